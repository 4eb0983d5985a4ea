"""HTML renderings of results, for Jupyter (``_repr_html_``) and the shareable report.

Plain HTML with inline styles only: no scripts, no external resources, so a page opens offline
and a notebook renders it as is. Figures are embedded as base64 PNG data URIs.
"""

from __future__ import annotations

import base64
import html
import io
import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ._format import format_compute

if TYPE_CHECKING:
    from .compare import Comparison
    from .forecast import Forecast
    from .monitor import MonitorReport
    from .result import SigmoidFit

ADVICE_COLORS = {
    "too early to tell": "#6b6b6b",
    "continue": "#0072B2",
    "on track": "#009E73",
    "unlikely to beat the baseline": "#D55E00",
    "unlikely to reach the target": "#D55E00",
    "peaked": "#E69F00",
}
_TABLE = "border-collapse:collapse;font-size:0.9em;margin:0.4em 0"
_CELL = "border:1px solid #ccc;padding:2px 8px;text-align:right"
_HEAD = "border:1px solid #ccc;padding:2px 8px;background:#f0f0f0;text-align:center"


def esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


class Html(str):
    """A table cell that is HTML already (not escaped again)."""


def interval_cell(value: float, lower: float, upper: float, digits: int = 3) -> Html:
    """A value over its interval in smaller type: a narrow cell that wraps, not a wide row."""
    if not all(map(math.isfinite, (value, lower, upper))):
        return Html(number(value, digits))
    return Html(
        f"{number(value, digits)}<br><span style='font-size:0.85em;color:#555;"
        f"white-space:nowrap'>[{number(lower, digits)}, {number(upper, digits)}]</span>"
    )


def number(v: Any, digits: int = 4) -> str:
    """A cell value: floats to ``digits`` significant digits, NaN as an empty cell."""
    if isinstance(v, Html):
        return v
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (float, np.floating)):
        if math.isnan(v):
            return ""
        if math.isinf(v):
            return "never" if v > 0 else "-inf"
        return f"{v:.{digits}g}"
    return esc(v)


def table(rows: list[list[Any]], header: list[str] | None = None, digits: int = 4) -> str:
    """An HTML table from a list of rows."""
    out = [f'<table style="{_TABLE}">']
    if header:
        out.append("<tr>" + "".join(f'<th style="{_HEAD}">{esc(h)}</th>' for h in header) + "</tr>")
    for row in rows:
        cells = "".join(f'<td style="{_CELL}">{number(v, digits)}</td>' for v in row)
        out.append(f"<tr>{cells}</tr>")
    out.append("</table>")
    return "".join(out)


def frame_table(df: pd.DataFrame, digits: int = 4) -> str:
    """An HTML table of a DataFrame (index dropped)."""
    return table(df.to_numpy(dtype=object).tolist(), [str(c) for c in df.columns], digits)


