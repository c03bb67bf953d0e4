"""Benchmarks (`python -m attnscope.bench`): speed, memory, quality and app latency, reported with the machine.

Nothing else in the package imports this part; it measures the rest. Its app section serves the
checkout's app.py and drives it with Playwright, so it needs the test requirements and a source checkout.
"""
