"""The trainer's command line: ``python -m recipe.train`` (or ``python -m recipe.cli``).

Config resolution (``--config`` + ``--set``), the check that ``--resume`` continues the same
run, and the exit messages. The loop itself is :func:`recipe.train.run`.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
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
    checkpoint = Path(args.out) / "checkpoint.pt"
    if args.resume and checkpoint.exists() and not saved_path.exists():
        raise ConfigError(
            f"--resume: {saved_path} is missing, but {checkpoint} is there: without the run's "
            "config the check that the resumed run trains the same recipe (every key but "
            f"{', '.join(RESUMABLE)}) cannot be made. Put the run's config.yaml back (or, if "
            "you know the config it was trained with, save that as config.yaml there), or "
            "start a new --out"
        )
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

        with TermHandler(args.out):
            run(cfg, args.out, resume=args.resume, stop_after=args.stop_after)
        from recipe import distributed

        distributed.end_process()  # a torchrun rank ends here (recipe/distributed.py: why)
    except (ConfigError, TaskError) as err:
        raise SystemExit(f"config error: {err}") from None
    except VersionError as err:
        raise SystemExit(f"unsupported version: {err}") from None
    except KeyboardInterrupt:  # Ctrl-C: the run's finally has closed the log and the engines
        stopped(interrupted(args.out), 130)
    except Terminated:  # SIGTERM (Slurm, Kubernetes, torchrun): closed the same way
        stopped(interrupted(args.out, "terminated (SIGTERM)"), 143)
    except GeneratorFailed as err:
        message = (
            f"run stopped: {err}\nthe log and the last checkpoint in {args.out} are intact; "
            "fix the cause and continue with --resume"
        )
        if err.fatal:
            end_now(message)
        raise SystemExit(message) from None


def interrupted(out: str, what: str = "interrupted") -> str:
    return (
        f"{what}: the log and the last checkpoint in {out} are kept; continue with --resume "
        "(rows after the checkpoint are dropped)"
    )


def stopped(message: str, status: int) -> None:
    """End after Ctrl-C or SIGTERM: the message (from rank 0 only) and ``status``; a torchrun
    rank through :func:`end_now` (its interpreter's exit could abort: recipe/distributed.py)."""
    if os.environ.get("RANK", "0") != "0":
        message = None
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        end_now(message, status)
    if message is not None:
        print(message, file=sys.stderr)
    raise SystemExit(status) from None


class Terminated(BaseException):
    """SIGTERM, raised in the main thread wherever it was (:class:`TermHandler`)."""


STUCK_SECONDS = 2.0  # a main thread that has not taken SIGTERM by then is blocked in C
GRACE_SECONDS = 20.0  # the close's limit after SIGTERM (Slurm, Kubernetes, torchrun: ~30 s)


class TermHandler:
    """SIGTERM ends the run as Ctrl-C does: :class:`Terminated` is raised in the main thread
    wherever it is (a step's checkpoint is written only at its end, so a half-finished step
    writes none), the run's ``finally`` closes the log and the engines, and the CLI exits 143.

    Python runs signal handlers between bytecodes, so a main thread blocked in C (a torchrun
    collective waiting for a rank that is gone) would take the signal only when the call
    returns, and a close may wait on a generate call that is running. A watchdog thread hears
    the signal as it comes (``signal.set_wakeup_fd``) and ends the process at once (exit 143,
    the same message) if the handler has not run within ``STUCK_SECONDS``, or if the close takes
    over ``GRACE_SECONDS``: the scheduler's SIGKILL follows SIGTERM after ~30 s. The log is safe
    either way (rows are flushed as they are written, checkpoints replaced atomically). A second
    SIGTERM ends the process at once. Outside the main thread (the API), nothing is installed.
    """

    def __init__(self, out: str) -> None:
        self.out, self.pid = out, os.getpid()
        self.taken, self.done = threading.Event(), threading.Event()
        self.installed = threading.current_thread() is threading.main_thread()

    def __enter__(self) -> TermHandler:
        if not self.installed:
            return self
        self.previous = signal.signal(signal.SIGTERM, self._handle)
        read, self.write = os.pipe()
        os.set_blocking(self.write, False)
        self.previous_fd = signal.set_wakeup_fd(self.write, warn_on_full_buffer=False)
        if self.previous_fd != -1:  # someone else's (an event loop): leave it to them
            signal.set_wakeup_fd(self.previous_fd)
            os.close(read)
            return self
        threading.Thread(target=self._watch, args=(read,), name="sigterm", daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        if not self.installed:
            return
        if self.previous_fd == -1:
            signal.set_wakeup_fd(-1)
        os.close(self.write)  # the watchdog's read ends
        signal.signal(signal.SIGTERM, self.previous)

    def _handle(self, signum, frame) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process
        if os.getpid() != self.pid:  # a forked child that inherited the handler: the default
            os.kill(os.getpid(), signal.SIGTERM)
            return
        self.taken.set()
        raise Terminated

    def _watch(self, read: int) -> None:
        with os.fdopen(read, "rb", buffering=0) as signals:
            while True:  # the numbers of the signals Python handles, as they come
                got = signals.read(64)
                if not got:  # the run ended: __exit__ closed the other end
                    return
                if signal.SIGTERM in got:
                    break
        if not self.taken.wait(STUCK_SECONDS) or not self.done.wait(GRACE_SECONDS):
            stopped_now = interrupted(self.out, "terminated (SIGTERM)")
            end_now(stopped_now if os.environ.get("RANK", "0") == "0" else None, 143)


def end_now(message: str | None, status: int = 1) -> None:
    """End the process now with ``status`` (1: a push that failed midway): threads (and, with
    torchrun, the other ranks) may sit in the weight round's collective, and the interpreter's
    exit would wait for them forever; torchrun stops the other ranks once this one is gone."""
    import logging

    if message is not None:
        print(message, file=sys.stderr)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    os._exit(status)


if __name__ == "__main__":
    main()