def figure_img(fig, *, alt: str, dpi: int = 110, close: bool = True) -> str:
    """A matplotlib figure as an ``<img>`` with a base64 PNG data URI."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    if close:
        import matplotlib.pyplot as plt

        plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return (
        f'<img alt="{esc(alt)}" src="data:image/png;base64,{data}" '
        'style="max-width:100%;height:auto">'
    )


def fit_html(fit: SigmoidFit) -> str:
    """A SigmoidFit as a small table: parameters with errors, fit statistics and the message."""
    rows = []
    for name in ("A", "B", "C_mid", "R0"):
        value, err = fit.params[name], fit.stderr[name]
        if name == "R0" and fit.r0_fixed is not None:
            shown = "fixed"
        elif math.isfinite(err):
            shown = f"{err:.3g}"
        else:
            shown = "not determined"
        rows.append([name, value, shown])
    state = "converged" if fit.converged else "NOT converged"
    title = f"Sigmoid fit{': ' + fit.label if fit.label else ''}"
    return (
        f'<div class="rlcurves-fit"><b>{esc(title)}</b> '
        f"<span style='color:#555'>R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B), {fit.method}, "
        f"{fit.n} points, {state}, residual sd {fit.noise_sd:.3g}</span>"
        + table(rows, ["parameter", "value", "std. error"])
        + f"<div style='font-size:0.85em;color:#333'>{esc(fit.message)}</div></div>"
    )


def forecast_html(fc: Forecast) -> str:
    """A Forecast as a table: compute, point forecast, curve and prediction intervals."""
    df = fc.to_frame()
    if len(df) > 12:  # a band on a grid: show a readable subset
        df = df.iloc[np.unique(np.linspace(0, len(df) - 1, 12).round().astype(int))]
    rows = [
        [format_compute(r.at), r.mean, r.lower, r.upper, r.prediction_lower, r.prediction_upper]
        for r in df.itertuples()
    ]
    head = ["compute", "forecast", "curve lower", "curve upper", "pred. lower", "pred. upper"]
    return (
        f'<div class="rlcurves-forecast"><b>Forecast</b> '
        f"<span style='color:#555'>{fc.level:.0%} intervals ({esc(fc.method)}): curve = where "
        "the mean reward will be; prediction = one evaluation</span>" + table(rows, head) + "</div>"
    )


def comparison_html(cmp: Comparison) -> str:
    """A Comparison: its table (each estimate over its interval, so that it fits a page) and
    the verdict of each variant against the baseline."""
    verdicts = "".join(f"<li>{esc(t)}</li>" for t in cmp.verdicts()["text"])
    t = cmp.table
    pct = f"{cmp.level:.0%}"

    def cells(row, name: str, digits: int = 3):
        lo, hi = row.get(f"{name}_lower", math.nan), row.get(f"{name}_upper", math.nan)
        return interval_cell(float(row[name]), float(lo), float(hi), digits)

    columns = [  # (header, the table's column it shows, the cell)
        ("variant", "variant", lambda r: r["variant"]),
        (f"A [{pct}]", "A", lambda r: cells(r, "A")),
        (f"B [{pct}]", "B", lambda r: cells(r, "B")),
        (f"C_mid [{pct}]", "C_mid", lambda r: cells(r, "C_mid")),
        (f"delta A [{pct}]", "delta_A", lambda r: cells(r, "delta_A")),
        ("p(A higher)", "p_A_higher", lambda r: r["p_A_higher"]),
        ("p(B higher)", "p_B_higher", lambda r: r["p_B_higher"]),
        (f"C90 [{pct}]", "C90", lambda r: cells(r, "C90")),
        ("p(sooner)", "p_sooner", lambda r: r["p_sooner"]),
        ("basis", "basis", lambda r: r["basis"]),
    ]
    columns = [(h, f) for h, col, f in columns if col in t.columns]
    rows = [[f(r) for _, f in columns] for _, r in t.iterrows()]
    return (
        f'<div class="rlcurves-comparison"><b>Comparison</b> '
        f"<span style='color:#555'>baseline {esc(cmp.baseline)}, {cmp.level:.0%} intervals from "
        f"{cmp.n_samples} {esc(cmp.method)} draws per variant</span>"
        + table(rows, [h for h, _ in columns], digits=3)
        + f"<ul style='font-size:0.9em'>{verdicts}</ul></div>"
    )


def advice_badge(advice: str) -> str:
    color = ADVICE_COLORS.get(advice, "#333")
    return (
        f'<span style="background:{color};color:white;padding:2px 8px;border-radius:4px;'
        f'font-weight:bold">{esc(advice.upper())}</span>'
    )


def monitor_report_html(report: MonitorReport, *, figure: bool = True) -> str:
    """A MonitorReport: the advice as a badge, its reason, the numbers and (optionally) the plot."""
    rows = [
        ["evaluations", report.n_points],
        ["compute", f"{format_compute(report.compute)} of {format_compute(report.budget)} "
                    f"({report.fraction:.0%})"],
    ]  # fmt: skip
    if report.forecast is not None:
        rows.append([
            f"at the budget ({report.level:.0%})",
            f"{report.mean:.3f} [{report.lower:.3f}, {report.upper:.3f}]",
        ])  # fmt: skip
    if report.baseline is not None and report.baseline_mean is not None:
        rows.append([f"baseline {report.baseline}", report.baseline_words()])
    if report.p_beat is not None:
        rows.append(["p(ends above the baseline)", f"{report.p_beat:.2f}"])
    if report.target_compute is not None:
        rows.append([f"target {report.target:g}", report.target_compute.message])
    if report.p_target is not None:
        rows.append(["p(target reached by the budget)", f"{report.p_target:.2f}"])
    rows.append(["fit identified", "yes" if report.is_identified else "no"])
    name = f" {esc(report.label)}" if report.label else ""
    parts = [
        f'<div class="rlcurves-monitor"><b>Monitor{name}</b> {advice_badge(report.advice)}',
        f"<div style='margin:0.3em 0'>{esc(report.reason)}</div>",
        table(rows),
    ]
    parts += [
        f"<div style='font-size:0.85em;color:#555'>note: {esc(n)}</div>" for n in report.notes
    ]
    if figure and report.fit is not None:
        parts.append(figure_img(report.plot(), alt=f"monitor figure: {report.advice}"))
    parts.append("</div>")
    return "".join(parts)
