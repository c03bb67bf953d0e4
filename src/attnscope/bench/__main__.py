"""`python -m attnscope.bench`: the same command as `python -m attnscope bench` (attnscope.cli.bench)."""
import sys

from attnscope.cli.bench import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
