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
        # the measured schedule, its % printed once (argparse may wrap the line anywhere)
        assert "10% of the budget" in " ".join(out.out.split())


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
    # too few points to estimate the noise: since issue 42 the corpus's prior predictive, not
    # an unbounded interval, and never a hint to fix the R0 that is fixed
    assert "UNBOUNDED" not in out and "prior predictive" in out and "residual degrees" in out
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


# ---- items 2 and 3: race a sweep's runs; a run that ended short of the budget ------------------
def _sweep(tmp_path, recipe: bool = False):
    """One CSV of two runs, as a W&B sweep export: ``a`` ran to the budget (750 GPU-hours), ``b``
    (faster, higher) ended at 150, 20% of it. With ``recipe``, a recipe column and two seeds
    of each."""
    import pandas as pd

    frames = []
    for seed in (0, 1) if recipe else (0,):
        a = _curve(50, 750.0, seed=seed)
        b = _curve(30, 150.0, seed=10 + seed, A=0.66, C_mid=60.0)
        for run, (c, y) in (("a", a), ("b", b)):
            name = f"{run}-s{seed}" if recipe else run
            frames.append(pd.DataFrame({"run": name, "gpu_hours": c, "val_acc": y}))
            if recipe:
                frames[-1]["recipe"] = f"recipe_{run}"
    path = tmp_path / "sweep.csv"
    pd.concat(frames).to_csv(path, index=False)
    b_only = tmp_path / "b.csv"
    frames[1].drop(columns=["run", "recipe"], errors="ignore").to_csv(b_only, index=False)
    return str(path), str(b_only)


RACE = ["--run", "run", "--reward", "val_acc", "--budget", "750", "--no-plot", "-q"]


def test_regression_race_takes_each_run_of_a_file_as_a_sweep_member(tmp_path, capsys):
    """One CSV of two runs raced as "1 runs to the budget", the two pooled as seeds of one
    recipe (compare on the same file saw two variants)."""
    sweep, _ = _sweep(tmp_path)
    assert main(["race", sweep, *RACE, "--json"]) == 0
    out = capsys.readouterr().out
    assert "[[Race]] 2 runs to the budget 750" in out
    table = out[out.index("[\n") :]
    import json

    rows = {r["run"]: r for r in json.loads(table[: table.rindex("]") + 1])}
    assert set(rows) == {"a", "b"} and rows["a"]["runs"] == ["a"]
    assert rows["a"]["fraction"] == pytest.approx(1.0) and rows["b"]["fraction"] < 0.21


def test_race_seeds_of_a_column_pool_a_recipes_runs(tmp_path, capsys):
    sweep, _ = _sweep(tmp_path, recipe=True)
    assert main(["race", sweep, *RACE, "--seeds-of", "recipe", "--json"]) == 0
    out = capsys.readouterr().out
    assert "[[Race]] 2 runs to the budget 750" in out
    assert '"runs": [\n      "a-s0",\n      "a-s1"\n    ]' in out
    assert main(["race", sweep, *RACE, "--seeds-of", "arm"]) == 2
    err = capsys.readouterr().err
    assert "--seeds-of arm" in err and "'recipe'" in err  # the columns there are
    assert main(["race", sweep, *RACE]) == 0  # without it: four runs, each its own
    assert "[[Race]] 4 runs" in capsys.readouterr().out


