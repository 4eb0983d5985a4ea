"""Which column is the reward, the step, the compute: explicit names win, detection says why.

Detection never picks between equals: two candidates of the same rank (a verl log validating on
two data sets, say) is an error that lists them and asks for ``reward=``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pandas as pd

from ..errors import RLCurvesError
from ._raw import RawLog

# Ranked groups, best first; names compared case-insensitively, '-' and ' ' read as '_'.
REWARD_RANKS: tuple[tuple[str, ...], ...] = (
    (
        "val_pass_rate",
        "eval_pass_rate",
        "val/pass_rate",
        "eval/pass_rate",
        "eval_reward",
        "val_reward",
        "eval/reward",
        "val/reward",
        "test_reward",
        "test/reward",
        "test_success_mean",
        "test_reward_mean",
        # validation accuracy, as Lightning, Keras, HF Trainer, Ray Tune examples name it
        "val_acc",
        "val/acc",
        "val_accuracy",
        "val/accuracy",
        "valid_acc",
        "valid/acc",
        "validation_acc",
        "validation/acc",
        "validation_accuracy",
        "validation/accuracy",
        "eval_acc",
        "eval/acc",
        "eval_accuracy",
        "eval/accuracy",
    ),
    # a test set's accuracy: after every validation metric (Lightning logs both)
    ("test_acc", "test/acc", "test_accuracy", "test/accuracy"),
    (
        "reward",
        "train_reward",
        "train/reward",
        "rewards/mean",
        "critic/score/mean",
        "success_mean",
        "reward_mean",
        "mean_reward",
        "pass_rate",
    ),
)
# Validation metrics named by pattern (verl writes the same keys to its file logger, W&B and
# TensorBoard): val-core/<data source>/<variable>/mean@<n> (newer), val/test_score/<source>.
VALIDATION_PATTERNS = (
    re.compile(r"^val-core/.+/(reward|acc|score)/mean@\d+$"),
    re.compile(r"^val/test_score/.+$"),
)
STEP_NAMES = (
    "step",
    "global_step",
    "train/global_step",
    "trainer/global_step",
    "training/global_step",
    "_step",
    "trainer_model_version",
    "iteration",
    "iter",
)
GPU_HOURS_NAMES = (
    "gpu_hours",
    "gpuhours",
    "compute",
    "compute_gpu_hours",
    "gpu_hours_total",
    "total_gpu_hours",
    "train/gpu_hours",
    "compute/gpu_hours",
    "perf/gpu_hours",
)
FLOPS_NAMES = (
    "flops",
    "total_flops",
    "cumulative_flops",
    "total_flos",
    "train/flops",
    "perf/total_flops",
)
SECONDS_NAMES = (
    "_runtime",
    "wall_seconds",
    "time_since_start",
    "elapsed_seconds",
    "elapsed_s",
    "elapsed",
    "runtime",
    "wall_time_seconds",
    "train/runtime",
)
DURATION_NAMES = ("timing_s/step", "perf/time_per_step")
# Names that read as seconds when given as compute= (they need gpus=).
_SECONDS_HINT = re.compile(r"(runtime|seconds|_s$|time_since|elapsed|timing_s|wall)")
_FLOPS_HINT = re.compile(r"(flops|flos)")


def norm(name: object) -> str:
    return re.sub(r"[\s\-]+", "_", str(name).strip().lower())


def find(frame: pd.DataFrame, names: Sequence[str]) -> list[str]:
    """Columns of ``frame`` whose normalized name is in ``names``, in the order of ``names``."""
    by_norm: dict[str, list[str]] = {}
    for column in frame.columns:
        by_norm.setdefault(norm(column), []).append(str(column))
    found: list[str] = []
    for name in names:
        for column in by_norm.get(norm(name), []):
            if column not in found:
                found.append(column)
    return found


def _numeric(frame: pd.DataFrame, column: str) -> bool:
    # An all-NaN float column counts: its NaNs were written, and the cleaning report says so.
    return pd.api.types.is_numeric_dtype(frame[column]) and not pd.api.types.is_bool_dtype(
        frame[column]
    )


def _missing(raw: RawLog, role: str, name: str, fix: str) -> RLCurvesError:
    columns = [str(c) for c in raw.frame.columns]
    return RLCurvesError(
        f"{raw.source}: no column {name!r} for {role}; columns found: {columns}. {fix}",
        file=raw.source,
        column=name,
        columns=columns,
    )


def choose_reward(raw: RawLog, reward: str | None) -> tuple[str, str]:
    """(reward column, how it was chosen)."""
    frame = raw.frame
    if reward is not None:
        if reward not in frame.columns:
            close = find(frame, [reward])
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise _missing(raw, "the reward", reward, f"Pass reward='<one of these>'.{hint}")
        if not (_numeric(frame, reward) or raw.as_numbers(reward)):
            raise RLCurvesError(
                f"{raw.source}: reward column {reward!r} holds no numbers ("
                + (
                    "every value is missing"
                    if frame[reward].isna().all()
                    else f"first value: {_first_non_number(frame[reward])!r}"
                )
                + "). Pass reward= a numeric metric column.",
                file=raw.source,
                column=reward,
                columns=[str(c) for c in frame.columns],
            )
        return reward, "explicit"
    by_pattern = tuple(
        str(c) for c in frame.columns if any(p.match(str(c)) for p in VALIDATION_PATTERNS)
    )
    generic = (REWARD_RANKS[0] + by_pattern, *REWARD_RANKS[1:])
    not_numbers: list[str] = []
    for rank in (*raw.reward_candidates, *generic):
        named = find(frame, rank)
        # a metric column with a few text cells ("n/a", a typo) is still the metric: read as
        # numbers, its text cells dropped and named in the cleaning report
        found = [c for c in named if _numeric(frame, c) or raw.as_numbers(c, min_share=0.5)]
        not_numbers += [c for c in named if c not in found and c not in not_numbers]
        if len(found) == 1:
            return found[0], "detected: the best-ranked reward name present"
        if len(found) > 1:
            raise RLCurvesError(
                f"{raw.source}: several columns could be the reward: {found}; detection does "
                f"not pick between them. Pass reward='{found[0]}' (or another).",
                file=raw.source,
                candidates=found,
                columns=[str(c) for c in frame.columns],
            )
    columns = [str(c) for c in frame.columns]
    why = "".join(_why_not_numbers(frame, c) for c in not_numbers)
    candidates = numeric_candidates(raw)
    could = f" Numeric columns that could be the reward: {candidates}." if candidates else ""
    example = f"'{candidates[0]}' (or another)" if candidates else "'<column>'"
    raise RLCurvesError(
        f"{raw.source}: no reward column recognized among the columns found: {columns}.{why}"
        f"{could} Pass reward={example} naming the validation metric to fit. "
        f"Names recognized without it: {', '.join(REWARD_RANKS[0])}, verl's "
        "val-core/<source>/<metric>/mean@<n>, then "
        f"{', '.join(n for rank in REWARD_RANKS[1:] for n in rank)}.",
        file=raw.source,
        columns=columns,
        candidates=candidates,
    )


def numeric_candidates(raw: RawLog) -> list[str]:
    """Columns holding numbers that are not a step, clock, compute or run column: what the
    reward could be when no name says so."""
    frame = raw.frame
    skip = {norm(n) for n in (*STEP_NAMES, *GPU_HOURS_NAMES, *FLOPS_NAMES, *SECONDS_NAMES)}
    skip |= {norm(n) for n in (*DURATION_NAMES, "_timestamp", "timestamp", "epoch", "run")}
    skip |= {norm(n) for n in (*raw.step_candidates, *raw.seconds_candidates)}
    return [
        str(c)
        for c in frame.columns
        if norm(c) not in skip
        and _numeric(frame, str(c))
        and frame[c].notna().any()
        and not str(c).endswith(("__MIN", "__MAX"))
    ]


def _why_not_numbers(frame: pd.DataFrame, column: str) -> str:
    """Why a column named like the reward is not read as it: text in it, or nothing at all."""
    if frame[column].isna().all():
        return f" Column {column!r} would be the reward but every value is missing (null)."
    text = _first_non_number(frame[column])
    return f" Column {column!r} would be the reward but holds text ({text!r})."


def _first_non_number(column: pd.Series) -> object:
    for value in column.dropna():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            try:
                float(value)
            except (TypeError, ValueError):
                return value
    return None


def choose_step(raw: RawLog) -> str | None:
    """The step (or step-like) column used to order records and find duplicates, if any."""
    frame = raw.frame
    names = [c for c in raw.step_candidates if c in frame.columns] + list(STEP_NAMES)
    for column in find(frame, names):
        if _numeric(frame, column):
            return column
    return None


def seconds_hint(name: str) -> bool:
    return bool(_SECONDS_HINT.search(norm(name)))


def flops_hint(name: str) -> bool:
    return bool(_FLOPS_HINT.search(norm(name)))
