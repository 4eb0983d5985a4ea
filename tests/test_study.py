"""The bundled runs of issue 19: the new CPU demo (two seeds) and the paired-seed study."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from rlcurves import datasets
from rlcurves.cli import main

ROOT = Path(__file__).resolve().parents[1]


def config_of(name: str) -> dict:
    return yaml.safe_load((datasets.example_path(name) / "config.yaml").read_text())


def test_lsb_demo_runs_climb_and_log_every_carry_class():
    names = datasets.list_examples(group="recipe_lsb_demo")
    assert names == ["recipe_lsb_demo_seed0", "recipe_lsb_demo_seed1"]
    for name in names:
        df = datasets.load_example(name)
        classes = [c for c in df.columns if c.startswith("val_pass_rate/carries_")]
        assert len(classes) == 4
        assert df["reward"].iloc[0] < 0.4 and df["reward"].tail(4).mean() > 0.6
        assert config_of(name)["task"] == "addition_lsb"
    assert datasets.load_example("recipe_lsb_demo_seed1").attrs["baseline"] == names[0]


def test_lsb_demo_runs_reach_a_plateau_within_the_configs_steps():
    """Both seeds level off well above 0.5 by the demo config's last step (as
    docs/studies/paired_seeds.md says): the mean evaluation over steps 900-1000 is above 0.75 and
    within 0.03 of steps 800-900's."""
    steps = yaml.safe_load((ROOT / "recipe/configs/cpu_demo_lsb.yaml").read_text())["steps"]
    for name in datasets.list_examples(group="recipe_lsb_demo"):
        df = datasets.load_example(name)
        late = df[df["step"].between(steps - 100, steps)]["reward"].mean()
        before = df[df["step"].between(steps - 200, steps - 100)]["reward"].mean()
        assert late > 0.75 and abs(late - before) < 0.03, (name, before, late)


# what each variant cell changes against its baseline cell (steps: a cell run longer)
SWITCHES = {
    "ppo4_dapo": {"loss"},
    "ppo4_cispo_lr1e4": {"lr", "steps"},
    "ppo4_dapo_lr1e4": {"loss"},
    "pipe4_dapo": {"mode"},
    "ppo4_dapo_b16": {"prompts_per_step", "steps"},
    "pipe4_cispo_lr1e4": {"mode"},
}


def test_study_runs_are_paired_by_seed_and_differ_by_their_switch_alone():
    names = datasets.list_examples(group="recipe_study")
    assert len(names) == len(datasets._STUDY) * len(datasets.STUDY_SEEDS)
    pairs = 0
    for name in names:
        attrs = datasets.load_example(name).attrs
        assert {"cell", "seed"} <= set(attrs) and attrs["group"] == "recipe_study"
        base = attrs["baseline"]
        if base is None:
            continue
        pairs += 1
        assert datasets.load_example(base).attrs["seed"] == attrs["seed"]
        cfg, base_cfg = config_of(name), config_of(base)
        # same warm-up (init folder), seed, prompt order; only the cell's switch differs
        differ = {k for k in cfg if cfg[k] != base_cfg[k]}
        assert differ == SWITCHES[attrs["cell"]], (name, differ)
        assert cfg["max_lag"] == 4 and cfg["init"].endswith(f"init-s{attrs['seed']}")
    assert pairs == len(names) - len(datasets.STUDY_SEEDS)


def test_demo_compares_the_study_by_cell_with_paired_seeds(tmp_path, capsys):
    argv = ["demo", "--example", "recipe_study_ppo4_cispo_s0", "--compute", "tokens_total",
            "--min-compute", "0", "--out", str(tmp_path)]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "[[Paired-seed study]]" in out
    for variant, base in (("ppo4_dapo", "ppo4_cispo"), ("ppo4_dapo_lr1e4", "ppo4_cispo_lr1e4"),
                          ("pipe4_dapo", "ppo4_dapo"), ("ppo4_dapo_b16", "ppo4_dapo")):  # fmt: skip
        assert f"paired {variant} - {base}, A:" in out
    # the 400-step lr 1e-4 cells against the 200-step lr 3e-4 baseline: on their common range
    assert "(compared on the cells' common range: compute <=" in out
    assert (tmp_path / "ppo4_cispo_study_compare.png").stat().st_size > 10_000


