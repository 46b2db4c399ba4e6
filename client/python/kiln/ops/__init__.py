"""Ready-made kernels written in Kiln's DSL as TileLang writes them, with
PyTorch autograd wrappers that tie each forward to its backward.

    from kiln.ops import flash_attention, rms_norm
    o = flash_attention(q, k, v, causal=True)   # q: [batch, seq, heads, dim]
    o.sum().backward()                           # dq, dk, dv from Kiln kernels

The wrappers take torch tensors: CPU tensors run on the CPU target (f64
works there, for ``torch.autograd.gradcheck``), CUDA tensors on the
current device and stream. The kernel factories themselves
(``kiln.ops.attention.flashattn_fwd`` and the like) are plain
``@kiln.jit`` functions and take NumPy arrays as well.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "flash_attention": "attention",
    "rms_norm": "norms",
    "layer_norm": "norms",
    "softmax": "norms",
    "cross_entropy": "norms",
}


def __getattr__(name: str) -> Any:  # torch is imported only when asked for
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kiln.ops' has no attribute '{name}'")
    import importlib
    return getattr(importlib.import_module(f"kiln.ops.{module}"), name)


__all__ = sorted(_EXPORTS)
