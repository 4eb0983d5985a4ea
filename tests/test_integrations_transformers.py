"""ForecastCallback with a real transformers.Trainer: a tiny random-init GPT-2 built locally (no
download), a few dozen steps on CPU, evaluation every 2 steps."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

import rlcurves  # noqa: E402
from rlcurves.monitor import TOO_EARLY, UNLIKELY_BASELINE  # noqa: E402

V, L = 16, 16  # vocabulary and sequence length


class Arithmetic(torch.utils.data.Dataset):
    """Sequences ``(k * i + o) mod V``: learnable, so the eval loss falls as a curve."""

    def __init__(self, n: int, seed: int):
        g = torch.Generator().manual_seed(seed)
        ks = torch.randint(1, 4, (n,), generator=g)
        offsets = torch.randint(0, V, (n,), generator=g)
        self.x = [(torch.arange(L) * int(k) + int(o)) % V for k, o in zip(ks, offsets, strict=True)]

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"input_ids": self.x[i], "labels": self.x[i]}


def make_trainer(tmp_path, max_steps=40, report_to="none"):
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=V, n_positions=L, n_embd=32, n_layer=1, n_head=2))
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        max_steps=max_steps,
        eval_strategy="steps",
        eval_steps=2,
        logging_steps=2,
        per_device_train_batch_size=16,
        per_device_eval_batch_size=32,
        learning_rate=3e-3,
        lr_scheduler_type="constant",
        report_to=report_to,
        use_cpu=True,
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
    )
    return Trainer(model=model, args=args, train_dataset=Arithmetic(640, 0),
                   eval_dataset=Arithmetic(64, 1))  # fmt: skip


def test_forecast_metrics_land_in_log_history_and_tensorboard(tmp_path):
    from rlcurves.integrations.transformers import ForecastCallback

    trainer = make_trainer(tmp_path, report_to="tensorboard")
    cb = ForecastCallback(trainer, metric="eval_loss", min_points=5, min_fraction=0.0,
                          n_samples=100)  # fmt: skip
    trainer.add_callback(cb)
    trainer.train()
    history = trainer.state.log_history
    evals = [h for h in history if "eval_loss" in h]
    forecasts = [h for h in history if "forecast/identified" in h]
    assert len(evals) == 20 and len(forecasts) == len(evals) == len(cb.reports)
    assert cb.monitor.sign == -1.0  # "loss" in the name: lower is better
    assert cb.monitor.budget == 40.0  # max_steps x 1 (compute = steps)
    with_fit = [h for h in forecasts if "forecast/mean" in h]
    assert with_fit, forecasts[-1]
    # the forecast follows the logged metric: at the last evaluation (at the budget) it is the
    # fitted curve there, within the spread of the last evaluations
    last = [h["eval_loss"] for h in evals[-4:]]
    assert min(last) - 0.1 < with_fit[-1]["forecast/mean"] < max(last) + 0.1
    assert with_fit[-1]["forecast/lower"] <= with_fit[-1]["forecast/mean"]
    assert cb.reports[0].advice == TOO_EARLY
    # through the trainer's own reporting: TensorBoard's event file has the scalars
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = sorted((tmp_path / "out").rglob("events.out.tfevents.*"))  # under output_dir
    assert events
    tags = set()
    for e in events:
        acc = EventAccumulator(str(e))
        acc.Reload()
        tags |= set(acc.Tags()["scalars"])
    # the integrations file non-eval keys under "train/" (transformers' rewrite_logs)
    assert {"train/forecast/mean", "train/forecast/upper", "train/forecast/identified"} <= tags


@pytest.mark.parametrize("guard", [False, True])
def test_stop_when_unlikely_stops_the_run(tmp_path, guard):
    """A baseline out of reach stops training once the stop advice has held; with
    ``require_identified=True`` (passed to the Monitor) only once the fit is identified (issue
    43: no guard by default, the calibrated forecast decides from the first fit)."""
    from rlcurves.integrations.transformers import ForecastCallback

    trainer = make_trainer(tmp_path, max_steps=40)
    # a baseline loss of 0.5: out of reach of 40 steps (the loss ends near 1.3)
    cb = ForecastCallback(trainer, metric="loss", baseline=0.5, stop_when="unlikely",
                          min_points=5, min_fraction=0.0, n_samples=100,
                          require_identified=guard)  # fmt: skip
    trainer.add_callback(cb)
    trainer.train()
    assert trainer.state.global_step < 40
    final = cb.reports[-1]
    assert final.advice == UNLIKELY_BASELINE and (final.is_identified or not guard)
    assert all(not r.stop for r in cb.reports[:-1])
    # issue 27: the stop advice held on the evaluation before (two refits, 5% of the budget apart)
    assert cb.reports[-2].pending == UNLIKELY_BASELINE
    assert trainer.state.global_step == final.compute


def test_without_the_trainer_values_still_reach_log_history(tmp_path):
    from rlcurves.integrations.transformers import ForecastCallback

    trainer = make_trainer(tmp_path, max_steps=10)
    trainer.add_callback(ForecastCallback(metric="eval_loss", n_samples=50))
    with pytest.warns(UserWarning, match="without the trainer"):
        trainer.train()
    assert any("forecast/identified" in h for h in trainer.state.log_history)


def test_a_missing_metric_warns_with_the_metrics_found(tmp_path):
    from rlcurves.integrations.transformers import ForecastCallback

    trainer = make_trainer(tmp_path, max_steps=4)
    cb = ForecastCallback(trainer, metric="eval_reward")
    trainer.add_callback(cb)
    with pytest.warns(UserWarning, match="eval_loss"):
        trainer.train()
    assert cb.reports == []


@pytest.mark.parametrize(
    "kwargs, word",
    [
        (dict(stop_when="always"), "stop_when"),
        (dict(compute="tokens"), "compute"),
        (dict(compute=-1.0), "positive"),
        (dict(compute="flos"), "budget"),
        (dict(budget=-1), "budget= must be a positive compute value"),  # at train start, before
        (dict(budget="x"), "got 'x'"),
    ],
)
def test_bad_settings_raise_the_documented_error(kwargs, word):
    from rlcurves.integrations.transformers import ForecastCallback

    with pytest.raises(rlcurves.RLCurvesError, match=word):
        ForecastCallback(**kwargs)


def test_regression_a_callback_reused_for_another_train_starts_afresh(tmp_path):
    """A second train() (another run, trainer.hyperparameter_search) kept the first run's
    Monitor: its evaluations were appended to the first run's, steps 2, 4, ... twice."""
    from rlcurves.integrations.transformers import ForecastCallback

    trainer = make_trainer(tmp_path, max_steps=10)
    cb = ForecastCallback(trainer, metric="eval_loss", n_samples=50)
    trainer.add_callback(cb)
    trainer.train()
    trainer.train()
    assert cb.monitor.points["compute"].tolist() == [2.0, 4.0, 6.0, 8.0, 10.0]
    assert len(cb.reports) == 5


