"""The Checkpoints page, by job: listing, activating, uploading and deleting checkpoints (manage.py), and importing
models trained elsewhere (imports.py). Opening a saved record is ui/records.py (several pages show it)."""
