"""Element types: TileLang spellings, tile-IR names, byte sizes."""

from __future__ import annotations

from typing import Any, Dict

from kiln.errors import KilnSourceError

# Tile-IR dtype name -> size in bits.
IR_BITS: Dict[str, int] = {
    "bool": 8, "i8": 8, "u8": 8, "i16": 16, "i32": 32, "i64": 64, "u32": 32,
    "f16": 16, "bf16": 16, "f32": 32, "f64": 64, "f8e4m3": 8, "f8e5m2": 8,
    "i4": 4, "u4": 4,
}

INT_DTYPES = frozenset({"i8", "u8", "i16", "i32", "i64", "u32", "i4", "u4"})
FLOAT_DTYPES = frozenset({"f16", "bf16", "f32", "f64", "f8e4m3", "f8e5m2"})

# Scalar-only dtypes: kernel values may have them (TileLang's bit-level
# dequantisation computes in uint16), but the tile IR has no such type, so
# tiles, tensors and parameters may not. A u16 value is carried in a u32
# kept within [0, 65535] (kiln/_dsl/u16.py).
SCALAR_ONLY_BITS: Dict[str, int] = {"u16": 16}

# Every accepted spelling (TileLang / TVM / torch / numpy) -> tile-IR name.
_ALIASES: Dict[str, str] = {name: name for name in IR_BITS}
_ALIASES.update({
    "float16": "f16", "half": "f16", "bfloat16": "bf16",
    "float32": "f32", "float": "f32", "float64": "f64", "double": "f64",
    "int8": "i8", "uint8": "u8", "int16": "i16", "int32": "i32",
    "int64": "i64", "uint32": "u32", "int4": "i4", "uint4": "u4",
    "float8_e4m3": "f8e4m3", "float8_e4m3fn": "f8e4m3",
    "e4m3_float8": "f8e4m3", "float8_e5m2": "f8e5m2", "e5m2_float8": "f8e5m2",
    "bool8": "bool",
    # TVM's C-style names: a bare "int" / "uint" is 32 bits wide.
    "int": "i32", "uint": "u32", "short": "i16", "long": "i64",
})
_SCALAR_ONLY_ALIASES: Dict[str, str] = {"u16": "u16", "uint16": "u16"}

# TensorFloat-32: TileLang's dtype for fp32 data a tensor-core GEMM reads
# at tf32 precision (a 10-bit mantissa). It is stored as float32, and Kiln
# keeps it float32 throughout: tiles, tensors and GEMMs are f32, so results
# are at least as precise as a tf32 GEMM's. The DType keeps its own name so
# that host code comparing against T.tfloat32 takes TileLang's branches.
TF32_NAME = "tfloat32"
_TF32_SPELLINGS = frozenset({"tfloat32", "custom[tfloat32]"})
for _name in _TF32_SPELLINGS:
    _ALIASES[_name] = "f32"


# Tile-IR name -> the TileLang name DType prints.
_TILELANG_NAMES: Dict[str, str] = {
    "bool": "bool", "i8": "int8", "u8": "uint8", "i16": "int16",
    "i32": "int32", "i64": "int64", "u32": "uint32", "i4": "int4",
    "u4": "uint4", "f16": "float16", "bf16": "bfloat16", "f32": "float32",
    "f64": "float64", "f8e4m3": "float8_e4m3", "f8e5m2": "float8_e5m2",
    "u16": "uint16",
}

# Tile-IR name -> torch's dtype attribute (fp8 only in torch >= 2.1).
_TORCH_NAMES: Dict[str, str] = {
    "bool": "bool", "i8": "int8", "u8": "uint8", "i16": "int16",
    "i32": "int32", "i64": "int64", "u32": "uint32", "f16": "float16",
    "bf16": "bfloat16", "f32": "float32", "f64": "float64",
    "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2",
}


