"""Kernels that read a float's bits (T.reinterpret, issue 25): block-wise
FP8 quantisation with power-of-two scales found from the exponent field,
and radix-sortable keys with a histogram of their top byte built with
element T.atomic_add. Run on the CPU target against NumPy with ragged
shapes and the awkward values (zeros of both signs, infinities, NaN,
scales exactly at a power of two)."""

import math

import numpy as np
import pytest

import kiln
import kiln.language as T


# --- fp8 e4m3 (the "fn" flavour) on the host ------------------------------
# Bias 7, three mantissa bits, no infinities; 0x7F / 0xFF are NaN, 448 the
# largest finite magnitude.

def _e4m3_magnitude(code):
    exp, man = (code >> 3) & 0xF, code & 0x7
    if exp == 0:
        return math.ldexp(man, -9)
    return math.ldexp(8 + man, exp - 10)


# Magnitudes of codes 0..126 (0x7F is NaN), increasing with the code.
E4M3_MAGNITUDES = np.array([_e4m3_magnitude(c) for c in range(127)])
assert E4M3_MAGNITUDES[-1] == 448.0
assert np.all(np.diff(E4M3_MAGNITUDES) > 0)


def e4m3_decode(codes):
    """The values of e4m3fn bytes (no NaN codes expected) as float64."""
    codes = np.asarray(codes, dtype=np.uint8)
    assert not np.any((codes & 0x7F) == 0x7F), "a NaN code"
    mag = E4M3_MAGNITUDES[codes & 0x7F]
    return np.where(codes & 0x80, -mag, mag)


def e4m3_encode(values):
    """Round float values within [-448, 448] to the nearest e4m3fn code,
    ties to the even code (the even mantissa), keeping the sign of zero."""
    v = np.asarray(values, dtype=np.float64)
    assert np.all(np.abs(v) <= 448.0)
    mag = np.abs(v)
    hi = np.clip(np.searchsorted(E4M3_MAGNITUDES, mag), 0, 126)
    lo = np.clip(hi - 1, 0, 126)
    d_lo = mag - E4M3_MAGNITUDES[lo]
    d_hi = E4M3_MAGNITUDES[hi] - mag
    take_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    code = np.where(take_hi, hi, lo).astype(np.uint8)
    return code | np.where(np.signbit(v), 0x80, 0).astype(np.uint8)


def test_the_host_fp8_reference_rounds_to_nearest_even():
    assert e4m3_encode([448.0, -448.0, 0.0, -0.0]).tolist() == \
        [0x7E, 0xFE, 0x00, 0x80]
    # Ties go to the even code: 1 + 1/16 between 1 (0x38) and 1.125, 2 ** -10
    # between 0 and the least subnormal, 3 * 2 ** -10 between codes 1 and 2.
    assert e4m3_encode([1.0625, 1.1875, 2.0 ** -10, 3 * 2.0 ** -10]
                       ).tolist() == [0x38, 0x3A, 0x00, 0x02]
    codes = np.array([c for c in range(256) if c & 0x7F != 0x7F], np.uint8)
    # -0.0 decodes to 0.0 * -1 and comes back as 0x80.
    np.testing.assert_array_equal(e4m3_encode(e4m3_decode(codes)), codes)


# --- the power-of-two scale, as bit arithmetic -----------------------------

def log2_ceil(v):
    """ceil(log2(v)) of a positive normal f32 from its bits: the unbiased
    exponent, plus one unless the mantissa is zero (v a power of two)."""
    bits = T.reinterpret(v, T.uint32)
    exponent = (bits >> 23) & 0xFF
    rounds_up = T.if_then_else((bits & 0x7FFFFF) != 0, 1, 0)
    return T.cast(exponent, T.int32) - 127 + rounds_up


def log2_ceil_wrapping(v):
    """The same, left in uint32 arithmetic until the end (as TileLang's
    DeepSeek kernels write it): below 1.0 the subtraction wraps around, and
    the cast to int32 brings the negative exponent back."""
    bits = T.reinterpret(v, "uint32")
    biased = (bits >> 23) & 0xFF
    fraction = bits & ((1 << 23) - 1)
    return T.Cast("int32", biased - 127 + T.if_then_else(fraction != 0, 1, 0))


