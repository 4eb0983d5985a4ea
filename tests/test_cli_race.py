"""``rlcurves race``: the toy sweep's logs (tests/race_toys.py) at 3/4 of the budget in, who to
stop and why out, the figure written; errors in the command line's words."""

from __future__ import annotations

import pandas as pd
import pytest
from race_toys import BUDGET, RECIPES, reward

from rlcurves.cli import main

STEPS = range(1, 3 * BUDGET // 4 + 1)


@pytest.fixture
def logs(tmp_path):
    paths = []
    for name in RECIPES:
        path = tmp_path / f"{name}.csv"
        pd.DataFrame({"step": list(STEPS), "val_acc": reward(name, STEPS)}).to_csv(
            path, index=False
        )
        paths.append(str(path))
    return paths


def test_race_command_prints_who_to_stop_and_writes_the_figure(logs, tmp_path, capsys):
    png = tmp_path / "race.png"
    code = main(
        [
            "race",
            *logs,
            "--budget",
            str(BUDGET),
            "--compute",
            "step",
            "--reward",
            "val_acc",
            "--rungs",
            "10",
            "--out",
            str(png),
            "--quiet",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "[[Race]] 4 runs to the budget 40" in out
    stop_line = next(line for line in out.splitlines() if line.startswith("stop now:"))
    assert "loser" in stop_line and "late" not in stop_line
    assert "loser: stopped at" in out  # the reason, with its numbers
    assert "leader: late" in out
    assert "misspecification scale tau" in out  # the sweep's own tau, by default
    assert png.exists() and png.stat().st_size > 10_000


def test_race_command_misspecification_flag(logs, capsys):
    """--misspecification calibration: the calibration's tau, no line about the sweep's;
    --misspecification sweep: one refitted tau for every run; a value outside the three choices
    is refused by the parser, in its words."""
    args = ["race", *logs, "--budget", str(BUDGET), "--compute", "step", "--reward", "val_acc",
            "--rungs", "10", "--no-plot", "--quiet"]  # fmt: skip
    assert main([*args, "--misspecification", "calibration"]) == 0
    out = capsys.readouterr().out
    assert "[[Race]] 4 runs" in out and "misspecification scale tau" not in out
    assert main([*args, "--misspecification", "sweep"]) == 0
    assert "misspecification scale tau" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main([*args, "--misspecification", "family"])
    assert "--misspecification: invalid choice: 'family'" in capsys.readouterr().err


def test_race_command_error_correlation_flag(logs, capsys):
    """--error-correlation reaches Race: the stop's reason says the shared error was taken out."""
    args = ["race", *logs, "--budget", str(BUDGET), "--compute", "step", "--reward", "val_acc",
            "--rungs", "10", "--no-plot", "--quiet"]  # fmt: skip
    assert main([*args, "--error-correlation", "0.4"]) == 0
    out = capsys.readouterr().out
    assert "error_correlation 0.4" in out and "loser: stopped at" in out
    assert main(args) == 0
    assert "error_correlation" not in capsys.readouterr().out


def test_race_command_seeds_of_a_recipe_race_as_one_entry(tmp_path, capsys):
    """--seeds-of COLUMN: the runs sharing a value of COLUMN race as one entry (without it each
    run is a sweep member of its own: tests/test_cli_first_hour_again.py)."""
    frames = [
        pd.DataFrame(
            {
                "run": f"{name}-s{seed}",
                "recipe": name,
                "step": list(STEPS),
                "val_acc": reward(name, STEPS, seed),
            }
        )
        for name in ("late", "loser")
        for seed in (0, 1)
    ]
    paths = []
    for name in ("late", "loser"):
        path = tmp_path / f"{name}.csv"
        pd.concat([f for f in frames if f["run"].iloc[0].startswith(name)]).to_csv(
            path, index=False
        )
        paths.append(str(path))
    code = main(
        [
            "race",
            *paths,
            "--budget",
            str(BUDGET),
            "--compute",
            "step",
            "--reward",
            "val_acc",
            "--run",
            "run",
            "--seeds-of",
            "recipe",
            "--rungs",
            "10",
            "--no-plot",
            "--json",
            "--quiet",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    stop_line = next(line for line in out.splitlines() if line.startswith("stop now:"))
    assert stop_line.split()[2:] == ["loser-s0", "loser-s1"]
    assert '"runs": [\n      "late-s0",\n      "late-s1"\n    ]' in out


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--alpha", "2"], "--alpha must be in [0, 1)"),
        (["--tolerance", "-1"], "--tolerance must be"),
        (["--budget", "0"], "--budget must be a positive"),
        (["--confirm", "0"], "--confirm must be a positive integer"),
        (["--identified-guard", "2"], "--identified-guard must be a fraction"),
        (["--error-correlation", "1.5"], "--error-correlation must be in [0, 1)"),
        (["--out", "race.txt"], "--out must name an image file"),
    ],
)
def test_race_command_errors_in_flag_words(logs, tmp_path, capsys, extra, words):
    args = [
        "race",
        *logs,
        "--budget",
        str(BUDGET),
        "--compute",
        "step",
        "--reward",
        "val_acc",
        "--quiet",
        *extra,
    ]
    if "--out" in extra:
        args[args.index("race.txt")] = str(tmp_path / "race.txt")
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("rlcurves: error: ") and words in err, err
    assert "Traceback" not in err


def test_race_command_needs_two_runs(logs, capsys):
    assert (
        main(
            [
                "race",
                logs[0],
                "--budget",
                "40",
                "--compute",
                "step",
                "--reward",
                "val_acc",
                "--quiet",
            ]
        )
        == 2
    )
    assert "at least two racers" in capsys.readouterr().err
