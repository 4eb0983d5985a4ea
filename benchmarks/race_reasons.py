"""Why Race keeps the runs that end far behind: the reasons its reports give, on every corpus sweep.

Issue 43 asks that runs ending more than 0.05 behind their sweep's winner be stopped by 40% of
the budget. This replays every sweep of the corpus (``benchmarks.race_corpus``'s protocol: cut at
the sweep's common budget, a report every 5% of it, forecasts calibrated leave-one-family-out) at
Race's defaults and, for each far-behind run still running at a report from 25% to 40% of the
budget, sorts the reason its row gives into one of a few kinds: the forecast does not exclude the
leader's (p(beats the baseline) above the stop threshold), the hold (a stop advice must hold on
consecutive refits), too few evaluations (``min_points``), the sweep's alpha spent, the
identification guard, no rival to compare with, the run leads, or on track. The counts say which
rule binds first, hence what would let Race stop dead runs earlier.

Run: python -m benchmarks.race_reasons [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections import Counter
from pathlib import Path

from tqdm.auto import tqdm

RESULTS = Path(__file__).parent / "results"
FROM, UPTO = 0.25, 0.40  # the reports read: from a quarter of the budget to issue 43's 40%
# (kind, words of the reason that mark it), tried in order
KINDS = (
    ("the sweep's alpha spent", ("alpha left",)),
    ("the hold", ("must hold on",)),
    ("too few evaluations (min_points)", ("(min_points)",)),
    ("the forecast does not exclude the leader's", ("not decided yet",)),
    ("the identification guard", ("does not determine the ceiling",)),
    ("no rival to compare with", ("nothing to compare with",)),
    ("it leads", ("most likely the best",)),
    ("on track", (">= p_on_track",)),
    ("too early (min_fraction)", ("(min_fraction)",)),
)


def kind_of(reason: str) -> str:
    """The kind of a report row's reason (``"other"`` when none of :data:`KINDS` matches)."""
    return next((k for k, words in KINDS if any(w in reason for w in words)), "other")


def main(argv: list[str] | None = None) -> dict:
    from benchmarks.race_corpus import DEFAULT, far_behind, fold_calibrations, load_sweeps
    from benchmarks.race_replay import RUNGS, replay_race

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(RESULTS / "race_reasons.json"), help="JSON results")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    sweeps = load_sweeps()
    cals = fold_calibrations(list(dict.fromkeys(s.family for s in sweeps)))
    counts: dict[str, Counter] = {"validation": Counter(), "training reward": Counter()}
    runs: dict[str, int] = {"validation": 0, "training reward": 0}
    for s in tqdm(sweeps, desc="sweeps"):
        far = set(far_behind(s))
        runs[s.kind] += len(far)
        reports = []
        alpha, guard, confirm, points = DEFAULT
        kws = {"calibration": cals[s.family], "alpha": alpha, "require_identified": guard,
               "confirm": confirm, "min_points": points}  # fmt: skip
        replay_race(s, kws, {}, None, on_report=reports.append)
        for i, rep in enumerate(reports):  # one report per rung: at (i + 1) / RUNGS of the budget
            if not FROM - 1e-9 <= (i + 1) / RUNGS <= UPTO + 1e-9:
                continue
            t = rep.table
            for reason in t.loc[t["run"].isin(far) & (t["status"] == "running"), "reason"]:
                counts[s.kind][kind_of(str(reason))] += 1
    res = {
        "fractions": [FROM, UPTO],
        "far_behind_runs": runs,
        "reasons": {k: dict(c.most_common()) for k, c in counts.items()},
        "seconds": time.perf_counter() - t0,
    }
    print(table(res))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=2))
    print(f"written {args.out}")
    return res


def table(res: dict) -> str:
    """The reasons as the race page shows them: one row per kind, reports per kind of metric."""
    kinds = [k for k, _ in KINDS] + ["other"]
    head = "| why a far-behind run was kept (reports at 25-40% of the budget) | validation | " \
        "training reward |"  # fmt: skip
    lines = [head, "|---|---|---|"]
    for k in kinds:
        v = res["reasons"]["validation"].get(k, 0)
        t = res["reasons"]["training reward"].get(k, 0)
        if v or t:
            lines.append(f"| {k} | {v} | {t} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
