"""Thin adapters that put :class:`rlcurves.monitor.Monitor` where people train.

``rlcurves.integrations.transformers.ForecastCallback``: a ``transformers.TrainerCallback`` (so
also for TRL's trainers) that refits after each evaluation, logs ``forecast/*`` through the
trainer's own reporting and can stop the run on the advice. Each adapter imports its framework
only when used.
"""
