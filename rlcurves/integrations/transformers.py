"""``ForecastCallback``: the live forecast inside a ``transformers.Trainer`` (and TRL's trainers).

After each evaluation the callback feeds the logged eval metric, against compute (optimizer steps
times a cost you give, or the trainer's FLOPs count), to a :class:`rlcurves.monitor.Monitor` and
logs its ``forecast/*`` numbers through the trainer's own ``log`` (so they land in W&B,
TensorBoard or whatever ``report_to`` configured, which file them as ``train/forecast/mean``
and so on, and in ``trainer.state.log_history`` as ``forecast/mean``). With
``stop_when`` it ends the run on the advice of :mod:`rlcurves.decide` (the measured stop rule):
only once the advice has held on two consecutive evaluations spanning 3.5% of the budget (and,
with ``require_identified=True`` passed on to the Monitor, never before the fit is identified).

Examples
--------
>>> trainer = GRPOTrainer(...)                                                    # doctest: +SKIP
>>> trainer.add_callback(ForecastCallback(trainer, metric="eval_reward", baseline=0.61,
...                                       stop_when="unlikely"))                 # doctest: +SKIP
>>> trainer.train()                                                               # doctest: +SKIP
"""

from __future__ import annotations

import logging
import math
import warnings
from typing import Any, Literal

from ..errors import RLCurvesError
from ..monitor import PEAKED, STOP_ADVICE, UNLIKELY_BASELINE, UNLIKELY_TARGET, Monitor

try:
    from transformers import TrainerCallback
except ImportError as exc:  # pragma: no cover - exercised only without transformers
    raise ImportError(
        "rlcurves.integrations.transformers needs the transformers package: "
        "pip install 'rlcurves[recipe]' (or pip install transformers)"
    ) from exc

logger = logging.getLogger(__name__)

StopWhen = Literal["unlikely", "peaked", "any"]
_STOP_SETS = {
    "unlikely": (UNLIKELY_BASELINE, UNLIKELY_TARGET),
    "peaked": (PEAKED,),
    "any": STOP_ADVICE,
}


