"""What the user asked for: one sentence, decoded with one beam size, output limit and decoding rules, by one checkpoint.

The five travel together from the sentence box to every cache and view; `Query.key` names them exactly,
so a cached result or figure never outlives the question it answers. It lives in ui/ because it is the
app's question (the sidebar's checkpoint, the boxes' sentence and options) and is read from the view state.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from attnscope.engine.decoding.translator import Translator
from attnscope.ui.state import ViewState

QueryKey = tuple[str, str, int, "int | None", str]  # (checkpoint, sentence, beam, max_len, rules)


@dataclass(frozen=True)
class Query:
    """One translation request. `checkpoint` is the translator's cache key (name and file revision), so a
    re-published checkpoint is another query; `max_len` None means the budget the source sets; `rules` is "model"
    (the decoding rules the checkpoint records) or "attnscope" (attnscope's own)."""
    checkpoint: str
    sentence: str
    beam: int = 1
    max_len: int | None = None
    rules: str = "model"

    @property
    def key(self) -> QueryKey:
        """A hashable name for this query, for caches and widget keys."""
        return self.checkpoint, self.sentence, self.beam, self.max_len, self.rules

    @classmethod
    def of(cls, tr: Translator, sentence: str, beam: int = 1, max_len: int | None = None, rules: str = "model") -> Query:
        """The query `sentence` puts to `tr`."""
        return cls(tr.cache_key, sentence, int(beam), None if max_len is None else int(max_len), str(rules))

    @classmethod
    def from_view(cls, tr: Translator, view: ViewState) -> Query:
        """The query the sentence box and decoding options hold, its maximum kept within `tr`'s limit (a page
        without the options may follow a larger model's)."""
        max_len = view.max_len
        return cls.of(tr, view.sentence, view.beam, None if max_len is None else min(max_len, tr.model.config.max_len),
                      view.rules)

    def on(self, tr: Translator) -> Query:
        """The same sentence and options put to another checkpoint."""
        return replace(self, checkpoint=tr.cache_key)

    def check(self, tr: Translator) -> None:
        """Refuse to compute this query with another checkpoint's translator (its results would be cached
        under this query's name)."""
        if tr.cache_key != self.checkpoint:
            raise ValueError(f"query for {self.checkpoint} computed with {tr.cache_key}")
