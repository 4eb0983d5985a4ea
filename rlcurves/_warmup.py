"""The numba kernels' first compilation: said before it happens, and done ahead by a warm-up.

The solver's kernels (:mod:`rlcurves._kernels`) compile on first use into numba's on-disk cache;
after that every process loads them in about a second. On a fresh install the first fit therefore
waits while they compile (``benchmarks/first_fit.py`` on 2 idle cores: 13 s, the first bootstrap
4 s and the first forecast, which compiles the bounded polish and the power law's search, 11 s
more; an earlier run at load 7-12 took 65 s for the first fit), which a notebook user would
otherwise sit through without a word. Two remedies:

- the first use of the solver (the first fit; ``import rlcurves`` loads nothing compiled) prints
  one line to stderr when the cache is cold, saying what the wait is and what measured it;
- :func:`rlcurves.warm_up` compiles every kernel a session uses (fit, batch fit, bootstrap,
  forecast, posterior, the bounded polish, the sweep's exact risk) into the cache ahead of
  time; ``make`` runs it at install (``python -c "import rlcurves; rlcurves.warm_up()"``).
  Measured in ``benchmarks/first_fit.py``.
"""

from __future__ import annotations

import os
import sys
import time

_NOTICED: list[bool] = []


def cache_is_cold() -> bool:
    """True when the solver's main kernel has no entry in numba's on-disk cache (a fresh install
    or a cleared cache): the first fit will compile the kernels."""
    from . import _kernels as K

    try:
        path = K.fit_one._cache._cache_file._index_path
    except AttributeError:  # no on-disk cache (read-only install: warned at import) or new numba
        return False
    return not os.path.exists(path)


def notice_if_cold() -> None:
    """One line on stderr, once per process, when the first fit is about to compile."""
    if _NOTICED:
        return
    _NOTICED.append(True)
    if cache_is_cold():
        sys.stderr.write(
            "rlcurves: first use after install: compiling the solver's numba kernels into their "
            "cache, once (benchmarks/first_fit.py timed the first fit at 13 s on 2 idle cores "
            "and 65 s on 2 busy ones, the first bootstrap 4 s and the first forecast 11 s more; "
            "later sessions load them in about a second). To compile them ahead: python -c "
            '"import rlcurves; rlcurves.warm_up()"\n'
        )


def warm_up(verbose: bool = True) -> float:
    """Compile (or load) every kernel a session uses; returns the seconds it took.

    Examples
    --------
    >>> seconds = rlcurves.warm_up(verbose=False)  # compiles the kernels once; cached on disk
    >>> seconds >= 0
    True
    """
    import warnings

    import numpy as np

    from ._trf import bounded_polish
    from .bayes import posterior
    from .bootstrap import bootstrap
    from .decide import stop_set
    from .fit import fit_sigmoid, fit_sigmoid_batch
    from .forecast import forecast
    from .model import sigmoid

    t0 = time.perf_counter()
    c = np.linspace(0.0, 16000.0, 41)
    y = sigmoid(c, 0.61, 1.9, 2500.0, 0.3) + np.random.default_rng(0).normal(0, 0.005, c.size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_sigmoid(c, y, max_compute=8000.0)
        fit_sigmoid(c, y, r0=0.3, max_compute=8000.0)
        fit_sigmoid_batch(c, np.stack([y, y[::-1]]))
        bootstrap(fit, 20, kind="ar1", seed=0, progress=False)
        bootstrap(fit, 20, kind="residual", seed=0, progress=False)
        forecast(fit, 16000.0, seed=0, progress=False, n=20)
        posterior(fit, seed=0, progress=False, max_steps=200, target_ess=10)
        # the compiled bounded polish (a step-shaped fit of a few points takes it)
        x = np.log(np.array([1.0, 2.0, 4.0, 8.0, 16.0]))
        bounded_polish(
            x, np.array([0.1, 0.1, 0.5, 0.5, 0.5]), np.ones(5), None,
            np.array([0.5, 0.1, 1.0, 1.5]), np.array([0.0, 0.0, -5.0, -10.0]),
            np.array([1.0, 1.0, 8.0, 15.0]),
        )  # fmt: skip
        # the sweep's exact risk (Race's stops)
        draws = np.random.default_rng(0).normal(0.5, 0.05, (3, 50))
        stop_set({"a": draws[0], "b": draws[1], "c": draws[2]}, ["a", "b"], alpha=0.5)
    seconds = time.perf_counter() - t0
    if verbose:
        print(f"rlcurves: kernels compiled or loaded in {seconds:.1f} s")
    return seconds
