"""The app's heavy libraries, imported whole by one thread before any page runs.

Streamlit runs each session's script in its own thread. On a fresh server, two first runs that import
pandas at once (one drawing a table, one a figure) can each hold part of it; Python's import locks then
break the deadlock by handing one thread a half-initialised module ("partially initialized module
'pandas' has no attribute 'Series'", a red traceback). app.py calls `import_heavy()` before any page
runs: the first run imports them under a lock, every other run waits for it, then finds them loaded.
The price is pandas and pyarrow in every server (~70 MB), paid once at the first run instead of a race.
"""
from __future__ import annotations

import importlib
import threading

# what the pages and Streamlit's tables import on first use (st.dataframe: pyarrow, then pandas)
HEAVY = ("numpy", "torch", "pandas", "pyarrow", "plotly.graph_objects", "tokenizers", "safetensors")
_LOCK = threading.Lock()


def import_heavy() -> None:
    """Import HEAVY once, whichever script run comes first; later runs pass through (they are in sys.modules)."""
    with _LOCK:
        for name in HEAVY:
            importlib.import_module(name)
