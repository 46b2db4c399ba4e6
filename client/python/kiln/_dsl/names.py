"""Tile-IR names: reserved words and per-kernel unique naming."""

from __future__ import annotations

from typing import Set

from kiln._dsl.dtypes import IR_BITS
from kiln.errors import KilnSourceError

KEYWORDS = frozenset("""
kernel tune in where assume grid threads cluster alloc shared fragment local
layout copy fill clear gemm reduce cumsum atomic_add parallel for serial unroll
pipelined if else let rasterize true false inf transpose_a transpose_b
clear_accum policy
""".split())

# Builtin functions and the words that appear after `name=` in statements:
# legal as names, but avoided so that a generated kernel reads unambiguously.
_AVOIDED = frozenset("""
exp exp2 log log2 sqrt rsqrt tanh sigmoid erf abs max min fma select
if_then_else ceildiv strides row_major swizzle padded dim reverse order panel
stages square full_row full_col row column sum absmax
""".split())

RESERVED = KEYWORDS | frozenset(IR_BITS) | _AVOIDED

MAX_NAME = 128


def check_identifier(name: str, what: str) -> None:
    """Raises unless ``name`` can be an interface name in the tile IR."""
    if not name.isascii() or not name.isidentifier():
        raise KilnSourceError(f"{what} '{name}' is not an ASCII identifier")
    if len(name) > MAX_NAME:
        raise KilnSourceError(f"{what} '{name}' is longer than {MAX_NAME}")
    if name in KEYWORDS or name in IR_BITS:
        raise KilnSourceError(
            f"{what} '{name}' is a tile-IR keyword or dtype; rename it")


class NameTable:
    """The names taken in one kernel; locals get fresh ones (i, i_1, ...)."""

    def __init__(self) -> None:
        self.used: Set[str] = set()

    def interface(self, name: str, what: str) -> str:
        """Takes ``name`` exactly (a parameter, symbol or tunable)."""
        check_identifier(name, what)
        if name in self.used:
            raise KilnSourceError(
                f"{what} '{name}' clashes with another name of the kernel "
                "(parameter, symbolic dim or tunable)")
        self.used.add(name)
        return name

    def parameter(self, name: str) -> str:
        """A parameter's tile-IR name: its own, or where that is a tile-IR
        keyword or dtype (``kernel``, ``copy``, ``f16``), ``name_`` (made
        unique); the Python name still refers to it."""
        if name.isascii() and name.isidentifier() and (
                name in KEYWORDS or name in IR_BITS):
            base, n = name + "_", 0
            ir = base
            while ir in self.used or ir in RESERVED:
                n += 1
                ir = f"{base}{n}"
            return self.interface(ir, "parameter")
        return self.interface(name, "parameter")

    def fresh(self, base: str) -> str:
        """A new local name derived from ``base``, unique in the kernel."""
        if not base.isascii() or not base.isidentifier():
            base = "v"
        base = base[:MAX_NAME - 8]
        name, n = base, 0
        while name in self.used or name in RESERVED:
            n += 1
            name = f"{base}_{n}"
        self.used.add(name)
        return name