def exp2_int(e):
    """2.0 ** e for an int32 e in [-126, 127], by building the f32."""
    return T.reinterpret((e + 127) << 23, T.float32)


# How the kernel forms amax / 448 and its exponent: "div" divides and works
# in int32; "mul" multiplies by the reciprocal and wraps in uint32.
SCALE_FORMS = {"div": lambda amax: exp2_int(log2_ceil(amax / 448.0)),
               "mul": lambda amax: exp2_int(log2_ceil_wrapping(
                   amax * (1.0 / 448.0)))}


def pow2_scale_reference(amax, form="div"):
    """The same scale on the host: 2 ** ceil(log2(amax / 448)), the ratio
    rounded to f32 as the kernel forms it."""
    amax = np.asarray(amax, np.float32)
    if form == "div":
        ratio = amax / np.float32(448.0)
    else:
        ratio = amax * np.float32(1.0 / 448.0)
    mant, exp = np.frexp(ratio.astype(np.float64))  # ratio = mant * 2**exp
    e = np.where(mant == 0.5, exp - 1, exp)
    return np.ldexp(np.float32(1.0), e).astype(np.float32)


# Block-wise quantisation in TileLang's eager style: each block takes
# `rows` rows of one 128-column group, finds each row's absolute maximum
# (at least 1e-4), rounds amax / 448 up to a power of two for the scale,
# and stores x / scale, clamped to fp8's range, as float8_e4m3.
#
# NumPy has no fp8 dtype, so the bytes of the fp8 values come out as uint8:
# with stage="fragment" straight from the fp8 fragment; with
# stage="global" the fp8 tile goes through shared memory into an fp8
# global tensor (TileLang's own epilogue) that a second kernel, launched
# after the first, reads back as bytes.
@kiln.jit
def act_quant_pow2(x, group=128, rows=32, in_dtype=T.bfloat16,
                   scale_form="div", stage="fragment"):
    M = T.dynamic("M")
    N = T.const("N")
    x: T.Tensor[(M, N), in_dtype]
    quant = T.empty((M, N), T.uint8)
    scale = T.empty((M, T.ceildiv(N, group)), T.float32)
    if stage == "global":
        quant_fp8 = T.alloc_global((M, N), T.float8_e4m3)
    fp8_max = 448.0
    pow2_scale = SCALE_FORMS[scale_form]

    with T.Kernel(T.ceildiv(M, rows), T.ceildiv(N, group),
                  threads=128) as (rb, gb):
        staged = T.alloc_shared((rows, group), in_dtype)
        vals = T.alloc_fragment((rows, group), in_dtype)
        amax = T.alloc_fragment((rows,), T.float32)
        step = T.alloc_fragment((rows,), T.float32)
        q = T.alloc_fragment((rows, group), T.float8_e4m3)
        # Past the last row or column the copy reads zeros: no effect on
        # the absolute maximum.
        T.copy(x[rb * rows, gb * group], staged)
        T.copy(staged, vals)
        T.reduce_absmax(vals, amax, dim=1)
        for r in T.Parallel(rows):
            amax[r] = T.max(amax[r], 1e-4)
            step[r] = pow2_scale(amax[r])
        for r, c in T.Parallel(rows, group):
            q[r, c] = T.clamp(vals[r, c] / step[r], -fp8_max, fp8_max)
        for r in T.Parallel(rows):
            scale[rb * rows + r, gb] = step[r]
        if stage == "global":
            q_shared = T.alloc_shared((rows, group), T.float8_e4m3)
            T.copy(q, q_shared)
            T.copy(q_shared, quant_fp8[rb * rows, gb * group])
        else:
            for r, c in T.Parallel(rows, group):
                quant[rb * rows + r, gb * group + c] = T.reinterpret(
                    q[r, c], T.uint8)

    if stage == "global":
        with T.Kernel(T.ceildiv(M, rows), T.ceildiv(N, group),
                      threads=128) as (rb, gb):
            for r, c in T.Parallel(rows, group):
                quant[rb * rows + r, gb * group + c] = T.reinterpret(
                    quant_fp8[rb * rows + r, gb * group + c], T.uint8)
    return quant, scale


