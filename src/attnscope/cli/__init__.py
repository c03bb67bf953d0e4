"""Command-line entry points: one module per command of `python -m attnscope`, each an argparse parser and a main.

The work stays in the library modules as plain functions; a command module only turns arguments into a call
and its result into printed lines and an exit code. Each main imports its library code when it runs, so the
dispatcher (attnscope.__main__) can list every command and run one without importing the others' code
(`translate` pays for no training imports). Nothing in attnscope imports this package but the entry points.
"""
