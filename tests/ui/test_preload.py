"""A fresh server's first runs, racing to import the heavy libraries, each get them whole."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.support import CEILING

RACE = """
import sys, threading
from attnscope.ui import preload
barrier, errors = threading.Barrier(4), []

def first_run(name):
    barrier.wait()
    try:
        preload.import_heavy()  # what app.py does before the page
        if name == "a":
            import pandas as pd; pd.Series
        elif name == "b":
            import pandas.io.formats.style; import pandas as pd; pd.Series
        elif name == "c":
            import plotly.graph_objects as go; go.Figure
        else:
            import pandas.core.frame; import pandas as pd; pd.DataFrame
    except Exception as err:
        errors.append(f"{name}: {type(err).__name__}: {err}")

threads = [threading.Thread(target=first_run, args=(n,)) for n in "abcd"]
[t.start() for t in threads]; [t.join() for t in threads]
print(errors)
"""


def test_concurrent_first_runs_get_whole_modules() -> None:
    """Without the lock this race fails nearly every time (a _DeadlockError or "partially initialized module
    'pandas' has no attribute 'Series'"); with it, never."""
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", RACE], capture_output=True, text=True,
                             timeout=CEILING)  # a ceiling for a hang only: the run ends when its threads do
        assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout + out.stderr


def test_the_app_imports_them_before_any_page_runs() -> None:
    tree = ast.parse(Path("app.py").read_text())
    calls = [ast.unparse(n) for n in tree.body if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)]
    assert calls[0] == "preload.import_heavy()", calls[:3]
