"""Property: repairing restarted clocks gives back the clock of the run as if never restarted."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rlcurves.logs.compute import repair_restarts


@st.composite
def restarted_clocks(draw):
    """(true cumulative clock per step, the clock as logged by restarted processes)."""
    n = draw(st.integers(min_value=10, max_value=120))
    # per-step durations in [1, 2]: a restarted clock's first value (<= 2) is then below the
    # last value of a segment of 3 or more steps (>= 3), so every restart shows as a drop
    durations = np.array(draw(st.lists(st.floats(1.0, 2.0), min_size=n, max_size=n)))
    clock = np.cumsum(durations)
    max_restarts = max(2, n // 10)  # more would read as "not cumulative" and be refused
    candidates = list(range(3, n - 2))
    starts: list[int] = []
    for start in sorted(draw(st.sets(st.sampled_from(candidates), max_size=max_restarts))):
        if not starts or start - starts[-1] >= 3:  # every segment 3 steps or more
            starts.append(start)
    logged = clock.copy()
    for begin, end in zip(starts, [*starts[1:], n], strict=False):
        logged[begin:end] = clock[begin:end] - clock[begin - 1]
    return clock, logged, starts


@settings(max_examples=100)  # the rest is the profile's (conftest.py)
@given(restarted_clocks())
def test_repair_recovers_the_uninterrupted_clock(case):
    clock, logged, starts = case
    steps = np.arange(1, len(clock) + 1, dtype=float)
    for step_column in (steps, None):  # in step order, and in write order without steps
        repaired, report = repair_restarts(logged, step_column, "test", "'clock'")
        np.testing.assert_allclose(repaired, clock, rtol=1e-12)
        assert report["restarts"] == len(starts)
        assert report["rows"] == (len(clock) - starts[0] if starts else 0)


@settings(max_examples=100)  # the rest is the profile's (conftest.py)
@given(restarted_clocks(), st.randoms(use_true_random=False))
def test_repair_does_not_depend_on_write_order_when_steps_are_known(case, rnd):
    clock, logged, _ = case
    steps = np.arange(1, len(clock) + 1, dtype=float)
    order = list(range(len(clock)))
    rnd.shuffle(order)
    repaired, _ = repair_restarts(logged[order], steps[order], "test", "'clock'")
    np.testing.assert_allclose(repaired, clock[order], rtol=1e-12)


# --- point 1 of issue 17: a small clock glitch is not a restart ---------------------------------

DATA = __import__("pathlib").Path(__file__).parent / "data" / "logs"


def test_point1_swapped_pair_is_a_glitch_not_a_restart():
    import warnings

    import pytest

    from rlcurves import fit_sigmoid
    from rlcurves.errors import DataRepairWarning
    from rlcurves.logs import describe_log, read_log

    with pytest.warns(DataRepairWarning, match=r"step 5000, step 5100"):
        df = read_log(DATA / "glitch" / "swapped_pair.csv")
    # nothing shifted: every kept row has the compute it was logged with
    np.testing.assert_array_equal(df["compute"], df["gpu_hours"])
    assert df.loc[df["step"] == 5200, "compute"].item() == 10_400
    assert 5000 not in set(df["step"]) and 5100 not in set(df["step"])
    entry = next(e for e in df.attrs["cleaning"] if e["step"] == "drop_compute_glitch")
    assert entry["rows"] == 2 and entry["glitches"][0]["values"] == [3000.0, 2000.0]
    assert "drop_compute_glitch: 2 rows" in describe_log(df)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_sigmoid("compute", "reward", data=df)
    assert abs(fit.A - 0.609) < 0.01  # the clean file gives 0.609; read as a restart 0.598


def _steps_clock(n=20, rate=200.0):
    steps = np.arange(n, dtype=float)
    return steps, steps * rate


def test_point1_adjacent_swap_spike_and_real_restart_are_told_apart():
    steps, clock = _steps_clock()
    swapped = clock.copy()
    swapped[[10, 11]] = swapped[[11, 10]]
    for order in (steps, None):
        repaired, report = repair_restarts(swapped, order, "t", "'c'")
        assert report["restarts"] == 0 and report["glitches"][0]["kind"] == "out of order"
        assert np.isnan(repaired[[10, 11]]).all()
        np.testing.assert_array_equal(np.delete(repaired, [10, 11]), np.delete(clock, [10, 11]))
    spike = clock.copy()
    spike[10] = 30_000.0
    repaired, report = repair_restarts(spike, steps, "t", "'c'")
    assert report["restarts"] == 0 and report["glitches"][0]["where"] == ["step 10"]
    np.testing.assert_array_equal(np.delete(repaired, 10), np.delete(clock, 10))
    # a real restart (a new process's clock from ~0, continuing) is still offset
    restarted = clock.copy()
    restarted[12:] = clock[12:] - clock[11]
    repaired, report = repair_restarts(restarted, steps, "t", "'c'")
    assert report["restarts"] == 1 and report["glitches"] == []
    np.testing.assert_allclose(repaired, clock)
