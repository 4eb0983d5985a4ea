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
    [("0.32.0", True), ("0.32.1", True), ("0.31.9", False), ("0.33.0", False), ("0.33.2", False),
     ("0.34.0", False), ("0.10.1", False), ("1.0.0", False)],
)  # fmt: skip
def test_vllm_is_accepted_only_in_the_range_the_code_was_written_against(installed, ok):
    if ok:
        check_range("vllm", installed, VLLM, "why")
    else:
        with pytest.raises(VersionError, match=r"vllm>=0\.32,<0\.33"):
            check_range("vllm", installed, VLLM, "why")


def test_pyproject_pins_the_checked_ranges():
    text = (ROOT / "pyproject.toml").read_text()  # (tomllib is 3.11's; the project allows 3.10)
    assert f'recipe = ["torch{versions.supported(versions.TORCH)}"' in text
    assert f'vllm = ["vllm{versions.supported(VLLM)}"' in text
    # vLLM 0.32 itself requires transformers>=5.16.1 (its wheel's metadata): the floor is true
    assert '"transformers>=5.16.1"]' in text.split("\nvllm = ", 1)[1].splitlines()[0]


def fake_vllm(monkeypatch, *, version="0.32.0", drop=(), as_property=()):
    """A fake vLLM whose modules offer every entry of VLLM_API, less ``drop``, with the
    attributes in ``as_property`` turned into properties (the shape of 0.33's metadata)."""
    import dataclasses
    import types

    modules: dict[str, types.ModuleType] = {}

    def module(name):
        if name not in modules:
            modules[name] = types.ModuleType(name)
            monkeypatch.setitem(sys.modules, name, modules[name])
        return modules[name]

    for module_name, path, needed in versions.VLLM_API:
        mod = module(module_name)
        if (module_name, path) in drop:
            continue
        first, _, attr = path.partition(".")
        if not attr:  # a dataclass
            setattr(mod, first, dataclasses.make_dataclass(first, list(needed)))
            continue
        scope: dict = {}
        params = ", ".join(dict.fromkeys(["self", *needed]))
        exec(f"def {attr}({params}): pass", scope)
        member = property(scope[attr]) if (module_name, path) in as_property else scope[attr]
        cls = getattr(mod, first, None) or type(first, (), {})
        setattr(cls, attr, member)
        setattr(mod, first, cls)
    module("vllm").__version__ = version
    return modules


def test_a_vllm_with_the_api_passes_the_check(monkeypatch):
    fake_vllm(monkeypatch)
    assert versions.api_problems() == []
    versions.check(vllm=True)


@pytest.mark.parametrize(
    ("drop", "as_property", "named"),
    [
        # the names versions.py once listed did not exist: the real ones are checked now
        ([("vllm.distributed.weight_transfer.nccl_engine",
           "NCCLTrainerWeightTransferEngine.send_weights")], [], "send_weights does not exist"),
        ([], [("vllm.distributed.weight_transfer.base", "WeightSource.metadata")],
         "WeightSource.metadata is a property"),
        ([("vllm.v1.engine.async_llm", "AsyncLLM.pause_generation")], [],
         "AsyncLLM.pause_generation does not exist"),
    ],
)  # fmt: skip
def test_regression_a_vllm_whose_api_moved_is_refused_at_start_up(
    monkeypatch, drop, as_property, named
):
    """The check read only the version number: a build in range whose trainer-side API moved
    (0.33's source interface) started every engine, then failed in the first push."""
    fake_vllm(monkeypatch, drop=drop, as_property=as_property)
    with pytest.raises(VersionError, match=rf"vllm 0\.32\.0 lacks the API .*{named}"):
        versions.check(vllm=True)


def test_a_missing_parameter_is_named(monkeypatch):
    modules = fake_vllm(monkeypatch)
    info = modules["vllm.distributed.weight_transfer.nccl_engine"]

    def trainer_init(cls, init_info, *, client):  # no source
        pass

    info.NCCLTrainerWeightTransferEngine.trainer_init = trainer_init
    assert versions.api_problems() == [
        "vllm.distributed.weight_transfer.nccl_engine.NCCLTrainerWeightTransferEngine."
        "trainer_init has no source"
    ]


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
    with pytest.raises(VersionError, match=r"generator=vllm needs vLLM>=0\.32,<0\.33"):
        versions.check(vllm=True)

    class Old:
        __version__ = "0.30.0"

    monkeypatch.setitem(sys.modules, "vllm", Old)
    with pytest.raises(VersionError, match=r"vllm 0\.30\.0 is installed"):
        versions.check(vllm=True)
