"""``tilelang.carver.arch.driver``: how many processors the kernels run on,
for persistent grids (``T.Kernel(get_num_sms())``)."""

from __future__ import annotations

import os

__all__ = ["get_num_sms"]


def get_num_sms(device_id: int = 0) -> int:
    """The CUDA device's multiprocessor count; without a CUDA device, the
    CPU target's worker threads (one per core), which run its blocks."""
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available():
        return int(torch.cuda.get_device_properties(device_id)
                   .multi_processor_count)
    return os.cpu_count() or 1
