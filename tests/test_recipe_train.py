"""The training loop end to end: smoke config, log format, resume, NaN safety, CLI."""

import subprocess
import sys
from pathlib import Path

import pytest
import recipe_helpers
import torch

from recipe import cli
from recipe import config as C
from recipe import train as T
from recipe.config import ConfigError

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "recipe" / "configs" / "smoke.yaml"


def tiny_cfg(init, **extra):
    return recipe_helpers.tiny_cfg(init, **{"steps": 6, "eval_every": 3, **extra})


@pytest.mark.slow  # ~40 s on an idle 2-core machine (a 200-step warm-up, so that it trains)
def test_smoke_config_runs_and_writes_a_valid_log(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "recipe.train", "--config", str(SMOKE), "--out", str(out),
         "--set", "threads=1"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    cfg = C.load(SMOKE)
    assert C.load(out / "config.yaml") == C.load(SMOKE, ["threads=1"])
    rows = recipe_helpers.read_log(out / "log.jsonl")
    train = [r for r in rows if r["kind"] == "train"]
    evals = [r for r in rows if r["kind"] == "eval"]
    assert [r["step"] for r in train] == list(range(1, cfg.steps + 1))
    assert [r["step"] for r in evals] == [0, 6, 12]
    hours = [r["gpu_hours"] for r in rows]
    assert hours == sorted(hours) and hours[0] == 0 and hours[-1] > 0
    # it trains: most steps keep prompts with signal and take an update that moves the weights
    # (issue 14: the former smoke config updated on 1 step of 12)
    assert sum(r["updated"] and r["prompts_filtered"] < 8 for r in train) >= 9
    from safetensors.torch import load_file

    init, final = (load_file(out / d / "model.safetensors") for d in ("init", "final"))
    assert sum(not torch.equal(init[k], final[k]) for k in init) > len(init) // 2
    for r in train:
        assert r["samples"] == 64 and r["tokens"] >= 64
        assert r["gpu_hours"] == pytest.approx(r["wall_seconds"] / 3600)
        assert 0 <= r["train_reward"] <= 1 and 0 <= r["truncation_fraction"] <= 1
        assert 0 <= r["prompts_filtered"] <= 8 and r["pool_size"] <= 2000
        assert r["skipped_update"] is False
        assert r["entropy"] >= 0
    for r in evals:
        assert 0 <= r["val_pass_rate"] <= 1
        assert (r["val_prompts"], r["val_samples_per_prompt"]) == (64, 2)
    assert (out / "final" / "model.safetensors").exists()
    assert (out / "init" / "tokenizer.json").exists()


def _compare(a, b):
    """Same rows except the timing fields."""
    timing = {"gpu_hours", "allocated_gpu_hours", "wall_seconds", "generator_idle_fraction",
              "trainer_idle_fraction", "step_seconds", "batch_wait_seconds", "train_seconds",
              "push_seconds", "load_average"}  # fmt: skip
    assert [{k: v for k, v in r.items() if k not in timing} for r in a] == [
        {k: v for k, v in r.items() if k not in timing} for r in b
    ]


def test_killed_run_resumes_without_lost_or_duplicated_rows(tmp_path, init_dir):
    cfg = tiny_cfg(init_dir)
    T.run(cfg, tmp_path / "straight")
    T.run(cfg, tmp_path / "killed", stop_after=3)  # checkpoint at step 2, rows up to 3
    before = recipe_helpers.read_log(tmp_path / "killed" / "log.jsonl")
    assert max(r["step"] for r in before) == 3
    ckpt = torch.load(tmp_path / "killed" / "checkpoint.pt", weights_only=True)
    assert ckpt["step"] == 2

    T.run(cfg, tmp_path / "killed", resume=True)
    rows = recipe_helpers.read_log(tmp_path / "killed" / "log.jsonl")
    keys = [(r["kind"], r["step"]) for r in rows]
    assert len(keys) == len(set(keys))
    assert [s for k, s in keys if k == "train"] == [1, 2, 3, 4, 5, 6]
    assert [s for k, s in keys if k == "eval"] == [0, 3, 6]
    # the compute counter continues from the checkpoint: monotone, rows up to step 2 unchanged
    hours = [r["gpu_hours"] for r in rows]
    assert hours == sorted(hours)
    assert rows[:3] == before[:3]
    # the bill continues from the last row the killed process wrote (step 3's, dropped from the
    # log but paid for), and is never below the busy hours
    billed = [r["allocated_gpu_hours"] for r in rows]
    assert billed == sorted(billed)
    assert rows[3]["allocated_gpu_hours"] > before[-1]["allocated_gpu_hours"]
    assert all(r["allocated_gpu_hours"] >= r["gpu_hours"] for r in rows)
    # and the resumed run is the run that was never killed (same samples, same updates)
    _compare(rows, recipe_helpers.read_log(tmp_path / "straight" / "log.jsonl"))


def test_resume_drops_a_torn_last_line(tmp_path, init_dir):
    cfg = tiny_cfg(init_dir, steps=4)
    T.run(cfg, tmp_path, stop_after=2)
    with open(tmp_path / "log.jsonl", "a") as f:
        f.write('{"kind": "train", "step": 3, "gpu_ho')  # killed mid-write
    T.run(cfg, tmp_path, resume=True)
    rows = recipe_helpers.read_log(tmp_path / "log.jsonl")
    assert [r["step"] for r in rows if r["kind"] == "train"] == [1, 2, 3, 4]


def test_nan_loss_skips_the_update(tmp_path, init_dir, monkeypatch):
    real = T.policy_loss

    def poisoned(*args, **kwargs):
        loss, diag = real(*args, **kwargs)
        return loss * float("nan"), diag

    monkeypatch.setattr(T, "policy_loss", poisoned)
    T.run(tiny_cfg(init_dir, steps=3, checkpoint_every=3), tmp_path)
    train = [r for r in recipe_helpers.read_log(tmp_path / "log.jsonl") if r["kind"] == "train"]
    assert [r["skipped_update"] for r in train] == [True, True, True]
    assert all(r["loss"] is None for r in train)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    from safetensors.torch import load_file

    init = load_file(init_dir / "model.safetensors")
    for name, value in state["model"].items():
        assert torch.equal(value, init[name]), name
    assert state["optimizer"]["state"] == {}  # AdamW's moments never saw a NaN either


def test_existing_log_needs_resume(tmp_path, init_dir):
    cfg = tiny_cfg(init_dir, steps=1)
    T.run(cfg, tmp_path)
    with pytest.raises(ConfigError, match="--resume"):
        T.run(cfg, tmp_path)


def test_resume_refuses_a_changed_recipe(tmp_path, init_dir):
    cfg = tiny_cfg(init_dir, steps=2)
    T.run(cfg, tmp_path)
    args = cli.build_parser().parse_args(["--out", str(tmp_path), "--resume", "--set", "loss=dapo"])
    with pytest.raises(ConfigError, match="loss"):
        cli.resolve_config(args)
    args = cli.build_parser().parse_args(["--out", str(tmp_path), "--resume", "--set", "steps=4"])
    assert cli.resolve_config(args).steps == 4


def test_help_documents_every_switch():
    text = cli.build_parser().format_help()
    for name in C.FIELDS:
        assert name in text
    for flag in ("--config", "--out", "--set", "--resume", "--stop-after"):
        assert flag in text


def test_bad_config_exits_with_the_key(tmp_path):
    with pytest.raises(SystemExit, match="'aggregation'"):
        cli.main(["--out", str(tmp_path), "--set", "aggregation=median"])


@pytest.mark.parametrize(
    "switches",
    [
        {"loss": "dapo", "aggregation": "sample", "adv_norm": "prompt"},
        {"loss": "gspo", "aggregation": "token", "adv_norm": "none", "positive_threshold": None},
        {"loss": "grpo", "dtype": "bfloat16", "fp32_head": False},
        {"loss": "cispo", "dtype": "bfloat16", "fp32_head": True, "eps_max": 8.0},
    ],
)
def test_every_switch_trains(tmp_path, init_dir, switches):
    T.run(tiny_cfg(init_dir, steps=2, eval_every=2, **switches), tmp_path)
    rows = recipe_helpers.read_log(tmp_path / "log.jsonl")
    train = [r for r in rows if r["kind"] == "train"]
    assert [r["step"] for r in train] == [1, 2]
    assert all(r["loss"] is not None and not r["skipped_update"] for r in train)
    # the update changed the weights
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)["model"]
    from safetensors.torch import load_file

    init = load_file(init_dir / "model.safetensors")
    assert any(not torch.equal(state[k].float(), init[k].float()) for k in init)


