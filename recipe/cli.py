"""The trainer's command line: ``python -m recipe.train`` (or ``python -m recipe.cli``).

Config resolution (``--config`` + ``--set``), the check that ``--resume`` continues the same
run, and the exit messages. The loop itself is :func:`recipe.train.run`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from recipe import config as config_mod
from recipe.config import Config, ConfigError
from recipe.pipeline import GeneratorFailed
from recipe.run import RESUMABLE
from recipe.tasks import TaskError
from recipe.versions import VersionError


def _epilog() -> str:
    lines = [
        "log.jsonl: kind=train rows (step, gpu_hours (the steps' wall hours x the devices in",
        "  use), allocated_gpu_hours (the GPUs the job holds x the hours since each process",
        "  started: the bill), wall_seconds, flops, samples, tokens, train_reward,",
        "  loss, entropy, clip_fraction, zero_grad_fraction (tokens whose gradient the clip",
        "  removes), rho_mean, rho_max, truncation_fraction, prompts_filtered,",
        "  pool_size, skipped_update, grad_norm, lr, lag_min, lag_mean, lag_max (policy versions",
        "  between the trainer and the batch's tokens), mixed_version_samples,",
        "  fresh_logprob_mismatch (max |log pi_train - log pi_gen| over completions wholly",
        "  sampled by the trainer's own version),",
        "  generator_idle_fraction, trainer_idle_fraction, step_seconds = batch_wait_seconds",
        "  + train_seconds + push_seconds (the step's wall time: waiting for the batch, scoring",
        "  and updates, the weight push), load_average (the machine's 1-minute load),",
        "  samples_total, tokens_total,",
        "  updated (the optimizer stepped), updates (optimizer updates this step:",
        "  updates_per_batch unless the batch kept fewer prompt groups or one was skipped),",
        "  optimizer_updates (cumulative),",
        "  interrupted_fraction (length control)) and",
        "  kind=eval rows (step, gpu_hours, allocated_gpu_hours, wall_seconds, val_pass_rate,",
        "  val_prompts,",
        "  val_samples_per_prompt, and val_pass_rate/<class> per class of the task's",
        "  prompt_class: addition, addition_lsb: carries_0 .. carries_<digits>).",
        "  Rewards come from the task (addition, addition_lsb, gsm8k: 0/1); val_pass_rate is",
        "  mean@n.",
        "",
        "config keys (YAML file or --set key=value; defaults in brackets):",
    ]
    for name, f in config_mod.FIELDS.items():
        lines.append(f"  {name:24s} {f.metadata['help']} [{f.default}]")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m recipe.train",
        description="ScaleRL reference trainer (modes sync | pipeline | ppo-off-policy; "
        "generators torch | vllm). Writes "
        "OUT/config.yaml and OUT/log.jsonl (kind=train per step, kind=eval per evaluation).",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", help="YAML file of config keys (default: built-in defaults)")
    parser.add_argument("--out", required=True, help="run folder (log, config, checkpoints)")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE",
        help="override a config key (repeatable; value parsed as YAML: 0.5, true, null)",
    )  # fmt: skip
    parser.add_argument(
        "--resume", action="store_true",
        help="continue from OUT/checkpoint.pt: log rows after it are dropped, compute continues; "
        "the config must match OUT/config.yaml except " + ", ".join(RESUMABLE),
    )  # fmt: skip
    parser.add_argument(
        "--stop-after", type=int, metavar="STEP",
        help="stop right after STEP as if killed (no final checkpoint); for testing --resume",
    )  # fmt: skip
    return parser


def resolve_config(args: argparse.Namespace) -> Config:
    """The run's config: from --config/--set, checked against OUT/config.yaml on --resume."""
    if not args.out.strip():  # Path("") is the working directory: its files would be replaced
        raise ConfigError("--out is empty; --out names the run's folder, e.g. --out runs/demo")
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise ConfigError(
            f"--out {args.out} is a file; --out names the run's folder (config.yaml, log.jsonl, "
            "checkpoints), new or a run to --resume"
        )
    saved_path = Path(args.out) / "config.yaml"
    if args.resume and saved_path.exists():
        saved = config_mod.load(saved_path)
        cfg = config_mod.load(args.config or saved_path, args.set)
        changed = [
            k for k in config_mod.FIELDS
            if getattr(cfg, k) != getattr(saved, k) and k not in RESUMABLE
        ]  # fmt: skip
        if changed:
            raise ConfigError(
                f"--resume with a config that differs from {saved_path} in {changed}; only "
                f"{list(RESUMABLE)} may change (start a new --out instead)"
            )
        return cfg
    return config_mod.load(args.config, args.set)


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    try:
        cfg = resolve_config(args)
    except ConfigError as err:
        raise SystemExit(f"config error: {err}") from None
    try:
        from recipe.train import run

        run(cfg, args.out, resume=args.resume, stop_after=args.stop_after)
        from recipe import distributed

        distributed.end_process()  # a torchrun rank ends here (recipe/distributed.py: why)
    except (ConfigError, TaskError) as err:
        raise SystemExit(f"config error: {err}") from None
    except VersionError as err:
        raise SystemExit(f"unsupported version: {err}") from None
    except KeyboardInterrupt:  # Ctrl-C: the run's finally has closed the log and the engines
        print(
            f"interrupted: the log and the last checkpoint in {args.out} are kept; continue "
            "with --resume (rows after the checkpoint are dropped)",
            file=sys.stderr,
        )
        raise SystemExit(130) from None
    except GeneratorFailed as err:
        message = (
            f"run stopped: {err}\nthe log and the last checkpoint in {args.out} are intact; "
            "fix the cause and continue with --resume"
        )
        if err.fatal:
            end_now(message)
        raise SystemExit(message) from None


def end_now(message: str) -> None:
    """End the process after a push that failed midway, with exit status 1: threads (and, with
    torchrun, the other ranks) may sit in the weight round's collective, and the interpreter's
    exit would wait for them forever; torchrun stops the other ranks once this one is gone."""
    import logging
    import os

    print(message, file=sys.stderr)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(1)


if __name__ == "__main__":
    main()
