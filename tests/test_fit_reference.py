"""The exact solver against references nobody here wrote: NIST StRD Rat42 and drc's LL.4 fits."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import least_squares

from rlcurves import fit_sigmoid, sigmoid

DATA = Path(__file__).parent / "data"


def test_nist_rat42_certified_values():
    # y = b1 / (1 + exp(b2 - b3 x)) is the sigmoid in C = exp(x) with R0 = 0, A = b1, B = b3,
    # log C_mid = b2 / b3. C reaches e^79 ~ 2e34: the log-compute parametrization must cope.
    df = pd.read_csv(DATA / "nist_rat42.csv", comment="#")
    fit = fit_sigmoid(np.exp(df["x"]), df["y"], r0=0.0)
    b1, b2, b3 = fit.A, fit.B * np.log(fit.C_mid), fit.B
    assert fit.converged
    # NIST certifies 11 significant digits; 1e-8 relative is what a double-precision LM reaches
    # (GSL's own test uses 1e-7).
    np.testing.assert_allclose(
        [b1, b2, b3], [72.462237576, 2.6180768402, 0.067359200066], rtol=1e-8
    )
    np.testing.assert_allclose(fit.rss, 8.0565229338, rtol=1e-9)
    # Standard errors: b1 and b3 directly; b2 = B log C_mid by the delta method.
    cov = fit.cov
    m = np.log(fit.C_mid)
    var_b2 = (
        m**2 * cov.loc["B", "B"]
        + fit.B**2 * cov.loc["C_mid", "C_mid"] / fit.C_mid**2
        + 2 * fit.B * m * cov.loc["B", "C_mid"] / fit.C_mid
    )
    np.testing.assert_allclose(
        [fit.stderr["A"], np.sqrt(var_b2), fit.stderr["B"]],
        [1.7340283401, 8.8295217536e-02, 3.4465663377e-03],
        rtol=1e-6,
    )
    np.testing.assert_allclose(fit.noise_sd, 1.1587725499, rtol=1e-8)
    assert fit.dof == 6


# Least-squares optima from ../shared/data/README.md (drc's LL.4; A = c, R0 = d, B = b, C_mid = e).
DRC_CASES = [
    (
        "ryegrass.csv",
        None,
        "conc",
        "rootl",
        dict(
            B=(2.98222, 0.4584), A=(0.48141, 0.2095), R0=(7.79296, 0.1897), C_mid=(3.05796, 0.1858)
        ),
        5.40021,
    ),
    (
        "S_alba.csv",
        "Glyphosate",
        "dose",
        "dry_matter",
        dict(B=(2.7161, 0.716), A=(0.89183, 0.2013), R0=(3.87587, 0.1135), C_mid=(62.048, 7.15)),
        4.53744,
    ),
    (
        "S_alba.csv",
        "Bentazone",
        "dose",
        "dry_matter",
        dict(B=(5.1254, 1.018), A=(0.68175, 0.0879), R0=(3.80628, 0.1018), C_mid=(29.265, 2.07)),
        3.81050,
    ),
    (
        "lettuce.csv",
        None,
        "conc",
        "weight",
        dict(B=(1.3833, 0.867), A=(0.37218, 0.138), R0=(1.10107, 0.0722), C_mid=(8.607, 4.34)),
        0.207075,
    ),
]


@pytest.mark.parametrize(
    "filename,herbicide,xcol,ycol,expected,rss",
    DRC_CASES,
    ids=["ryegrass", "S_alba-glyphosate", "S_alba-bentazone", "lettuce"],
)
def test_drc_ll4_optima(filename, herbicide, xcol, ycol, expected, rss):
    df = pd.read_csv(DATA / filename)
    if herbicide is not None:
        df = df[df["herbicide"] == herbicide]
    # Decreasing curves (A < R0) and dose 0 (the curve's limit R0) are both legal input.
    fit = fit_sigmoid(xcol, ycol, data=df)
    assert fit.converged
    for name, (value, se) in expected.items():
        # the reference values are printed to 5 significant digits, SEs to 3-4
        np.testing.assert_allclose(fit.params[name], value, rtol=2e-4, err_msg=name)
        np.testing.assert_allclose(fit.stderr[name], se, rtol=2e-3, err_msg=name)
    np.testing.assert_allclose(fit.rss, rss, rtol=1e-5)


def test_drc_no_random_start_beats_exact_fit(rng):
    # lettuce (hormesis, a poor sigmoid) is the hard one: a multi-modal RSS surface.
    df = pd.read_csv(DATA / "lettuce.csv")
    x, y = df["conc"].to_numpy(), df["weight"].to_numpy()
    fit = fit_sigmoid(x, y)

    def resid(p):
        A, R0, lb, lm = p
        with np.errstate(all="ignore"):
            r = sigmoid(x, A, np.exp(lb), np.exp(lm), R0) - y
        return np.nan_to_num(r, nan=1e6, posinf=1e6, neginf=-1e6)

    best = np.inf
    for _ in range(200):
        p0 = [rng.uniform(0, 2), rng.uniform(0, 2), rng.uniform(-2, 3), rng.uniform(-3, 5)]
        best = min(best, 2 * least_squares(resid, p0, method="lm").cost)
    assert fit.rss <= best * (1 + 1e-9)
