"""The documentation site (issue 45): `make docs` built it (`make test` builds it before the
suite), and its front page and an API page render in headless Chromium: not blank, every image
decoded, no console error. Also: the site covers every public name, and the link checker finds
broken links (it is what `make docs` runs after the build).

Without a built site these tests skip locally (`make docs` builds it) and FAIL in CI (CI=true)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from browser import Browser, chromium

import rlcurves

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "docs" / "_build" / "html"
SHOTS = os.environ.get("RLCURVES_DOCS_SCREENSHOTS")  # a folder to keep the screenshots in


def _site() -> Path:
    if not (SITE / "index.html").exists():
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but no built site: `make test` runs `make docs` first")
        pytest.skip("no built site in docs/_build/html: run `make docs`")
    return SITE


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    b = Browser(chromium(), tmp_path_factory.mktemp("chromium-profile"))
    yield b
    b.close()


def _renders(b: Browser, page: Path, name: str) -> str:
    b.open(page.as_uri())
    images = json.loads(
        b.call(
            "Runtime.evaluate",
            expression="JSON.stringify(Array.from(document.images).map("
            "i => [i.currentSrc, i.complete, i.naturalWidth]))",
            returnByValue=True,
        )["result"]["value"]
    )
    assert all(done and width > 0 for _, done, width in images), images
    assert b.errors() == []
    img = b.screenshot()
    if SHOTS:
        import matplotlib.image as mpimg

        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        mpimg.imsave(Path(SHOTS) / f"{name}.png", img)
    assert img.shape[:2] == (900, 1200)
    gray = img[..., :3].mean(axis=2)
    assert 0.5 < gray.mean() < 0.99  # a light page with text on it, not blank
    assert (gray < 0.4).mean() > 0.005  # dark pixels: text was drawn
    text = b.call("Runtime.evaluate", expression="document.body.innerText", returnByValue=True)
    return text["result"]["value"]


def test_front_page_renders_in_headless_chromium(browser):
    site = _site()
    text = _renders(browser, site / "index.html", "index")
    for words in ("rlcurves", "User guide", "API reference", "Benchmarks and validation"):
        assert words.lower() in text.lower(), words
    img = browser.screenshot()
    assert np.unique(img[..., :3].reshape(-1, 3), axis=0).shape[0] > 50  # the figure's colours


def test_api_page_renders_in_headless_chromium(browser):
    site = _site()
    text = _renders(browser, site / "api" / "generated" / "rlcurves.forecast.html", "api")
    for words in ("rlcurves.forecast", "Parameters", "Returns", "Raises", "RLCurvesError"):
        assert words.lower() in text.lower(), words  # the theme may set headings in capitals
    assert "examples" in text.lower() and ">>>" in text


def test_every_public_name_has_an_api_page():
    site = _site()
    for name in rlcurves.__all__:
        if name == "__version__":
            continue
        page = site / "api" / "generated" / f"rlcurves.{name}.html"
        if name == "datasets":  # a module: its own page beside the other modules'
            page = site / "api" / "rlcurves.datasets.html"
        assert page.exists(), f"no API page for rlcurves.{name}"
    cli = (site / "api" / "cli.html").read_text(encoding="utf-8")
    for command in ("fit", "forecast", "compare", "watch", "report", "race"):
        assert f'id="{command}"' in cli or f"rlcurves {command}" in cli, command


def test_link_checker_finds_a_broken_link(tmp_path):
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import check_links
    finally:
        sys.path.remove(str(ROOT / "docs"))
    (tmp_path / "a.html").write_text('<p id="here"><a href="b.html#there">b</a>'
                                     '<a href="#here">me</a><img src="c.png"></p>')  # fmt: skip
    (tmp_path / "b.html").write_text('<p id="elsewhere"><a href="https://example.org">x</a></p>')
    broken, internal, external = check_links.check(tmp_path)
    assert internal == 3 and external == 1
    assert sorted(broken) == ["a.html: b.html#there (no #there in b.html)",
                              "a.html: c.png (no such file)"]  # fmt: skip
    (tmp_path / "c.png").write_bytes(b"png")
    (tmp_path / "b.html").write_text('<p id="there"></p>')
    assert check_links.check(tmp_path)[0] == []


def test_regression_no_page_holds_a_scripts_raw_printout():
    """docs/benchmarks/race_scale.md once carried three lines a script printed while the page
    was written ("10 7.743283870783984e-09"): bare numbers outside any table or sentence."""
    import re

    printout = re.compile(r"^\s*[-+0-9.e]+(\s+[-+0-9.e]+)+\s*$")
    bad = [
        f"{page.relative_to(ROOT)}:{i}: {line}"
        for page in sorted((ROOT / "docs").rglob("*.md"))
        if "_build" not in page.parts
        for i, line in enumerate(page.read_text().splitlines(), 1)
        if printout.match(line)
    ]
    assert not bad, bad