def test_sigkilled_process_resumes(tmp_path, init_dir):
    import os
    import signal
    import time

    cfg_path = tmp_path / "tiny.yaml"
    cfg_path.write_text(C.to_yaml(tiny_cfg(init_dir, steps=60, checkpoint_every=4)))
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "recipe.train", "--config", str(cfg_path), "--out", str(out)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = out / "log.jsonl"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if log.exists() and sum(1 for _ in log.open()) >= 15:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = max(r["step"] for r in recipe_helpers.read_log(log) if r["kind"] == "train")

    done = subprocess.run([*cmd, "--resume"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = recipe_helpers.read_log(log)
    keys = [(r["kind"], r["step"]) for r in rows]
    assert len(keys) == len(set(keys))
    assert [s for k, s in keys if k == "train"] == list(range(1, 61))
    hours = [r["gpu_hours"] for r in rows]
    assert hours == sorted(hours)
    assert killed_at < 60


def test_regression_a_cuda_device_that_is_not_there_is_a_config_error(tmp_path, monkeypatch):
    """`--set device=cuda` on a machine without CUDA ended in resolve_device's RuntimeError
    traceback (and cuda:N past the last GPU in torch's 'invalid device ordinal'): both are
    config errors naming the key and what to use, before any log is written."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit, match=r"config error: config key 'device' = 'cuda', but torch "
                       "sees no CUDA device.*use device=auto"):  # fmt: skip
        cli.main(["--out", str(tmp_path / "run"), "--set", "device=cuda", "--set", "steps=1"])
    assert not (tmp_path / "run" / "log.jsonl").exists()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    from recipe.forward import resolve_device

    assert resolve_device("cuda:1") == torch.device("cuda:1")
    with pytest.raises(ConfigError, match=r"'cuda:2', but torch sees 2 CUDA device\(s\) "
                       r"\(cuda:0 .. cuda:1\)"):  # fmt: skip
        resolve_device("cuda:2")


def test_regression_resume_with_a_damaged_checkpoint_or_log_is_a_config_error(tmp_path, init_dir):
    """--resume on a folder whose checkpoint.pt was empty, random bytes or a pickle ended in
    torch.load's traceback (the pickle's advising to allowlist globals); a missing log.jsonl in
    open's FileNotFoundError, and a log shorter than the checkpoint recorded was silently padded
    with NUL bytes up to that length. Each is a config error now, the files left as they are."""
    import shutil

    cfg = tiny_cfg(init_dir, steps=4)
    base = tmp_path / "base"
    T.run(cfg, base, stop_after=3)  # checkpoint at step 2, rows up to 3
    log_bytes = (base / "log.jsonl").read_bytes()

    def damaged(name, change):
        out = tmp_path / name
        shutil.copytree(base, out)
        change(out)
        return out

    for name, change in [
        ("empty", lambda out: (out / "checkpoint.pt").write_bytes(b"")),
        ("noise", lambda out: (out / "checkpoint.pt").write_bytes(bytes(range(256)) * 4)),
        ("pickle", lambda out: torch.save({"step": 2, "model": object}, out / "checkpoint.pt")),
        ("other", lambda out: torch.save({"weights": torch.ones(2)}, out / "checkpoint.pt")),
    ]:
        out = damaged(name, change)
        with pytest.raises(ConfigError, match=r"checkpoint.pt is not a checkpoint this trainer "
                           r"can read .*log is left as it is"):  # fmt: skip
            T.run(cfg, out, resume=True)
        assert (out / "log.jsonl").read_bytes() == log_bytes, name
    out = damaged("nolog", lambda out: (out / "log.jsonl").unlink())
    with pytest.raises(ConfigError, match=r"log.jsonl is missing, but the checkpoint was written"):
        T.run(cfg, out, resume=True)
    assert not (out / "log.jsonl").exists()
    out = damaged("short", lambda out: (out / "log.jsonl").write_bytes(log_bytes[:100]))
    with pytest.raises(ConfigError, match=r"log.jsonl holds 100 bytes, but the checkpoint was "
                       r"written when it held \d+"):  # fmt: skip
        T.run(cfg, out, resume=True)
    assert (out / "log.jsonl").read_bytes() == log_bytes[:100]  # no NUL padding


@pytest.mark.parametrize("mode", ["sync", "pipeline"])
def test_regression_a_run_that_retires_every_prompt_stops_with_a_config_error(
    tmp_path, init_dir, monkeypatch, mode
):
    """A run whose no-positive resampling retired its whole pool stopped with "run stopped:
    generator failed: RuntimeError('every training prompt is retired; lower positive_threshold')
    ... continue with --resume": the advice backwards, and a resume that fails the same way. It
    is a config error that names the keys to change in a new --out; the log is kept."""
    monkeypatch.setattr(T, "score", lambda *args, **kwargs: 1.0)  # every prompt solved
    cfg = tiny_cfg(init_dir, train_prompts=8, steps=6, mode=mode)
    with pytest.raises(SystemExit, match=r"config error: every one of the 8 training prompts is "
                       r"retired .* in a new --out with a higher positive_threshold"):  # fmt: skip
        cfg_path = tmp_path / "c.yaml"
        cfg_path.write_text(C.to_yaml(cfg))
        cli.main(["--config", str(cfg_path), "--out", str(tmp_path / "run")])
    rows = recipe_helpers.read_log(tmp_path / "run" / "log.jsonl")
    assert [r["step"] for r in rows if r["kind"] == "train"][:2] == [1, 2]


def test_regression_ctrl_c_ends_with_a_message_and_a_resumable_folder(
    tmp_path, init_dir, monkeypatch, capsys
):
    """Ctrl-C ended the trainer in a KeyboardInterrupt traceback from wherever the loop was
    (torch's linear layer, the pipeline's queue): it ends with exit status 130 and a line that
    says the log and checkpoint are kept and how to continue; the folder resumes."""
    real = T.train_step

    def interrupted(cfg, s, batch, optimizer, pool, step):
        if step == 4:
            raise KeyboardInterrupt
        return real(cfg, s, batch, optimizer, pool, step)

    monkeypatch.setattr(T, "train_step", interrupted)
    cfg = tiny_cfg(init_dir, steps=5)
    cfg_path = tmp_path / "c.yaml"
    cfg_path.write_text(C.to_yaml(cfg))
    out = tmp_path / "run"
    try:
        with pytest.raises(SystemExit) as err:
            cli.main(["--config", str(cfg_path), "--out", str(out)])
    except KeyboardInterrupt:
        pytest.fail("the KeyboardInterrupt escaped the CLI (a traceback)")
    assert err.value.code == 130
    assert f"interrupted: the log and the last checkpoint in {out} are kept; continue with " \
        "--resume" in capsys.readouterr().err  # fmt: skip
    rows = recipe_helpers.read_log(out / "log.jsonl")
    assert [r["step"] for r in rows if r["kind"] == "train"] == [1, 2, 3]
    monkeypatch.setattr(T, "train_step", real)
    cli.main(["--config", str(cfg_path), "--out", str(out), "--resume"])
    rows = recipe_helpers.read_log(out / "log.jsonl")
    assert [r["step"] for r in rows if r["kind"] == "train"] == [1, 2, 3, 4, 5]


# ~25 s: a pipeline run started as a process, SIGTERMed mid-run, then resumed
def test_regression_sigterm_ends_with_a_message_and_a_resumable_folder(tmp_path, init_dir):
    """SIGTERM (what Slurm, Kubernetes and torchrun send before they kill a job) killed the
    trainer with no cleanup, and the pipeline's sampler child printed a ConnectionResetError
    traceback under it; it now ends the run as Ctrl-C does: exit status 143 (128 + 15), a line
    saying the log and checkpoint are kept, the engines closed, no traceback from any process
    (the signal goes to the whole process group, as torchrun and Slurm send it), and the
    folder resumes."""
    import os
    import signal
    import time

    cfg_path = tmp_path / "tiny.yaml"
    cfg_path.write_text(C.to_yaml(tiny_cfg(init_dir, steps=60, mode="pipeline", eval_every=30)))
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "recipe.train", "--config", str(cfg_path), "--out", str(out)]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    log = out / "log.jsonl"
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            if log.exists() and log.read_text().count('"kind": "train"') >= 5:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before it could be stopped"
        os.killpg(proc.pid, signal.SIGTERM)
        err = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 143, err[-3000:]
    assert f"terminated (SIGTERM): the log and the last checkpoint in {out} are kept; " \
        "continue with --resume" in err  # fmt: skip
    assert "Traceback" not in err and "leaked" not in err, err[-3000:]
    rows = recipe_helpers.read_log(log)  # every line whole
    stopped_at = max(r["step"] for r in rows if r["kind"] == "train")
    assert [r["step"] for r in rows if r["kind"] == "train"] == list(range(1, stopped_at + 1))
    assert stopped_at < 60

    steps = f"steps={stopped_at + 4}"  # a checkpoint every 2 steps: 4 or 5 more train
    cli.main(["--config", str(cfg_path), "--out", str(out), "--resume", "--set", steps])
    rows = recipe_helpers.read_log(log)
    assert [r["step"] for r in rows if r["kind"] == "train"] == list(range(1, stopped_at + 5))


STUCK_RANK = """
import signal, sys, time
from recipe import cli
with cli.TermHandler(sys.argv[1]):
    # the signal reaches only the watchdog thread, and the main thread sleeps in C: what a
    # torchrun rank in a collective that waits for a rank that is gone looks like
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])
    print("ready", flush=True)
    time.sleep(60)