class ForecastCallback(TrainerCallback):
    """Refit after each evaluation; log ``forecast/*``; optionally stop on the advice.

    Parameters
    ----------
    trainer : transformers.Trainer, optional
        The trainer whose ``log`` carries the metrics to its reporting integrations (the pattern
        of TRL's own callbacks). Without it the values are appended to
        ``state.log_history`` only, where no tracker sees them.
    metric : str
        The evaluation metric to forecast, as logged (``"eval_reward"``; ``"reward"`` finds
        ``"eval_reward"`` too).
    budget : float, optional
        Planned compute, in the units of ``compute``. Default: ``max_steps`` times the cost per
        step (not available with ``compute="flos"``).
    compute : "steps", "flos" or float
        The compute axis: optimizer steps, the trainer's floating-point operation count
        (``state.total_flos``), or steps times this cost per step (e.g. GPU-hours per step).
    baseline, target
        As in :class:`rlcurves.monitor.Monitor` (a fit, a finished run, a log path or a number).
    stop_when : {"unlikely", "peaked", "any"}, optional
        Set ``control.should_training_stop`` when the advice is "unlikely to beat the baseline"
        or "... to reach the target" ("unlikely"), "peaked", or either ("any"). None: never.
        The advice is the monitor's after its hysteresis: a stop is advised only once it has
        held (:class:`rlcurves.decide.Hysteresis`).
    higher_is_better : bool, optional
        Default: the trainer's ``greater_is_better`` when its ``metric_for_best_model`` is this
        metric (with or without ``eval_``), else False when the metric's name contains "loss",
        True otherwise.
    prefix : str
        Prefix of the logged names.
    **monitor_kws
        Passed to :class:`rlcurves.monitor.Monitor` (``level``, ``rule``, ``min_points``,
        ``min_fraction``, ``p_unlikely``, ``hold``, ``fit_kws``...).

    Attributes
    ----------
    monitor : Monitor or None
        Built anew each time training begins (a callback reused for another ``train()`` starts
        afresh); a run resumed from a checkpoint (``train(resume_from_checkpoint=...)``) gets
        the evaluations its log history holds (with ``compute="steps"`` or a cost per step).
    reports : list of MonitorReport
        One per evaluation of the current ``train()``.

    Raises
    ------
    RLCurvesError
        A ``stop_when``, ``compute`` or ``budget`` out of range (when built); when training
        begins, a run of unknown length without ``budget=``, or ``higher_is_better`` that
        disagrees with the trainer's ``greater_is_better`` for the same metric.

    Warns
    -----
    UserWarning
        The metric is not among the evaluation metrics (naming those there are);
        ``eval_strategy="no"`` (nothing to forecast); no ``trainer`` given.
    """

    def __init__(
        self,
        trainer: Any = None,
        *,
        metric: str = "eval_reward",
        budget: float | None = None,
        compute: Literal["steps", "flos"] | float = "steps",
        baseline: Any = None,
        target: float | None = None,
        stop_when: StopWhen | None = None,
        higher_is_better: bool | None = None,
        prefix: str = "forecast/",
        **monitor_kws: Any,
    ) -> None:
        if stop_when is not None and stop_when not in _STOP_SETS:
            raise RLCurvesError(
                f"stop_when must be None or one of {sorted(_STOP_SETS)}, got {stop_when!r}"
            )
        if isinstance(compute, str):
            if compute not in ("steps", "flos"):
                raise RLCurvesError(
                    f"compute must be 'steps', 'flos' or a cost per step (a number), got "
                    f"{compute!r}"
                )
        elif not (math.isfinite(float(compute)) and float(compute) > 0):
            raise RLCurvesError(f"a cost per step must be a positive number, got {compute}")
        if budget is not None:
            try:
                planned = float(budget)
            except (TypeError, ValueError):
                planned = math.nan
            if not (math.isfinite(planned) and planned > 0):
                raise RLCurvesError(
                    "budget= must be a positive compute value in the units of compute= (the "
                    f"run's planned steps, FLOPs or GPU-hours), or None; got {budget!r}"
                )
            budget = planned
        if compute == "flos" and budget is None:
            raise RLCurvesError("with compute='flos' give budget= (the planned FLOPs)")
        self.trainer = trainer
        self.metric = metric
        self.budget = budget
        self.compute = compute
        self.stop_when = stop_when
        self.prefix = prefix
        self.higher_is_better = higher_is_better
        self._monitor_kws = dict(baseline=baseline, target=target, **monitor_kws)
        self.monitor: Monitor | None = None
        self.reports: list = []
        self._warned: set[str] = set()

    # ---- trainer events -------------------------------------------------------------------------
    def on_train_begin(self, args, state, control, **kwargs):
        # a new Monitor at every train(): a callback reused for another run (a second train(),
        # trainer.hyperparameter_search) does not race it on the previous run's evaluations
        budget = self.budget
        if budget is None:
            steps = state.max_steps or args.max_steps
            if not steps or steps < 0:
                raise RLCurvesError(
                    "ForecastCallback: the run's length is unknown (max_steps not set); "
                    "give budget="
                )
            budget = steps * (1.0 if self.compute == "steps" else float(self.compute))
        self.monitor = Monitor(
            budget,
            label=self.metric,
            higher_is_better=self._direction(args),
            **self._monitor_kws,
        )
        self.reports = []
        if str(getattr(args, "eval_strategy", "")) == "no":
            self._warn_once(
                "no-eval",
                "ForecastCallback: eval_strategy='no': the trainer never evaluates during "
                "training, so there is nothing to forecast (nor to stop on); set "
                "TrainingArguments(eval_strategy='steps', eval_steps=...)",
            )
        self._resume(state)
        return control

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if self.monitor is None:  # evaluate() outside train(): nothing to forecast against
            return control
        value = self._value(metrics or {})
        if value is None:
            return control
        report = self.monitor.update(self._compute_now(state), value)
        self.reports.append(report)
        record = report.metrics(self.prefix)
        if self.trainer is not None:
            self.trainer.log(dict(record))
        else:
            self._warn_once(
                "no-trainer",
                "ForecastCallback was built without the trainer: forecast/* values go to "
                "state.log_history only, not to the trainer's reporting integrations; pass "
                "ForecastCallback(trainer, ...) to log them there",
            )
            state.log_history.append({**record, "step": state.global_step})
        if state.is_world_process_zero:
            logger.info("rlcurves forecast at step %d: %s", state.global_step, report.reason)
        if self.stop_when is not None and report.advice in _STOP_SETS[self.stop_when]:
            logger.warning(
                "rlcurves: stopping the run at step %d: %s: %s",
                state.global_step,
                report.advice,
                report.reason,
            )
            control.should_training_stop = True
        return control

    # ---- helpers --------------------------------------------------------------------------------
    def _direction(self, args) -> bool:
        """Higher is better? The callback's ``higher_is_better``, else the trainer's
        ``greater_is_better`` when ``metric_for_best_model`` is this metric, else the name."""
        best = getattr(args, "metric_for_best_model", None)
        greater = getattr(args, "greater_is_better", None)
        if best is not None and greater is not None and _bare(best) == _bare(self.metric):
            if self.higher_is_better is not None and bool(self.higher_is_better) != bool(greater):
                raise RLCurvesError(
                    f"ForecastCallback(higher_is_better={self.higher_is_better}) disagrees with "
                    f"TrainingArguments(metric_for_best_model={best!r}, "
                    f"greater_is_better={greater}) on the same metric: make them agree (or "
                    "leave higher_is_better=None to take the trainer's)"
                )
            return bool(greater)
        if self.higher_is_better is not None:
            return bool(self.higher_is_better)
        return "loss" not in self.metric.lower()

    def _resume(self, state) -> None:
        """A run resumed from a checkpoint: feed the Monitor the evaluations its log history
        holds (``trainer_state.json``), so that it forecasts from the whole run."""
        steps, values = [], []
        for record in state.log_history:
            for key in (self.metric, f"eval_{self.metric}"):
                if key in record and "step" in record:
                    try:
                        step, value = float(record["step"]), float(record[key])
                    except (TypeError, ValueError):
                        break
                    if math.isfinite(value) and math.isfinite(step):
                        steps.append(step)
                        values.append(value)
                    break
        if not steps:
            return
        if self.compute == "flos":
            self._warn_once(
                "resume-flos",
                f"ForecastCallback: the run resumed at step {state.global_step}, but with "
                "compute='flos' its earlier evaluations are left out (the log history holds no "
                "FLOPs count per evaluation); compute='steps' or a cost per step keeps them",
            )
            return
        cost = 1.0 if self.compute == "steps" else float(self.compute)
        self.monitor.update([s * cost for s in steps], values)

    def _value(self, metrics: dict) -> float | None:
        for key in (self.metric, f"eval_{self.metric}"):
            if key in metrics:
                value = float(metrics[key])
                return value if math.isfinite(value) else None
        self._warn_once(
            "metric",
            f"ForecastCallback: metric {self.metric!r} is not among the evaluation metrics "
            f"{sorted(metrics)}; pass metric= one of them",
        )
        return None

    def _compute_now(self, state) -> float:
        if self.compute == "steps":
            return float(state.global_step)
        if self.compute == "flos":
            pending = getattr(self.trainer, "current_flos", 0.0) if self.trainer else 0.0
            return float(state.total_flos) + float(pending)
        return state.global_step * float(self.compute)

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(message, UserWarning, stacklevel=3)


def _bare(metric: str) -> str:
    """A metric's name without the ``eval_`` prefix the trainer adds."""
    return metric[len("eval_") :] if metric.startswith("eval_") else metric
