"""``tilelang.transform``: ``PassConfigKey``, whose options Kiln accepts and
ignores (its compiler has no TVM passes to configure)."""

from kiln import PassConfigKey

__all__ = ["PassConfigKey"]
