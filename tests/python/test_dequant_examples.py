"""Low-bit dequantisation kernels written in TileLang's style (issue 25).

Each kernel here is spelled the way a TileLang user spells one, with kiln
standing in for tilelang in the imports:

    import kiln as tilelang
    import kiln.language as T
    from kiln import tvm as tvm
    from tvm import DataType, tirx     # kiln.tvm's shims, or a real TVM

(with a real TVM installed, ``from kiln.tvm import DataType, tirx``). The
decoding helpers build their bit manipulation out of tirx nodes
(``tirx.const``, ``tirx.Select``, ``tirx.reinterpret``, ``tirx.Cast``,
``.astype``) and pick their integer carriers from ``DataType(dtype).bits``.
The kernels run on the CPU target at ragged shapes and are checked against
NumPy decoders written straight from the format definitions:

* fp4 e2m1: a sign bit, two exponent bits with bias 1 and one mantissa bit;
  exponent 0 is subnormal, so the magnitudes are 0, 0.5, 1, 1.5, 2, 3, 4, 6;
* int4: a two's-complement nibble, -8 .. 7;
* fp8 e4m3 (the "fn" flavour): bias 7, exponent 0 subnormal (m * 2**-9), no
  infinities, and S.1111.111 the only NaN; the largest finite value is 448.

Packed tensors hold two 4-bit codes per byte (or eight per 32-bit word),
lowest-order field first.
"""

import numpy as np
import pytest

import kiln as tilelang
import kiln.language as T
from kiln import tvm as tvm
from kiln.tvm import DataType
from kiln.tvm import tirx

torch = pytest.importorskip("torch")


@pytest.fixture
def gen():
    seed = int(np.random.default_rng().integers(1 << 31))
    print(f"torch generator seeded with {seed}")
    return torch.Generator().manual_seed(seed)


def test_tvm_spelling_of_the_imports_reaches_the_kiln_shims():
    if not tvm.AS_TVM:
        pytest.skip("a real TVM is installed; kernels import kiln.tvm")
    from tvm import DataType as via_tvm_datatype
    from tvm import tirx as via_tvm_tirx
    assert via_tvm_datatype is DataType
    assert via_tvm_tirx is tirx


# --- reference decoders (NumPy, from the format definitions) --------------

def e2m1_value(code):
    """The real number the 4-bit e2m1 ``code`` encodes."""
    negative = bool(code & 0b1000)
    exponent, mantissa = (code >> 1) & 0b11, code & 0b1
    if exponent == 0:               # subnormal: 0.m * 2**(1 - bias)
        magnitude = mantissa / 2
    else:                           # normal: 1.m * 2**(exponent - bias)
        magnitude = (1 + mantissa / 2) * 2.0 ** (exponent - 1)
    return -magnitude if negative else magnitude


def e4m3_value(code):
    """The real number the fp8 e4m3fn byte ``code`` encodes."""
    negative = bool(code & 0x80)
    exponent, mantissa = (code >> 3) & 0xF, code & 0x7
    if exponent == 0xF and mantissa == 0x7:
        return float("nan")
    if exponent == 0:
        magnitude = mantissa / 8 * 2.0 ** -6
    else:
        magnitude = (1 + mantissa / 8) * 2.0 ** (exponent - 7)
    return -magnitude if negative else magnitude


E2M1_TABLE = np.array([e2m1_value(c) for c in range(16)])
INT4_TABLE = np.array([c - 16 if c >= 8 else c for c in range(16)])
E4M3_TABLE = np.array([e4m3_value(c) for c in range(256)])


def split_fields(words, nbit, count):
    """The ``count`` unsigned ``nbit``-wide fields of each integer in
    ``words``, lowest first, along a new last axis."""
    words = np.asarray(words).astype(np.int64) & ((1 << (nbit * count)) - 1)
    shifts = nbit * np.arange(count)
    return (words[..., None] >> shifts) & ((1 << nbit) - 1)


