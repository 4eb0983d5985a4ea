"""Config loading, overrides and refusal of bad values."""

from pathlib import Path

import pytest

from recipe import config as C
from recipe.config import ConfigError


def test_defaults_are_the_scalerl_recipe():
    cfg = C.load(None)
    assert (cfg.loss, cfg.aggregation, cfg.adv_norm) == ("cispo", "prompt", "batch")
    assert cfg.zero_variance_filter and cfg.fp32_head
    assert cfg.positive_threshold == 0.9
    assert (cfg.generator, cfg.mode, cfg.max_lag) == ("torch", "sync", 8)


def test_yaml_and_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("loss: dapo\nsteps: 7\npositive_threshold: 0.8\n")
    cfg = C.load(path, ["steps=9", "positive_threshold=null", "fp32_head=false", "eps_max=5"])
    assert (cfg.loss, cfg.steps, cfg.positive_threshold, cfg.fp32_head) == ("dapo", 9, None, False)
    assert cfg.eps_max == 5.0 and isinstance(cfg.eps_max, float)


def test_yaml_round_trip(tmp_path):
    cfg = C.load(None, ["loss=gspo", "init=/some/folder"])
    path = tmp_path / "resolved.yaml"
    path.write_text(C.to_yaml(cfg))
    assert C.load(path) == cfg


@pytest.mark.parametrize(
    ("item", "words"),
    [
        ("loss=ppo", ["'loss'", "'cispo'", "'gspo'"]),
        ("aggregation=batch", ["'aggregation'", "'prompt'", "'token'"]),
        ("adv_norm=std", ["'adv_norm'", "'batch'", "'none'"]),
        ("mode=async", ["'mode'", "'pipeline'"]),
        ("generator=hf", ["'generator'", "'vllm'"]),
        ("steps=0", ["'steps'", "> 0"]),
        ("lr=-1", ["'lr'"]),
        ("positive_threshold=1.5", ["'positive_threshold'", "null"]),
        ("zero_variance_filter=yes please", ["'zero_variance_filter'", "true or false"]),
        ("steps=1.5", ["'steps'", "int"]),
        ("seed=null", ["'seed'", "null"]),
        ("max_new_tokens=3", ["'max_new_tokens'", "5"]),
    ],
)
def test_bad_values_name_key_and_allowed(item, words):
    with pytest.raises(ConfigError) as err:
        C.load(None, [item])
    for w in words:
        assert w in str(err.value)


@pytest.mark.parametrize("item", ["mode=pipeline", "mode=ppo-off-policy", "generator=vllm"])
def test_part_two_values_load(item):
    key, value = item.split("=")
    assert getattr(C.load(None, [item]), key) == value


def test_unknown_keys_suggest(tmp_path):
    with pytest.raises(ConfigError, match="did you mean eps_max"):
        C.load(None, ["eps_mx=3"])
    path = tmp_path / "c.yaml"
    path.write_text("agregation: token\n")
    with pytest.raises(ConfigError, match="aggregation"):
        C.load(path)
    with pytest.raises(ConfigError, match="key=value"):
        C.load(None, ["loss"])


def test_config_error_is_value_error():
    assert issubclass(ConfigError, ValueError)


def test_warmup_target_range():
    assert C.load(None, ["warmup_target=0.16"]).warmup_target == 0.16
    with pytest.raises(ConfigError, match="'warmup_target'"):
        C.load(None, ["warmup_target=0"])


CPU_DEMO = Path(__file__).resolve().parents[1] / "recipe" / "configs" / "cpu_demo.yaml"


def test_regression_inert_leave_one_out_switches_are_named():
    """The bundled fp32_head=false and positive_threshold=null runs repeated the recipe's run token
    for token (float32 body; 600 x 32 prompts < one epoch of 20,000): the trainer now says so."""
    cpu_demo = C.load(CPU_DEMO)
    assert C.inert_settings(cpu_demo) == []
    notes = C.inert_settings(C.load(CPU_DEMO, ["fp32_head=false"]))
    assert len(notes) == 1 and "dtype=bfloat16" in notes[0]
    off = ["positive_threshold=null", "steps=600"]
    notes = C.inert_settings(C.load(CPU_DEMO, off))
    assert len(notes) == 1 and "0.96 epochs" in notes[0]
    acting = [*off, "train_prompts=2000", "fp32_head=false", "dtype=bfloat16"]
    assert C.inert_settings(C.load(CPU_DEMO, acting)) == []


