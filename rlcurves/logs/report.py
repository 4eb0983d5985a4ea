"""A readable account of what read_log chose and cleaned, from a frame's ``attrs``."""

from __future__ import annotations

import pandas as pd

from ..errors import RLCurvesError


def describe_log(df: pd.DataFrame) -> str:
    """What :func:`read_log` read, chose and cleaned, one block per run (for a CLI or a notebook).

    Parameters
    ----------
    df : DataFrame
        A frame returned by :func:`read_log` / :func:`read_logs` (its ``attrs`` are read).

    Returns
    -------
    str
        Lines such as ``reward: 'val_pass_rate' (detected ...)`` and one line per cleaning step
        that changed something.

    Raises
    ------
    RLCurvesError
        A frame that ``read_log`` did not return (no ``attrs`` to describe).

    Examples
    --------
    >>> df = rlcurves.read_log("example:recipe_loo_scalerl")
    >>> print(rlcurves.describe_log(df).splitlines()[2])
      compute [GPU-hours]: GPU-hours column 'gpu_hours'
    """
    if not isinstance(df, pd.DataFrame):  # a path, say: describe_log(read_log(path))
        raise RLCurvesError(
            f"describe_log takes the frame rlcurves.read_log returned, got "
            f"{type(df).__name__} {df!r}; e.g. describe_log(rlcurves.read_log(path))"
        )
    runs = df.attrs.get("runs")
    if not runs:
        raise RLCurvesError(
            "this frame carries no read_log attrs (attrs['runs'] is missing); describe_log "
            "explains frames returned by rlcurves.read_log.",
        )
    blocks = []
    for name, attrs in runs.items():
        compute = attrs["compute"]
        lines = [
            f"run {name!r}: {attrs['format']} log {attrs['source']} ({attrs['format_how']})",
            f"  reward: {attrs['reward']['column']!r} ({attrs['reward']['how']})",
            f"  compute [{compute['unit']}]: {compute['how']}",
            f"  kept {attrs['rows_kept']} of {attrs['rows_read']} records"
            + (f", ordered by {attrs['step']!r}" if attrs["step"] else ""),
        ]
        for entry in attrs["cleaning"]:
            if entry["rows"]:
                lines.append(f"  - {entry['step']}: {entry['rows']} rows: {entry['detail']}")
        lines.extend(f"  note: {note}" for note in attrs["notes"])
        blocks.append("\n".join(lines))
    return "\n".join(blocks)