def bf16_exact(rng, shape, spread=6):
    """f32 values with a zero low half (exact in bfloat16), magnitudes over
    about 2 ** -spread .. 2 ** spread, both signs."""
    v = rng.standard_normal(shape) * np.exp2(
        rng.integers(-spread, spread + 1, shape))
    bits = v.astype(np.float32).view(np.uint32) & np.uint32(0xFFFF0000)
    return bits.view(np.float32)


def quant_inputs(rng, m, n):
    x = bf16_exact(rng, (m, n))
    groups = -(-n // 128)
    # Row 0, group 0: amax = 0.875 = 448 * 2**-9, so amax / 448 is exactly
    # a power of two: scale 2**-9 and the maximum quantises to 448.
    x[0, :128] = np.clip(x[0, :128], -0.5, 0.5)
    x[0, 5] = -0.875
    # Row 1, group 0: the next bfloat16 above 0.875 needs the next scale.
    x[1, :128] = np.clip(x[1, :128], -0.5, 0.5)
    x[1, 9] = 0.87890625
    # Row 2: all zeros (signed), amax floored to 1e-4.
    x[2] = 0.0
    x[2, ::3] = -0.0
    # Row 3, last (ragged) group: one tiny value, the floor still applies.
    x[3, (groups - 1) * 128:] = 0.0
    x[3, n - 1] = -2.0 ** -20
    # Row 4: large magnitudes, positive scale exponents.
    x[4] *= 2.0 ** 20
    return x


def quant_reference(x, form="div", group=128):
    m, n = x.shape
    groups = -(-n // group)
    pad = np.zeros((m, groups * group), np.float32)
    pad[:, :n] = x
    blocks = pad.reshape(m, groups, group)
    amax = np.maximum(np.abs(blocks).max(axis=2), np.float32(1e-4))
    scale = pow2_scale_reference(amax, form)
    y = np.clip(blocks / scale[:, :, None], -448.0, 448.0)
    # x / scale is exact in f32 (a power of two, no underflow here).
    codes = e4m3_encode(y.reshape(m, groups * group)[:, :n])
    return codes, scale, amax


def check_quant(x, quant, scale, form="div"):
    codes, want_scale, amax = quant_reference(x, form)
    assert scale.dtype == np.float32 and quant.dtype == np.uint8
    np.testing.assert_array_equal(scale, want_scale)
    # The scales are powers of two from the bit arithmetic, the smallest
    # ones that keep amax / scale within fp8's range.
    mant, _ = np.frexp(scale)
    assert np.all(mant == 0.5)
    assert np.all(amax / scale <= 448.0) and np.all(amax / scale > 224.0)
    # Every byte decodes to x / scale within half an fp8 step ...
    scaled = x / np.repeat(scale, 128, axis=1)[:, :x.shape[1]]
    got = e4m3_decode(quant)
    step = np.where(np.abs(got) < 2.0 ** -6, 2.0 ** -9,
                    np.exp2(np.floor(np.log2(np.maximum(np.abs(got),
                                                        2.0 ** -6))) - 3))
    assert np.all(np.abs(got - scaled) <= step / 2)
    # ... and is exactly the round-to-nearest-even code, signed zeros too.
    np.testing.assert_array_equal(quant, codes)


@pytest.mark.parametrize("m,n,form,stage", [
    (77, 300, "div", "fragment"), (33, 128, "div", "global"),
    (5, 129, "mul", "fragment"), (40, 390, "mul", "global")])
def test_fp8_act_quant_from_float32(backend, rng, m, n, form, stage):
    x = quant_inputs(rng, m, n)
    # (The "global" stage's fp8 scratch tensor has no NumPy dtype: it gets
    # same-width uint8 storage, kiln/_launch.py allocate.)
    quant, scale = act_quant_pow2(x, in_dtype=T.float32, scale_form=form,
                                  stage=stage)
    assert quant.shape == (m, n) and scale.shape == (m, -(-n // 128))
    check_quant(x, quant, scale, form)
    # The special rows came out as planned.
    if form == "div":
        assert scale[0, 0] == 2.0 ** -9 and quant[0, 5] == 0xFE  # -448
    assert scale[1, 0] == 2.0 ** -8
    assert np.all(quant[2] & 0x7F == 0)
    assert np.array_equal(quant[2] == 0x80, np.signbit(x[2]))


def test_fp8_act_quant_from_bfloat16(backend, rng):
    torch = pytest.importorskip("torch", reason="bfloat16 tensors need torch")
    m, n = 70, 260
    x = quant_inputs(rng, m, n)
    xb = torch.from_numpy(x).to(torch.bfloat16)
    assert torch.equal(xb.float(), torch.from_numpy(x))  # exact
    quant, scale = act_quant_pow2(xb)
    check_quant(x, quant.numpy(), scale.numpy())


def test_fp8_act_quant_ir_reads_the_bits(backend):
    kernel = act_quant_pow2.compile(N=200, in_dtype=T.bfloat16)
    lines = [line.strip() for line in kernel.ir.splitlines()]
    assert "alloc fragment q: f8e4m3[32, 128]" in lines
    step = next(line for line in lines if line.startswith("step[r] = "))
    assert step.startswith("step[r] = from_bits_f32(") and "bits(" in step
    assert "quant[rb * 32 + r_3, gb * 128 + c_1] = u8(bits(q[r_3, c_1]))" \
        in lines
    # The staged form: two kernels sharing the fp8 tensor, the second
    # reading its bytes.
    staged = act_quant_pow2.compile(N=200, stage="global").ir
    assert "kernel act_quant_pow2_k1(" in staged
    assert "quant_fp8: f8e4m3[M, 200])" in staged
    assert "copy q_shared -> quant_fp8[rb * 32:+32, gb * 128:+128]" in staged


# --- radix keys from float bits --------------------------------------------

def sortable_key_select(v):
    """Flip every bit of a negative float, only the sign of the rest."""
    bits = T.reinterpret(v, T.uint32)
    return bits ^ T.if_then_else((bits >> 31) == 1, T.uint32(0xFFFFFFFF),
                                 T.uint32(0x80000000))


def sortable_key_shift(v):
    """The same flip without a branch: the sign, spread by an arithmetic
    shift of the signed bits, or-ed with the sign bit."""
    spread = T.reinterpret(v, T.int32) >> 31
    return T.reinterpret(v, T.uint32) ^ (T.reinterpret(spread, T.uint32)
                                         | T.uint32(0x80000000))


KEY_FORMS = {"select": sortable_key_select, "shift": sortable_key_shift}


# A top-k selector's first pass in the eager style: each element's key
# goes out, and every block adds its elements to a 256-bin histogram of
# the keys' top byte. A first kernel zeroes the histogram (T.empty is
# uninitialised); the second runs once the first is done.
@kiln.jit
def radix_keys(x, form="select", block=256, threads=128):
    N = T.dynamic("N")
    x: T.Tensor((N,), T.float32)
    keys = T.empty((N,), T.uint32)
    hist = T.empty((256,), T.int32)
    key_of = KEY_FORMS[form]

    with T.Kernel(1, threads=threads) as _:
        for b in T.Parallel(256):
            hist[b] = 0

    with T.Kernel(T.ceildiv(N, block), threads=threads) as blk:
        vals = T.alloc_fragment((block,), T.float32)
        T.copy(x[blk * block], vals)
        for i in T.Parallel(block):
            key = key_of(vals[i])
            if blk * block + i < N:
                keys[blk * block + i] = key
                T.atomic_add(hist[key >> 24], 1)
    return keys, hist


def key_reference(x):
    bits = x.view(np.uint32)
    flip = np.where(bits >> 31 == 1, np.uint32(0xFFFFFFFF),
                    np.uint32(0x80000000)).astype(np.uint32)
    keys = bits ^ flip
    return keys, np.bincount(keys >> 24, minlength=256).astype(np.int32)


def key_inputs(rng, n):
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-40, 40, n))
         ).astype(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, 1e-45, -1e-45,
                        np.finfo(np.float32).max, -np.finfo(np.float32).max,
                        1.0, -1.0, np.finfo(np.float32).tiny], np.float32)
    x[:len(special)] = special
    x[-3:] = [-0.0, 0.0, -np.inf]  # in the ragged last block
    return x


