"""helpdp.train.vllm_cpu: the two workarounds that let TRL's colocated vLLM run on a CPU,
checked on stand-ins (vLLM itself is not in the test venv: it pins its own torch)."""

from __future__ import annotations

import types

import pytest

torch = pytest.importorskip("torch")

from helpdp.train.vllm_cpu import guarded_rebind, keep_weights, patch_vllm_cpu  # noqa: E402


class _NoDictNamespace:
    """An attribute value whose ``__dict__`` is not a dict (what broke vLLM's scan)."""

    @property
    def __dict__(self):  # noqa: D105
        return object()


def test_guarded_rebind_rebinds_copies_and_owners_and_skips_odd_namespaces():
    def kernel():
        return "original"

    def wrapper():
        return "wrapped"

    class Owner:  # a JIT warmup owner holding the kernel as an attribute
        def __init__(self):
            self.kernel = kernel
            self._kernel_arg_names = ("x",)

    copy = types.ModuleType("copy_mod")
    copy.k = kernel
    copy.other = len
    owner_mod = types.ModuleType("owner_mod")
    owner_mod.owner = Owner()
    odd = types.ModuleType("odd_mod")
    odd.thing = _NoDictNamespace()
    with pytest.raises(AttributeError):  # vLLM's own scan reads vars(value).get
        vars(odd.thing).get("kernel")
    guarded_rebind([(kernel, wrapper)], [copy, owner_mod, odd, object()])
    assert copy.k is wrapper and copy.other is len
    assert owner_mod.owner.kernel is wrapper
    assert "_kernel_arg_names" not in vars(owner_mod.owner)


def test_keep_weights_multiplies_by_the_live_weight():
    layer = torch.nn.Linear(3, 2)
    keep_weights(layer, remove_weight=True)
    x = torch.ones(1, 3)
    before = layer.cpu_linear(x, layer.weight, layer.bias)
    with torch.no_grad():  # what a weight sync's load_weights does: in place
        layer.weight.copy_(torch.full((2, 3), 2.0))
        layer.bias.zero_()
    after = layer.cpu_linear(x, layer.weight, layer.bias)
    assert not torch.equal(before, after)
    assert torch.equal(after, torch.full((1, 2), 6.0))
    assert layer.weight.shape == (2, 3)  # the weight is kept, not emptied


def test_patch_is_a_no_op_without_vllm(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_vllm(name, *args, **kwargs):
        if name.startswith("vllm"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_vllm)
    assert patch_vllm_cpu() == []
