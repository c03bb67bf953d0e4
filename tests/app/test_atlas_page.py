"""AppTest journey on the Head atlas page: the sample is mapped on request (an estimate first), the explorer is sent
every head's map of every kind, the heads' groups are listed, and the atlas is kept for the session."""
from __future__ import annotations

import json
import struct

from streamlit.testing.v1 import AppTest

from tests.support import page_script, shown

PASTED = "a b c d\ne f g\nh i j k l\nb c\nd d e f"


def atlas_sent(app: AppTest) -> dict:
    """The header of the atlas payload the page mounted."""
    for e in app.get("bidi_component"):
        if e.proto.component_name == "attnscope_explorer":
            data = e.proto.bytes
            _, length = struct.unpack("<II", data[4:12])
            header = json.loads(data[12:12 + length].decode("utf-8"))
            if header["mode"] == "atlas":
                return header
    raise AssertionError("no atlas was mounted")


def test_the_atlas_maps_the_pasted_sentences_on_request(app: AppTest) -> None:
    app.session_state["sentence"] = "a b c d"
    app.session_state["layer"], app.session_state["head"], app.session_state["kind"] = 1, 2, "encoder"
    app.run()
    app.switch_page(page_script("Head atlas")).run()
    assert not app.exception
    app.text_area(key="atlas_pasted").input(PASTED).run()
    go = next(b for b in app.button if b.label.startswith("Map every head"))
    assert "for 5 sentences" in go.label  # with its estimate
    go.click().run()
    assert not app.exception
    header = atlas_sent(app)
    assert header["sentences"] == PASTED.splitlines()
    assert header["selection"] == {"kind": "encoder", "layer": 1, "head": 2, "step": 0}  # the session's view
    shapes = {k: (v["n_layers"], v["heads"]) for k, v in header["kinds"].items()}
    assert shapes == {k: (2, 4) for k in ("encoder", "decoder", "cross")}  # every head of the toy model
    assert any("Projection:" in shown(c) and "share a centre" in shown(c) for c in app.caption)
    groups = app.dataframe[0].value
    assert len(groups) == 3 * 2 * 4 and "group" in groups.columns
    sent = app.get("bidi_component")[0].proto.bytes
    app.run()  # a rerun sends the same bytes (kept for the session: not computed or sent again)
    assert app.get("bidi_component")[0].proto.bytes == sent
