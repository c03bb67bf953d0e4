"""What the user asked for: one sentence (after its task prefix), decoded with one beam size, output limit and decoding
rules, by one checkpoint.

The six travel together from the sentence box to every cache and view; `Query.key` names them exactly,
so a cached result or figure never outlives the question it answers. It lives in ui/ because it is the
app's question (the sidebar's checkpoint, the boxes' sentence and options) and is read from the view state.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from attnscope.engine.decoding.translator import Translator
from attnscope.ui.state import ViewState

QueryKey = tuple[str, str, int, "int | None", str, str]  # (checkpoint, sentence, beam, max_len, rules, task_prefix)


@dataclass(frozen=True)
class Query:
    """One translation request. `checkpoint` is the translator's cache key (name and file revision), so a
    re-published checkpoint is another query; `max_len` None means the budget the source sets; `rules` is "model"
    (the decoding rules the checkpoint records) or "attnscope" (attnscope's own); `task_prefix` is the text the model
    reads before the sentence (a T5 model's "translate English to German: "), "" for none."""
    checkpoint: str
    sentence: str
    beam: int = 1
    max_len: int | None = None
    rules: str = "model"
    task_prefix: str = ""

    @property
    def key(self) -> QueryKey:
        """A hashable name for this query, for caches and widget keys."""
        return self.checkpoint, self.sentence, self.beam, self.max_len, self.rules, self.task_prefix

    @classmethod
    def of(cls, tr: Translator, sentence: str, beam: int = 1, max_len: int | None = None, rules: str = "model",
           task_prefix: str | None = None) -> Query:
        """The query `sentence` puts to `tr` (`task_prefix` None: the checkpoint's own)."""
        prefix = tr.bundle.task_prefix if task_prefix is None else str(task_prefix)
        return cls(tr.cache_key, sentence, int(beam), None if max_len is None else int(max_len), str(rules), prefix)

    @classmethod
    def from_view(cls, tr: Translator, view: ViewState) -> Query:
        """The query the sentence box and decoding options hold, its maximum kept within `tr`'s limit (a page
        without the options may follow a larger model's)."""
        max_len = view.max_len
        return cls.of(tr, view.sentence, view.beam, None if max_len is None else min(max_len, tr.model.config.max_len),
                      view.rules, view.task_prefix(tr.name))

    def on(self, tr: Translator) -> Query:
        """The same sentence and options put to another checkpoint, after that checkpoint's own task prefix."""
        return replace(self, checkpoint=tr.cache_key, task_prefix=tr.bundle.task_prefix)

    def check(self, tr: Translator) -> None:
        """Refuse to compute this query with another checkpoint's translator (its results would be cached
        under this query's name)."""
        if tr.cache_key != self.checkpoint:
            raise ValueError(f"query for {self.checkpoint} computed with {tr.cache_key}")
