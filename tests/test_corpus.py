"""The calibration corpus (rlcurves/data/curves/ + corpus.json): every file names its public
source, none is a held-out source, every run is long enough, and the registry agrees with the
files it lists."""

import csv
import re
from importlib import resources

import numpy as np
import pytest

from rlcurves import RLCurvesError, datasets

# The project's independent evaluation set (../shared/HOLDOUT_SOURCES.md, outside this
# repository): these repositories, copies of them and the ScaleRL paper's figures must never be
# bundled. befocuss/Deep-GRPO is held out except the runs already bundled before the corpus grew
# (the two deepgrpo_gsm8k_* files, which are the copies in ../shared/data/curves/).
HOLDOUT_REPOS = (
    "josancamon19/rl-scaling-laws",
    "befocuss/Deep-GRPO",
    "kiankyars/rlvrbook",
    "rqzhangberkeley/DAPO",
    "damek/assignment5-alignment",
    "dequeueing/assignment5-alignment",
    "Taoger-Xu/assignment5-alignment",
)
HOLDOUT_WORDS = ("scalerl", "khatri", "2510.13786", "chickweight", "dnase")
DEEP_GRPO_FILES = ("deepgrpo_gsm8k_sweeps.csv", "deepgrpo_gsm8k_wallclock.csv")
DEEP_GRPO_RUNS = 12  # the nine-setting sweep and the budget variants, one run in both files
SOURCE = re.compile(r"github\.com/([\w.-]+/[\w.-]+)\W.*?\b([0-9a-f]{40})\b")


def _curves():
    return sorted(p for p in resources.files("rlcurves.data").joinpath("curves").iterdir()
                  if p.name.endswith(".csv"))  # fmt: skip


def _header_and_rows(path):
    text = path.read_text()
    header = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    rows = list(csv.DictReader(line for line in text.splitlines() if not line.startswith("#")))
    return header, rows


@pytest.mark.parametrize("path", _curves(), ids=lambda p: p.name)
def test_every_file_names_its_source_repository_and_commit(path):
    header, rows = _header_and_rows(path)
    found = SOURCE.search(header.splitlines()[0])
    assert found, f"{path.name}: the first header line must name github.com/OWNER/REPO and a commit"
    assert "metric" in header.lower() and rows
    # the registry names the same repository and commit for the family the file belongs to
    spec = next(s for s in datasets._registry().values()
                if path.name in [f["file"] for f in s["files"]])  # fmt: skip
    repo, commit = spec["source"].removeprefix("github.com/").split("@")
    assert (repo, commit) == found.groups()


@pytest.mark.parametrize("path", _curves(), ids=lambda p: p.name)
def test_no_held_out_source_is_bundled(path):
    header, _ = _header_and_rows(path)
    low = header.lower()
    for word in HOLDOUT_WORDS:
        assert word not in low, f"{path.name} mentions held-out material {word!r}"
    for repo in HOLDOUT_REPOS:
        if repo.lower() not in low:
            continue
        assert repo == "befocuss/Deep-GRPO" and path.name in DEEP_GRPO_FILES, (
            f"{path.name} takes runs from the held-out source {repo}"
        )
    if path.name in DEEP_GRPO_FILES:
        allowed = {r["run"] for f in DEEP_GRPO_FILES for r in _header_and_rows(
            resources.files("rlcurves.data").joinpath("curves", f))[1]}  # fmt: skip
        assert len(allowed) == DEEP_GRPO_RUNS


def test_registry_sources_are_not_held_out():
    for family, spec in datasets._registry().items():
        for repo in HOLDOUT_REPOS:
            if repo.lower() in spec["source"].lower():
                assert family == "gsm8k" and all(
                    f["file"] in DEEP_GRPO_FILES for f in spec["files"]
                )


def test_every_corpus_file_is_registered_once():
    registered = [f["file"] for s in datasets._registry().values() for f in s["files"]]
    assert sorted(registered) == sorted(p.name for p in _curves())