def unpack_nibble_rows(packed):
    """(rows, k/2) bytes -> (rows, k) codes, byte j giving codes 2j, 2j+1."""
    fields = split_fields(packed, 4, 2)
    return fields.reshape(fields.shape[0], -1)


def same_bits(a, b):
    return np.array_equal(a.view(np.uint16 if a.itemsize == 2 else np.uint32),
                          b.view(np.uint16 if b.itemsize == 2 else np.uint32))


# --- decoding helpers (tirx expressions) ----------------------------------

# Field layout of the IEEE-style targets: (mantissa bits, exponent bias).
_TARGET_LAYOUT = {"float16": (10, 15), "bfloat16": (7, 127),
                  "float32": (23, 127)}


def low_field(packed, index, nbit=4):
    """Field ``index`` (``nbit`` wide, lowest first) of the unsigned integer
    expression ``packed``, in ``packed``'s own type."""
    kind = packed.dtype
    offset = index.astype(kind) * tirx.const(nbit, kind)
    return (packed >> offset) & tirx.const((1 << nbit) - 1, kind)


def e2m1_as_float(code, dtype, exp_shift=0):
    """The e2m1 ``code`` (an unsigned expression holding 4 bits) as a
    ``dtype`` value, scaled by 2**exp_shift.

    Both formats are sign/exponent/mantissa, so the result is assembled bit
    by bit in an unsigned integer as wide as ``dtype``. An e2m1 exponent
    field e means 2**(e - 1), and the one subnormal (0.5) sits one binade
    below e == 1, so the target's exponent field is e + (bias - 1) in both
    cases; only normal codes carry their mantissa bit over. Scaled
    exponents saturate at the largest finite binade.
    """
    width = DataType(dtype).bits
    carrier = f"uint{width}"
    man_bits, bias = _TARGET_LAYOUT[str(dtype)]

    def k(value):
        return tirx.const(value, carrier)

    code = code.astype(carrier)
    exponent = (code >> k(1)) & k(0b11)
    mantissa = code & k(0b1)

    target_exp = T.min(exponent + k(bias - 1 + exp_shift), k(2 * bias))
    target_man = tirx.Select(exponent == k(0), k(0),
                             mantissa << k(man_bits - 1))
    magnitude = tirx.Select((code & k(0b111)) == k(0), k(0),
                            (target_exp << k(man_bits)) | target_man)
    sign = (code >> k(3)) << k(width - 1)
    return tirx.reinterpret(dtype, sign | magnitude)


def int4_as_int8(byte, index):
    """Nibble ``index`` of the uint8 ``byte`` read as two's complement.

    Flipping the nibble's top bit and then subtracting 8 leaves 0..7 alone
    and sends 8..15 to -8..-1.
    """
    code = low_field(byte, index)
    flipped = code ^ tirx.const(0b1000, T.uint8)
    return tirx.Cast(T.int8, flipped) - tirx.const(8, T.int8)


def signed_field(nbit, packed, index, dtype):
    """Field ``index`` of the packed integer ``packed`` (signed or unsigned
    storage) sign-extended and converted to ``dtype``.

    The field is shifted up to the top of its word in unsigned arithmetic,
    then an arithmetic right shift on the signed view brings it back down
    with its sign bit copied across.
    """
    width = DataType(packed.dtype).bits
    unsigned, signed = f"uint{width}", f"int{width}"
    bits = packed
    if packed.dtype != unsigned:
        bits = tirx.reinterpret(unsigned, packed)
    lift = (tvm.tirx.const(width - nbit, unsigned)
            - index.astype(unsigned) * tvm.tirx.const(nbit, unsigned))
    raised = tirx.reinterpret(signed, bits << lift)
    return tirx.Cast(dtype, raised >> tirx.const(width - nbit, signed))


