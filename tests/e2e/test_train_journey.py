"""Browser journey: start a toy run, stop it, resume it, stop again; every control stays reachable.

Waits only for events (a status text, a button becoming enabled), never for a fixed time."""
from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from attnscope.ui.train.form import MAX_EPOCHS


def test_stop_then_resume_a_toy_run(server: str, page: Page) -> None:
    page.goto(server)
    page.get_by_role("link", name="Train").click()
    page.get_by_label("Run name").fill("browser-stop-resume")
    page.get_by_label("Run name").press("Enter")
    expect(page.get_by_text("saves the model as browser-stop-resume")).to_be_visible()
    epochs = page.get_by_label(re.compile(r"^Epochs"))  # the most epochs: still going when Stop lands, however fast
    epochs.fill(str(MAX_EPOCHS))
    epochs.press("Enter")
    expect(epochs).to_have_value(str(MAX_EPOCHS))
    start, resume, stop = (page.get_by_role("button", name=n) for n in ("Start new", "Resume", "Stop"))
    expect(resume).to_be_disabled()
    start.click()
    expect(stop).to_be_enabled()
    expect(page.get_by_text("running: step", exact=False).first).to_be_visible(timeout=180_000)
    stop.click()
    expect(page.get_by_text("Saved as browser-stop-resume")).to_be_visible(timeout=180_000)
    expect(resume).to_be_enabled()  # the dead end is gone: Resume and Start new are there after Stop
    expect(start).to_be_enabled()
    expect(page.get_by_text("Resume continues it", exact=False)).to_be_visible()
    expect(page.get_by_label("Run name")).to_have_value("browser-stop-resume")  # the form kept its values
    expect(page.get_by_text("min left", exact=False)).to_have_count(0)  # a stopped run shows no ETA
    expect(page.get_by_text("Stopped by you at step", exact=False)).to_be_visible()  # it says why it ended
    resume.click()
    expect(page.get_by_text("running: step", exact=False).first).to_be_visible(timeout=180_000)
    stop.click()
    expect(page.get_by_text("stopped: step", exact=False).first).to_be_visible(timeout=180_000)
    expect(resume).to_be_enabled()
