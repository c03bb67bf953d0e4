"""The explorer built anew on the payload it showed (Streamlit may rebuild a component's element on a page rerun)
opens where the user left it, not on the selection the payload was first sent with, and says so to the server again;
a payload of a new epoch (the view changed elsewhere) still opens on its own selection. The component's module runs
alone in the page here, so the rebuild happens exactly when the test says, not when a rerun's timing makes it."""
from __future__ import annotations

from importlib.resources import files

from playwright.sync_api import Page, expect

from attnscope.ui.explorer import JS_PARTS
from attnscope.viz.explorer import Selection, payload
from tests.viz.test_explorer import record

MOUNT = """async ({ source, bytes, parent }) => {
  window.sent = window.sent || [];
  window.explorerModule = window.explorerModule
    || await import(URL.createObjectURL(new Blob([source], { type: "text/javascript" })));
  const box = document.createElement("div");
  box.id = parent;
  document.body.replaceChildren(box);  // the element before is gone, as when Streamlit rebuilds it
  window.explorerModule.default({ data: new Uint8Array(bytes), parentElement: box, key: parent,
    setStateValue: (name, value) => window.sent.push([name, value]), setTriggerValue: () => {} });
}"""


def mount(page: Page, data: bytes, parent: str) -> None:
    source = "\n".join((files("attnscope.ui") / "assets" / "explorer" / p).read_text("utf-8") for p in JS_PARTS)
    page.evaluate(MOUNT, {"source": source, "bytes": list(data), "parent": parent})


def test_a_rebuilt_explorer_opens_where_the_user_left_it_unless_the_view_changed_elsewhere(page: Page) -> None:
    rec = record(layers=3)
    first = payload(rec, view_id="v", selection=Selection("cross", 0, None, 0))
    page.set_content("<body></body>")
    mount(page, first, "a")
    root = page.locator("#a .atsx")
    expect(root).to_have_attribute("data-layer", "0")
    root.focus()
    page.keyboard.press("PageDown")
    page.keyboard.press("ArrowDown")  # head 0
    expect(root).to_have_attribute("data-layer", "1")
    page.wait_for_function("() => window.sent.some(([name]) => name === 'view')")  # reported: nothing pending
    mount(page, first, "b")  # the same bytes, a new element
    rebuilt = page.locator("#b .atsx")
    expect(rebuilt).to_have_attribute("data-layer", "1")
    expect(rebuilt).to_have_attribute("data-head", "0")
    views = "() => window.sent.filter(([name]) => name === 'view').map(([, view]) => view)"
    page.wait_for_function(f"() => ({views})().length === 2")  # said again: the first may have gone with its element
    assert page.evaluate(views)[1] == {"kind": "cross", "layer": 1, "head": 0, "step": 0}
    moved = payload(rec, view_id="v", selection=Selection("cross", 2, 1, 0), epoch=1)
    mount(page, moved, "c")  # changed in the sidebar: the new epoch's selection wins
    expect(page.locator("#c .atsx")).to_have_attribute("data-layer", "2")
    expect(page.locator("#c .atsx")).to_have_attribute("data-head", "1")
