"""lmfit interoperability: the sigmoid as a self-starting ``lmfit.Model``.

``SigmoidModel().guess(reward, compute=compute)`` returns lmfit Parameters set at the exact
least-squares optimum (from :func:`rlcurves.fit_sigmoid`), with hints (B > 0, C_mid > 0, A and R0
in [0, 1] for pass rates), so lmfit users keep their workflow (constraints, ``fit_report``,
``conf_interval``) without hand-picked starting values.
"""

from __future__ import annotations

import lmfit
import numpy as np

from .model import sigmoid


def _sigmoid(compute, A, B, C_mid, R0):
    return sigmoid(compute, A, B, C_mid, R0)


class SigmoidModel(lmfit.Model):
    """``R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)`` as an lmfit Model with an exact ``guess``.

    Examples
    --------
    >>> model = SigmoidModel()                                   # doctest: +SKIP
    >>> params = model.guess(reward, compute=compute)            # doctest: +SKIP
    >>> result = model.fit(reward, params, compute=compute)      # doctest: +SKIP
    >>> print(result.fit_report())                               # doctest: +SKIP
    """

    def __init__(self, **kwargs):
        kwargs.setdefault("independent_vars", ["compute"])
        super().__init__(_sigmoid, **kwargs)
        self.set_param_hint("B", min=0.0)
        self.set_param_hint("C_mid", min=0.0)

    def guess(self, data, compute=None, r0=None, **kwargs):
        """Parameters at the exact least-squares optimum of ``data`` against ``compute``."""
        from .fit import fit_sigmoid

        if compute is None:
            compute = kwargs.pop("x", None)
        fit = fit_sigmoid(compute, data, r0=r0)
        params = self.make_params(A=fit.A, B=fit.B, C_mid=fit.C_mid, R0=fit.R0)
        lo, hi = fit.bounds.A
        params["A"].set(min=lo, max=hi)
        lo, hi = fit.bounds.R0
        params["R0"].set(min=lo, max=hi)
        if r0 is not None:
            params["R0"].set(value=r0, vary=False)
        return lmfit.models.update_param_vals(params, self.prefix, **kwargs)


def fit_with_lmfit(compute, reward, sigma, window, r0, bounds, **fit_kws):
    """Fit through lmfit's Model.fit, started at the exact solution; returns params, ok, note."""
    model = SigmoidModel()
    c, r = compute[window], reward[window]
    params = model.guess(r, compute=c, r0=r0)
    params["A"].set(min=bounds.A[0], max=bounds.A[1])
    if r0 is None:
        params["R0"].set(min=bounds.R0[0], max=bounds.R0[1])
    weights = None if sigma is None else 1.0 / sigma[window]
    result = model.fit(r, params, compute=c, weights=weights, **fit_kws)
    values = {k: float(result.params[k].value) for k in ("A", "B", "C_mid", "R0")}
    ok = bool(result.success) and np.all(np.isfinite(list(values.values())))
    return values, bool(ok), "" if ok else f"lmfit: {result.message}"
