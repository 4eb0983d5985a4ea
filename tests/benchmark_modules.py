"""The modules of ``benchmarks/`` for the tests that hold pages, README rows and results to them
(the repository root is not on the import path under every way of running pytest)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def benchmark(name: str) -> ModuleType:
    """``benchmarks.<name>``, imported with the repository root on the path."""
    sys.path.insert(0, str(ROOT))
    try:
        return importlib.import_module(f"benchmarks.{name}")
    finally:
        sys.path.remove(str(ROOT))