def test_issue14_settings_are_validated():
    ok = C.from_dict({"device": "cuda:1", "micro_batch_size": 8, "interrupt_range": [2, 3],
                      "max_new_tokens": 9, "gpu_memory_utilization": 0.4})  # fmt: skip
    assert ok.interrupt_range == [2, 3] and ok.micro_batch_size == 8
    for bad, key in [
        ({"device": "tpu"}, "device"),
        ({"micro_batch_size": 0}, "micro_batch_size"),
        ({"interrupt_range": [3, 2], "max_new_tokens": 9}, "interrupt_range"),
        ({"interrupt_range": [2, 9], "max_new_tokens": 9}, "interrupt_range"),
        ({"interrupt_range": [1.5, 2]}, "interrupt_range"),
        ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
        ({"weight_transfer": "nccl"}, "weight_transfer"),
        ({"weight_transfer": "tcp"}, "weight_transfer"),
    ]:
        with pytest.raises(ConfigError, match=key):
            C.from_dict(bad)


@pytest.mark.parametrize("mode", ["sync", "ppo-off-policy", "pipeline"])
def test_regression_every_mode_takes_nccl_weight_pushes(mode):
    """weight_transfer=nccl was refused outside pipeline mode, so sync and PPO-off-policy
    pushed by RPC at any scale and their gpu_hours carried that push time."""
    cfg = C.from_dict({"generator": "vllm", "mode": mode, "weight_transfer": "nccl"})
    assert cfg.weight_transfer == "nccl"
    with pytest.raises(ConfigError, match="'weight_transfer' = 'nccl' needs generator=vllm"):
        C.from_dict({"generator": "torch", "mode": mode, "weight_transfer": "nccl"})


def test_issue15_settings_are_validated():
    ok = C.from_dict({"generator": "vllm", "generators": 6, "device": "cuda",
                      "generator_devices": [2, 3, 4, 5, 6, 7], "dist_timeout": 60})  # fmt: skip
    assert ok.generators == 6 and ok.generator_devices[0] == 2 and ok.dist_timeout == 60
    assert C.Config().generators == 1 and C.Config().dist_timeout == 1800
    for bad, words in [
        ({"generators": 0}, ["'generators'", "> 0"]),
        ({"generators": 1.5}, ["'generators'", "int"]),
        ({"generators": 2}, ["'generators'", "generator=vllm"]),  # the torch sampler: one
        ({"generator": "vllm", "generators": 2, "generator_devices": [1]}, ["'generator_devices'"]),
        ({"generator": "vllm", "generators": 2, "generator_devices": [1, 1]}, ["distinct"]),
        ({"generator": "vllm", "generator_devices": [-1]}, ["'generator_devices'"]),
        ({"generator": "vllm", "device": "cpu", "generator_devices": [1]}, ["CUDA"]),
        ({"generator_devices": [1]}, ["generator=vllm"]),
        ({"dist_timeout": 0}, ["'dist_timeout'"]),
    ]:
        with pytest.raises(ConfigError) as err:
            C.from_dict(bad)
        for w in words:
            assert w in str(err.value), (bad, str(err.value))


def test_regression_exponent_without_a_dot_is_a_float(tmp_path):
    """`--set lr=1e-4` was refused ("must be float, got '1e-4'"): YAML 1.1 reads 1e-4 without a
    dot as a string; in a config file too."""
    assert C.load(None, ["lr=1e-4"]).lr == 1e-4
    path = tmp_path / "c.yaml"
    path.write_text("lr: 3e-5\neps_max: 4\n")
    cfg = C.load(path)
    assert cfg.lr == 3e-5 and isinstance(cfg.lr, float)
    for bad in ("lr=fast", "lr=nan", "lr=inf"):
        with pytest.raises(ConfigError, match="'lr' must be float"):
            C.load(None, [bad])


