"""The attribution methods, as their modules declare them: each module of this package that holds a method names it in
a module-level `ATTRIBUTIONS` tuple of `Method`s (its name, what it computes, whether it is exact, its cost, how to
compute it and how to read a map of source-token scores off its result). `attribute` (sentence.py), the Attribution
page, the agreement view and the dataset comparison read the methods from here, so a new method is its own module (and
its test): nothing else lists the methods by name (tests/test_architecture.py holds that rule)."""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

if TYPE_CHECKING:  # the methods' inputs; importing them here would import every method module first
    from attnscope.engine.attribution.contrastive import Contrast
    from attnscope.engine.attribution.contributions import Contributions, Mixing
    from attnscope.engine.attribution.quadrature import IGSettings
    from attnscope.engine.attribution.saliency import Progress
    from attnscope.engine.decoding.translator import Translation, Translator
    from attnscope.engine.recording.trace import Trace

TOKEN = "token"  # a method that explains each generated token's log-probability
CONTRAST = "contrast"  # a method that explains one step's log-probability difference between its token and a foil


@dataclass(frozen=True)
class Inputs:
    """What a method computes from: one translation, teacher-forced on its own ids, and the passes methods share."""

    translator: Translator
    translation: Translation
    ig: IGSettings | None  # integrated gradients' completeness (None: skip them)
    progress: Progress | None  # hears what runs and how far it got
    exact: tuple[Contributions, Contributions] | None  # ALTI+ and value zeroing, from one float64 pass
    traced: Trace | None  # one traced float32 pass (what the norms read); both None when only a contrast is asked
    contrast: Contrast | None = None  # the step and foil a contrastive method explains
    shared: dict[str, Any] = field(default_factory=dict)  # results two methods share, kept by the first to ask


@dataclass(frozen=True)
class Method:
    """One attribution method as the app lists it."""

    name: str
    computes: str  # what it computes, in one sentence
    exact: bool  # whether its numbers are exact (a decomposition or a defined quantity), not an approximation
    cost: str  # what it costs, in the passes it runs
    order: int  # its place in tables and figures: attention first, then cheaper to dearer
    explanation: str  # the page's paragraph on it (markdown, with its reference)
    compute: Callable[[Inputs], Any]  # its result for a translation, None when the inputs do not ask for it
    source_map: Callable[[Any, int], np.ndarray]  # (result, decoder layer) -> nonnegative [T, S] scores over the source
    reference: bool = True  # an attribution that attention is compared against (agreement, the dataset comparison)
    explains: str = TOKEN  # TOKEN or CONTRAST
    per_layer: bool = False  # whether its map is of one decoder layer (the sidebar's)
    mixing: Mixing | None = None  # how it reads each traced float64 layer, for the methods that split each token
    # between source and prefix (the split by position over a sample)


def methods(explains: str | None = TOKEN) -> tuple[Method, ...]:
    """Every method that explains `explains` (None: all), in their order: each module of this package is asked for its
    `ATTRIBUTIONS` (importing a module twice costs nothing: Python keeps it)."""
    package = importlib.import_module(__package__)
    found = [m for info in pkgutil.iter_modules(package.__path__)
             for m in getattr(importlib.import_module(f"{__package__}.{info.name}"), "ATTRIBUTIONS", ())]
    return tuple(sorted((m for m in found if explains is None or m.explains == explains), key=lambda m: m.order))


def method(name: str) -> Method:
    """The method called `name`; a clear error naming the known ones otherwise."""
    known = {m.name: m for m in methods(None)}
    if name not in known:
        raise ValueError(f"no attribution method {name!r}; known: {', '.join(known)}")
    return known[name]


def names(explains: str | None = TOKEN) -> tuple[str, ...]:
    return tuple(m.name for m in methods(explains))


def splitting() -> tuple[Method, ...]:
    """The methods that split each generated token between the source and the prefix (their `mixing`)."""
    return tuple(m for m in methods() if m.mixing is not None)


def references() -> tuple[str, ...]:
    """The attributions raw and norm-based attention are compared against, in order."""
    return tuple(m.name for m in methods() if m.reference)


def explanations(explains: str | None = TOKEN) -> str:
    """Every method's paragraph, in order (markdown)."""
    return "\n\n".join(m.explanation for m in methods(explains))
