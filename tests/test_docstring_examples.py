"""Every public name of ``rlcurves`` (``rlcurves.__all__``) has an example in its docstring, and
the example runs as written: its doctest passes (issue 45). These are the examples the API
reference shows (docs/api/), so a docstring whose example drifts from the code fails here.

Each example runs in a fresh folder (some write a file), with ``rlcurves`` imported, in well under
a second to a few seconds (the posterior's). Printed numbers are rounded to what a bootstrap's
last digits do not move."""

from __future__ import annotations

import doctest
import inspect
import warnings

import matplotlib
import pytest

import rlcurves

# the one public name that has no docstring of its own: a string (the API page states it)
NO_DOCSTRING = {"__version__"}
NAMES = [name for name in rlcurves.__all__ if name not in NO_DOCSTRING]
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _examples(name: str) -> list[doctest.DocTest]:
    obj = getattr(rlcurves, name)
    finder = doctest.DocTestFinder(recurse=False)
    return [t for t in finder.find(obj, f"rlcurves.{name}", globs={}) if t.examples]


def test_every_public_name_is_documented():
    assert set(NO_DOCSTRING) == set(rlcurves.__all__) - set(NAMES)
    assert isinstance(rlcurves.__version__, str)
    for name in NAMES:
        doc = inspect.getdoc(getattr(rlcurves, name)) or ""
        assert "Examples\n--------" in doc, f"rlcurves.{name}: no Examples section"


@pytest.mark.parametrize("name", NAMES)
def test_docstring_example_runs(name, tmp_path, monkeypatch):
    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    tests = _examples(name)
    assert tests, f"rlcurves.{name}: its docstring has no >>> example"
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    for test in tests:
        test.globs = {"rlcurves": rlcurves}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an example that means to see a warning records it
            runner.run(test)
    import matplotlib.pyplot as plt

    plt.close("all")
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"rlcurves.{name}: {result.failed} of {result.attempted} failed"
    assert result.attempted >= 1