def test_regression_a_resumed_run_keeps_its_earlier_evaluations(tmp_path):
    """train(resume_from_checkpoint=...) in a new process: the Monitor forecast from the
    evaluations after the checkpoint only; those in the log history are fed to it."""
    from rlcurves.integrations.transformers import ForecastCallback

    trainer = make_trainer(tmp_path, max_steps=20)
    trainer.args.save_strategy, trainer.args.save_steps = "steps", 10
    trainer.train()
    resumed = make_trainer(tmp_path, max_steps=20)
    cb = ForecastCallback(resumed, metric="eval_loss", n_samples=50)
    resumed.add_callback(cb)
    resumed.train(resume_from_checkpoint=str(tmp_path / "out" / "checkpoint-10"))
    assert cb.monitor.points["compute"].tolist() == [float(s) for s in range(2, 21, 2)]
    evals = [h["eval_loss"] for h in resumed.state.log_history if "eval_loss" in h]
    assert cb.monitor.points["reward"].tolist() == pytest.approx(evals)


def test_regression_the_direction_follows_greater_is_better():
    """metric_for_best_model names the metric and greater_is_better=False (a perplexity, a
    word error rate): the callback raced it as higher-is-better (no "loss" in its name)."""
    from types import SimpleNamespace

    from rlcurves.integrations.transformers import ForecastCallback

    state = SimpleNamespace(max_steps=40, log_history=[])
    args = SimpleNamespace(max_steps=40, eval_strategy="steps", metric_for_best_model="wer",
                           greater_is_better=False)  # fmt: skip
    cb = ForecastCallback(metric="eval_wer")
    cb.on_train_begin(args, state, None)
    assert cb.monitor.sign == -1.0
    cb = ForecastCallback(metric="eval_wer", higher_is_better=True)
    with pytest.raises(rlcurves.RLCurvesError, match="greater_is_better=False"):
        cb.on_train_begin(args, state, None)


def test_regression_no_evaluation_during_training_warns(tmp_path):
    """eval_strategy='no': no evaluation, so no forecast and no stop, said nowhere."""
    from rlcurves.integrations.transformers import ForecastCallback

    trainer = make_trainer(tmp_path, max_steps=4)
    trainer.args.eval_strategy = "no"
    cb = ForecastCallback(trainer, metric="eval_loss", stop_when="unlikely")
    trainer.add_callback(cb)
    with pytest.warns(UserWarning, match="eval_strategy='no'"):
        trainer.train()
    assert cb.reports == []
