"""Several sessions at once on the one cached model: each sees exactly its own results."""
from __future__ import annotations

import json
import threading

from streamlit.testing.v1 import AppTest

from tests.app.conftest import APP

SENTENCES = ["a b c", "d e f g", "b a", "j i h g f", "c c d", "e d c b a b"]


def test_concurrent_sessions_do_not_cross_talk(app: AppTest) -> None:
    app.run()  # warm the model cache once, as a running server would
    outcomes: dict[int, tuple[list, str, list]] = {}
    errors: list[str] = []

    def session(i: int) -> None:
        try:
            at = AppTest.from_file(APP, default_timeout=120)
            at.session_state["sentence"] = SENTENCES[i]
            at.run()
            at.switch_page("pages/step.py" if i % 2 else "pages/translate.py").run()
            specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
            outcomes[i] = ([e.value for e in at.exception], at.session_state["sentence"],
                           [s["layout"].get("xaxis", {}).get("ticktext") for s in specs])
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(repr(err))

    threads = [threading.Thread(target=session, args=(i,)) for i in range(len(SENTENCES))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i, (exceptions, sentence, tick_texts) in outcomes.items():
        assert not exceptions and sentence == SENTENCES[i]
        source = SENTENCES[i].split() + ["<eos>"]
        assert source in tick_texts, (i, tick_texts[:2])
    from attnscope.ui import state
    for path in state.available_checkpoints().values():
        model = state._load(str(path), path.stat().st_mtime).model
        assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())
        assert all(m.head_mask is None for m in model.attention_modules().values())