def test_list_corpus_agrees_with_the_files():
    """Counts, budgets and run names read with the csv module, independently of the library."""
    listed = datasets.list_corpus()
    for family, spec in datasets._registry().items():
        expected = {}
        for entry in spec["files"]:
            _, rows = _header_and_rows(
                resources.files("rlcurves.data").joinpath("curves", entry["file"])
            )
            runs = {}
            for r in rows:
                runs.setdefault(r["run"], []).append(float(r[entry["x"]]))
            for run, xs in runs.items():
                expected.setdefault(run, (len(xs), max(xs), entry["file"]))  # first file wins
        mine = listed[listed["family"] == family].set_index("run")
        assert set(mine.index) == set(expected)
        for run, (n, budget, file) in expected.items():
            assert (mine.loc[run, "n"], mine.loc[run, "budget"], mine.loc[run, "file"]) == (
                n,
                budget,
                file,
            )
            assert n >= datasets.MIN_CORPUS_POINTS, f"{family}/{run} has {n} evaluations"
        for name, sweep in spec["sweeps"].items():
            assert len(sweep["runs"]) >= 2 and set(sweep["runs"]) <= set(expected), name
            for run in sweep["runs"]:
                assert f"{family}/{name}" in mine.loc[run, "sweep"]
        assert (mine["source"] == spec["source"]).all()
        assert set(mine["metric_kind"]) <= {"validation", "training reward"}


def test_the_corpus_has_five_families_and_every_run_is_a_curve():
    listed = datasets.list_corpus()
    assert listed["family"].nunique() >= 5
    assert not listed.duplicated(["family", "run"]).any()
    assert (listed["n"] >= 12).all()
    long = datasets.load_corpus()
    assert list(long.columns) == ["family", "run", "x", "metric"]
    assert long["metric"].between(0, 1).all()
    for (_, _), g in long.groupby(["family", "run"]):
        assert np.all(np.diff(g["x"].to_numpy()) > 0)
    assert len(long) == listed["n"].sum()


def test_load_corpus_reads_one_family_and_names_the_families_for_an_unknown_one():
    math = datasets.load_corpus(family="math")
    assert set(math["family"]) == {"math"} and math["run"].nunique() == 17
    # the family shipped calibration uses reads the same numbers as its compute/reward frames
    from rlcurves.calibrate import load_corpus as frames

    lr = frames("math")["lr3e-5"]
    mine = math[math["run"] == "lr3e-5"]
    np.testing.assert_array_equal(mine["x"].to_numpy(), lr["compute"].to_numpy())
    np.testing.assert_array_equal(mine["metric"].to_numpy(), lr["reward"].to_numpy())
    with pytest.raises(RLCurvesError, match="countdown_qwen"):
        datasets.load_corpus(family="code")
    with pytest.raises(RLCurvesError, match="gsm8k"):
        datasets.list_corpus(family="MATH")


def test_describe_corpus_is_one_row_per_family():
    table = datasets.describe_corpus()
    listed = datasets.list_corpus()
    assert list(table["family"]) == list(dict.fromkeys(listed["family"]))
    assert table["runs"].sum() == len(listed)
    assert (table.set_index("family")["metric_kind"]["gsm8k_trl_train"]) == "training reward"


def test_corpus_page_tables_are_what_the_scripts_print():
    """The corpus page's family table (docs/benchmarks/corpus.md) is scripts/corpus_figure.py's,
    and its whole-corpus calibration table is `python -m benchmarks.calibration --corpus all`'s
    for the results it wrote."""
    import importlib.util
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    readme = (root / "docs" / "benchmarks" / "corpus.md").read_text()
    spec = importlib.util.spec_from_file_location(
        "corpus_figure", root / "scripts" / "corpus_figure.py"
    )
    figure = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(figure)
    assert figure.family_table() in readme
    from benchmarks.calibration import corpus_table

    res = json.loads((root / "benchmarks" / "results" / "calibration_corpus.json").read_text())
    listed = datasets.list_corpus()
    assert res["families"] == listed.groupby("family", sort=False).size().to_dict()
    kinds = dict(zip(listed["family"], listed["metric_kind"], strict=False))
    lofo = [r for r in res["summary"] if r["split"] == "leave-one-family-out"]
    assert corpus_table(lofo, kinds) in readme
