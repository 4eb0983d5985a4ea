"""A user's first hour, again (issue 39): the live and sweep commands on a user's own files.

Each test reproduces one finding of that session as it was reported (it failed on the code of
the time) and checks the fix.
"""

from __future__ import annotations

import argparse

import pytest

from rlcurves.cli import build_parser, main


def _commands() -> list[str]:
    parser = build_parser()
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(sub.choices)


def test_every_command_has_a_help_page():
    assert {"watch", "race", "report", "fit", "forecast", "compare"} <= set(_commands())


@pytest.mark.parametrize("command", [None, *_commands()])
def test_regression_every_commands_help_runs(command, capsys):
    """`rlcurves watch --help` crashed (`%o format`: a bare % in a help string); every
    command's --help prints its usage and exits 0."""
    argv = ["--help"] if command is None else [command, "--help"]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    assert exc.value.code == 0, out.err
    assert out.out.startswith("usage: rlcurves") and "Traceback" not in out.err
    if command == "watch":
        assert "10% of the budget" in out.out  # the measured schedule, its % printed once


# ---- item 4: validation-accuracy names --------------------------------------------------------
def _curve(n: int = 30, end: float = 750.0, seed: int = 0, A: float = 0.62, C_mid: float = 180.0):
    """A run's evaluations: ScaleRL sigmoid plus noise, on GPU-hours."""
    import numpy as np

    from rlcurves import sigmoid

    c = np.linspace(end / n, end, n)
    y = sigmoid(c, A, 1.6, C_mid, 0.2) + np.random.default_rng(seed).normal(0, 0.008, n)
    return c, y


@pytest.mark.parametrize(
    "name", ["val_acc", "val/acc", "eval/accuracy", "val_accuracy", "val-core/gsm8k/acc/mean@1"]
)
def test_regression_validation_accuracy_names_are_recognised(name, tmp_path, capsys):
    """`val_acc` (the README's own Ray Tune metric) was "no reward column recognized"."""
    import pandas as pd

    c, y = _curve()
    path = tmp_path / "run.csv"
    pd.DataFrame({"run": "a", "gpu_hours": c, name: y}).to_csv(path, index=False)
    assert main(["fit", str(path)]) == 0
    captured = capsys.readouterr()
    assert f"reward: {name!r} (detected" in captured.err


def test_regression_unrecognised_reward_lists_the_candidates(tmp_path, capsys):
    import pandas as pd

    c, y = _curve()
    path = tmp_path / "run.csv"
    pd.DataFrame({"step": range(len(c)), "gpu_hours": c, "score": y, "kl": y / 10}).to_csv(
        path, index=False
    )
    assert main(["fit", str(path)]) == 2
    err = capsys.readouterr().err
    # the numeric columns that could be it (not the step or compute), the flag, the known names
    assert "could be the reward: ['score', 'kl']" in err
    assert "Pass --reward score" in err and "val_acc" in err and "eval/accuracy" in err


# ---- item 5: bad input ------------------------------------------------------------------------
def _write(tmp_path, name: str, column: str | None = None, cell: object = None, rows=None):
    """A one-run CSV (gpu_hours, val_acc), with ``cell`` written into ``column`` at row 5."""
    import pandas as pd

    c, y = _curve()
    df = pd.DataFrame({"gpu_hours": c, "val_acc": y}).astype(object)
    if column is not None:
        df.loc[5, column] = cell
    if rows is not None:
        df = df.iloc[rows]
    path = tmp_path / name
    df.to_csv(path, index=False)
    return str(path)


@pytest.mark.parametrize("reward", [[], ["--reward", "val_acc"]])
@pytest.mark.parametrize("cell", ["oops", "n/a"])
def test_regression_text_in_the_reward_column_drops_that_row_and_names_it(
    tmp_path, capsys, cell, reward
):
    """One text cell rejected the whole column ("Pass --reward <column>" when it already was the
    reward column; with --reward no row named), while "n/a" was dropped in silence: now both
    drop their row, named with its text in the read report."""
    path = _write(tmp_path, "run.csv", "val_acc", cell)
    assert main(["fit", path, *reward]) == 0
    err = capsys.readouterr().err
    assert "rows kept: 29 of 30" in err
    assert f"dropped 1 rows: records whose reward 'val_acc' holds text, not a number: record 6 " \
        f"({cell!r})" in err  # fmt: skip


