"""Every Python example of the user guide (docs/guide/*.md) runs as written.

The examples are what a user copies first; nothing else executes them (the docstrings' examples
are doctests, the README's fifteen lines run in tests/test_readme.py). A page's blocks run in
order in one namespace, as in one notebook, in a fresh folder (they write figures and tables).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guide"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
PAGES = sorted(p for p in GUIDE.glob("*.md") if BLOCK.search(p.read_text()))


def test_the_guide_has_python_examples():
    assert len(PAGES) >= 6, PAGES  # a change in the fences would skip them all silently


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_guide_page_examples_run(page, tmp_path, monkeypatch, capsys):
    import matplotlib.pyplot as plt

    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": f"guide_{page.stem}"}
    blocks = BLOCK.findall(page.read_text())
    assert blocks
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the pages say which warnings to expect
        for i, code in enumerate(blocks):
            try:
                exec(compile(code, f"{page.name} block {i + 1}", "exec"), namespace)
            finally:
                plt.close("all")
    assert capsys.readouterr().out.strip()  # every page prints something
