"""Browser fixtures: a real `streamlit run` server and headless Debian Chromium via Playwright."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.support import ROOT, train_toy_checkpoint

expect.set_options(timeout=30_000)  # a loaded 2-core machine can take seconds to translate and draw
CHROMIUM = os.environ.get("ATTNSCOPE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def e2e_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy reverse model as a file a user could upload (renamed so it does not clash)."""
    folder = tmp_path_factory.mktemp("e2e-upload")
    path = train_toy_checkpoint(tmp_path_factory.mktemp("e2e-run"), folder)
    return path.rename(folder / "uploaded-reverse.safetensors")


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory, e2e_checkpoint: Path) -> Iterator[str]:
    """URL of a streamlit server running app.py on a toy checkpoint, with its own user-models folder."""
    folder = tmp_path_factory.mktemp("e2e-checkpoints")
    (folder / "toy-reverse.safetensors").write_bytes(e2e_checkpoint.read_bytes())
    port = free_port()
    env = dict(os.environ, ATTNSCOPE_CHECKPOINTS=str(folder),
               ATTNSCOPE_USER_MODELS=str(tmp_path_factory.mktemp("e2e-user-models")))
    log = (tmp_path_factory.mktemp("e2e-log") / "streamlit.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.port", str(port),
                             "--server.headless", "true", "--browser.gatherUsageStats", "false"],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError as err:
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"streamlit did not start; see {log.name}") from err
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"browser tests need Chromium at {CHROMIUM} (apt-get install -y chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    pg.set_default_timeout(60_000)
    yield pg
    context.close()
