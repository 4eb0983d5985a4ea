"""The forecast, compare, plot, backtest and half-budget demo commands, run as a user would."""

import json

import numpy as np
import pandas as pd
import pytest

from rlcurves import sigmoid
from rlcurves.cli import main

C = np.linspace(0, 16000, 41)


def _csv(tmp_path, name="run", A=0.61, B=1.92, C_mid=2542, seed=0, runs=None):
    rng = np.random.default_rng(seed)
    if runs is None:
        df = pd.DataFrame(
            {
                "gpu_hours": C,
                "val_pass_rate": sigmoid(C, A, B, C_mid, 0.3) + rng.normal(0, 0.005, C.size),
            }
        )
    else:
        df = pd.concat(
            pd.DataFrame(
                {
                    "gpu_hours": C,
                    "val_pass_rate": sigmoid(C, a, B, C_mid, 0.3) + rng.normal(0, 0.005, C.size),
                    "variant": label,
                }
            )
            for label, a in runs.items()
        )
    path = tmp_path / f"{name}.csv"
    df.to_csv(path, index=False)
    return path


IO = ["--compute", "gpu_hours", "--reward", "val_pass_rate"]


def test_forecast_text_target_and_plot(tmp_path, capsys):
    path = _csv(tmp_path)
    png = tmp_path / "fc.png"
    argv = ["forecast", str(path), *IO, "--min-compute", "1500", "--max-compute", "8000"]
    argv += ["--at", "12000", "16000", "--target", "0.58", "--plot", str(png)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "[[Forecast]]" in out and "16,000" in out and "[[Compute to target]]" in out
    assert "reaching 0.58 takes C = " in out
    assert png.stat().st_size > 10_000


def test_forecast_json(tmp_path, capsys):
    path = _csv(tmp_path)
    argv = ["forecast", str(path), *IO, "--min-compute", "1500", "--at", "20000", "--json"]
    assert main([*argv, "--target", "0.9"]) == 0
    out = json.loads(capsys.readouterr().out)
    (row,) = out["forecast"]
    assert row["lower"] <= row["mean"] <= row["upper"]
    assert row["mean"] == pytest.approx(sigmoid(20000, 0.61, 1.92, 2542, 0.3), abs=0.01)
    # 0.9 is far above the ceiling: "never", said plainly; strict JSON has no Infinity literal
    assert out["target"]["compute"] == "inf" and "never" in out["target"]["message"]


def test_compare_files_and_baseline(tmp_path, capsys):
    a = _csv(tmp_path, "base", A=0.61, seed=1)
    b = _csv(tmp_path, "fp16", A=0.52, seed=2)
    png = tmp_path / "cmp.png"
    argv = ["compare", str(a), str(b), *IO, "--min-compute", "1500", "--n-samples", "200"]
    assert main([*argv, "--baseline", "base", "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "p_A_higher" in out and "fp16: A 0.5" in out and "lower ceiling" in out
    assert png.stat().st_size > 10_000
    assert main([*argv, "--baseline", "fp16", "--json"]) == 0
    table = json.loads(capsys.readouterr().out)
    assert [r["variant"] for r in table] == ["base", "fp16"]
    assert table[0]["p_A_higher"] > 0.99  # base against the fp16 baseline


def test_compare_one_file_with_variant_column(tmp_path, capsys):
    path = _csv(tmp_path, "loo", runs={"baseline": 0.61, "no-fp32": 0.55})
    argv = ["compare", str(path), *IO, "--run", "variant", "--min-compute", "1500"]
    assert main([*argv, "--n-samples", "100"]) == 0
    out = capsys.readouterr().out
    assert "no-fp32: A 0.5" in out
    single = _csv(tmp_path, "one")
    assert main(["compare", str(single), *IO]) == 2
    assert "at least two variants" in capsys.readouterr().err


def test_plot_command(tmp_path, capsys):
    path = _csv(tmp_path)
    png = tmp_path / "sub" / "out.png"
    argv = ["plot", str(path), *IO, "--min-compute", "1500", "--max-compute", "8000"]
    assert main([*argv, "-o", str(png), "--logx"]) == 0
    assert png.stat().st_size > 10_000 and "plot saved" in capsys.readouterr().out


def test_backtest_command(tmp_path, capsys):
    path = _csv(tmp_path)
    argv = ["backtest", str(path), *IO, "--min-compute", "1500", "--n-samples", "200"]
    png = tmp_path / "bt.png"
    assert main([*argv, "--fractions", "0.5", "0.75", "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "[[Backtest]]" in out and "coverage" in out and png.stat().st_size > 10_000
    assert main([*argv, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["fraction"] for r in rows] == [0.25, 0.5, 0.75]


def test_demo_forecasts_from_half_the_budget(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "first half of the budget" in out and "8,000 of 16,000" in out
    assert "[[Forecast]]" in out and "observed" in out and "[[Compute to target]]" in out
    assert (tmp_path / "simulated_scalerl_8b_fit.png").stat().st_size > 10_000


def test_forecast_pools_seeds_with_run_level_intervals(tmp_path, capsys):
    path = _csv(tmp_path, "seeds", runs={"s0": 0.59, "s1": 0.61, "s2": 0.63})
    argv = ["forecast", str(path), *IO, "--run", "variant", "--min-compute", "1500"]
    assert main([*argv, "--at", "16000", "--json"]) == 0
    captured = capsys.readouterr()
    assert "3 runs pooled" in captured.err
    (row,) = json.loads(captured.out)["forecast"]
    # the seeds' ceilings spread over 0.59-0.63: a run-level interval is several points wide,
    # far wider than the ~0.005 a pooled residual bootstrap of 120 points would give
    assert row["upper"] - row["lower"] > 0.015
    assert row["lower"] <= 0.61 <= row["upper"]


def test_demo_compares_several_examples(tmp_path, capsys, monkeypatch):
    import rlcurves.datasets as datasets

    real = datasets.load_example

    def load(name, compute=None):
        df = real("simulated_scalerl_8b", compute=compute)
        if name == "other":
            df = df.assign(reward=df["reward"] - 0.05)
            df.attrs["baseline"] = "simulated_scalerl_8b"  # differs from it by one switch
        return df

    monkeypatch.setattr(
        datasets, "list_examples", lambda group=None: ["simulated_scalerl_8b", "other"]
    )
    monkeypatch.setattr(datasets, "load_example", load)
    assert main(["demo", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "[[Comparison]] baseline simulated_scalerl_8b" in out
    assert "other: A 0.5" in out and "lower ceiling" in out


def test_demo_on_the_real_leave_one_out_runs_compares_each_with_its_own_baseline(tmp_path, capsys):
    argv = ["demo", "--example", "recipe_loo_scalerl", "--compute", "tokens_total",
            "--min-compute", "0", "--out", str(tmp_path)]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "compute axis: tokens_total (as logged)" in out
    assert "[[Comparison]] baseline recipe_loo_scalerl" in out
    assert "    recipe_loo_dapo: A" in out
    # the pairs with their own baseline are compared with it, not with the recipe
    assert "[[Comparison]] baseline recipe_loo_pool_2000" in out
    assert "    recipe_loo_pool_2000_no_positive: A" in out
    # the inert runs repeat the recipe: nothing to compare
    assert "recipe_loo_fp32_head:" not in out and "recipe_loo_no_positive:" not in out
    assert (tmp_path / "recipe_loo_scalerl_fit.png").stat().st_size > 10_000
    for base in ("recipe_loo_scalerl", "recipe_loo_bf16", "recipe_loo_pool_2000"):
        assert (tmp_path / f"{base}_compare.png").stat().st_size > 10_000
    assert "variant     A  A_lower" in out  # the printed table


def test_regression_report_refuses_a_folder_output_and_bad_settings_before_the_work(
    tmp_path, capsys
):
    # -o naming a folder ended in IsADirectoryError after every fit; --budget 0 forecast every run
    # at the start, --fractions 2 left the backtests out as a muted note, --n-samples 0 said
    # "n must be" (the bootstrap's keyword)
    path = str(_csv(tmp_path))
    html = str(tmp_path / "r.html")
    cases = [
        (["-o", str(tmp_path)], f"-o {tmp_path} is a folder; name the HTML file"),
        (["-o", html, "--budget", "0"], "--budget must be a positive compute value"),
        (["-o", html, "--budget", "nan"], "--budget must be a positive compute value"),
        (["-o", html, "--fractions", "2"], "--fractions must be numbers in (0, 1)"),
        (["-o", html, "--n-samples", "0"], "--n-samples must be an integer >= 2"),
    ]
    for flags, words in cases:
        assert main(["report", path, *IO, *flags]) == 2, flags
        assert words in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()


def test_regression_plot_to_zero_or_negative_names_to(tmp_path, capsys):
    # --to 0 was taken for "not given" (the plot ran to twice the fit); --to -5 or nan said
    # "--at <compute> takes finite compute values", a flag plot does not have
    path = str(_csv(tmp_path))
    for to in ("0", "-5", "nan"):
        assert main(["plot", path, *IO, "-o", str(tmp_path / "p.png"), "--to", to]) == 2
        err = capsys.readouterr().err
        assert "--to must be a positive compute value" in err and "--at" not in err
    assert not (tmp_path / "p.png").exists()


def test_regression_watch_out_naming_a_file_and_settings_in_flag_words(tmp_path, capsys):
    # --out naming a file was a FileExistsError traceback after the first refit; the Monitor's
    # refusals said its keywords (budget, n_samples, hold, target) instead of the flags
    path = str(_csv(tmp_path))
    watch = ["watch", path, *IO, "--once", "--no-plot"]
    assert main([*watch, "--budget", "16000", "--out", path]) == 2
    assert f"--out {path}: is a file; --out takes the folder" in capsys.readouterr().err
    cases = [
        (["--budget", "0"], "--budget must be a positive compute value"),
        (["--budget", "16000", "--n-samples", "0"], "--n-samples must be a positive integer"),
        (["--budget", "16000", "--hold", "0"], "--hold must be a positive integer"),
    ]
    for flags, words in cases:
        assert main([*watch, *flags]) == 2, flags
        assert words in capsys.readouterr().err
    with pytest.raises(SystemExit):  # a target that is no number: argparse's type says so
        main([*watch, "--budget", "16000", "--target", "nan"])
    assert "argument --target: must be a finite number" in capsys.readouterr().err


def test_regression_watch_refuses_a_nan_fit_window_up_front_and_says_no_python_none(
    tmp_path, capsys
):
    # --min-compute nan or --r0 nan was accepted by watch and every report said "TOO EARLY TO
    # TELL: no fit yet: --min-compute must be ... or None"; --baseline nan said "a numeric
    # baseline must be finite". Now each is refused before the first look, in flags, without
    # Python's "or None" (a flag is left out by not passing it)
    path = str(_csv(tmp_path))
    watch = ["watch", path, *IO, "--once", "--no-plot", "--budget", "16000"]
    cases = [
        (["--min-compute", "nan"], "argument --min-compute: must be a finite number, got 'nan'"),
        (["--r0", "nan"], "argument --r0: must be a finite number, got 'nan'"),
        (["--baseline", "nan"], "--baseline must be a finite reward level or a finished run"),
        (["--target", "inf"], "argument --target: must be a finite number, got 'inf'"),
    ]
    for flags, words in cases:
        try:
            status = main([*watch, *flags])
        except SystemExit as exc:  # argparse's type refused it
            status = exc.code
        assert status == 2, flags
        captured = capsys.readouterr()
        assert words in captured.err and "None" not in captured.err, flags
        assert "advice" not in captured.out, flags
    assert not list(tmp_path.glob("rlcurves_monitor*"))


@pytest.mark.parametrize("command", ["fit", "forecast", "plot", "backtest", "race", "report"])
def test_regression_nan_for_a_reward_or_compute_bound_is_refused_by_argparse(
    tmp_path, capsys, command
):
    # --target nan in forecast printed "--reward must be finite target reward(s)" (the Python
    # keyword of compute_to_reach, in flag words: a flag forecast does not have); --r0 and
    # --min-compute nan reached the fit. Every such flag now takes finite numbers only
    path = str(_csv(tmp_path))
    extra = {"forecast": ["--at", "16000"], "race": ["--budget", "16000"],
             "report": ["-o", str(tmp_path / "r.html")]}.get(command, [])  # fmt: skip
    flags = [["--r0", "nan"], ["--min-compute", "inf"]]
    if command == "forecast":
        flags.append(["--target", "nan"])
    for flag in flags:
        with pytest.raises(SystemExit) as exit_:
            main([command, path, *IO, *extra, *flag])
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert f"argument {flag[0]}: must be a finite number, got '{flag[1]}'" in err, err
