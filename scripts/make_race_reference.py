"""Write ``benchmarks/race_reference.py``: "today's Race" from a commit's ``rlcurves/race.py``
and the sweep-level functions of its ``rlcurves/decide.py``.

Usage: ``python scripts/make_race_reference.py COMMIT [OUT]`` (OUT defaults to
``benchmarks/race_reference.py``). The two files are read with ``git show COMMIT:...`` and
rewritten by ``ast.unparse``: docstrings, plotting (``plot_race``), the report's printing
(``RaceReport``'s methods) and the type-checking imports left out, relative imports made
absolute, decide's ``_draws`` named ``_level_draws``; every other statement is the commit's. The
output is formatted with ``ruff format``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SWEEP_LEVEL = (
    "prob_best",
    "_draw_matrix",
    "_risk",
    "prob_regret_above",
    "stop_set",
    "sweep_baseline",
)

ABOUT = (
    "``rlcurves/race.py`` and the sweep-level functions of ``rlcurves/decide.py`` as they were at "
    "commit {commit} ({what}), generated from that commit by ``scripts/make_race_reference.py`` "
    "(``ast.unparse`` with docstrings, plotting and the report's printing left out): every "
    "statement of the report's code path is the commit's. The per-run forecasting it calls "
    "(``rlcurves.forecast``, ``rlcurves.calibrate.window_records``, the fits, "
    "``rlcurves.decide.decide``) is the library's own, the same code in both."
)

HEADER = '''"""Today's ``Race``: the reference :mod:`benchmarks.race_scale` times and
``tests/test_race_scale.py`` compares the library's ``Race`` with.

{about}
"""

# ruff: noqa
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from rlcurves._format import format_compute
from rlcurves.decide import (
    CONTINUE,
    DEFAULT_RULE,
    TOO_EARLY,
    Decision,
    Hysteresis,
    StopRule,
    _check_sign,
    _check_tolerance,
    _draws as _level_draws,
    decide,
)
from rlcurves.errors import RLCurvesError
from rlcurves.forecast import Forecast
from rlcurves.predictive import Predictive

COMMIT = "{commit}"


# ---- rlcurves/decide.py (sweep level) ----


{decide}


# ---- rlcurves/race.py ----

{race}
'''


def _show(commit: str, path: str) -> ast.Module:
    text = subprocess.run(
        ["git", "show", f"{commit}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    return ast.parse(text)


class _Strip(ast.NodeTransformer):
    """Docstrings out, relative imports absolute, decide's ``_draws`` renamed."""

    def __init__(self, rename: dict[str, str] | None = None) -> None:
        self.rename = rename or {}

    def _body(self, node):
        self.generic_visit(node)
        body = node.body
        if (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            body = body[1:] or [ast.Pass()]
        node.body = body
        return node

    visit_FunctionDef = visit_ClassDef = visit_AsyncFunctionDef = _body

    def visit_ImportFrom(self, node):
        if node.level:
            node.module = "rlcurves" + (f".{node.module}" if node.module else "")
            node.level = 0
        return node

    def visit_Name(self, node):
        if node.id in self.rename:
            node.id = self.rename[node.id]
        return node


def _unparse(nodes) -> str:
    return "\n\n\n".join(ast.unparse(n) for n in nodes)


def decide_part(commit: str) -> str:
    tree = _show(commit, "rlcurves/decide.py")
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    strip = _Strip({"_draws": "_level_draws"})
    return _unparse(strip.visit(funcs[name]) for name in SWEEP_LEVEL)


def race_part(commit: str) -> str:
    tree = _show(commit, "rlcurves/race.py")
    kept = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.If)):
            continue  # imports: the header's; `if TYPE_CHECKING:`
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the module docstring
        if isinstance(node, ast.FunctionDef) and node.name == "plot_race":
            continue
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            continue
        if isinstance(node, ast.ClassDef) and node.name == "RaceReport":
            node.body = [n for n in node.body if not isinstance(n, ast.FunctionDef)]
            for dec in node.decorator_list:  # repr=False went with its __repr__
                if isinstance(dec, ast.Call):
                    dec.keywords = [k for k in dec.keywords if k.arg != "repr"]
        kept.append(_Strip().visit(node))
    return _unparse(kept)


def main(commit: str, out: Path, what: str) -> None:
    about = textwrap.fill(ABOUT.format(commit=commit, what=what), width=96, break_on_hyphens=False)
    text = HEADER.format(
        commit=commit, about=about, decide=decide_part(commit), race=race_part(commit)
    )
    out.write_text(text)
    ruff = Path(sys.executable).with_name("ruff")
    subprocess.run([str(ruff if ruff.exists() else "ruff"), "format", str(out)], check=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0)
    main(
        args[0],
        Path(args[1]) if len(args) > 1 else ROOT / "benchmarks" / "race_reference.py",
        args[2] if len(args) > 2 else "the Race before issue 43's sweep-scale work",
    )
