"""Benchmarks (`python -m attnscope.bench`): speed, memory, quality and app latency, reported with the machine.

Nothing in the package imports this part but its command (attnscope/cli/bench.py); it measures the rest.
Its app section serves the checkout's app.py and drives it with Playwright, so it needs the test requirements
and a source checkout.
"""