def test_study_table_script_reads_the_bundled_runs(tmp_path):
    out = tmp_path / "study.json"
    proc = subprocess.run(
        [sys.executable, "scripts/study_table.py", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "`ppo4_dapo` vs `ppo4_cispo`" in proc.stdout
    assert out.stat().st_size > 500


# ------------------------------------------------------------------ the long-completion study
def long_train_rows(name: str) -> pd.DataFrame:
    lines = (datasets.example_path(name) / "log.jsonl").read_text().splitlines()
    return pd.DataFrame([r for r in map(json.loads, lines) if r["kind"] == "train"])


def test_long_study_runs_are_paired_long_and_log_where_the_time_went():
    """Issue 30's runs: three seeds in each of the three modes, completions of 50 tokens or more
    on average, each run the same config as its baseline but for the mode (same warm-up, seed
    and prompt order, the same devices charged), every step's timing and idle fields."""
    names = datasets.list_examples(group="recipe_long")
    cells: dict[str, set[int]] = {}
    for name in names:
        attrs = datasets.load_example(name).attrs
        assert attrs["group"] == "recipe_long" and attrs["compute_unit"] == "GPU-hours"
        cells.setdefault(attrs["cell"], set()).add(attrs["seed"])
        cfg = config_of(name)
        assert cfg["task"] == "addition_chain" and cfg["generator"] == "vllm"
        assert cfg["devices"] == 2 and cfg["init"].endswith(f"init-s{attrs['seed']}")
        train = long_train_rows(name)
        assert (train["step"].to_numpy() == np.arange(1, cfg["steps"] + 1)).all(), name
        assert train["tokens"].sum() / train["samples"].sum() >= 50, name
        assert (train["samples"] == cfg["prompts_per_step"] * cfg["generations"]).all()
        cols = ["generator_idle_fraction", "trainer_idle_fraction", "lag_mean", "load_average"]
        for col in [*cols, "batch_wait_seconds", "train_seconds", "push_seconds"]:
            assert train[col].notna().all(), (name, col)
        parts = train["batch_wait_seconds"] + train["train_seconds"] + train["push_seconds"]
        assert (parts - train["step_seconds"]).abs().max() < 1e-6
        # the trainer idles only while it waits for its batch, and (summed over the run) that
        # wait is idle time: what the table reads as "which side waits" is one clock
        idle = train["trainer_idle_fraction"] * train["step_seconds"]
        assert (idle <= train["batch_wait_seconds"] + 1e-3).all(), name
        assert idle.sum() >= 0.95 * train["batch_wait_seconds"].sum(), name
        # gpu_hours charges both devices for every step's wall time, in every mode
        hours = train["step_seconds"].cumsum() / 3600 * 2
        assert (hours - train["gpu_hours"]).abs().max() < 1e-9, name
        base = attrs["baseline"]
        if base is not None:
            assert datasets.load_example(base).attrs["seed"] == attrs["seed"]
            base_cfg = config_of(base)
            differ = {k for k in cfg if cfg[k] != base_cfg[k]}
            assert differ <= {"mode", "max_lag"} and "mode" in differ, (name, differ)
    assert cells == {cell: set(datasets.LONG_SEEDS) for cell in ("sync", "ppo8", "pipe8")}
    assert len(datasets.LONG_SEEDS) >= 3
    # the modes as configured: PPO-off-policy-8 trains at lags 0..7 in turn; the pipeline's
    # lag is bounded by 8 and is a mixture (in-flight weight pushes); sync's is 0
    for seed in datasets.LONG_SEEDS:
        assert (long_train_rows(f"recipe_long_sync_s{seed}")["lag_max"] == 0).all()
        train = long_train_rows(f"recipe_long_ppo8_s{seed}")
        assert (train["lag_mean"] == (train["step"] - 1) % 8).all()
        train = long_train_rows(f"recipe_long_pipe8_s{seed}")
        assert train["lag_max"].max() <= 8 and train["mixed_version_samples"].sum() > 0


def test_study_table_script_reads_the_long_study(tmp_path):
    """The long study's table runs on the bundled runs, reports both modes on gpu_hours with
    their idle fractions, and gives the numbers its page quotes (docs/studies/long_completions.md;
    benchmarks/results/study_long.json, regenerated here: a stale page or JSON fails)."""
    out = tmp_path / "long.json"
    proc = subprocess.run(
        [sys.executable, "scripts/study_table.py", "--study", "long", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "compute axis: gpu_hours" in proc.stdout
    for pair in ("`pipe8` vs `ppo8`", "`ppo8` vs `sync`", "`pipe8` vs `sync`"):
        assert pair in proc.stdout
    assert "generator idle | trainer idle" in proc.stdout
    numbers = json.loads(out.read_text())
    for cell in ("pipe8", "ppo8", "sync"):
        t = numbers["cells"][cell]["time"]
        assert 0 <= t["generator_idle_fraction"] <= 1 and 0 <= t["trainer_idle_fraction"] <= 1
        assert t["completion_tokens"] >= 50 and len(t["gpu_hours"]) == len(datasets.LONG_SEEDS)
        assert numbers["cells"][cell]["compute"] == "gpu_hours"
        for key in ("A", "B", "C_mid"):  # each with its interval
            value, low, high = numbers["cells"][cell][key]
            assert np.isfinite([value, low, high]).all() and low <= high, (cell, key)
    # the paired GPU-hours ratio is the geometric mean of the per-seed ratios of the runs' ends
    ratio = numbers["pairs_long"]["pipe8 vs ppo8"]["gpu_hours_ratio"]
    per_seed = [
        a / b
        for a, b in zip(numbers["cells"]["pipe8"]["time"]["gpu_hours"],
                        numbers["cells"]["ppo8"]["time"]["gpu_hours"], strict=True)
    ]  # fmt: skip
    assert abs(ratio[0] - float(np.exp(np.mean(np.log(per_seed))))) < 1e-9
    assert ratio[1] <= ratio[0] <= ratio[2]
    committed = json.loads((ROOT / "benchmarks/results/study_long.json").read_text())
    for pair, values in numbers["pairs_long"].items():
        for key, value in values.items():
            assert committed["pairs_long"][pair][key] == pytest.approx(value, rel=1e-6)
    page = (ROOT / "docs" / "studies" / "long_completions.md").read_text()  # the study's page
    assert f"{ratio[0]:.2f} [{ratio[1]:.2f}, {ratio[2]:.2f}]" in page


def test_demo_long_study_on_gpu_hours_compares_on_own_ranges_when_the_common_one_is_too_short(
    tmp_path, capsys
):
    """Regression: on GPU-hours PipelineRL-8's runs end where the others have 3 evaluations, too
    few to refit them on the common range; the demo compared nothing and raised. It now compares
    the cells on their own ranges (the same tokens) and says so."""
    argv = ["demo", "--example", "recipe_long_sync_s0", "--min-compute", "0",
            "--out", str(tmp_path)]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "[[Paired-seed study]]" in out
    assert "(compared on the cells' own ranges:" in out
    assert "paired pipe8 - ppo8, A:" in out and "paired ppo8 - sync, A:" in out


def test_the_one_call_rerun_is_what_its_page_quotes(tmp_path):
    """Issue 44's rerun of the long study against the one-call PPO-off-policy-8 (seeds 0 and 1,
    logs in benchmarks/results/study_long_one_call/): the table script reproduces the committed
    numbers, and the study's page (docs/studies/long_completions.md) quotes its ratios."""
    out = tmp_path / "one_call.json"
    runs = "benchmarks/results/study_long_one_call"
    pairs = ["--pair", "ppo8=sync", "--pair", "pipe8=ppo8", "--pair", "pipe8=sync"]
    proc = subprocess.run(
        [sys.executable, "scripts/study_table.py", runs, "--study", "long", *pairs,
         "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    numbers = json.loads(out.read_text())
    committed = json.loads((ROOT / f"{runs}.json").read_text())
    readme = (ROOT / "docs" / "studies" / "long_completions.md").read_text()
    for pair, values in numbers["pairs_long"].items():
        for key, value in values.items():
            assert committed["pairs_long"][pair][key] == pytest.approx(value, rel=1e-6)
        variant, base = pair.split(" vs ")
        per_seed = [
            a / b
            for a, b in zip(numbers["cells"][variant]["time"]["gpu_hours"],
                            numbers["cells"][base]["time"]["gpu_hours"], strict=True)
        ]  # fmt: skip
        r = values["gpu_hours_ratio"]
        seeds = ", ".join(f"{x:.2f}" for x in per_seed)
        assert f"({seeds}) [{r[1]:.2f}, {r[2]:.2f}]" in readme, pair
    assert all(len(c["runs"]) == 2 for c in numbers["cells"].values())
