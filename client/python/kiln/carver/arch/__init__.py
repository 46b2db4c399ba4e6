"""``tilelang.carver.arch``: ``driver``, the device queries."""

from kiln.carver.arch import driver

__all__ = ["driver"]
