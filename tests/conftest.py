import os

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
os.environ.setdefault("MPLBACKEND", "Agg")

# Hypothesis profiles. Tests set only their example budget (max_examples); everything else comes
# from here. `ci` (chosen when CI is set, as .ci/run does): the same examples on every run and
# machine, no example database. `dev` (the default elsewhere): random examples and the database
# that replays a failure; `pytest --hypothesis-seed N` repeats a dev run. Pick one by hand with
# `pytest --hypothesis-profile ci|dev`. (.venv-vllm, which runs only the engine tests, has no
# Hypothesis.)
try:
    from hypothesis import HealthCheck, settings
except ImportError:  # pragma: no cover
    settings = None
if settings is not None:
    settings.register_profile(
        "ci",
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("ci" if os.environ.get("CI") else "dev")


def _pin_hypothesis_local_constants() -> None:
    """Keep Hypothesis's examples independent of what ran before in the process.

    Hypothesis (6.131 and later) draws, now and then, a literal taken from the source of every
    project module already imported (not site-packages, not test files) instead of a random
    value. Which modules those are depends on the tests that ran before, so a derandomized test
    drew other curves after a CLI test had imported ``rlcurves.cli`` (issue 38). Hypothesis has
    no setting for this; this pins that pool to empty, so a test's examples are a function of
    the test, the profile and the seed only. If a Hypothesis release moves the pool,
    ``test_hypothesis_examples_do_not_depend_on_imported_modules`` fails and says so.
    """
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - an older Hypothesis has no such pool
        return
    if hasattr(providers, "_get_local_constants") and hasattr(providers, "Constants"):
        empty = providers.Constants()
        providers._get_local_constants = lambda: empty


_pin_hypothesis_local_constants()


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
