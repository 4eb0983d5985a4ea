"""Headless Chromium driven over the DevTools protocol (websocket-client, dev extra), for the tests
that check a page renders: the HTML report (tests/test_report.py) and the documentation site
(tests/test_docs.py). Without a system Chromium those tests skip locally and FAIL in CI (CI=true),
where `make test` installs it."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("CI") == "true":
        pytest.fail("CI=true but no chromium on PATH: `make test` installs it (apt-get)")
    pytest.skip("no system chromium (apt-get install chromium); required in CI")


class Browser:
    """Headless Chromium over the DevTools protocol (one page)."""

    def __init__(self, exe: str, profile: Path):
        import websocket

        self.proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        port = None
        deadline = time.monotonic() + 30
        while port is None and time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            m = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
            if m:
                port = int(m.group(1))
        assert port, "chromium did not start its DevTools server"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=10) as r:
            pages = [t for t in json.load(r) if t["type"] == "page"]
        self.ws = websocket.create_connection(
            pages[0]["webSocketDebuggerUrl"], timeout=30, suppress_origin=True
        )  # no Origin header: Chromium 111+ rejects one it was not told to allow
        self.next_id = 0
        self.events: list[dict] = []

    def call(self, method: str, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                assert "error" not in msg, msg
                return msg.get("result", {})
            self.events.append(msg)

    def wait_for(self, event: str, timeout: float = 30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(e.get("method") == event for e in self.events):
                return
            self.events.append(json.loads(self.ws.recv()))
        raise AssertionError(f"no {event} within {timeout} s")

    def close(self):
        self.ws.close()
        self.proc.terminate()
        self.proc.wait(timeout=10)

    def errors(self) -> list[dict]:
        """Console errors, exceptions and log entries of level error seen so far."""
        return [
            e for e in self.events
            if e.get("method") == "Runtime.exceptionThrown"
            or (e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] == "error")
            or (e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")
        ]  # fmt: skip

    def open(self, url: str, width: int = 1200, height: int = 900) -> None:
        """Load ``url`` in a ``width`` x ``height`` viewport and wait for its load event."""
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)  # fmt: skip
        self.events.clear()
        self.call("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")

    def screenshot(self) -> np.ndarray:
        """The viewport as an RGBA float image."""
        import matplotlib.image as mpimg

        shot = self.call("Page.captureScreenshot", format="png")
        return mpimg.imread(io.BytesIO(base64.b64decode(shot["data"])), format="png")


def start(tmp_path: Path) -> Browser:
    return Browser(chromium(), tmp_path)
