"""Write the bundled SIMULATED example run (rlcurves/data/simulated_scalerl_8b.csv).

Not a real training run: a curve drawn from the ScaleRL paper's reported 8B parameters
(C_mid = 2542 GPU-hours, B = 1.92, A = 0.610; Khatri et al. 2025, table of fitted parameters) with
R0 = 0.30 assumed, evaluated every 200 GPU-hours to 16k GPU-hours (the leave-one-out budget), with
realistic evaluation noise: binomial sampling of 1,000 prompts x 16 generations (mean@16, prompt
difficulties spread by a Beta law so that prompt-level variance dominates) plus a slow AR(1)
run-level drift (sd 0.006, lag-1 correlation 0.9) for the shared policy of neighbouring checkpoints.

Run: python scripts/make_simulated_example.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

A, B, C_MID, R0 = 0.610, 1.92, 2542.0, 0.30
N_PROMPTS, N_GEN = 1000, 16


def simulate(seed: int = 2025) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    gpu_hours = np.arange(0.0, 16000.0 + 1, 200.0)
    mean = R0 + (A - R0) / (1.0 + (C_MID / np.maximum(gpu_hours, 1e-12)) ** B)
    drift = np.zeros(gpu_hours.size)
    for i in range(1, drift.size):
        drift[i] = 0.9 * drift[i - 1] + np.sqrt(1 - 0.9**2) * 0.006 * rng.standard_normal()
    target = np.clip(mean + drift, 1e-3, 1 - 1e-3)
    concentration = 2.0  # Beta(2p, 2(1-p)): prompts range from easy to hard
    rewards = []
    for p in target:
        difficulty = rng.beta(concentration * p, concentration * (1 - p), N_PROMPTS)
        rewards.append(rng.binomial(N_GEN, difficulty).sum() / (N_PROMPTS * N_GEN))
    return pd.DataFrame(
        {
            "step": (gpu_hours / 200 * 100).astype(int),
            "gpu_hours": gpu_hours,
            "val_pass_rate": np.round(rewards, 5),
        }
    )


if __name__ == "__main__":
    out = Path(__file__).resolve().parents[1] / "rlcurves" / "data" / "simulated_scalerl_8b.csv"
    df = simulate()
    header = (
        "# SIMULATED run (not real training): ScaleRL 8B parameters A=0.610 B=1.92 C_mid=2542 "
        "R0=0.30 (assumed) + binomial mean@16 noise on 1000 prompts + AR(1) drift; "
        "made by scripts/make_simulated_example.py\n"
    )
    out.write_text(header + df.to_csv(index=False))
    print(f"wrote {out} ({len(df)} rows)")