def e4m3_as_half(byte):
    """The fp8 e4m3fn ``byte`` as float16.

    Placing the byte's low seven bits at float16's exponent/mantissa
    position yields a float16 exactly 2**(7 - 15) times the fp8 magnitude,
    for subnormal codes as well as normal ones (both formats give exponent
    field 0 the same meaning), so one exact multiply by 2**8 rescales it.
    The sign and the NaN code are applied afterwards.
    """
    wide = byte.astype(T.uint16)
    body = wide & tirx.const(0x7F, T.uint16)
    shrunk = tirx.reinterpret(T.float16, body << tirx.const(7, T.uint16))
    magnitude = shrunk * tirx.const(256.0, T.float16)
    signed = tirx.Select(wide >= tirx.const(0x80, T.uint16),
                         -magnitude, magnitude)
    quiet_nan = tirx.reinterpret(T.float16, tirx.const(0x7E00, T.uint16))
    return tirx.Select(body == tirx.const(0x7F, T.uint16), quiet_nan, signed)


def decode_e2m1_half(byte, index):
    return e2m1_as_float(low_field(byte, index), T.float16)


# --- row-wise unpacking kernel ---------------------------------------------

@tilelang.jit(out_idx=[1])
def unpack_rows(N, K, block_N, block_K, out_dtype, decode, threads=128):
    """W[n, k] = decode(Wq[n, k // 2], k % 2): a 4-bit-packed (N, K) matrix
    widened tile by tile through shared memory and a register fragment."""
    packed_K = block_K // 2

    @T.prim_func
    def main(Wq: T.Tensor((N, K // 2), T.uint8),
             W: T.Tensor((N, K), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), threads=threads) as nb:
            wq_shared = T.alloc_shared((block_N, packed_K), T.uint8)
            wq_regs = T.alloc_fragment((block_N, packed_K), T.uint8)
            w_regs = T.alloc_fragment((block_N, block_K), out_dtype)
            for kb in T.Pipelined(0, T.ceildiv(K, block_K), num_stages=1):
                T.copy(Wq[nb * block_N, kb * packed_K], wq_shared)
                T.copy(wq_shared, wq_regs)
                for n, k in T.Parallel(block_N, block_K):
                    w_regs[n, k] = decode(wq_regs[n, k // 2], k % 2)
                T.copy(w_regs, W[nb * block_N, kb * block_K])

    return main


def test_fp4_rows_decode_to_half_bit_exactly(backend, gen):
    # Two rows hold every byte value; 70 rows leave the last block ragged.
    N, K = 70, 256
    wq = torch.randint(0, 256, (N, K // 2), dtype=torch.uint8, generator=gen)
    wq[:2] = torch.arange(256, dtype=torch.uint8).reshape(2, K // 2)
    out = unpack_rows(N, K, 64, 64, T.float16, decode_e2m1_half)(wq)
    want = E2M1_TABLE[unpack_nibble_rows(wq.numpy())].astype(np.float16)
    assert same_bits(out.numpy(), want)


def test_int4_rows_sign_extend_to_int8(backend, gen):
    N, K = 50, 256
    wq = torch.randint(0, 256, (N, K // 2), dtype=torch.uint8, generator=gen)
    wq[0] = torch.arange(128, dtype=torch.uint8) * 2 + 1
    out = unpack_rows(N, K, 32, 128, T.int8, int4_as_int8)(wq)
    want = INT4_TABLE[unpack_nibble_rows(wq.numpy())].astype(np.int8)
    assert np.array_equal(out.numpy(), want)


# --- GEMMs against fp4 weights ---------------------------------------------

@tilelang.jit(out_idx=[2])
def fp4_gemm_feature_major(M, N, K, block_M=64, block_N=64, block_K=128,
                           stages=2, threads=128, dtype=T.float16,
                           acc_dtype=T.float32):
    """Yt = W @ X.T, an (N, M) result, with W (N, K) stored as packed e2m1.

    Each weight tile is decoded straight from shared memory into a register
    fragment that then serves as the gemm's left operand.
    """
    assert K % block_K == 0
    packed_K = block_K // 2

    @T.prim_func
    def main(X: T.Tensor((M, K), dtype),
             Wq: T.Tensor((N, K // 2), T.uint8),
             Yt: T.Tensor((N, M), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M),
                      threads=threads) as (nb, mb):
            x_tile = T.alloc_shared((block_M, block_K), dtype)
            wq_tile = T.alloc_shared((block_N, packed_K), T.uint8)
            w_regs = T.alloc_fragment((block_N, block_K), dtype)
            acc = T.alloc_fragment((block_N, block_M), acc_dtype)
            staged = T.alloc_shared((block_N, block_M), dtype)
            T.annotate_layout(
                {wq_tile: tilelang.layout.make_swizzled_layout(wq_tile)})

            T.clear(acc)
            for kb in T.Pipelined(K // block_K, num_stages=stages):
                T.copy(X[mb * block_M, kb * block_K], x_tile)
                T.copy(Wq[nb * block_N, kb * packed_K], wq_tile)
                for n, k in T.Parallel(block_N, block_K):
                    w_regs[n, k] = e2m1_as_float(
                        low_field(wq_tile[n, k // 2], k % 2), dtype)
                T.gemm(w_regs, x_tile, acc, transpose_B=True)
            T.copy(acc, staged)
            T.copy(staged, Yt[nb * block_N:(nb + 1) * block_N,
                              mb * block_M:(mb + 1) * block_M])

    return main


def test_fp4_half_gemm_feature_major(backend, gen):
    m, n, k = 72, 200, 256           # neither M nor N fills its last block
    X = torch.randint(-2, 3, (m, k), generator=gen).to(torch.float16)
    Wq = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, generator=gen)
    Yt = fp4_gemm_feature_major(m, n, k)(X, Wq)
    # Small integer activations times multiples of 0.5: every partial sum is
    # exact in float32, so the only rounding is the final one to float16.
    W = E2M1_TABLE[unpack_nibble_rows(Wq.numpy())]
    want = (W @ X.numpy().astype(np.float64).T).astype(np.float16)
    assert same_bits(Yt.numpy(), want)


@tilelang.jit(out_idx=[-1], pass_configs={
    tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True})
def fp4_gemm_bf16(M, N, K, exp_shift=0, block_M=32, block_N=64, block_K=128,
                  stages=2, threads=128):
    """Y = X @ (2**exp_shift * W).T in bfloat16, W (N, K) packed e2m1; the
    decode step is a T.macro writing a bfloat16 tile to shared memory."""
    assert K % block_K == 0
    packed_K = block_K // 2

    @T.macro
    def widen_weights(wq_tile, w_tile):
        w_regs = T.alloc_fragment((block_N, block_K), T.bfloat16)
        for n, k in T.Parallel(block_N, block_K):
            w_regs[n, k] = e2m1_as_float(low_field(wq_tile[n, k // 2], k % 2),
                                         T.bfloat16, exp_shift)
        T.copy(w_regs, w_tile)

    @T.prim_func
    def main(X: T.Tensor((M, K), T.bfloat16),
             Wq: T.Tensor((N, K // 2), T.uint8),
             Y: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M),
                      threads=threads) as (nb, mb):
            x_tile = T.alloc_shared((block_M, block_K), T.bfloat16)
            wq_tile = T.alloc_shared((block_N, packed_K), T.uint8)
            w_tile = T.alloc_shared((block_N, block_K), T.bfloat16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)

            T.clear(acc)
            for kb in T.Pipelined(K // block_K, num_stages=stages):
                T.copy(X[mb * block_M, kb * block_K], x_tile)
                T.copy(Wq[nb * block_N, kb * packed_K], wq_tile)
                widen_weights(wq_tile, w_tile)
                T.gemm(x_tile, w_tile, acc, transpose_B=True)
            T.copy(acc, Y[mb * block_M, nb * block_N])

    return main


@pytest.mark.parametrize("exp_shift", [0, 2])
def test_fp4_bf16_gemm(backend, gen, exp_shift):
    m, n, k = 40, 100, 256           # neither M nor N fills its last block
    X = torch.randn(m, k, generator=gen).to(torch.bfloat16)
    Wq = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, generator=gen)
    Y = fp4_gemm_bf16(m, n, k, exp_shift)(X, Wq)
    W = E2M1_TABLE[unpack_nibble_rows(Wq.numpy())] * 2.0 ** exp_shift
    exact = X.to(torch.float64).numpy() @ W.T
    want = torch.from_numpy(exact).to(torch.bfloat16)
    torch.testing.assert_close(Y, want, rtol=0.01, atol=0.01)


# --- DataType(...).bits, as tile-size heuristics use it --------------------

def test_datatype_bits_give_vector_widths():
    vector_bits = 128
    lanes = [vector_bits // DataType(dt).bits
             for dt in (T.float16, "bfloat16", "int8", "float32", "uint8")]
    assert lanes == [8, 8, 16, 4, 16]
    assert 64 * DataType("float16").bits == 1024
    assert tilelang.DataType is DataType   # `from tilelang import DataType`


# --- every field of every packed word, through one symbolic-length kernel --

words = T.symbolic("words")


@tilelang.jit(out_idx=[-1])
def fields_of(decode, nbit, per_word, packed_dtype, out_dtype, rows=64):
    """Out[w, f] = decode(nbit, Packed[w], f, out_dtype) for a packed vector
    of any length; the last block of ``rows`` words is ragged."""

    @T.prim_func
    def main(Packed: T.Tensor((words,), packed_dtype),
             Out: T.Tensor((words, per_word), out_dtype)):
        with T.Kernel(T.ceildiv(words, rows), threads=64) as b:
            for r, f in T.Parallel(rows, per_word):
                if b * rows + r < words:
                    Out[b * rows + r, f] = decode(
                        nbit, Packed[b * rows + r], f, out_dtype)

    return main


def e2m1_field_as_float(nbit, packed, index, dtype):
    return e2m1_as_float(low_field(packed, index, nbit), dtype)


def e4m3_byte_as_half(nbit, packed, index, dtype):
    assert nbit == 8 and str(dtype) == "float16"
    return e4m3_as_half(packed)


def test_signed_fields_of_uint32_and_int8_words(backend, gen):
    w32 = torch.randint(0, 1 << 32, (300,), generator=gen)
    w32[:16] = torch.arange(16) * 0x11111111        # each nibble value
    got32 = fields_of(signed_field, 4, 8, "uint32", "float32")(
        w32.numpy().astype(np.uint32))
    want32 = INT4_TABLE[split_fields(w32.numpy(), 4, 8)].astype(np.float32)
    assert np.array_equal(np.asarray(got32), want32)

    w8 = torch.arange(-128, 128, dtype=torch.int8)
    got8 = fields_of(signed_field, 4, 2, "int8", "float16")(w8)
    want8 = INT4_TABLE[split_fields(w8.numpy(), 4, 2)].astype(np.float16)
    assert np.array_equal(got8.numpy(), want8)


def test_e2m1_fields_of_uint32_words_decode_to_float32(backend):
    codes = np.arange(16, dtype=np.uint32)
    words_in = codes * np.uint32(0x11111111)        # code c in every field
    got = fields_of(e2m1_field_as_float, 4, 8, "uint32", "float32")(words_in)
    want = np.repeat(E2M1_TABLE.astype(np.float32)[:, None], 8, axis=1)
    assert same_bits(np.asarray(got), want)


def test_e4m3_bytes_decode_to_half(backend):
    got = fields_of(e4m3_byte_as_half, 8, 1, "uint8", "float16")(
        torch.arange(256).to(torch.uint8))[:, 0].numpy()
    want = E4M3_TABLE.astype(np.float16)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert same_bits(got[~nan], want[~nan])
