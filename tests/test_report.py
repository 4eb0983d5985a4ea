"""``rlcurves report``: one self-contained HTML page, checked in a real headless Chromium.

The browser is driven over the DevTools protocol (websocket-client, dev extra): the page loads,
every image decodes, no console error or exception; a screenshot at 1200x900. Without a system
Chromium the browser tests skip locally and FAIL in CI (CI=true), where `make test` installs it.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
from browser import Browser, chromium

import rlcurves
from rlcurves.cli import main

RUNS = Path(__file__).resolve().parents[1] / "rlcurves" / "data" / "runs"


@pytest.fixture(scope="module")
def report_path(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "report.html"
    rc = main(["report", str(RUNS / "recipe_loo_scalerl"), str(RUNS / "recipe_loo_dapo"),
               "--compute", "tokens_total", "--n-samples", "100", "--fractions", "0.5",
               "-o", str(out)])  # fmt: skip
    assert rc == 0
    return out


def test_report_is_self_contained_and_has_provenance(report_path):
    page = report_path.read_text()
    # nothing to fetch: every src is a data URI, no scripts, no stylesheets by link
    srcs = re.findall(r'src="([^"]*)"', page)
    assert len(srcs) >= 5 and all(s.startswith("data:image/png;base64,") for s in srcs)
    assert "<script" not in page and "<link" not in page and "http://" not in page
    assert "https://" not in page
    for name in ("comparison", "run-recipe_loo_scalerl", "run-recipe_loo_dapo", "provenance"):
        assert f'id="{name}"' in page
    # the data file's hash is the real one
    log = RUNS / "recipe_loo_scalerl" / "log.jsonl"
    assert hashlib.sha256(log.read_bytes()).hexdigest() in page
    assert "rlcurves</td><td style" in page.replace("\n", "")  # versions table
    assert "drop_missing_reward" in page  # the cleaning report of the log
    # each image is a real PNG
    import matplotlib.image as mpimg

    for s in srcs:
        img = mpimg.imread(io.BytesIO(base64.b64decode(s.split(",", 1)[1])), format="png")
        assert img.shape[0] > 100 and img.shape[1] > 100


def test_bad_baseline_says_which_flag(tmp_path, capsys):
    rc = main(["report", str(RUNS / "recipe_loo_scalerl"), "--baseline", "nope",
               "-o", str(tmp_path / "r.html")])  # fmt: skip
    assert rc == 2 and "--baseline 'nope'" in capsys.readouterr().err


def test_repr_html_of_results():
    df = rlcurves.datasets.load_example("recipe_loo_scalerl", compute="tokens_total")
    fit = rlcurves.fit_sigmoid("compute", "reward", data=df, label="scalerl")
    assert "Sigmoid fit: scalerl" in fit._repr_html_() and "<table" in fit._repr_html_()
    fc = rlcurves.forecast(fit, [1e6, 2e6], n=100, progress=False, seed=0)
    assert fc._repr_html_().count("<tr>") == 3
    other = rlcurves.datasets.load_example("recipe_loo_dapo", compute="tokens_total")
    cmp = rlcurves.compare({"a": fit, "b": (other["compute"], other["reward"])}, n_samples=100)
    assert "baseline a" in cmp._repr_html_()
    from rlcurves.monitor import Monitor

    rep = Monitor(1.3e6, baseline=0.3, n_samples=100).update(df["compute"], df["reward"])
    html = rep._repr_html_()
    assert rep.advice.upper() in html and "data:image/png;base64," in html


# ---- in a real browser ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    b = Browser(chromium(), tmp_path_factory.mktemp("chromium-profile"))
    yield b
    b.close()


def test_report_renders_in_headless_chromium(browser, report_path):
    b = browser
    for domain in ("Page", "Runtime", "Log"):
        b.call(f"{domain}.enable")
    b.call("Emulation.setDeviceMetricsOverride", width=1200, height=900, deviceScaleFactor=1,
           mobile=False)  # fmt: skip
    b.call("Page.navigate", url=report_path.as_uri())
    b.wait_for("Page.loadEventFired")
    result = b.call(
        "Runtime.evaluate",
        expression="JSON.stringify(Array.from(document.images).map("
        "i => [i.complete, i.naturalWidth, i.naturalHeight]))",
        returnByValue=True,
    )
    images = json.loads(result["result"]["value"])
    assert len(images) >= 5
    assert all(done and w > 100 and h > 100 for done, w, h in images), images
    title = b.call("Runtime.evaluate", expression="document.title", returnByValue=True)
    assert "rlcurves report" in title["result"]["value"]
    errors = [
        e for e in b.events
        if e.get("method") == "Runtime.exceptionThrown"
        or (e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] == "error")
        or (e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")
    ]  # fmt: skip
    assert errors == []

    # screenshot at one size: 1200x900, the top of the page, not blank
    shot = b.call("Page.captureScreenshot", format="png")
    import matplotlib.image as mpimg

    img = mpimg.imread(io.BytesIO(base64.b64decode(shot["data"])), format="png")
    assert img.shape[:2] == (900, 1200)
    gray = img[..., :3].mean(axis=2)
    assert 0.5 < gray.mean() < 0.99  # mostly white page with text, tables and a figure
    assert (gray < 0.3).mean() > 0.005  # dark pixels: text was drawn
    assert np.unique(img[..., :3].reshape(-1, 3), axis=0).shape[0] > 50  # a figure's colours


# ---- at 1280 px: the main job's figures and a report, nothing wider than the page (issue 39) --
PAGE_WIDTH = 1280


def _layout(b: Browser, url: str) -> dict:
    """Load ``url`` at 1280x900 and measure: the page's scroll width, each table's and image's
    right edge, and whether every image decoded."""
    for domain in ("Page", "Runtime"):
        b.call(f"{domain}.enable")
    b.events.clear()
    b.call("Emulation.setDeviceMetricsOverride", width=PAGE_WIDTH, height=900,
           deviceScaleFactor=1, mobile=False)  # fmt: skip
    b.call("Page.navigate", url=url)
    b.wait_for("Page.loadEventFired")
    js = (
        "JSON.stringify({scroll: document.documentElement.scrollWidth,"
        " tables: Array.from(document.querySelectorAll('table')).map("
        "t => [t.getBoundingClientRect().right, t.innerText.slice(0, 40)]),"
        " images: Array.from(document.images).map("
        "i => [i.complete && i.naturalWidth > 100, i.getBoundingClientRect().right])})"
    )
    return json.loads(
        b.call("Runtime.evaluate", expression=js, returnByValue=True)["result"]["value"]
    )


@pytest.fixture(scope="module")
def main_job(tmp_path_factory):
    """The figures of `make demo` (its three commands, read from the Makefile) and a report of
    the leave-one-out runs it compares."""
    from test_cli_first_hour_again import _demo_commands

    out = tmp_path_factory.mktemp("main_job")
    for argv in _demo_commands():
        argv[argv.index("--out") + 1] = str(out)
        assert main(argv) == 0
    report = out / "report.html"
    runs = [str(RUNS / n) for n in ("recipe_loo_scalerl", "recipe_loo_dapo", "recipe_loo_bf16",
                                    "recipe_loo_pipeline_rl")]  # fmt: skip
    assert main(["report", *runs, "--compute", "tokens_total", "--n-samples", "100", "-o",
                 str(report), "-q"]) == 0  # fmt: skip
    return out


@pytest.mark.slow
def test_regression_main_job_and_report_fit_a_1280px_page(browser, main_job):
    """The report's comparison and data-file tables ran off the page (delta_A and sha256 cut
    off); at 1280 px no table and no figure is wider than the page."""
    figures = sorted(main_job.glob("*.png"))
    assert len(figures) >= 6  # forecasts, comparisons, the study's comparisons
    page = main_job / "figures.html"
    page.write_text(
        "<!DOCTYPE html><html><body style='margin:8px'>"
        + "".join(f"<p><img src='{f.name}' style='max-width:100%'></p>" for f in figures)
        + "</body></html>"
    )
    seen = _layout(browser, page.as_uri())
    assert len(seen["images"]) == len(figures)
    assert all(ok for ok, _ in seen["images"]), seen["images"]
    assert seen["scroll"] <= PAGE_WIDTH and all(r <= PAGE_WIDTH for _, r in seen["images"])
    for png in figures:  # each figure as it is, at its own size, fits the page too
        assert _layout(browser, png.as_uri())["scroll"] <= PAGE_WIDTH, png.name
    seen = _layout(browser, (main_job / "report.html").as_uri())
    assert len(seen["tables"]) >= 8
    wide = [(right, text) for right, text in seen["tables"] if right > PAGE_WIDTH]
    assert wide == [], wide
    assert seen["scroll"] <= PAGE_WIDTH
