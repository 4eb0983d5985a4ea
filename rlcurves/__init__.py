"""rlcurves: fit, forecast and compare RL compute-scaling curves.

The ScaleRL sigmoid ``R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)`` (Khatri et al., 2025): a ceiling
A, an efficiency exponent B and a midpoint compute C_mid. Fit it early, forecast the finish, compare
recipe variants by A and B.

``import rlcurves`` loads no module of the library but its errors: each name below is imported on
first use (``rlcurves.compare`` loads scipy.stats, ``rlcurves.fit_sigmoid`` numba and the compiled
kernels), so a command or a script pays only for what it uses
(``python -m benchmarks.import_time``).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import TYPE_CHECKING, Any

from .errors import DataRepairWarning, IdentifiabilityWarning, NotConvergedWarning, RLCurvesError

__version__ = "0.1.0"

# public name -> the module that defines it (imported on first use, PEP 562)
_LAZY = {
    "warm_up": "._warmup",
    "datasets": ".datasets",
    "Backtest": ".backtest",
    "backtest": ".backtest",
    "Posterior": ".bayes",
    "Prior": ".bayes",
    "BootstrapResult": ".bootstrap",
    "Calibration": ".calibrate",
    "calibrate": ".calibrate",
    "Comparison": ".compare",
    "Crossover": ".compare",
    "compare": ".compare",
    "fit_sigmoid": ".fit",
    "fit_sigmoid_batch": ".fit",
    "Forecast": ".forecast",
    "forecast": ".forecast",
    "describe_log": ".logs",
    "read_log": ".logs",
    "read_logs": ".logs",
    "read_wandb_run": ".logs",
    "inverse_sigmoid": ".model",
    "power_law": ".model",
    "sigmoid": ".model",
    "Monitor": ".monitor",
    "MonitorReport": ".monitor",
    "plot_fits": ".plot",
    "ModelComparison": ".powerlaw",
    "PowerLawFit": ".powerlaw",
    "compare_models": ".powerlaw",
    "fit_power_law": ".powerlaw",
    "ProfileResult": ".profile",
    "Race": ".race",
    "RaceReport": ".race",
    "SigmoidFit": ".result",
    "RunsFit": ".runs",
    "fit_runs": ".runs",
    "paired_differences": ".runs",
    "shared_compute": ".runs",
    "ComputeTarget": ".target",
}
# names that are modules of the package, not attributes of one
_MODULES = {"datasets"}
# functions named as their module: ``rlcurves.compare`` is the function, as it always was
_SHADOWED = {"backtest", "calibrate", "compare", "forecast"}


class _Package(types.ModuleType):
    """The package, keeping ``rlcurves.compare`` (and the others in ``_SHADOWED``) the function
    when the import system binds the same-named submodule to the package on its first import."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _SHADOWED and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

if TYPE_CHECKING:  # what static analysis and IDEs see: the eager imports
    from . import datasets
    from ._warmup import warm_up
    from .backtest import Backtest, backtest
    from .bayes import Posterior, Prior
    from .bootstrap import BootstrapResult
    from .calibrate import Calibration, calibrate
    from .compare import Comparison, Crossover, compare
    from .fit import fit_sigmoid, fit_sigmoid_batch
    from .forecast import Forecast, forecast
    from .logs import describe_log, read_log, read_logs, read_wandb_run
    from .model import inverse_sigmoid, power_law, sigmoid
    from .monitor import Monitor, MonitorReport
    from .plot import plot_fits
    from .powerlaw import ModelComparison, PowerLawFit, compare_models, fit_power_law
    from .profile import ProfileResult
    from .race import Race, RaceReport
    from .result import SigmoidFit
    from .runs import RunsFit, fit_runs, paired_differences, shared_compute
    from .target import ComputeTarget


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        # a submodule (rlcurves.plot, rlcurves.decide...), as an eager import made them all
        if not name.startswith("__") and importlib.util.find_spec(f"{__name__}.{name}"):
            return importlib.import_module(f".{name}", __name__)
        raise AttributeError(f"module 'rlcurves' has no attribute {name!r}")
    loaded = importlib.import_module(module, __name__)
    value = loaded if name in _MODULES else getattr(loaded, name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "Backtest",
    "BootstrapResult",
    "Calibration",
    "Comparison",
    "ComputeTarget",
    "Crossover",
    "DataRepairWarning",
    "Forecast",
    "IdentifiabilityWarning",
    "ModelComparison",
    "Monitor",
    "MonitorReport",
    "NotConvergedWarning",
    "Posterior",
    "PowerLawFit",
    "Prior",
    "ProfileResult",
    "RLCurvesError",
    "Race",
    "RaceReport",
    "RunsFit",
    "SigmoidFit",
    "__version__",
    "backtest",
    "calibrate",
    "compare",
    "compare_models",
    "datasets",
    "describe_log",
    "fit_power_law",
    "fit_runs",
    "fit_sigmoid",
    "fit_sigmoid_batch",
    "forecast",
    "inverse_sigmoid",
    "paired_differences",
    "plot_fits",
    "power_law",
    "read_log",
    "read_logs",
    "read_wandb_run",
    "shared_compute",
    "sigmoid",
    "warm_up",
]