def test_regression_a_config_file_that_is_missing_or_not_yaml_is_a_config_error(tmp_path):
    """`python -m recipe.train --config /nope.yaml` ended in a FileNotFoundError traceback, and a
    file that is not YAML in yaml's own traceback: each is a ConfigError (the CLI prints
    "config error: ..."), naming the file and, for bad YAML, the line."""
    with pytest.raises(ConfigError, match=r"no such file .*recipe/configs/"):
        C.load(tmp_path / "nope.yaml")
    bad = tmp_path / "notes.md"
    bad.write_text("# a title\nlr: 1e-6\nA ceiling: R(C) = A: B\n")
    with pytest.raises(ConfigError, match=r"is not valid YAML \(line 3"):
        C.load(bad)
    with pytest.raises(ConfigError, match="cannot be read as a YAML config"):
        C.load(tmp_path)  # a folder
    listing = tmp_path / "list.yaml"
    listing.write_text("- lr\n- 1e-6\n")
    with pytest.raises(ConfigError, match="expected a mapping of config keys, got list"):
        C.load(listing)


def test_regression_out_naming_a_file_is_a_config_error(tmp_path):
    """`python -m recipe.train --out afile` where afile is a file ended in mkdir's
    FileExistsError traceback after building the model: the CLI says it before the work."""
    from recipe.cli import main

    afile = tmp_path / "afile"
    afile.write_text("notes\n")
    with pytest.raises(SystemExit, match=r"config error: --out .*afile is a file"):
        main(["--out", str(afile)])
    assert afile.read_text() == "notes\n"  # untouched


def test_regression_init_that_is_not_a_model_folder_is_a_config_error(tmp_path):
    """`--set init=/nonexistent/model` ended in transformers' hub traceback ("Repo id must be
    in the form ..."), and a folder without config.json in its "Unrecognized model" traceback:
    both are config errors before anything is built, saying what init takes."""
    from recipe.cli import main

    empty = tmp_path / "empty"
    empty.mkdir()
    for init, what in ((tmp_path / "nope", "no such folder"), (empty, "no config.json in it")):
        with pytest.raises(SystemExit, match=f"config error: init=.*: {what}; init names a local"):
            main(["--out", str(tmp_path / "run"), "--set", f"init={init}"])
    assert not (tmp_path / "run" / "log.jsonl").exists()  # a corrected rerun needs no --resume


@pytest.mark.parametrize(
    "item", ["lr=.nan", "weight_decay=.nan", "eps_max=.NaN", "warmup_mix=.nan", "grad_clip=.inf",
             "temperature=.inf", "adam_eps=-.inf", "positive_threshold=.nan"],
)  # fmt: skip
def test_regression_nan_or_inf_float_is_refused(item):
    """YAML's .nan and .inf passed as floats: `--set lr=.nan` ended in torch's "Invalid learning
    rate: nan" traceback, and weight_decay, eps_max or warmup_mix = .nan trained silently (NaN
    weights, a NaN clip bound): each is a config error naming the key."""
    key = item.split("=")[0]
    with pytest.raises(ConfigError, match=f"config key '{key}' must be float and finite, got"):
        C.load(None, [item])


def test_regression_a_task_that_does_not_exist_lists_the_tasks():
    """`--set task=additon` (a typo) said "config key 'init' is needed with task='additon'",
    sending the user after a model folder: an unknown task name is now refused as such, with
    the closest name and the tasks there are."""
    with pytest.raises(ConfigError) as err:
        C.load(None, ["task=additon"])
    text = str(err.value)
    assert "config key 'task' = 'additon' is not a task (did you mean addition?)" in text
    for name in ("addition_lsb", "addition_chain", "gsm8k", "path/to/file.py:MyTask"):
        assert name in text
    assert "init" not in text
    # a user task ('module:Class') still needs init, as before
    with pytest.raises(ConfigError, match="config key 'init' is needed"):
        C.load(None, ["task=my_task.py:MyTask"])