@pytest.mark.parametrize("form", sorted(KEY_FORMS))
def test_radix_keys_and_top_byte_histogram(backend, rng, form):
    n = 5 * 256 + int(rng.integers(1, 255))
    x = key_inputs(rng, n)
    keys, hist = radix_keys(x, form)
    want_keys, want_hist = key_reference(x)
    assert keys.dtype == np.uint32 and hist.dtype == np.int32
    np.testing.assert_array_equal(keys, want_keys)
    np.testing.assert_array_equal(hist, want_hist)
    assert hist.sum() == n
    # Unsigned key order is float order, -0.0 just below +0.0.
    order = np.argsort(keys, kind="stable")
    ordered = x[order]
    assert np.all(ordered[1:] >= ordered[:-1])
    assert keys[1] == 0x7FFFFFFF and keys[0] == 0x80000000
    assert keys[3] == 0x007FFFFF and keys[2] == 0xFF800000


def test_radix_keys_keep_nan_bits(backend):
    # NaNs sort past the infinities of their sign, payload kept (f32 bits
    # round-trip exactly).
    pos_nan = np.array([0x7FC00001], np.uint32).view(np.float32)[0]
    neg_nan = np.array([0xFFA00000], np.uint32).view(np.float32)[0]
    x = np.array([pos_nan, neg_nan, np.inf, -np.inf], np.float32)
    keys, hist = radix_keys(x)
    np.testing.assert_array_equal(keys, key_reference(x)[0])
    assert keys[0] > keys[2] and keys[1] < keys[3]
    assert hist[0xFF] == 2 and hist[0x00] == 2 and hist.sum() == 4


