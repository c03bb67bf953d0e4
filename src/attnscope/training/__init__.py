"""The one training loop, its data, background jobs and evaluation (no UI inside)."""