def test_regression_race_says_a_leader_short_of_the_budget_is_a_forecast(tmp_path, capsys):
    """`race` made a run that stood at 20% of the budget the leader at its extrapolated value
    without a word; with --ended it is a run that ended there, not one still running."""
    sweep, _ = _sweep(tmp_path)
    assert main(["race", sweep, *RACE]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "leader: b (its value at the budget a forecast from 20% of it: 5.0x past" in head
    assert main(["race", sweep, *RACE, "--ended", "b"]) == 0
    out = capsys.readouterr().out
    assert "leader: b (its value at the budget a forecast from 20% of it, where it ended" in out
    b_row = next(line for line in out.splitlines() if line.startswith("    b "))
    assert b_row.rstrip().endswith("ended")
    assert "b: ended at 20% of the budget (C = 150): its value at the budget is a forecast" in out
    assert main(["race", sweep, *RACE, "--ended", "c"]) == 2
    assert "--ended c: no such run in the race; the runs: ['a', 'b']" in capsys.readouterr().err


def test_regression_watch_says_a_short_baseline_is_extrapolated(tmp_path, capsys):
    """`watch` printed a baseline that ended at 20% of the budget as "baseline ...: 0.624
    [0.584, 0.663]", the extrapolation said only in a docstring; now where it is printed, in
    the JSON lines report and in the HTML rendering."""
    import json

    _, b_only = _sweep(tmp_path)
    run = _write(tmp_path, "run.csv", rows=list(range(16)))
    args = ["watch", run, "--budget", "750", "--baseline", b_only, "--once", "--no-plot", "-q"]
    assert main([*args, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.strip().startswith("baseline b.csv"))
    assert "(FORECAST: that run ended at C = 150, 20% of the budget; extrapolated 5.0x" in line
    record = json.loads((tmp_path / "rlcurves_monitor.jsonl").read_text().splitlines()[-1])
    assert record["baseline"]["ended"] == pytest.approx(150.0)

    import pandas as pd

    from rlcurves import Monitor

    df = pd.read_csv(run)
    report = Monitor(750, baseline=pd.read_csv(b_only).rename(
        columns={"gpu_hours": "compute", "val_acc": "reward"}), n_samples=100,
    ).update(df["gpu_hours"], df["val_acc"])  # fmt: skip
    from rlcurves._html import monitor_report_html

    assert "FORECAST: that run ended at C = 150" in monitor_report_html(report, figure=False)


def test_regression_html_report_says_a_forecast_at_the_budget_is_extrapolated(tmp_path):
    _, b_only = _sweep(tmp_path)
    out = tmp_path / "report.html"
    rc = main(["report", b_only, "--budget", "750", "--n-samples", "50", "--fractions", "0.5",
               "-o", str(out), "-q"])  # fmt: skip
    assert rc == 0
    page = out.read_text()
    assert (
        "b.csv's evaluations end at C = 150, 20% of the budget: its value at C = 750 is a "
        "forecast, extrapolated 5.0x past its last evaluation." in page
    )


# ---- item 7: a refused (unbounded) forecast is never covered ------------------------------------
def test_regression_backtest_counts_a_refused_forecast_as_a_miss(tmp_path, capsys):
    """An unbounded interval [0.000, 1.000] counted as "covered: yes", so a run reported 100%
    coverage; it is shown as refused and counted as a miss. (A reward outside [0, 1]: a pass
    rate's 6-point fit is forecast from the corpus's prior since issue 42, never refused.)"""
    from rlcurves import backtest

    c, y = _curve(24)
    y = y + 1.0  # a reward in [1.2, 1.7], not a pass rate
    bt = backtest(c, y, fractions=(0.25, 0.5, 0.75), n_samples=100, progress=False, seed=0)
    first = bt.table.iloc[0]
    assert first["refused"] and "UNBOUNDED" in first["note"]  # 6 points: too few for noise
    assert not first["covered"] and not first["covered_observed"]
    assert not bt.table["refused"].iloc[1:].any()
    assert bt.coverage["forecast"] == pytest.approx(bt.table["covered"].iloc[1:].sum() / 3)
    assert bt.coverage["forecast"] <= 2 / 3
    text = bt.summary()
    assert "refused (unbounded)" in text and "(refused: counted as a miss)" in text
    assert "1 refused forecast(s) counted as misses" in text
    import pandas as pd

    path = tmp_path / "run.csv"
    pd.DataFrame({"gpu_hours": c, "val_acc": y}).to_csv(path, index=False)
    out = tmp_path / "report.html"
    rc = main(["report", str(path), "--n-samples", "50", "-o", str(out), "-q"])
    assert rc == 0
    page = out.read_text()
    assert ">refused</td>" in page and "(1 refused, counted as misses)" in page
    assert "Refits on the first 25%, 50% and 75% of the run" in page  # not a Python list


# ---- item 6: the main job's third run -----------------------------------------------------------
def _demo_commands() -> list[list[str]]:
    """The `rlcurves demo` commands of the Makefile's `demo` target, as argv lists."""
    import re
    import shlex
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    body = text.split("\ndemo:", 1)[1].split("\n\n", 1)[0].replace("\\\n", " ")
    return [
        shlex.split(line.split("rlcurves", 1)[1])
        for line in body.splitlines()
        if re.search(r"\$\(BIN\)/rlcurves demo", line)
    ]


def test_regression_main_jobs_third_run_is_a_forecast_the_data_support(tmp_path, capsys):
    """The third run of `make demo` (recipe_study_ppo4_cispo_s0) got a step-function fit, every
    parameter "not determined", and a forecast 0.522 [0, 1] against an observed 0.188. The run
    shown now is one whose first half determines a forecast: bounded, and the run's end in it."""
    import re

    commands = _demo_commands()
    assert len(commands) == 3
    argv = commands[2]
    argv[argv.index("--out") + 1] = str(tmp_path)
    assert main(argv) == 0
    out = capsys.readouterr().out
    half = out.split("[[Forecast]]")[0]
    assert "not determined" not in half and "UNBOUNDED" not in out.split("[[Compute")[0]
    row = re.search(r"\[(\d\.\d+), (\d\.\d+)\]\s+\[[^]]+\]\s+observed (\d\.\d+)", out)
    lo, hi, observed = map(float, row.groups())
    assert 0 < lo <= observed <= hi < 1 and hi - lo < 0.3
    whole = float(re.search(r"whole-run fit at the end: (\d\.\d+)", out).group(1))
    assert lo <= whole <= hi
    assert "[[Paired-seed study]]" in out  # the study it leads into, as before


def test_regression_demo_on_a_falling_run_gives_no_contradictory_target(
    tmp_path, capsys, monkeypatch
):
    """ "0.18 is at or before the start value ... no compute needed" beside "the whole-run fit
    reaches 0.18 at C = inf": a run that fell has no default target; the demo says so."""
    import rlcurves.cli as cli

    monkeypatch.setattr(cli, "_demo_comparisons", lambda *a, **k: None)  # the run alone
    args = argparse.Namespace(example="recipe_study_ppo4_cispo_s0", compute="tokens_total",
                              min_compute=0.0, target=None, out=str(tmp_path))  # fmt: skip
    assert cli.cmd_demo(args) == 0
    out = capsys.readouterr().out
    assert "no compute needed" not in out and "at C = inf" not in out
    assert "no default target: the whole run's fit does not rise (R0 0.391" in out


# ---- item 8: the figures ---------------------------------------------------------------------
def _band_edges(fig, label_end: str = "interval of the curve"):
    """The curve band's lower and upper edges as drawn (x, lower, upper), from its polygon."""
    import numpy as np

    ax = fig.axes[0]
    (poly,) = [c for c in ax.collections if str(c.get_label()).endswith(label_end)]
    xy = poly.get_paths()[0].vertices
    # fill_between's path: a start vertex, the lower edge, the upper edge back, a closing one
    n = (len(xy) - 3) // 2
    x, lower = xy[1 : n + 1, 0], xy[1 : n + 1, 1]
    upper = xy[n + 2 : 2 * n + 2, 1][::-1]
    return np.asarray(x), np.asarray(lower), np.asarray(upper)


@pytest.mark.parametrize("example", ["loo", "running"])
def test_regression_forecast_band_has_no_steps(example):
    """The bands stepped: where the number of evaluations a level averages changes (the
    recipe_loo_scalerl fit near 0.85M tokens), where the power law joins at the fit window's
    end and where the conformal quantile moves from one score to the next. No step of an edge is
    larger than the steepest step of the curve itself, unless it shrinks on a grid 16 times
    finer as a continuous edge's does: a misspecification growing as sqrt(d) past the window
    (issue 41) fans out steeply there, a cusp, not a step (a step keeps its size)."""
    import matplotlib.pyplot as plt
    import numpy as np

    import rlcurves
    from rlcurves.plot import plot_forecast

    if example == "loo":
        df = rlcurves.datasets.load_example("recipe_loo_scalerl", compute="tokens_total")
        end = float(df["compute"].max())
        fit = rlcurves.fit_sigmoid("compute", "reward", data=df, min_compute=0, max_compute=end / 2)
        to = end
    else:
        c, y = _curve(16, 300.0)
        fit, to = rlcurves.fit_sigmoid(c, y), 750.0
    fig = plot_forecast(fit, to=to, seed=0)
    x, lower, upper = _band_edges(fig)
    plt.close(fig)
    curve = np.abs(np.diff(fit.predict(x)))
    for side, edge in (("lower", lower), ("upper", upper)):
        steps = np.abs(np.diff(edge))
        i = int(np.argmax(steps))
        if steps[i] <= 1.1 * curve.max() + 1e-4:
            continue
        fine = np.linspace(x[i], x[i + 1], 17)  # a step lies whole in one of the 16
        again = rlcurves.forecast(fit, fine, seed=0, progress=False, band=True)
        fine_step = float(np.abs(np.diff(getattr(again, side))).max())
        assert fine_step <= 0.5 * steps[i], (x[i], steps[i], fine_step)


def test_prediction_band_is_drawn_apart_from_the_curve_band():
    """The prediction band was a fill barely wider than the curve's: it has its own dotted
    edges now."""
    import matplotlib.pyplot as plt

    import rlcurves
    from rlcurves.plot import plot_forecast

    c, y = _curve(16, 300.0)
    fig = plot_forecast(rlcurves.fit_sigmoid(c, y), to=750.0, seed=0)
    lines = [ln for ln in fig.axes[0].lines if "prediction" in str(ln.get_label())]
    assert len(lines) == 1 and lines[0].get_linestyle() not in ("-", "None")
    plt.close(fig)


def test_regression_comparison_plot_clips_an_undetermined_b():
    """In the main job's (B, A) plot recipe_loo_pipeline_rl's B bar spanned 0.45 to 2,373 on a
    log axis and squashed the others; the axis spans the estimates, the bar ends in an arrow."""
    import matplotlib.pyplot as plt

    import rlcurves

    fits = {
        name: rlcurves.fit_sigmoid(
            "compute", "reward", label=name, min_compute=0,
            data=rlcurves.datasets.load_example(name, compute="tokens_total"),
        )
        for name in ("recipe_loo_scalerl", "recipe_loo_dapo", "recipe_loo_pipeline_rl")
    }  # fmt: skip
    cmp = rlcurves.compare(fits, n_samples=300, seed=0)
    t = cmp.table.set_index("variant")
    assert t.loc["recipe_loo_pipeline_rl", "B_upper"] > 100  # barely determined
    fig = cmp.plot()
    ax = fig.axes[0]
    lo, hi = ax.get_xlim()
    assert hi < 2 * t["B"].max() and lo > t["B_lower"].min() / 2
    arrows = [ln for ln in ax.lines if ln.get_marker() == ">" and len(ln.get_xdata())]
    assert arrows and all(abs(ln.get_xdata()[0] - hi) < 0.1 * hi for ln in arrows)
    assert any("runs off the axis" in str(ln.get_label()) for ln in ax.lines)
    plt.close(fig)


def test_regression_study_and_live_figures_name_the_compute_unit(tmp_path, capsys, monkeypatch):
    """The paired-seed study plots said "compute axis: unit not given" with --compute
    tokens_total; the Monitor and Race figures labelled the axis "compute" alone."""
    import matplotlib.pyplot as plt

    import rlcurves.cli as cli
    from rlcurves import Monitor, RaceReport, datasets

    titles, labels = [], []

    def keep(fig, path):
        ax = fig.axes[0]
        titles.append(ax.get_title())
        labels.append((ax.get_xlabel(), ax.get_ylabel()))
        plt.close(fig)
        return path

    monkeypatch.setattr(cli, "_save", keep)
    # three cells, each compared with the one before it (their baselines)
    cells = ("recipe_study_ppo4_cispo", "recipe_study_ppo4_dapo", "recipe_study_pipe4_dapo")
    family = {
        f"{cell}_s{seed}": datasets.load_example(f"{cell}_s{seed}", compute="tokens_total")
        for cell in cells
        for seed in (0, 1, 2)
    }
    args = argparse.Namespace(compute="tokens_total", min_compute=0.0, out=str(tmp_path))
    cli._demo_study(args, family)
    assert titles and all("compute axis: tokens_total" in t for t in titles), titles

    sweep, _ = _sweep(tmp_path)
    run = _write(tmp_path, "run.csv", rows=list(range(16)))
    fig = Monitor(750, n_samples=100).update_from(run).plot()
    assert (fig.axes[0].get_xlabel(), fig.axes[0].get_ylabel()) == (
        "compute (GPU-hours)",
        "val_acc",
    )
    plt.close(fig)
    drawn = []
    real_plot = RaceReport.plot

    def plot(self, ax=None, **kwargs):
        fig = real_plot(self, ax=ax, **kwargs)
        drawn.append((fig.axes[0].get_xlabel(), fig.axes[0].get_ylabel()))
        return fig

    monkeypatch.setattr(RaceReport, "plot", plot)
    assert main(["race", sweep, *RACE[:-2], "--out", str(tmp_path / "race.png"), "-q"]) == 0
    assert drawn == [("compute (GPU-hours)", "val_acc")]


# ---- item 9: start-up ------------------------------------------------------------------------
def test_regression_import_rlcurves_loads_nothing_heavy():
    """`import rlcurves` took 5.5 s on a busy machine (numba, scipy.stats, pandas, matplotlib
    for every command); it loads none of them now, a name loads its module on first use, and
    the command line's help loads no pandas. (Times: python -m benchmarks.import_time.)"""
    import subprocess
    import sys

    probe = (
        "import sys, rlcurves\n"
        "heavy = ('numba', 'scipy.stats', 'pandas', 'matplotlib', 'scipy.optimize')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
        "from rlcurves.compare import Comparison\n"  # binds the submodule to the package
        "print(callable(rlcurves.compare), 'scipy.stats' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded, after_use = out.stdout.strip().splitlines()
    assert loaded == "[]", loaded
    # rlcurves.compare is still the function; scipy.stats waits for a t test
    assert after_use == "True False"
    help_only = (
        "import sys\nfrom rlcurves.cli import main\ntry:\n    main(['watch', '--help'])\n"
        "except SystemExit:\n    pass\nprint('pandas' in sys.modules, 'numba' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", help_only], capture_output=True, text=True)
    assert out.stdout.strip().splitlines()[-1] == "False False"


def test_first_use_notice_says_what_measured_the_wait(monkeypatch, capsys):
    """The notice said "10-20 s on 2 cores" and it took 45 s: it now names the benchmark and
    what it measured, idle and busy, and is given at the first fit (import loads no kernels)."""
    from rlcurves import _warmup

    monkeypatch.setattr(_warmup, "_NOTICED", [])
    monkeypatch.setattr(_warmup, "cache_is_cold", lambda: True)
    _warmup.notice_if_cold()
    err = capsys.readouterr().err
    assert "benchmarks/first_fit.py" in err and "13 s on 2 idle cores" in err
    assert "65 s on 2 busy ones" in err and "10-20 s" not in err


def test_start_up_numbers_on_the_fit_speed_page_are_the_benchmarks():
    """The start-up sentence (docs/benchmarks/fit_speed.md) quotes
    benchmarks/results/import_time.json."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    res = json.loads((root / "benchmarks" / "results" / "import_time.json").read_text())
    rows = {r["statement"]: r for r in res["rows"]}
    readme = " ".join((root / "docs" / "benchmarks" / "fit_speed.md").read_text().split())
    own = rows["import rlcurves"]
    ref = rows["import scipy.optimize, pandas"]
    assert res["ratio"] <= res["target"] == 1.3
    assert f"`import rlcurves` {own['median_s'] * 1000:.0f} ms" in readme
    assert f"against {ref['median_s']:.2f} s for `import scipy.optimize, pandas`" in readme
    assert f"({res['ratio']:.2f}x;" in readme
    before = next(r for n, r in rows.items() if n.startswith("import rlcurves ("))
    assert f"{before['median_s']:.2f} s, {before['ratio_to_scipy_pandas']:.2f}x)" in readme


def test_first_fit_numbers_on_the_fit_speed_page_are_the_benchmarks():
    """The cold-cache sentence (docs/benchmarks/fit_speed.md) quotes the range over the runs of
    benchmarks/results/first_fit.json, and the notice's idle figure is its first fit, rounded."""
    import json
    from pathlib import Path

    from rlcurves import _warmup

    root = Path(__file__).resolve().parents[1]
    runs = json.loads((root / "benchmarks" / "results" / "first_fit.json").read_text())["runs"]
    page = " ".join((root / "docs" / "benchmarks" / "fit_speed.md").read_text().split())

    def span(values, fmt):
        lo, hi = format(min(values), fmt), format(max(values), fmt)
        return lo if lo == hi else f"{lo}-{hi}"

    cold = [r["cold"] for r in runs]
    warm = [r["after_warm_up"] for r in runs]
    for said in (
        f"the first fit took {span([c['first_fit'] for c in cold], '.1f')} s",
        f"the first bootstrap {span([c['first_bootstrap'] for c in cold], '.1f')} s more",
        f"forecast {span([c['first_forecast'] for c in cold], '.1f')} s more",
        f"({span([r['warm_up'] for r in runs], '.0f')} s, once)",
        f"took {span([w['first_fit'] for w in warm], '.2f')} s",
    ):
        assert said in page, said
    assert all(r["notice_when_cold"] and not r["notice_after_warm_up"] for r in runs)
    idle = round(sum(c["first_fit"] for c in cold) / len(cold))
    assert f"first fit at {idle} s on 2 idle cores" in open(_warmup.__file__).read()


def test_regression_forecast_far_past_the_data_and_a_bad_at_say_what_to_do(capsys):
    """`rlcurves forecast example:recipe_long_pipe8_s0 --at 1e9` (a compute in the wrong unit,
    say) ended in a MemoryError traceback (the level window's 10 billion evaluations), and a
    negative or NaN --at was refused as "at must be ..., got array([-5.])": the far forecast is
    made, and the bad one named as the flag with the value."""
    run = "example:recipe_long_pipe8_s0"
    assert main(["forecast", run, "--at", "1e9", "-q"]) == 0
    assert "1e+09" in capsys.readouterr().out
    for bad, said in (("-5", "got -5"), ("nan", "got nan")):
        assert main(["forecast", run, "--at", "100", bad, "-q"]) == 2
        err = capsys.readouterr().err
        assert "--at <compute> takes finite compute values >= 0" in err and said in err
        assert "array(" not in err and "Traceback" not in err


def test_regression_a_negative_seed_and_an_empty_window_in_the_command_lines_words(capsys):
    """`--seed -1` ended in numpy's "expected non-negative integer" traceback; an empty window
    said "widen the window (min_compute/max_compute)", the Python keywords; a 99.9% level was
    "a 100% interval". Now argparse refuses the seed in every command that takes one, the window
    is named by its flags and the level as asked."""
    run = "example:recipe_long_pipe8_s0"
    for command in (["forecast", run, "--at", "200"], ["race", run, "--budget", "300"]):
        with pytest.raises(SystemExit):
            main([*command, "--seed", "-1", "-q"])
        assert "--seed: must be a non-negative integer, got '-1'" in capsys.readouterr().err
    assert main(["forecast", run, "--at", "200", "--min-compute", "1e12", "-q"]) == 2
    err = capsys.readouterr().err
    assert "widen the window (--min-compute or --max-compute)" in err and "min_compute" not in err
    assert main(["forecast", run, "--at", "200", "--level", "0.999", "-q"]) == 0
    assert "a 99.9% interval needs" in capsys.readouterr().out


def test_regression_an_image_name_matplotlib_cannot_write_is_refused_before_the_work(
    tmp_path, capsys
):
    """`rlcurves plot RUN -o p.txt` fitted the run, then ended in matplotlib's ValueError
    traceback ("Format 'txt' is not supported"); a level out of range was named "level", the
    Python keyword. Every image flag of the fitting commands (plot's -o, forecast's, compare's
    and backtest's --plot, compare's --plot-curves; race's --out has its own check) now refuses
    such a name as the flag, with the extensions that work, and --level is named as the flag."""
    run = "example:recipe_long_pipe8_s0"
    for command, flag in (
        (["plot", run, "-o"], "-o/--output"),
        (["forecast", run, "--at", "200", "--plot"], "--plot"),
        (["backtest", run, "--plot"], "--plot"),
    ):
        for name, said in (("p.txt", "matplotlib cannot write .txt"), ("p", "has no extension")):
            with pytest.raises(SystemExit):
                main([*command, str(tmp_path / name), "-q"])
            err = capsys.readouterr().err
            assert f"argument {flag}: " in err and said in err and ".png, .pdf or .svg" in err
    assert not list(tmp_path.iterdir())  # nothing written
    assert main(["plot", run, "-o", str(tmp_path / "p.svg"), "-q"]) == 0
    assert (tmp_path / "p.svg").stat().st_size > 0
    assert main(["forecast", run, "--at", "200", "--level", "1.5", "-q"]) == 2
    assert "--level must be in (0, 1), e.g. 0.9 for 90%; got 1.5" in capsys.readouterr().err
