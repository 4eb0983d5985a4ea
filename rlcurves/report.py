"""A report people can share: one self-contained HTML file of runs, fits, forecasts, a comparison.

:func:`build_report` turns read logs into one HTML page: per run the cleaning report of its log,
the fit, the forecast figure and table, a backtest (refits on prefixes, scored against the
whole run); for several runs the comparison table, verdicts and A-B figure; and the numbers'
provenance (versions, the command, a SHA-256 of every data file read). Figures are embedded as
base64 PNG and the page has no scripts and no external resources, so it opens offline.
:func:`write_report` reads the logs and writes the file (the ``rlcurves report`` command).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import math
import os
import platform
import sys
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from . import _html as h
from ._data import check_numbers, check_resamples
from ._format import format_compute
from .errors import RLCurvesError

if TYPE_CHECKING:
    from .calibrate import Calibration

_STYLE = """
body{font-family:system-ui,-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;max-width:1100px;
margin:1.5em auto;padding:0 1em;color:#222;line-height:1.4}
h1{font-size:1.6em;margin-bottom:0.2em} h2{border-bottom:1px solid #ddd;padding-bottom:0.2em;
margin-top:1.6em} h3{margin-bottom:0.3em}
pre{background:#f6f6f6;padding:0.6em;overflow-x:auto;font-size:0.85em;white-space:pre-wrap}
.muted{color:#666;font-size:0.9em} .figures{display:flex;flex-wrap:wrap;gap:1em}
.figures figure{margin:0;flex:1 1 460px} figcaption{font-size:0.85em;color:#555}
nav a{margin-right:1em} .notes{font-size:0.9em}
.warn{background:#fff4e5;border-left:4px solid #E69F00;padding:0.3em 0.6em}
"""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def data_files(df: pd.DataFrame) -> list[Path]:
    """The files a frame from :func:`rlcurves.read_log` was read from (its ``attrs`` sources)."""
    sources: list[str] = []
    for attrs in (df.attrs.get("runs") or {"": df.attrs}).values():
        src = attrs.get("source")
        sources.extend(src if isinstance(src, list) else [src] if src else [])
    out = []
    for s in sources:
        p = Path(str(s))
        # a run folder (the recipe's log.jsonl + config.yaml): every file in it
        for f in [p] if p.is_file() else sorted(p.glob("*")) if p.is_dir() else []:
            if f.is_file() and f not in out:
                out.append(f)
    return out


def provenance(runs: Mapping[str, pd.DataFrame], command: str | None = None) -> dict[str, Any]:
    """Versions, platform, time, command and the SHA-256 of every data file behind the report."""
    import matplotlib
    import scipy

    from . import __version__

    files = []
    for name, df in runs.items():
        for p in data_files(df):
            files.append(
                {"run": name, "file": str(p), "bytes": p.stat().st_size, "sha256": _sha256(p)}
            )
    return {
        "generated": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "command": command,
        "versions": {
            "rlcurves": __version__,
            "python": platform.python_version(),
            "numpy": np.__version__,
            "scipy": scipy.__version__,
            "pandas": pd.__version__,
            "matplotlib": matplotlib.__version__,
        },
        "platform": f"{platform.system()} {platform.release()} ({platform.machine()})",
        "files": files,
    }


def build_report(
    runs: Mapping[str, pd.DataFrame],
    *,
    baseline: str | None = None,
    budget: float | None = None,
    level: float = 0.9,
    seed: int | None = 0,
    n_samples: int = 500,
    fractions: Sequence[float] = (0.25, 0.5, 0.75),
    fit_kws: Mapping[str, Any] | None = None,
    title: str | None = None,
    command: str | None = None,
    calibration: Calibration | str | None = None,
) -> str:
    """One self-contained HTML page about ``runs``.

    Parameters
    ----------
    runs : mapping
        Run name -> a frame with ``compute`` and ``reward`` (from :func:`rlcurves.read_log`:
        its ``attrs`` give the cleaning report and the data files to hash).
    baseline : str, optional
        The run the others are compared against (default: the first). Only with 2+ runs.
    budget : float, optional
        Forecast every run at this compute (default: twice each run's last compute).
    level, seed, n_samples
        Interval level, bootstrap seed and resamples (forecasts, comparison, backtests).
    fractions : sequence of float
        Backtest prefixes, as fractions of each run's final compute.
    fit_kws : mapping, optional
        Passed to :func:`rlcurves.fit_sigmoid` (``min_compute``, ``r0``...).
    title : str, optional
    command : str, optional
        The command line that made the report, recorded in the provenance.
    calibration : Calibration or str, optional
        What calibrates the forecasts and backtests (see :func:`rlcurves.forecast`): a
        :class:`~rlcurves.calibrate.Calibration`, or ``"validation"`` (the default) or
        ``"training reward"``.

    Returns
    -------
    str
        The HTML document.
    """
    import matplotlib.pyplot as plt

    from .backtest import backtest, checked_fractions
    from .compare import compare
    from .fit import fit_sigmoid
    from .forecast import forecast
    from .logs import describe_log
    from .plot import plot_forecast

    if not runs:
        raise RLCurvesError("no runs to report on: pass at least one log")
    if budget is not None:  # checked now: 0 forecast at the start, bad fractions a muted note
        check_numbers(budget=budget)
        if not (math.isfinite(budget) and budget > 0):
            raise RLCurvesError(
                f"budget= must be a positive compute value to forecast every run at, got {budget}"
            )
    fractions = checked_fractions(fractions)
    check_resamples("n_samples", n_samples)
    names = list(runs)
    if baseline is not None and baseline not in names:
        raise RLCurvesError(f"--baseline {baseline!r} is not one of the runs {names}")
    fit_kws = dict(fit_kws or {})
    title = title or f"rlcurves report: {', '.join(names)}"
    sections: list[str] = []
    fits = {}
    for name, df in runs.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the page shows fit.message
            fit = fit_sigmoid("compute", "reward", data=df, label=name, **fit_kws)
        fits[name] = fit
        end = float(df["compute"].max())
        at = budget if budget is not None else 2 * end
        start = float(fit.fit_compute.min())
        grid = np.linspace(start, max(at, end), 160)
        band = forecast(fit, grid, level=level, n=n_samples, seed=seed, progress=False,
                        band=True, calibration=calibration)  # fmt: skip
        points = forecast(fit, sorted({end, at}), level=level, n=n_samples, seed=seed,
                          progress=False, calibration=calibration)  # fmt: skip
        # the axes as the backtest's figure names them: the compute unit, the reward column
        fig = plot_forecast(fit, band)
        fig.axes[0].set_title(f"{name}: fit and forecast", fontsize=10)
        figs = [
            "<figure>"
            + h.figure_img(fig, alt=f"{name}: fit and forecast")
            + f"<figcaption>{h.esc(name)}: the fit (solid), its extrapolation (dashed) and the "
            f"{level:.0%} forecast band to {format_compute(max(at, end))}.</figcaption></figure>"
        ]
        bt_html = ""
        try:
            bt = backtest("compute", "reward", data=df, fractions=fractions, level=level,
                          n_samples=n_samples, seed=seed, label=name, progress=False,
                          min_compute=fit_kws.get("min_compute"), r0=fit_kws.get("r0"),
                          calibration=calibration)  # fmt: skip
            bt_html = _backtest_html(bt)
            bfig = bt.plot()
            figs.append(
                "<figure>" + h.figure_img(bfig, alt=f"{name}: backtest") + "<figcaption>"
                f"{h.esc(name)}: forecasts of the final value from prefixes.</figcaption></figure>"
            )
        except RLCurvesError as exc:
            bt_html = f"<h3>Backtest</h3><p class='muted'>not available: {h.esc(exc)}</p>"
        cleaning = (
            describe_log(df) if df.attrs.get("runs") else "(not read by read_log: no account)"
        )
        extrapolated = ""
        if at > end * (1 + 1e-9):  # the value at the budget is not seen: say how far it reaches
            extrapolated = (
                f"<p class='warn'>{h.esc(name)}'s evaluations end at C = "
                f"{h.esc(format_compute(end))}"
                + (f", {end / at:.0%} of the budget" if budget is not None else "")
                + f": its value at C = {h.esc(format_compute(at))} is a forecast, extrapolated "
                f"{at / end:.1f}x past its last evaluation.</p>"
                if end > 0
                else ""
            )
        sections.append(
            f'<section id="run-{h.esc(name)}"><h2>{h.esc(name)}</h2>'
            f"<h3>The log and its cleaning</h3><pre>{h.esc(cleaning)}</pre>"
            f"<h3>Fit</h3>{h.fit_html(fit)}<h3>Forecast</h3>{extrapolated}"
            f"{h.forecast_html(points)}"
            f'<div class="figures">{"".join(figs)}</div>{bt_html}</section>'
        )
        plt.close("all")
    if len(fits) >= 2:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cmp = compare(fits, baseline=baseline or names[0], level=level,
                          n_samples=n_samples, seed=seed)  # fmt: skip
        cfig = cmp.plot()
        sections.insert(
            0,
            '<section id="comparison"><h2>Comparison</h2>'
            + h.comparison_html(cmp)
            + '<div class="figures"><figure>'
            + h.figure_img(cfig, alt="comparison of A and B")
            + "<figcaption>Ceiling A and efficiency B of each run with intervals.</figcaption>"
            "</figure></div></section>",
        )
    prov = provenance(runs, command)
    files = [  # a path and a 64-digit hash wrap inside their cells, not past the page
        [
            f["run"],
            h.Html(f"<span style='overflow-wrap:anywhere'>{h.esc(f['file'])}</span>"),
            f["bytes"],
            h.Html(f"<code style='word-break:break-all'>{h.esc(f['sha256'])}</code>"),
        ]
        for f in prov["files"]
    ]
    versions = [[k, v] for k, v in prov["versions"].items()]
    prov_html = (
        '<section id="provenance"><h2>Provenance</h2>'
        f"<p class='muted'>generated {h.esc(prov['generated'])} on {h.esc(prov['platform'])}"
        + (f"; command: <code>{h.esc(command)}</code>" if command else "")
        + "</p><h3>Versions</h3>"
        + h.table(versions, ["package", "version"])
        + "<h3>Data files</h3>"
        + (h.table(files, ["run", "file", "bytes", "sha256"]) if files else "<p>none on disk</p>")
        + "</section>"
    )
    nav = "".join(f'<a href="#run-{h.esc(n)}">{h.esc(n)}</a>' for n in names)
    if len(fits) >= 2:
        nav = '<a href="#comparison">comparison</a>' + nav
    nav += '<a href="#provenance">provenance</a>'
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{h.esc(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{h.esc(title)}</h1><p class='muted'>The ScaleRL sigmoid R(C) = R0 + (A - R0) / "
        f"(1 + (C_mid / C)^B) fitted to each run; {level:.0%} intervals from {n_samples} "
        f"bootstrap resamples (seed {seed}).</p><nav>{nav}</nav>"
        + "".join(sections)
        + prov_html
        + "</body></html>\n"
    )


def _backtest_html(bt) -> str:
    """The backtest: its table (a refused, unbounded forecast shown as refused, a miss), the
    coverage, and each prefix's note as a numbered line below the table, not a column."""
    t = bt.table
    refused_rows = t["refused"].fillna(False).to_numpy(dtype=bool)
    covered = [
        "refused" if r else "" if pd.isna(c) else "yes" if c else "no"
        for c, r in zip(t["covered"], refused_rows, strict=True)
    ]
    table = pd.DataFrame(
        {
            "fit on": [f"{f:.0%}" for f in t["fraction"]],
            "fit to": [format_compute(c) for c in t["fit_to"]],
            "points": ["" if pd.isna(n) else int(n) for n in t["n_points"]],
            "forecast": t["forecast"],
            "lower": t["forecast_lower"].where(~refused_rows),
            "upper": t["forecast_upper"].where(~refused_rows),
            "whole-run fit": t["final_fit"],
            "error": t["error"],
            "covered": covered,
            "A": t["A"],
            "note": [f"[{i + 1}]" if n else "" for i, n in enumerate(t["note"])],
        }
    )
    notes = "".join(f"<li value='{i + 1}'>{h.esc(n)}</li>" for i, n in enumerate(t["note"]) if n)
    cov = bt.coverage
    refused = int(refused_rows.sum())
    return (
        f"<h3>Backtest</h3><p class='muted'>Refits on the first "
        f"{_fractions_words(list(t['fraction']))} of the run's compute, each forecasting the "
        f"run's final value ({bt.level:.0%} intervals); scored against the whole run's fit "
        "there. A refused forecast (an unbounded interval: too few points to estimate the noise) "
        "covers nothing and counts as a miss.</p>"
        + h.frame_table(table)
        + f"<p>coverage: forecast {cov['forecast']:.0%} of {len(t.dropna(subset=['forecast']))}"
        + (f" ({refused} refused, counted as misses)" if refused else "")
        + f", A {cov['A']:.0%}</p>"
        + (f"<ol class='notes'>{notes}</ol>" if notes else "")
    )


def _fractions_words(fractions: Sequence[float]) -> str:
    """0.25, 0.5, 0.75 -> "25%, 50% and 75%"."""
    words = [f"{f:.0%}" for f in fractions]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def write_report(
    paths: Sequence[str | os.PathLike],
    output: str | os.PathLike,
    *,
    read_log_kws: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> Path:
    """Read each log with :func:`rlcurves.read_log` and write :func:`build_report`'s page.

    Parameters
    ----------
    paths : sequence of paths
        One log or run folder per run (the run is named after it).
    output : path
        The HTML file to write (its folder is created).
    read_log_kws : mapping, optional
        Passed to ``read_log`` (``compute=``, ``reward=``, ``gpus=``...).
    **kwargs
        Passed to :func:`build_report`.
    """
    from .logs import read_log

    out = Path(output)
    if out.is_dir():  # said before the work, not as an IsADirectoryError after it
        raise RLCurvesError(
            f"output={str(output)!r} is a folder; name the HTML file to write, e.g. "
            f"output={str(out / 'report.html')!r}"
        )
    runs: dict[str, pd.DataFrame] = {}
    for p in paths:
        name = Path(p).name or str(p)
        if name in runs:
            name = str(p)
        runs[name] = read_log(p, **dict(read_log_kws or {}))
    page = build_report(runs, **kwargs)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    return out


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: rlcurves report RUN [RUN ...] -o report.html")
