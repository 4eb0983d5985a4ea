"""The one documented exception type of rlcurves, and the warning for fits that did not converge.

Every problem with a user's input (a missing column, NaN compute, too few points, an unreadable
log file) raises :class:`RLCurvesError`, a subclass of :class:`ValueError`, whose message names the
problem, the offending value or column and what to do instead. Catch it with
``except rlcurves.RLCurvesError`` (or ``except ValueError``).
"""

from __future__ import annotations


class RLCurvesError(ValueError):
    """Bad input to an rlcurves function: the message says what is wrong and how to fix it.

    Attributes
    ----------
    details : dict
        Structured facts behind the message (for example ``{"column": "reward", "found": [...]}``),
        so that programs can react without parsing text.

    Examples
    --------
    >>> try:
    ...     rlcurves.fit_sigmoid([1, 2, 3], [0.1, 0.2])
    ... except rlcurves.RLCurvesError as err:
    ...     print(err)
    compute and reward have different lengths (3 and 2); pass one reward per compute value.
    """

    def __init__(self, message: str, **details: object) -> None:
        super().__init__(message)
        self.details = details


class NotConvergedWarning(UserWarning):
    """A fit returned, but its optimum is not trustworthy (see ``SigmoidFit.message``).

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error", rlcurves.NotConvergedWarning)  # a failed fit raises
    ...     fit = rlcurves.fit_sigmoid([1, 2, 4, 8, 16, 32], [0.1, 0.2, 0.4, 0.5, 0.55, 0.56])
    ...
    >>> fit.converged
    True
    """


class IdentifiabilityWarning(UserWarning):
    """A fit converged, but the data barely determine some parameter (see ``SigmoidFit.message``).

    Typical cause: a run that stops before its midpoint, where A and C_mid trade off. Standard
    errors are then large; prefer profile or posterior intervals to the symmetric ones.

    Examples
    --------
    >>> import warnings
    >>> df = rlcurves.datasets.load_example("recipe_loo_batch_16", compute="tokens_total")
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     fit = rlcurves.fit_sigmoid("compute", "reward", data=df)
    ...
    >>> [w.category.__name__ for w in caught]
    ['IdentifiabilityWarning']
    """


class DataRepairWarning(UserWarning):
    """``read_log`` changed or dropped data it could not trust (a clock glitch): the message names
    the rows, and ``attrs["cleaning"]`` of the frame holds the details.

    Examples
    --------
    >>> import warnings, pandas as pd
    >>> hours = [10, 20, 30, 200, 40, 50, 60, 70]  # one stray value, then back on track
    >>> reward = [0.1, 0.2, 0.3, 0.35, 0.4, 0.42, 0.43, 0.44]
    >>> log = pd.DataFrame({"step": range(1, 9), "reward": reward, "gpu_hours": hours})
    >>> log.to_csv("run.csv")
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     df = rlcurves.read_log("run.csv")
    ...
    >>> [w.category.__name__ for w in caught], len(df)
    (['DataRepairWarning'], 7)
    """
