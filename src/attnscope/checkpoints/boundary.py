"""Where an import route meets other libraries: their exceptions become one CheckpointError naming the user's input.

attnscope's own checks say what is wrong in their words; anything they did not foresee (a library's
KeyError, RecursionError, OSError, validation error...) still reaches the user as one sentence with
the input and the real cause, never as a traceback or an exception box.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Any, Iterator

from attnscope.checkpoints.checkpoint import CheckpointError

SHOWN = 80  # characters of an input shown in a message


def shown(source: Any) -> str:
    """The user's input as a message shows it: a path or name, shortened when long."""
    text = os.fspath(source) if isinstance(source, (str, os.PathLike)) else repr(source)
    text = str(text)
    return text if len(text) <= SHOWN else f"{text[:SHOWN // 2]}…{text[-SHOWN // 4:]} ({len(text):,} characters)"


def cause(err: BaseException) -> str:
    """An exception in a few words: its first line, and its type when that says more than the line."""
    first = str(err).strip().splitlines()[0][:200] if str(err).strip() else ""
    return f"{type(err).__name__}: {first}" if first else type(err).__name__


@contextmanager
def boundary(source: Any) -> Iterator[None]:
    """Run an import route, turning any exception but attnscope's own into a CheckpointError about `source`."""
    try:
        yield
    except CheckpointError:
        raise
    except MemoryError:
        raise CheckpointError(f"{shown(source)} needs more memory than this machine has free") from None
    except Exception as err:  # the route's boundary: whatever a library raised, the user gets a sentence
        raise CheckpointError(f"{shown(source)} could not be imported ({cause(err)})") from err
