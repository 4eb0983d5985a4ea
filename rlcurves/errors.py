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
    """

    def __init__(self, message: str, **details: object) -> None:
        super().__init__(message)
        self.details = details


class NotConvergedWarning(UserWarning):
    """A fit returned, but its optimum is not trustworthy (see ``SigmoidFit.message``)."""


class IdentifiabilityWarning(UserWarning):
    """A fit converged, but the data barely determine some parameter (see ``SigmoidFit.message``).

    Typical cause: a run that stops before its midpoint, where A and C_mid trade off. Standard
    errors are then large; prefer profile or posterior intervals to the symmetric ones.
    """


class DataRepairWarning(UserWarning):
    """``read_log`` changed or dropped data it could not trust (a clock glitch): the message names
    the rows, and ``attrs["cleaning"]`` of the frame holds the details."""
