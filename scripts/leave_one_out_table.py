"""Print the README's leave-one-out comparison table: every bundled run against its baseline.

Fitted on generated tokens, 90% intervals and verdicts from :func:`rlcurves.compare` (its default
draws). Run: python scripts/leave_one_out_table.py
"""

from __future__ import annotations

import warnings

from rlcurves import compare, fit_sigmoid
from rlcurves.datasets import list_examples, load_example


def main() -> None:
    names = list_examples(group="recipe_loo")
    data = {n: load_example(n, compute="tokens_total") for n in names}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fits = {n: fit_sigmoid("compute", "reward", data=df, label=n) for n, df in data.items()}
    print("| run | A [90%] | B [90%] | ceiling | B (steepness) | 90% of gain |")
    print("|---|---|---|---|---|---|")
    for name, df in data.items():
        base = df.attrs.get("baseline")
        if base is None or base not in fits:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cmp = compare({base: fits[base], name: fits[name]}, baseline=base)
        row = cmp.table.set_index("variant").loc[name]
        v = cmp.verdicts().iloc[0]
        reach = cmp.reach().iloc[0]["reach"]
        steep = {"higher": "steeper", "lower": "shallower"}.get(v["efficiency"], v["efficiency"])
        print(
            f"| `{name}` vs `{base}` | {row['A']:.2f} [{row['A_lower']:.2f}, {row['A_upper']:.2f}]"
            f" | {row['B']:.2f} [{row['B_lower']:.2f}, {row['B_upper']:.2f}] | {v['ceiling']} "
            f"(dA {row['delta_A_lower']:+.2f} to {row['delta_A_upper']:+.2f}) | {steep} "
            f"(p = {row['p_B_higher']:.2f}) | {reach} |"
        )


if __name__ == "__main__":
    main()
