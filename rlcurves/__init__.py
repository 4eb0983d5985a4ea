"""rlcurves: fit, forecast and compare RL compute-scaling curves.

The ScaleRL sigmoid ``R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)`` (Khatri et al., 2025): a ceiling
A, an efficiency exponent B and a midpoint compute C_mid. Fit it early, forecast the finish, compare
recipe variants by A and B.
"""

from . import _warmup, datasets
from ._warmup import warm_up
from .backtest import Backtest, backtest
from .bayes import Posterior, Prior
from .bootstrap import BootstrapResult
from .calibrate import Calibration, calibrate
from .compare import Comparison, Crossover, compare
from .errors import DataRepairWarning, IdentifiabilityWarning, NotConvergedWarning, RLCurvesError
from .fit import fit_sigmoid, fit_sigmoid_batch
from .forecast import Forecast, forecast
from .logs import describe_log, read_log, read_logs, read_wandb_run
from .model import inverse_sigmoid, power_law, sigmoid
from .monitor import Monitor, MonitorReport
from .plot import plot_fits
from .powerlaw import ModelComparison, PowerLawFit, compare_models, fit_power_law
from .profile import ProfileResult
from .result import SigmoidFit
from .runs import RunsFit, fit_runs, paired_differences, shared_compute
from .target import ComputeTarget

__version__ = "0.1.0"

# a fresh install's first fit compiles the numba kernels (seconds): say so before it happens
_warmup.notice_if_cold()

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