def test_regression_text_in_the_compute_column_drops_that_row_and_names_it(tmp_path, capsys):
    """ "compute column 'gpu_hours' holds no numbers" was false: 29 of 30 were numbers."""
    path = _write(tmp_path, "run.csv", "gpu_hours", "oops")
    assert main(["fit", path]) == 0
    err = capsys.readouterr().err
    assert "holds no numbers" not in err and "rows kept: 29 of 30" in err
    assert "records whose compute 'gpu_hours' holds text, not a number: record 6 ('oops')" in err


def test_regression_too_few_points_with_r0_given_does_not_suggest_r0(tmp_path, capsys):
    three = _write(tmp_path, "three.csv", rows=[10, 20, 29])
    assert main(["forecast", three, "--r0", "0.2", "--at", "750", "-q"]) == 0
    out = capsys.readouterr().out
    assert "UNBOUNDED" in out and "fit at least 6 points for an interval" in out
    assert "--r0" not in out
    assert main(["forecast", three, "--at", "750", "-q"]) == 2  # 3 points, 4 parameters
    assert "or fix R0 with --r0" in capsys.readouterr().err  # without --r0 the hint stays
    two = _write(tmp_path, "two.csv", rows=[10, 20])
    assert main(["fit", two, "--r0", "0.2", "-q"]) == 2
    err = capsys.readouterr().err
    assert "fewer than the 3 parameters" in err and "--r0" not in err


def test_regression_watch_takes_a_number_as_the_baseline(tmp_path, capsys):
    """`watch --baseline 0.62` said "0.62: no such file or folder"."""
    run = _write(tmp_path, "run.csv", rows=list(range(12)))
    args = ["watch", run, "--budget", "750", "--once", "--no-plot", "-q"]
    assert main([*args, "--baseline", "0.62"]) == 0
    out = capsys.readouterr().out
    assert "baseline 0.62" in out and "p(above) =" in out
    assert main([*args, "--baseline", "nope.csv"]) == 2
    err = capsys.readouterr().err
    assert "not a number" in err and "--target" in err and "Traceback" not in err


def test_regression_text_cells_named_in_json_lines_and_a_wandb_panel_export(tmp_path):
    """The same account in every reader: JSON lines (a string where a number was expected) and
    a W&B panel CSV of two runs (the run whose cell it was)."""
    import json

    from rlcurves import DataRepairWarning, read_log

    path = tmp_path / "log.jsonl"
    bad = {4: "n/a", 7: "bad"}
    path.write_text(
        "".join(
            json.dumps({"step": i, "gpu_hours": 10.0 * i, "val_acc": bad.get(i, 0.1 + 0.02 * i)})
            + "\n"
            for i in range(1, 20)
        )
    )
    with pytest.warns(DataRepairWarning, match="step 4 \\('n/a'\\), step 7 \\('bad'\\)"):
        df = read_log(path)
    assert len(df) == 17 and df.attrs["cleaning"][0]["step"] == "drop_text_reward"
    panel = tmp_path / "panel.csv"
    head = "Step," + ",".join(
        f"{r} - val_acc{s}" for r in ("r1", "r2") for s in ("", "__MIN", "__MAX")
    )
    rows = [
        f"{i},{'n/a' if i == 3 else 0.1 * i},{0.1 * i},{0.1 * i},{0.05 * i},{0.05 * i},{0.05 * i}"
        for i in range(1, 8)
    ]
    panel.write_text("\n".join([head, *rows]) + "\n")
    df = read_log(panel, compute="Step")
    assert df.groupby("run").size().to_dict() == {"r1": 6, "r2": 7}
    (entry,) = [e for e in df.attrs["cleaning"] if e["rows"]]
    assert entry["run"] == "r1" and "Step 3 ('n/a')" in entry["detail"]