class DType(str):
    """A scalar type, as ``T.float16``; calling it casts a kernel value.
    ``T.dtype(x)`` (one argument: a name, a DType, a torch or NumPy dtype)
    is the DType of ``x``, as TileLang's ``T.dtype``. As TileLang's (TVM's
    DataType) it is also the str of its TileLang name, so
    ``getattr(torch, T.float16)`` is ``torch.float16``; it compares equal to
    every spelling of the same type (``T.float16 == "half"``)."""

    ir: str
    name: str

    def __new__(cls, ir: Any, tilelang: Any = None) -> "DType":
        if tilelang is None:
            source = ir
            ir = scalar_ir(source)
            tilelang = TF32_NAME if is_tf32(source) else _TILELANG_NAMES[ir]
        self = super().__new__(cls, tilelang)
        self.ir = ir
        self.name = tilelang
        return self

    @property
    def bits(self) -> int:
        """Bits per element (TVM's ``DataType.bits``)."""
        return IR_BITS.get(self.ir) or SCALAR_ONLY_BITS[self.ir]

    def as_torch(self) -> Any:
        """The torch dtype of this type."""
        import torch
        attr = _TORCH_NAMES.get(self.ir)
        if attr is None or not hasattr(torch, attr):
            raise KilnSourceError(
                f"torch {torch.__version__} has no dtype for {self.name}")
        return getattr(torch, attr)

    def __repr__(self) -> str:
        return f"T.{self.name}"

    def __str__(self) -> str:
        return self.name

    def __eq__(self, other: Any) -> bool:
        # T.tfloat32 is float32 storage, but a type of its own to compare.
        try:
            return scalar_ir(other) == self.ir and \
                is_tf32(other) == (self.name == TF32_NAME)
        except KilnSourceError:
            return False

    def __ne__(self, other: Any) -> bool:
        return not self == other

    def __getnewargs__(self) -> Any:  # pickle and copy keep both names
        return (self.ir, self.name)

    def __hash__(self) -> int:
        return str.__hash__(self)

    def __call__(self, value: Any) -> Any:
        from kiln._dsl import expr
        return expr.cast(self.ir, value)


def _spelling(dtype: Any) -> str:
    """``dtype`` as a name to look up: a string, DType, numpy or torch
    dtype, or the Python types bool, float and int."""
    if isinstance(dtype, DType):
        return dtype.ir
    if isinstance(dtype, str):
        key = dtype
    elif dtype is bool:
        key = "bool"
    elif dtype is float:
        key = "float32"
    elif dtype is int:
        key = "int32"
    else:
        key = str(getattr(dtype, "name", None) or dtype)
    key = key.strip()
    if key.startswith("torch."):
        key = key[len("torch."):]
    return key


def is_tf32(dtype: Any) -> bool:
    """Whether ``dtype`` is a spelling of TensorFloat-32 (T.tfloat32)."""
    if isinstance(dtype, DType):
        return dtype.name == TF32_NAME
    return isinstance(dtype, str) and dtype.strip() in _TF32_SPELLINGS


def _unknown(dtype: Any) -> KilnSourceError:
    return KilnSourceError(
        f"unknown dtype {dtype!r}; expected a TileLang name such as "
        "'float16', 'bfloat16', 'float32', 'int32' or a tile-IR name "
        "such as 'f16'")


def to_ir(dtype: Any) -> str:
    """The tile-IR name of ``dtype`` (a string, DType, numpy or torch
    dtype): the type of a tile, tensor or parameter. A scalar-only dtype
    (uint16) raises a KilnSourceError saying what to store instead."""
    key = _spelling(dtype)
    ir = _ALIASES.get(key)
    if ir is None:
        if key in _SCALAR_ONLY_ALIASES:
            raise KilnSourceError(
                "uint16 tiles, tensors and parameters are not supported: "
                "the tile IR has no 16-bit unsigned type (uint16 kernel "
                "values are: T.uint16(x), x.astype('uint16')); store the "
                "values as int32 or uint32")
        raise _unknown(dtype)
    return ir


def scalar_ir(dtype: Any) -> str:
    """The dtype name of a kernel value of ``dtype``: a tile-IR name, or a
    scalar-only one (``u16``)."""
    key = _spelling(dtype)
    ir = _ALIASES.get(key) or _SCALAR_ONLY_ALIASES.get(key)
    if ir is None:
        raise _unknown(dtype)
    return ir


def itemsize_bits(ir: str) -> int:
    """Bits per element of a tile-IR dtype."""
    return IR_BITS[ir]
