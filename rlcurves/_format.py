"""How compute values print: thousands separators for GPU-hours, digits for tiny or huge axes."""

from __future__ import annotations

import math


def format_compute(value: float) -> str:
    """``2,542`` for GPU-hours in the usual range; ``0.121`` or ``3.2e+21`` for CPU-demo or FLOPs
    axes (where ``,.0f`` would print 0 or 22 digits); ``inf`` as is."""
    value = float(value)
    if not math.isfinite(value):
        return str(value)
    return f"{value:,.0f}" if value == 0 or 100 <= abs(value) < 1e7 else f"{value:.3g}"