"""


def test_regression_sigterm_ends_a_process_blocked_in_c_promptly(tmp_path):
    """A main thread blocked in C (a torchrun rank in a collective with a rank that died) runs
    no Python signal handler until the call returns (up to dist_timeout): SIGTERM still ends
    the process within seconds, with the same line and exit status 143, not at torchrun's
    SIGKILL 30 s later."""
    import os
    import signal
    import time

    script = tmp_path / "stuck.py"
    script.write_text(STUCK_RANK)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "run")], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert proc.stdout.readline() == "ready\n"
        time.sleep(1.0)  # into the sleep (a signal taken during print runs the handler there)
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        err = proc.communicate(timeout=30)[1]
        assert time.monotonic() - start < 15
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 143, err
    assert "terminated (SIGTERM): the log and the last checkpoint in " in err


def test_regression_resume_without_the_runs_config_yaml_is_a_config_error(
    tmp_path, init_dir, capsys
):
    """--resume into a folder whose config.yaml is gone but whose checkpoint.pt is there
    skipped the check that the resumed run has the run's config and continued with whatever
    config was given (the built-in defaults without --config); it is a config error that says
    what is missing and what to do, and leaves the folder as it is."""
    cfg = tiny_cfg(init_dir, steps=3)
    cfg_path = tmp_path / "c.yaml"
    cfg_path.write_text(C.to_yaml(cfg))
    out = tmp_path / "run"
    cli.main(["--config", str(cfg_path), "--out", str(out), "--stop-after", "2"])
    (out / "config.yaml").unlink()
    log = (out / "log.jsonl").read_bytes()
    for given in (["--config", str(cfg_path), "--set", "loss=dapo"], []):
        with pytest.raises(SystemExit, match=r"config error: --resume: .*config\.yaml is "
                           r"missing, but .*checkpoint\.pt is there.*Put the run's config\.yaml "
                           "back.*or start a new --out"):  # fmt: skip
            cli.main([*given, "--out", str(out), "--resume"])
    assert (out / "log.jsonl").read_bytes() == log and not (out / "config.yaml").exists()
    (out / "config.yaml").write_text(C.to_yaml(cfg))  # put back: the run resumes
    cli.main(["--out", str(out), "--resume"])
    rows = recipe_helpers.read_log(out / "log.jsonl")
    assert [r["step"] for r in rows if r["kind"] == "train"] == [1, 2, 3]


def test_regression_a_kill_while_the_final_model_is_saved_leaves_it_for_resume(
    tmp_path, init_dir, monkeypatch
):
    """A run stopped while it wrote final/ (SIGTERM, Ctrl-C, a kill after the last checkpoint)
    left config.json without the weights there, and --resume, seeing final/config.json, kept
    that half folder as the trained model; final/ is now written beside and renamed, and the
    resume saves it whole."""
    real = T.save_policy

    def stopped_midway(model, tokenizer, out, state_dict=None):
        model.config.save_pretrained(out)  # transformers writes config.json first
        raise KeyboardInterrupt

    monkeypatch.setattr(T, "save_policy", stopped_midway)
    cfg = tiny_cfg(init_dir, steps=2, eval_every=2)
    cfg_path = tmp_path / "c.yaml"
    cfg_path.write_text(C.to_yaml(cfg))
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as err:
        cli.main(["--config", str(cfg_path), "--out", str(out)])
    assert err.value.code == 130
    monkeypatch.setattr(T, "save_policy", real)
    cli.main(["--config", str(cfg_path), "--out", str(out), "--resume"])
    assert (out / "final" / "model.safetensors").is_file()
    assert not (out / "final.tmp").exists()
