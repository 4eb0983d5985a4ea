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


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(restarted_clocks())
def test_repair_recovers_the_uninterrupted_clock(case):
    clock, logged, starts = case
    steps = np.arange(1, len(clock) + 1, dtype=float)
    for step_column in (steps, None):  # in step order, and in write order without steps
        repaired, report = repair_restarts(logged, step_column, "test", "'clock'")
        np.testing.assert_allclose(repaired, clock, rtol=1e-12)
        assert report["restarts"] == len(starts)
        assert report["rows"] == (len(clock) - starts[0] if starts else 0)


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(restarted_clocks(), st.randoms(use_true_random=False))
def test_repair_does_not_depend_on_write_order_when_steps_are_known(case, rnd):
    clock, logged, _ = case
    steps = np.arange(1, len(clock) + 1, dtype=float)
    order = list(range(len(clock)))
    rnd.shuffle(order)
    repaired, _ = repair_restarts(logged[order], steps[order], "test", "'clock'")
    np.testing.assert_allclose(repaired, clock[order], rtol=1e-12)
