import os

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture
def paper_curve(rng):
    """A noisy curve from the paper's 8B parameters (C_mid 2542, B 1.92, A 0.61), R0 = 0.3."""
    from rlcurves import sigmoid

    compute = np.linspace(0, 16000, 81)
    truth = dict(A=0.61, B=1.92, C_mid=2542.0, R0=0.30)
    reward = sigmoid(compute, **truth) + rng.normal(0, 0.008, compute.size)
    return compute, reward, truth


@pytest.fixture(scope="session")
def init_dir(tmp_path_factory):
    """A tiny warmed-up policy for the trainer tests, built once per session."""
    import torch

    from recipe.model import warm_up

    torch.set_num_threads(1)
    return warm_up(tmp_path_factory.mktemp("init"), steps=30, seed=0)