@pytest.mark.parametrize("task", ["addition", "addition_lsb", "addition_chain"])
def test_regression_more_prompts_than_the_addition_task_has_is_a_config_error(task):
    """`--set digits=1` with the default 20,000 + 500 prompts ended, after the run folder was
    made, in split_problems' ValueError traceback (only 100 one-digit problems exist)."""
    extra = ["max_new_tokens=32"] if task == "addition_chain" else []
    with pytest.raises(ConfigError) as err:
        C.load(None, [f"task={task}", "digits=1", "chain_terms=2", *extra])
    text = str(err.value)
    assert "'train_prompts' + 'val_prompts' = 20000 + 500 exceed the 100 distinct" in text
    assert "raise 'digits'" in text
    ok = C.load(None, [f"task={task}", "digits=1", "chain_terms=2", "train_prompts=80",
                       "val_prompts=20", *extra])  # fmt: skip
    assert ok.train_prompts + ok.val_prompts == 100


@pytest.mark.parametrize("extra", [[], ["adv_norm=none", "zero_variance_filter=false"]])
def test_regression_one_generation_per_prompt_is_a_config_error(extra):
    """generations=1 ran every step without learning (each completion is its group's mean, so
    its advantage is 0; the zero-variance filter dropped every prompt): a config error now."""
    with pytest.raises(ConfigError, match=r"'generations' = 1 leaves nothing to learn.*at least 2"):
        C.load(None, ["generations=1", *extra])
    assert C.load(None, ["generations=2", *extra]).generations == 2


def test_regression_out_empty_or_holding_a_foreign_config_yaml_is_refused(
    tmp_path, monkeypatch, init_dir
):
    """`--out ""` trained in the working directory, and any --out folder's config.yaml (a
    user's own, another program's) was overwritten by the run's: the first is a config error,
    the second too unless the file is a config this trainer wrote (a rerun of a failed start)."""
    import recipe_helpers

    from recipe.cli import main

    tiny = tmp_path / "tiny.yaml"
    tiny.write_text(C.to_yaml(recipe_helpers.tiny_cfg(init_dir, steps=1)))
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    mine = project / "config.yaml"
    mine.write_text("name: my project\n")
    with pytest.raises(SystemExit, match="config error: --out is empty"):
        main(["--config", str(tiny), "--out", ""])
    words = r"config.yaml is not a config this trainer wrote \(unknown config key 'name'"
    with pytest.raises(SystemExit, match=rf"config error: .*{words}.*choose another --out"):
        main(["--config", str(tiny), "--out", str(project)])
    assert mine.read_text() == "name: my project\n"
    assert sorted(p.name for p in project.iterdir()) == ["config.yaml"]


def test_regression_a_seed_too_large_for_torch_is_a_config_error():
    """--set seed=1700000000000000000 (a nanosecond clock) ended, after the model was loaded, in
    torch's "Overflow when unpacking long long" from the prompt pool's derived seed."""
    with pytest.raises(ConfigError, match=r"'seed' must be below 2\*\*32 = 4294967296, got 17"):
        C.load(None, ["seed=1700000000000000000"])
    assert C.load(None, [f"seed={2**32 - 1}"]).seed == 2**32 - 1
    from recipe.curriculum import PromptPool

    PromptPool(3, seed=2**32 - 1).next_batch(5)  # the largest seed's derived seeds fit


@pytest.mark.parametrize("task", ["addition", "addition_lsb", "addition_chain"])
def test_regression_prompts_per_step_over_the_training_prompts_is_a_config_error(task, tmp_path):
    """prompts_per_step larger than the training prompts (--set train_prompts=20 with the
    default 32 per step) trained on batches that held some prompts twice, every step more than
    an epoch, without a word; it is a config error naming both keys, before anything is
    written (the tasks whose count is known only once loaded: tests/test_recipe_tasks.py)."""
    from recipe.cli import main

    extra = ["max_new_tokens=96"] if task == "addition_chain" else []
    with pytest.raises(ConfigError) as err:
        C.load(None, [f"task={task}", "train_prompts=20", *extra])
    assert "'prompts_per_step' = 32 exceeds the task's 20 training prompts" in str(err.value)
    assert "lower prompts_per_step to at most 20, or raise 'train_prompts'" in str(err.value)
    sets = [f"task={task}", "train_prompts=20", "prompts_per_step=21", *extra]
    with pytest.raises(SystemExit, match="config error: config key 'prompts_per_step' = 21"):
        main(["--out", str(tmp_path / "run"), *(a for item in sets for a in ("--set", item))])
    assert not (tmp_path / "run").exists()
    assert C.load(None, [f"task={task}", "train_prompts=20", "prompts_per_step=20", *extra])
