"""A toy sweep for the race tests: four recipes with sigmoid curves (ScaleRL form) and noise.

- ``late``: the late bloomer, slow early (C_mid at 45% of the budget), best ceiling (0.85);
- ``fast``: fast early (C_mid at 10%), saturates at 0.70;
- ``mid``: between the two, 0.75;
- ``loser``: fast early too, saturates at 0.45: a clear loser.

At a quarter of the budget ``late`` is the worst of the four (0.21 against ``loser``'s 0.36), so
successive halving stops it; at the budget it is the best by 0.10.
"""

from __future__ import annotations

import numpy as np

from rlcurves import sigmoid

BUDGET = 40
R0 = 0.1
NOISE = 0.01
RECIPES = {
    "late": dict(A=0.85, B=3.0, C_mid=18.0),
    "fast": dict(A=0.70, B=2.0, C_mid=4.0),
    "mid": dict(A=0.75, B=2.5, C_mid=8.0),
    "loser": dict(A=0.45, B=2.0, C_mid=6.0),
}


def reward(name: str, step, seed: int = 0) -> np.ndarray:
    """Noisy evaluations of recipe ``name`` at ``step`` (one seed: a fixed noise stream)."""
    step = np.atleast_1d(np.asarray(step, dtype=float))
    rng = np.random.default_rng([seed, list(RECIPES).index(name)])
    noise = rng.normal(0, NOISE, BUDGET + 1)
    return sigmoid(step, R0=R0, **RECIPES[name]) + noise[step.astype(int)]
