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
