"""The command line, run as a user would (in-process through main, and once as a subprocess)."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd

from rlcurves import sigmoid
from rlcurves.cli import main


def _csv(tmp_path):
    c = np.linspace(0, 16000, 41)
    r = sigmoid(c, 0.61, 1.92, 2542, 0.3) + np.random.default_rng(0).normal(0, 0.005, c.size)
    path = tmp_path / "run.csv"
    pd.DataFrame({"gpu_hours": c, "val_pass_rate": r, "step": np.arange(c.size)}).to_csv(
        path, index=False
    )
    return path


def test_fit_prints_summary(tmp_path, capsys):
    path = _csv(tmp_path)
    assert (
        main(
            [
                "fit",
                str(path),
                "--compute",
                "gpu_hours",
                "--reward",
                "val_pass_rate",
                "--min-compute",
                "1500",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "[[Parameters]]" in out and "C_mid" in out


def test_fit_json_and_fixed_r0(tmp_path, capsys):
    path = _csv(tmp_path)
    assert (
        main(
            [
                "fit",
                str(path),
                "--compute",
                "gpu_hours",
                "--reward",
                "val_pass_rate",
                "--r0",
                "0.3",
                "--json",
            ]
        )
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert result["params"]["R0"] == 0.3 and result["fixed"] == ["R0"]
    assert abs(result["params"]["A"] - 0.61) < 0.02


def test_bad_column_is_a_clean_error(tmp_path, capsys):
    path = _csv(tmp_path)
    code = main(["fit", str(path), "--compute", "gpu_hours", "--reward", "nope"])
    err = capsys.readouterr().err
    assert code == 2 and "nope" in err and "Traceback" not in err


def test_demo_subprocess_writes_plot(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "rlcurves", "demo", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"MPLBACKEND": "Agg", "PATH": ""},
    )
    assert proc.returncode == 0, proc.stderr
    assert "SIMULATED" in proc.stdout and "[[Parameters]]" in proc.stdout
    assert (tmp_path / "simulated_scalerl_8b_fit.png").stat().st_size > 10_000
