"""Thin adapters that put :class:`rlcurves.monitor.Monitor` and :class:`rlcurves.race.Race` where
people train and sweep.

``rlcurves.integrations.transformers.ForecastCallback``: a ``transformers.TrainerCallback`` (so
also for TRL's trainers) that refits after each evaluation, logs ``forecast/*`` through the
trainer's own reporting and can stop the run on the advice.
``rlcurves.integrations.ray_tune.RaceScheduler`` (a Ray Tune trial scheduler) and
``rlcurves.integrations.optuna.RacePruner`` (an Optuna pruner) race a sweep's trials with
:class:`rlcurves.race.Race`. Each adapter imports its framework only when used.
"""
