"""Issue 17, a user's first hour with the command line: what it says it read, wide tables, errors in
CLI words, bundled examples by name, JSON, pipes. One regression test per point of the issue."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rlcurves.cli import build_parser, cli_words, main

LOGS = Path(__file__).parent / "data" / "logs"
SWAPPED = LOGS / "glitch" / "swapped_pair.csv"
WIDE = LOGS / "wide" / "models.csv"
ROOT = Path(__file__).parents[1]


def test_point1_cli_reports_what_it_read_and_every_repair_before_the_result(capsys):
    assert main(["fit", str(SWAPPED), "--json"]) == 0
    captured = capsys.readouterr()
    err = captured.err
    assert f"read {SWAPPED}" in err and "csv" in err
    assert "columns: step, gpu_hours, val_pass_rate" in err
    assert "compute axis: GPU-hours" in err and "rows kept: 79 of 81" in err
    assert "step 5000, step 5100" in err and "glitch" in err
    fit = json.loads(captured.out)
    assert abs(fit["params"]["A"] - 0.609) < 0.01  # not 0.598: no later row was shifted
    assert fit["compute_unit"] == "GPU-hours"
    # --quiet silences the report (and the repair warning it replaces), not the result
    assert main(["fit", str(SWAPPED), "--quiet"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and "[[Parameters]]" in captured.out


def test_point2_units_in_cli_tables_and_sentences(capsys):
    argv = ["fit", "example:recipe_loo_scalerl", "--compute", "tokens_total", "-q"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "compute axis    = tokens_total (as logged)" in out
    assert "GPU-hours" not in out
    assert main(["forecast", str(WIDE), "--reward", "8b", "--at", "8000", "-q"]) == 0
    assert "compute (GPU-hours)" in capsys.readouterr().out
    argv = ["compare", str(WIDE), "--reward", "14b", "8b", "--n-samples", "100", "-q"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "C_mid" in out.splitlines()[0]  # C_mid beside A and B in the table
    assert "compute axis: GPU-hours" in out


def test_point4_wide_table_several_reward_columns(tmp_path, capsys):
    argv = ["compare", str(WIDE), "--reward", "14b", "8b", "4b", "--baseline", "8b"]
    assert main([*argv, "--n-samples", "200", "--json", "-q"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["variant"] for r in rows] == ["14b", "8b", "4b"]
    by_name = {r["variant"]: r for r in rows}
    assert by_name["14b"]["A"] > by_name["8b"]["A"] > by_name["4b"]["A"]  # 0.72 > 0.61 > 0.52
    assert main(["fit", str(WIDE), "--reward", "*", "-q"]) == 0
    out = capsys.readouterr().out
    for column in ("14b", "8b", "4b"):  # the titles name the column
        assert f"[[Sigmoid fit: models: {column}]]" in out
    assert "gpu_hours]]" not in out and "Step]]" not in out
    png = tmp_path / "wide.png"
    assert main(["plot", str(WIDE), "--reward", "14b", "8b", "-o", str(png), "--no-bands"]) == 0
    assert png.stat().st_size > 10_000


def test_point4_read_log_wide_gives_a_long_frame_with_a_run_column():
    from rlcurves import read_log

    df = read_log(WIDE, reward=["14b", "8b"])
    assert list(df["run"].unique()) == ["14b", "8b"] and len(df) == 2 * 41
    np.testing.assert_array_equal(df.loc[df["run"] == "8b", "reward"], pd.read_csv(WIDE)["8b"])
    assert df.attrs["compute_unit"] == "GPU-hours"
    every = read_log(WIDE, reward="*")
    assert list(every["run"].unique()) == ["14b", "8b", "4b"]  # not Step, not gpu_hours


def test_point4_wide_table_without_a_compute_column(tmp_path, capsys):
    wide = pd.read_csv(WIDE).drop(columns="gpu_hours")
    path = tmp_path / "by_step.csv"
    wide.to_csv(path, index=False)
    code = main(["compare", str(path), "--reward", "14b", "8b"])
    err = capsys.readouterr().err
    assert code == 2 and "--gpu-hours-per-step" in err and "--compute" in err
    argv = ["compare", str(path), "--reward", "14b", "8b", "--compute", "Step", "--n-samples", "50"]
    assert main(argv) == 0
    assert "compute axis: Step" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("library", "cli"),
    [
        ("Pass gpus=<number of GPUs> to use", "Pass --gpus <number of GPUs> to use"),
        ("Pass reward='<column>' naming", "Pass --reward <column> naming"),
        ("fix R0 with r0=.", "fix R0 with --r0."),
        ("pass either gpus= (with", "pass either --gpus (with"),
        ("or gpu_hours_per_step= instead", "or --gpu-hours-per-step instead"),
        ("Pass reward='val_pass_rate' (or another).", "Pass --reward val_pass_rate (or another)."),
        ("a data= frame", "a data= frame"),  # not a flag: left alone
    ],
)
def test_point5_library_keywords_become_cli_flags(library, cli):
    assert cli_words(library) == cli


def test_point5_cli_errors_speak_flags_and_options_read_well(capsys):
    code = main(["fit", str(LOGS / "verl" / "gsm8k_grpo.jsonl")])
    err = capsys.readouterr().err
    assert code == 2 and "--gpus <number of GPUs>" in err and "gpus=" not in err
    assert "Traceback" not in err
    code = main(["fit", str(LOGS / "csv" / "run_a.csv"), "--reward", "nope"])
    err = capsys.readouterr().err
    assert code == 2 and "--reward" in err and "reward=" not in err
    help_text = build_parser()._subparsers._group_actions[0].choices["fit"].format_help()
    choices = help_text.split("--format {", 1)[1].split("}", 1)[0].split(",")
    assert len(choices) == len(set(choices)) and choices[0] == "auto"
    demo_help = build_parser()._subparsers._group_actions[0].choices["demo"].format_help()
    assert "bundled run to forecast" in demo_help
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and "rlcurves 0." in capsys.readouterr().out


def test_point5_examples_listed_and_usable_wherever_a_path_goes(capsys):
    from rlcurves import read_log
    from rlcurves.datasets import list_examples

    assert main(["examples"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in list_examples())
    assert main(["fit", "example:simulated_scalerl_8b", "--min-compute", "1500", "-q"]) == 0
    assert "[[Sigmoid fit: simulated_scalerl_8b: val_pass_rate]]" in capsys.readouterr().out
    assert len(read_log("example:recipe_cpu_demo_seed0")) > 20
    code = main(["fit", "example:nope"])
    assert code == 2 and "rlcurves examples" in capsys.readouterr().err


def test_point6_json_writes_nan_as_null_not_a_string(capsys):
    assert main(["fit", str(SWAPPED), "--r0", "0.3", "--json", "-q"]) == 0
    text = capsys.readouterr().out
    assert '"nan"' not in text and json.loads(text)["stderr"]["R0"] is None


def test_point6_output_into_a_closed_pipe_is_no_traceback():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    cmd = f"'{sys.executable}' -m rlcurves examples -v | head -n 1"
    proc = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {cmd}"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr
    assert proc.stdout.startswith("bundled examples")


def test_point6_profile_repr_leaves_out_the_trace_tables():
    import warnings

    from rlcurves import fit_sigmoid
    from rlcurves.datasets import load_example

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_sigmoid("compute", "reward", data=load_example("simulated_scalerl_8b"))
    text = repr(fit.profile())
    assert "statistic" not in text and "rss" not in text  # trace columns
    assert len(text.splitlines()) <= 5 and "C_mid" in text


def test_point6_bootstrap_progress_counts_resamples_not_chunks(capsys):
    import warnings

    from rlcurves import fit_sigmoid
    from rlcurves.datasets import load_example

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_sigmoid("compute", "reward", data=load_example("simulated_scalerl_8b"))
    fit.bootstrap(300, seed=0)
    err = capsys.readouterr().err
    assert "/300 " in err and "/1 " not in err  # counts the 300 fits, not one chunk


def test_point8_backtest_explains_its_coverage_line(capsys):
    argv = ["backtest", "example:simulated_scalerl_8b", "--n-samples", "100", "-q"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "last observation" in out and "prediction interval" in out
    assert "one run checks little" in out


def test_forecast_cli_says_what_calibrated_the_interval_and_its_warnings(tmp_path, capsys):
    """The forecast's calibration and notes (issue 12) reach the CLI, in flags' words."""
    assert main(["forecast", str(WIDE), "--reward", "8b", "--at", "8000", "-q"]) == 0
    out = capsys.readouterr().out
    from rlcurves.calibrate import default_calibration

    n = default_calibration().n  # every run of the corpus
    assert "calibration: " in out and f"{n} runs (" in out
    # regression (issue 26): the count was printed twice, "36 scores from 12 runs (36 scores)"
    line = next(x for x in out.splitlines() if "calibration: " in x)
    assert line.count(f"{n} runs") == 1 and "scores" not in line
    # four points, four parameters: the fit cannot estimate the noise; the forecast is the
    # corpus's prior predictive (issue 42: never refused), and the note says so
    path = tmp_path / "four.csv"
    pd.DataFrame(
        {"gpu_hours": [100, 200, 400, 800], "val_pass_rate": [0.2, 0.3, 0.45, 0.5]}
    ).to_csv(path, index=False)
    assert main(["forecast", str(path), "--at", "1600", "--json", "-q"]) == 0
    item = json.loads(capsys.readouterr().out)
    assert item["unbounded"] is False
    assert "prior predictive" in item["note"] and "4 evaluations" in item["note"]
