"""Browser fixtures: a real `streamlit run` server and headless Debian Chromium via Playwright."""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path
from typing import Callable, Iterator

import pytest
from playwright.sync_api import Browser, BrowserContext, Locator, Page, expect, sync_playwright

from tests.support import CEILING, ROOT, copy_toy_checkpoint, distinct_toy_checkpoint, wait_for

# Ceiling for every wait on the page (milliseconds). Waits end as soon as the element shows; a loaded
# 2-core machine can take tens of seconds to translate and draw, so only a hang should reach this.
TIMEOUT_MS = 180_000
expect.set_options(timeout=TIMEOUT_MS)
CHROMIUM = os.environ.get("ATTNSCOPE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def settled(page: Page) -> None:
    """Wait until Streamlit has redrawn everything (no element marked stale)."""
    expect(page.locator('[data-stale="true"]')).to_have_count(0)


def explorer_map(page: Page, title: str, showing: str = "") -> Locator:
    """A map the attention explorer draws on canvas, found by the start of its title (its aria-label also lists
    every row and column label) and, with `showing`, by a part of the label. While a new sentence's run ends, its
    explorer and the previous sentence's (stale, not yet removed) can both be on the page for a moment: `showing`
    tells the new one apart."""
    part = f'[aria-label*="{showing}"]' if showing else ""  # (CSS: *="" matches nothing)
    return page.locator(f'.atsx canvas.cells[aria-label^="{title}"]{part}')


def open_menu(box: Locator, option: Locator) -> None:
    """Open a selectbox's list (`box`, its combobox) until `option` shows. The key is pressed again while the list
    is closed: on a loaded machine a redraw of the menu just after one press swallowed it, and it never opened.
    A key, not a click: a second click on a list still opening would close it."""
    def opened() -> bool:
        if option.is_visible():
            return True
        box.focus()
        box.press("ArrowDown")  # opens the list (react-aria combobox); never closes it
        return False

    wait_for(opened, "a menu to open")


def type_sentence(page: Page, box: Locator, text: str) -> None:
    """Type `text` into a page's text box once the page has drawn, and commit it with Ctrl+Enter, as a user who
    waits for the page does. Text typed while the page still reruns is lost when Streamlit rebuilds the box (seen
    on a loaded machine: the previous sentence was translated again)."""
    box.wait_for()
    settled(page)
    box.fill(text)
    box.press("Control+Enter")


def enter(box: Locator, value: str) -> None:
    """Type `value` into an input and commit it with Enter, as a user does."""
    box.fill(value)
    box.press("Enter")


def upload(page: Page, path: Path, shown: str) -> None:
    """Give the page's first file uploader `path` and wait for the text `shown`. A file given while
    Streamlit reruns the page (just after a navigation) is dropped with the remounted widget: give it again."""
    uploader, message = page.get_by_test_id("stFileUploader").first, page.get_by_text(shown)
    for _ in range(3):
        settled(page)
        uploader.locator("input[type=file]").set_input_files(str(path))
        expect(uploader.or_(message).first).to_be_visible()
        settled(page)
        if message.is_visible() or path.name in uploader.inner_text():
            break
    expect(message).to_be_visible()


def import_folder(page: Page, server: str, folder: Path, langs: tuple[str, str] | None = None) -> None:
    """Import a Hugging Face folder as a user does: zipped, uploaded on the Checkpoints page's import form (with the
    language pair, when given) and imported; waits until it is the active checkpoint."""
    archive = folder.with_suffix(".zip")
    with zipfile.ZipFile(archive, "w") as z:
        for file in folder.iterdir():
            z.write(file, f"{folder.name}/{file.name}")
    page.goto(server)
    page.get_by_role("link", name="Checkpoints").click()
    page.get_by_text("Import a Hugging Face, fairseq or OpenNMT-py model").click()
    uploader = page.get_by_test_id("stFileUploader").filter(has_text="The model's files")
    for _ in range(3):  # an upload landing while the page reruns is dropped with the remounted widget: upload it again
        settled(page)
        uploader.locator("input[type=file]").set_input_files(str(archive))
        settled(page)
        if archive.name in uploader.inner_text():
            break
    for label, code in zip(("Source language code (multilingual models, T5 tasks)", "Target language code"), langs or ()):
        enter(page.get_by_label(label), code)
        settled(page)
    page.get_by_role("button", name="Import model", exact=True).click()
    expect(page.get_by_text(f"Loaded {folder.name}; it is now the active checkpoint on every page")).to_be_visible()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def healthy(url: str) -> bool:
    """Whether the server at `url` answers its health check."""
    try:
        return urllib.request.urlopen(f"{url}/_stcore/health", timeout=10).read() == b"ok"
    except OSError:
        return False


@pytest.fixture(scope="session")
def e2e_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy reverse model as a file a user could upload: renamed so it does not clash, and with bytes of its
    own (a file identical to an installed model only makes that model active)."""
    return distinct_toy_checkpoint(tmp_path_factory.mktemp("e2e-upload"), "uploaded-reverse")


class Served(str):
    """A running server's URL, with its process id (a test may pause it to prove the browser does not wait)."""

    pid: int


@contextlib.contextmanager
def streamlit_server(env: dict[str, str], log_dir: Path) -> Iterator[Served]:
    """URL of `streamlit run app.py` started with `env`; stopped on exit, its output in log_dir."""
    port = free_port()
    log = (log_dir / "streamlit.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.port", str(port),
                             "--server.headless", "true", "--browser.gatherUsageStats", "false"],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = Served(f"http://127.0.0.1:{port}")
    url.pid = proc.pid
    try:
        wait_for(lambda: healthy(url) or proc.poll() is not None, "streamlit to start")
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with code {proc.returncode}; see {log.name}")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=CEILING)
        log.close()


@pytest.fixture(scope="session")
def server_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the `server` fixture's streamlit writes its output."""
    return tmp_path_factory.mktemp("e2e-log") / "streamlit.log"


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory, e2e_checkpoint: Path, server_log: Path) -> Iterator[Served]:
    """URL of a streamlit server running app.py on a toy checkpoint, with its own user-models folder."""
    folder = copy_toy_checkpoint(tmp_path_factory.mktemp("e2e-checkpoints")).parent
    env = dict(os.environ, ATTNSCOPE_CHECKPOINTS=str(folder),
               ATTNSCOPE_USER_MODELS=str(tmp_path_factory.mktemp("e2e-user-models")))
    with streamlit_server(env, server_log.parent) as url:
        yield url


def logged_since(log: Path, start: int) -> list[str]:
    """Lines of the server's log after byte `start` that report a traceback or a failed Arrow conversion."""
    with log.open("rb") as f:
        f.seek(start)
        text = f.read().decode(errors="replace")
    return [line for line in text.splitlines() if "Traceback" in line or "ArrowInvalid" in line]


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"browser tests need Chromium at {CHROMIUM} (apt-get install -y chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def new_context(browser: Browser) -> Iterator[Callable[[], BrowserContext]]:
    """Makes browser contexts (separate users) with the generous ceiling; all closed afterwards."""
    made: list[BrowserContext] = []

    def make() -> BrowserContext:
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        context.set_default_timeout(TIMEOUT_MS)
        made.append(context)
        return context

    yield make
    for context in made:
        context.close()


@pytest.fixture
def page(new_context: Callable[[], BrowserContext]) -> Page:
    return new_context().new_page()


def translate_on_page(page: Page, server: str, text: str, expected: str) -> None:
    """Open the app, type `text` as the source sentence and wait until the translation `expected` shows."""
    page.goto(server)
    type_sentence(page, page.locator("textarea[aria-label=\"Sentence (en)\"]"), text)
    expect(page.get_by_text(expected)).to_be_visible()
