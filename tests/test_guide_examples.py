"""Every Python and command-line example of the user guide (docs/guide/*.md) runs as written.

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


BASH = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)
# the trainer page's rlcurves line reads the run its block trains first (tests/test_recipe_*)
COMMANDS = [
    (page.stem, line.split("#")[0].strip())
    for page in sorted(GUIDE.glob("*.md"))
    if page.stem != "trainer"
    for block in BASH.findall(page.read_text())
    for line in block.splitlines()
    if line.startswith("rlcurves ")
]


def test_the_guide_has_command_line_examples():
    assert len(COMMANDS) >= 8, COMMANDS


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: f"{c[0]}: {c[1][:60]}")
def test_guide_command_line_examples_run(command, tmp_path, monkeypatch, capsys):
    import shlex

    import matplotlib.pyplot as plt

    from rlcurves.cli import main

    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            status = main(shlex.split(command[1])[1:])
        finally:
            plt.close("all")
    captured = capsys.readouterr()
    assert status in (0, None), captured.err[-2000:]
    assert captured.out.strip()