# --- float16 <-> bfloat16, same width --------------------------------------

@kiln.jit(out_idx=[-2, -1])
def swap_half_kinds(n):
    @T.prim_func
    def main(H: T.Tensor((n,), T.float16), B: T.Tensor((n,), T.float32),
             HasB: T.Tensor((n,), T.float32),
             BasH: T.Tensor((n,), T.float16)):
        with T.Kernel(T.ceildiv(n, 64), threads=64) as blk:
            for i in T.Parallel(64):
                k = blk * 64 + i
                if k < n:
                    HasB[k] = T.reinterpret(H[k], T.bfloat16)
                    BasH[k] = T.reinterpret(B[k].astype(T.bfloat16),
                                            T.float16)
    return main


def test_reinterpret_between_float16_and_bfloat16(backend, rng):
    n = 100 + int(rng.integers(1, 27))
    # Patterns that are no NaN in either format (whose payload the manual
    # leaves open): float16's infinities are finite bfloat16 values.
    pats = rng.integers(0, 1 << 16, 4 * n).astype(np.uint16)
    f16_nan = ((pats & 0x7C00) == 0x7C00) & ((pats & 0x03FF) != 0)
    bf16_nan = ((pats & 0x7F80) == 0x7F80) & ((pats & 0x007F) != 0)
    pats = pats[~f16_nan & ~bf16_nan][:n]
    pats[:8] = [0x0000, 0x8000, 0x3C00, 0xBC00, 0x3F80, 0x0001, 0x7C00,
                0xFC00]
    h = pats.view(np.float16)
    b = (pats.astype(np.uint32) << 16).view(np.float32)  # same bits, bf16
    h_as_b, b_as_h = swap_half_kinds(n)(h, b)
    np.testing.assert_array_equal(h_as_b.view(np.uint32),
                                  pats.astype(np.uint32) << 16)
    np.testing.assert_array_equal(b_as_h.view(np.uint16), pats)
    # float16's 1.0 read as bfloat16 is 2 ** -7; bfloat16's 1.0 read as
    # float16 is 1.875.
    assert h_as_b[2] == 2.0 ** -7 and b_as_h[4] == 1.875
    assert b_as_h[6] == np.inf and h_as_b[6] == 2.0 ** 121
