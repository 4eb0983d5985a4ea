"""recipe/versions.py: the supported torch and vLLM ranges, pyproject's pins and the start-up
check that refuses anything outside them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from recipe import versions
from recipe.versions import VLLM, VersionError, check_range, parse

ROOT = Path(__file__).resolve().parents[1]


def test_versions_are_read_from_release_numbers():
    assert parse("2.13.0+cpu") == (2, 13, 0)
    assert parse("0.33.0rc1") == (0, 33, 0)
    assert parse("2.8") == (2, 8)
    with pytest.raises(VersionError, match="cannot read"):
        parse("nightly")


@pytest.mark.parametrize("installed", ["2.8.0", "2.9.1+cu128", "2.13.0+cpu"])
def test_torch_from_2_8_on_is_accepted(installed):
    check_range("torch", installed, versions.TORCH, "why")


@pytest.mark.parametrize("installed", ["2.4.1", "2.7.1+cu126", "1.13.0"])
def test_older_torch_is_refused_with_the_range_and_the_install_command(installed):
    with pytest.raises(VersionError, match=r"torch>=2\.8.*pip install 'torch>=2\.8'"):
        check_range("torch", installed, versions.TORCH, "FSDP2")


@pytest.mark.parametrize(
    ("installed", "ok"),
    [("0.32.0", True), ("0.33.2", True), ("0.31.9", False), ("0.34.0", False), ("0.10.1", False),
     ("1.0.0", False)],
)  # fmt: skip
def test_vllm_is_accepted_only_in_the_range_the_code_was_written_against(installed, ok):
    if ok:
        check_range("vllm", installed, VLLM, "why")
    else:
        with pytest.raises(VersionError, match=r"vllm>=0\.32,<0\.34"):
            check_range("vllm", installed, VLLM, "why")


def test_pyproject_pins_the_checked_ranges():
    text = (ROOT / "pyproject.toml").read_text()  # (tomllib is 3.11's; the project allows 3.10)
    assert f'recipe = ["torch{versions.supported(versions.TORCH)}"' in text
    assert f'vllm = ["vllm{versions.supported(VLLM)}"]' in text


def test_the_installed_torch_passes(monkeypatch):
    # the project's machines run torch 2.13.0: it must stay allowed
    versions.check(sharded=True)


def test_a_run_with_old_torch_stops_before_it_starts(tmp_path, monkeypatch):
    import torch

    from recipe import config as C
    from recipe.cli import main

    monkeypatch.setattr(torch, "__version__", "2.7.1")
    with pytest.raises(SystemExit, match=r"unsupported version: torch 2\.7\.1 .*>=2\.8"):
        main(["--out", str(tmp_path / "run"), "--set", "steps=1"])
    assert not (tmp_path / "run" / "log.jsonl").exists()
    with pytest.raises(VersionError):
        from recipe.train import run

        run(C.from_dict({"steps": 1}), tmp_path / "run2")


def test_a_missing_or_old_vllm_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm raises ImportError
    with pytest.raises(VersionError, match=r"generator=vllm needs vLLM>=0\.32,<0\.34"):
        versions.check(vllm=True)

    class Old:
        __version__ = "0.30.0"

    monkeypatch.setitem(sys.modules, "vllm", Old)
    with pytest.raises(VersionError, match=r"vllm 0\.30\.0 is installed"):
        versions.check(vllm=True)
