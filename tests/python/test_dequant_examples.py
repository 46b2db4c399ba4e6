"""TileLang's bit-level dequantisation examples ported as a new user would
(issue 25): the kernel text of examples/dequantize_gemm/*.py copied with
only the imports changed, run on the CPU target against the examples' own
torch references at small ragged shapes.

The examples import

    import tilelang
    import tilelang.language as T
    from tilelang import tvm as tvm
    from tvm import DataType
    from tvm import tirx

and the ports

    import kiln as tilelang
    import kiln.language as T
    from kiln import tvm as tvm
    from tvm import DataType
    from tvm import tirx

(``from kiln import tvm`` makes ``tvm`` importable when no real TVM is
installed; with one installed, ``from kiln.tvm import DataType, tirx``).
Left out of the copies: docstrings, the autotune configs, the split-K and
fast (``T.call_extern``) variants, and the benchmarking mains.
"""

import pytest

import kiln as tilelang
import kiln.language as T
from kiln import tvm as tvm
from kiln.tvm import DataType
from kiln.tvm import tirx

torch = pytest.importorskip("torch")


@pytest.fixture
def gen():
    seed = int(torch.randint(0, 1 << 30, (1,)))
    print(f"random seed {seed}")
    return torch.Generator().manual_seed(seed)


def test_the_port_imports_resolve_through_tvm():
    if not tvm.AS_TVM:
        pytest.skip("a real tvm is installed: the port imports kiln.tvm")
    from tvm import DataType as dt
    from tvm import tirx as tx
    assert dt is DataType and tx is tirx


# --- examples/dequantize_gemm/example_dequant_gemm_fp4_hopper.py ----------

def _tir_u8_to_f4_to_f16(nbit: int, val: tirx.PrimExpr, pos: tirx.PrimExpr, dtype: str):
    assert nbit == 4
    assert dtype == T.float16
    assert val.dtype == T.uint8
    # e_f4 == 0 -> e_f16 = 0
    # e_f4 != 0 -> e_f16 = e_f4 + ExponentialBias(f16, f4) = e_f4 + (2^4 - 2^1) = e_f4 + 14
    # s1e2m1
    mask = tirx.const((1 << nbit) - 1, T.uint16)
    f4 = (val >> (pos.astype(T.uint16) * tirx.const(nbit, T.uint16))) & mask
    s = f4 >> tirx.const(3, T.uint16)
    e_f4 = (f4 & tirx.const(6, T.uint16)) >> tirx.const(1, T.uint16)
    e_f16 = e_f4 + tirx.const(14, T.uint16)
    m_f4 = f4 & tirx.const(1, T.uint16)
    m_f16 = m_f4
    val_f16 = tirx.reinterpret(
        T.float16,
        ((e_f16 | (s << tirx.const(5, T.uint16))) << tirx.const(10, T.uint16) | m_f16 << tirx.const(9, T.uint16)).astype(T.uint16),
    )
    # return tirx.Select(e_f4 == tirx.const(0, "uint32"), tirx.const(0, T.float16), val_f16)
    return val_f16


def torch_convert_f16(tensor):
    assert tensor.dim() == 2 and tensor.dtype == torch.uint8
    N, K = tensor.shape

    f4 = torch.stack((tensor & 0x0F, tensor >> 4), dim=-1)
    f4 = f4.reshape(N, K * 2).to(torch.int16)
    sign = (f4 >> 3) * -32768
    exponent = (((f4 & 6) >> 1) + 14) << 10
    mantissa = (f4 & 1) << 9
    return (sign + exponent + mantissa).view(torch.float16)


# The example's `test_convert`, renamed so pytest does not collect it.
@tilelang.jit(out_idx=[1])
def fp4_convert(N, K, block_N, block_K, in_dtype, num_bits=4, threads=128):
    num_elems_per_byte = 8 // num_bits
    storage_dtype = T.uint8
    B_shape = (N, K // num_elems_per_byte)
    B_shared_shape = (block_N, block_K // num_elems_per_byte)
    B_dequantize_shared_shape = (block_N, block_K)

    @T.prim_func
    def main(
        B: T.Tensor(B_shape, storage_dtype),
        C: T.Tensor((N, K), in_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), threads=threads) as (bx):
            B_shared = T.alloc_shared(B_shared_shape, storage_dtype)
            B_local = T.alloc_fragment(B_shared_shape, storage_dtype)
            B_dequantize_local = T.alloc_fragment(B_dequantize_shared_shape, in_dtype)

            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=1):
                T.copy(B[bx * block_N, k * block_K // num_elems_per_byte], B_shared)
                T.copy(B_shared, B_local)
                for i, j in T.Parallel(block_N, block_K):
                    B_dequantize_local[i, j] = _tir_u8_to_f4_to_f16(
                        num_bits,
                        B_local[i, j // num_elems_per_byte],
                        j % num_elems_per_byte,
                        dtype=in_dtype,
                    )
                T.copy(B_dequantize_local, C[bx * block_N, k * block_K])

    return main


@tilelang.jit(out_idx=[2])
def matmul_fp4_f16(
    M,
    N,
    K,
    in_dtype,
    out_dtype,
    accum_dtype,
    num_bits=4,
    block_M=128,
    block_N=128,
    block_K=128,
    num_stages=2,
    threads=256,
    split=1,
):
    num_elems_per_byte = 8 // num_bits
    storage_dtype = T.uint8
    A_shape = (M, K)
    B_shape = (N, K // num_elems_per_byte)
    A_shared_shape = (block_M, block_K)
    B_shared_shape = (block_N, block_K // num_elems_per_byte)
    B_dequantize_shared_shape = (block_N, block_K)
    assert K % (block_K * split) == 0

    @T.prim_func
    def main(
        A: T.Tensor(A_shape, in_dtype),
        B: T.Tensor(B_shape, storage_dtype),
        Ct: T.Tensor((N, M), out_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared(A_shared_shape, in_dtype)
            B_shared = T.alloc_shared(B_shared_shape, storage_dtype)
            B_local = T.alloc_fragment(B_shared_shape, storage_dtype)
            B_dequantize_local = T.alloc_fragment(B_dequantize_shared_shape, in_dtype)
            B_dequantize_prev_local = T.alloc_fragment(B_dequantize_shared_shape, in_dtype)
            Ct_local = T.alloc_fragment((block_N, block_M), accum_dtype)
            Ct_shared = T.alloc_shared((block_N, block_M), out_dtype)

            T.annotate_layout(
                {
                    B_shared: tilelang.layout.make_swizzled_layout(B_shared),
                }
            )

            T.clear(Ct_local)
            for k in T.Pipelined(K // block_K, num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K // num_elems_per_byte], B_shared)
                T.copy(B_shared, B_local)
                for i, j in T.Parallel(block_N, block_K):
                    B_dequantize_local[i, j] = _tir_u8_to_f4_to_f16(
                        num_bits,
                        B_local[i, j // num_elems_per_byte],
                        j % num_elems_per_byte,
                        dtype=in_dtype,
                    )
                T.copy(B_dequantize_local, B_dequantize_prev_local)
                T.gemm(B_dequantize_prev_local, A_shared, Ct_local, transpose_B=True)
            T.copy(Ct_local, Ct_shared)
            T.copy(Ct_shared, Ct[bx * block_N : (bx + 1) * block_N, by * block_M : (by + 1) * block_M])

    return main


def ref_program_f16(A, qB):
    dtypeC = T.float16
    B = torch_convert_f16(qB)
    C = torch.matmul(A.to(torch.float), B.T.to(torch.float))
    C = C.to(torch.__getattribute__(dtypeC))
    return C.transpose(0, 1)


def test_fp4_to_f16_convert_matches_the_torch_reference(backend, gen):
    # Every byte value, in a ragged last block of rows.
    N, K = 70, 256
    kernel = fp4_convert(N, K, 64, 64, T.float16)
    B = torch.randint(0, 256, (N, K // 2), dtype=torch.uint8, generator=gen)
    B[0, :128] = torch.arange(128, dtype=torch.uint8)
    B[1, :128] = torch.arange(128, 256, dtype=torch.uint8)
    out = kernel(B)
    ref = torch_convert_f16(B)
    assert torch.equal(out.view(torch.int16), ref.view(torch.int16))


def test_fp4_f16_gemm_matches_the_torch_reference(backend, gen):
    m, n, k = 72, 200, 256  # ragged M and N blocks
    kernel = matmul_fp4_f16(m, n, k, T.float16, T.float16, T.float32,
                            num_bits=4, block_M=64, block_N=64, block_K=128,
                            num_stages=2, threads=128, split=1)
    A = torch.randint(-2, 3, (m, k), generator=gen).to(torch.float16)
    qB = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, generator=gen)
    Ct = kernel(A, qB)
    torch.testing.assert_close(Ct, ref_program_f16(A, qB), rtol=0.01,
                               atol=0.01)


# --- examples/dequantize_gemm/example_dequant_gemm_bf16_fp4_hopper.py -----
# (its simple path: fast_dequant=False)

@tilelang.jit(
    out_idx=[-1],
    pass_configs={tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True},
)
def matmul_fp4_bf16(
    M,
    N,
    K,
    in_dtype,
    out_dtype,
    accum_dtype,
    source_format=T.uint32,
    num_bits=4,
    fast_dequant=True,
    block_M=256,
    block_N=128,
    block_K=128,
    num_stages=2,
    threads=256,
    split=1,
):
    num_elems_per_byte = 8 // num_bits
    storage_dtype = T.uint8

    QK = K // num_elems_per_byte
    Block_QK = block_K // num_elems_per_byte
    A_shape = (M, K)
    B_shape = (N, QK)
    A_shared_shape = (block_M, block_K)
    B_shared_shape = (block_N, Block_QK)
    B_dequantize_shared_shape = (block_N, block_K)
    assert K % (block_K * split) == 0
    assert not fast_dequant, "the port keeps the simple dequantisation"

    def get_simple_dequant_func(in_dtype="fp4", out_dtype=T.bfloat16):
        assert in_dtype in ["fp4"]
        assert out_dtype in [T.bfloat16]

        def _tir_u8_to_f4_to_bf16(nbit: int, val: tirx.PrimExpr, pos: tirx.PrimExpr, scale: tirx.PrimExpr, dtype: str):
            assert nbit == 4
            assert dtype == T.bfloat16
            assert val.dtype == T.uint8
            mask = tirx.const((1 << nbit) - 1, T.uint16)
            f4 = (val >> (pos.astype(T.uint16) * tirx.const(nbit, T.uint16))) & mask
            s = f4 >> tirx.const(3, T.uint16)
            e_f4 = (f4 & tirx.const(6, T.uint16)) >> tirx.const(1, T.uint16)
            # Exponential bias between f4 and bf16 is 2^(8-1) - 2^(2-1) = 126
            e_bf16 = e_f4 + tirx.const(126, T.uint16)
            # Scale is the exponential part, within the representation of uint8
            # To handle the overflow, we use the max function to limit the exponential part to 8 bits
            e_bf16 = T.min(e_bf16 + scale, tirx.const((1 << 8) - 1, T.uint16))
            m_f4 = f4 & tirx.const(1, T.uint16)
            val_bf16 = tirx.reinterpret(
                T.bfloat16,
                ((((s << tirx.const(8, T.uint16)) | e_bf16) << tirx.const(7, T.uint16)) | (m_f4 << tirx.const(6, T.uint16))).astype(
                    T.uint16
                ),
            )
            return val_bf16

        @T.macro
        def simple_dequant_bf16_fp4(B_shared, B_dequantize_shared):
            B_local = T.alloc_fragment(B_shared_shape, storage_dtype)
            B_dequantize_local = T.alloc_fragment(B_dequantize_shared_shape, out_dtype)
            T.copy(B_shared, B_local)
            for i, j in T.Parallel(block_N, block_K):
                B_dequantize_local[i, j] = _tir_u8_to_f4_to_bf16(
                    num_bits,
                    B_shared[i, j // num_elems_per_byte],
                    j % num_elems_per_byte,
                    0,  # No scale for test
                    dtype=out_dtype,
                )
            T.copy(B_dequantize_local, B_dequantize_shared)

        return simple_dequant_bf16_fp4

    @T.prim_func
    def main(
        A: T.Tensor(A_shape, in_dtype),
        B: T.Tensor(B_shape, storage_dtype),
        C: T.Tensor((M, N), out_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared(A_shared_shape, in_dtype)
            B_shared = T.alloc_shared(B_shared_shape, storage_dtype)
            B_dequantize_shared = T.alloc_shared(B_dequantize_shared_shape, in_dtype)

            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            C_shared = T.alloc_shared((block_M, block_N), out_dtype)

            T.clear(C_local)
            for k in T.Pipelined(K // block_K, num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K // num_elems_per_byte], B_shared)

                if fast_dequant:
                    get_fast_dequant_twiddling_func()(B_shared, B_dequantize_shared)  # noqa: F821
                else:
                    get_simple_dequant_func()(B_shared, B_dequantize_shared)

                T.gemm(A_shared, B_dequantize_shared, C_local, transpose_B=True)

            T.copy(C_local, C_shared)
            T.copy(C_shared, C[by * block_M : (by + 1) * block_M, bx * block_N : (bx + 1) * block_N])

    return main


# examples/dequantize_gemm/dequantize_utils.py (no scale)
def torch_convert_bf16(tensor):
    assert tensor.dim() == 2 and tensor.dtype == torch.uint8
    N, K = tensor.shape

    f4 = torch.stack((tensor & 0x0F, tensor >> 4), dim=-1)
    f4 = f4.reshape(N, K * 2).to(torch.int16)
    sign = (f4 >> 3) * -32768
    exponent = ((f4 & 6) >> 1) + 126
    mantissa = (f4 & 1) << 6
    return (sign + (exponent << 7) + mantissa).view(torch.bfloat16)


def ref_program_simple(A, qB):
    dtypeC = T.bfloat16
    B = torch_convert_bf16(qB)
    C = torch.matmul(A.to(torch.float), B.T.to(torch.float))
    C = C.to(torch.__getattribute__(dtypeC))
    return C


def test_fp4_bf16_gemm_matches_the_torch_reference(backend, gen):
    m, n, k = 40, 100, 256  # ragged M and N blocks
    kernel = matmul_fp4_bf16(m, n, k, T.bfloat16, T.bfloat16, T.float32,
                             num_bits=4, fast_dequant=False, block_M=32,
                             block_N=64, block_K=128, num_stages=2,
                             threads=128)
    A = torch.randn(m, k, generator=gen).to(torch.bfloat16)
    qB = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, generator=gen)
    C = kernel(A, qB)
    torch.testing.assert_close(C, ref_program_simple(A, qB), rtol=0.01,
                               atol=0.01)


# --- examples/dequantize_gemm/example_dequant_gemm_w4a8.py ----------------

def _tir_u8_to_i4_to_i8(nbit: int, val: tirx.PrimExpr, pos: tirx.PrimExpr, dtype: str):
    assert nbit == 4
    assert dtype == T.int8
    assert val.dtype == T.uint8

    mask = tirx.const((1 << nbit) - 1, T.uint8)

    i4 = (val >> (pos.astype(T.uint8) * tirx.const(nbit, T.uint8))) & mask

    i8_shifted = tirx.reinterpret(T.int8, i4 << tirx.const(4, T.uint8))
    i8 = i8_shifted >> tirx.const(4, T.int8)
    return i8


@tilelang.jit(out_idx=[1])
def _convert_test(N, K, block_N, block_K, in_dtype, num_bits=4, threads=128):
    num_elems_per_byte = 8 // num_bits
    storage_dtype = T.uint8
    B_shape = (N, K // num_elems_per_byte)
    B_shared_shape = (block_N, block_K // num_elems_per_byte)
    B_dequantize_shared_shape = (block_N, block_K)

    @T.prim_func
    def main(
        B: T.Tensor(B_shape, storage_dtype),
        C: T.Tensor((N, K), in_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), threads=threads) as (bx):
            B_shared = T.alloc_shared(B_shared_shape, storage_dtype)
            B_local = T.alloc_fragment(B_shared_shape, storage_dtype)
            B_dequantize_local = T.alloc_fragment(B_dequantize_shared_shape, in_dtype)

            for k in T.Pipelined(0, T.ceildiv(K, block_K), num_stages=1):
                T.copy(B[bx * block_N, k * block_K // num_elems_per_byte], B_shared)
                T.copy(B_shared, B_local)
                for i, j in T.Parallel(block_N, block_K):
                    B_dequantize_local[i, j] = _tir_u8_to_i4_to_i8(
                        num_bits,
                        B_local[i, j // num_elems_per_byte],
                        j % num_elems_per_byte,
                        dtype=in_dtype,
                    )
                T.copy(B_dequantize_local, C[bx * block_N, k * block_K])

    return main


def torch_convert_i8(tensor):
    assert tensor.dim() == 2 and tensor.dtype == torch.uint8
    N, K = tensor.shape

    i4 = torch.stack((tensor & 0x0F, tensor >> 4), dim=-1)
    i4 = i4.reshape(N, K * 2).to(torch.int8)
    return (i4 << 4) >> 4


def test_int4_to_int8_convert_matches_the_torch_reference(backend, gen):
    N, K = 50, 256
    kernel = _convert_test(N, K, 32, 128, T.int8)
    B = torch.randint(0, 256, (N, K // 2), dtype=torch.uint8, generator=gen)
    assert torch.equal(kernel(B), torch_convert_i8(B))


# --- DataType(...).bits, as the gemm and gemv examples size their tiles ---

def test_datatype_bits_size_tiles_as_the_examples_do():
    MAX_TRANSACTION_SIZE_IN_BITS = 128
    assert MAX_TRANSACTION_SIZE_IN_BITS // DataType(T.float16).bits == 8
    assert MAX_TRANSACTION_SIZE_IN_BITS // DataType("int8").bits == 16
    assert 64 * DataType("float16").bits == 1024  # can_swizzle
    assert tilelang.DataType is DataType  # `from tilelang import DataType`


# --- examples/dequantize_gemm/quantize/quantization.py helpers ------------
# (T.Select, T.Cast, tvm.tirx.const spelled through `tvm`, uint32 and
# uint16 bit assembly), each run on every code it decodes.

def _tir_u32_to_int_to_float(nbit: int, val: tirx.PrimExpr, pos: tirx.PrimExpr, dtype: str):
    assert val.dtype == T.uint32
    mask = tvm.tirx.const((1 << nbit) - 1, T.uint32)
    unextended = (val >> (pos * nbit).astype(T.uint32)) & mask
    shift = tirx.const(32 - nbit, T.int32)
    extended = (tirx.Cast(T.int32, unextended) << shift) >> shift
    return tirx.Cast(dtype, extended)


def _tir_packed_int_to_int_to_float(storage_nbit: int):
    storage_dtype = "int" + str(storage_nbit)

    def f_convert(nbit: int, val: tirx.PrimExpr, pos: tirx.PrimExpr, dtype: str):
        assert val.dtype == storage_dtype, f"{val.dtype} != {storage_dtype}"
        mask = tirx.const((1 << nbit) - 1, T.int32)
        unextended = (val >> (pos.astype(T.int32) * tirx.const(nbit, T.int32))) & mask
        return tirx.Cast(
            dtype, (unextended << tirx.const(32 - nbit, T.int32)) >> tirx.const(32 - nbit, T.int32))

    return f_convert


def _tir_u32_to_f4_to_f32(nbit: int, val: tirx.PrimExpr, pos: tirx.PrimExpr, dtype: str):
    assert nbit == 4
    assert dtype == T.float32
    assert val.dtype == T.uint32
    # e_f4 == 0 -> e_f32 = 0
    # e_f4 != 0 -> e_f32 = e_f4 + 120 = e_f4 | (1111000)_2
    mask = tvm.tirx.const((1 << nbit) - 1, T.uint32)
    f4 = (val >> (pos.astype(T.uint32) * tirx.const(nbit, T.uint32))) & mask
    s = f4 >> tirx.const(3, T.uint32)
    e_f4 = f4 & tirx.const(7, T.uint32)
    e_f32 = e_f4 | tirx.const(120, T.uint32)
    val_f32 = tirx.reinterpret(T.float32,
                              (e_f32 | (s << tirx.const(8, T.uint32))) << tirx.const(23, T.uint32))
    return tirx.Select(e_f4 == tirx.const(0, T.uint32), tirx.const(0, T.float32), val_f32)


def _tir_u8_to_f8_e4m3_subnormal_to_f16_bits(mantissa: tirx.PrimExpr):
    # E4M3 subnormals have value mantissa * 2^-9; normalize that value into binary16 bits.
    return tirx.Select(
        mantissa >= tirx.const(4, T.uint16),
        tirx.const(0x2000, T.uint16)
        | ((mantissa & tirx.const(0x3, T.uint16)) << tirx.const(8, T.uint16)),
        tirx.Select(
            mantissa >= tirx.const(2, T.uint16),
            tirx.const(0x1C00, T.uint16)
            | ((mantissa & tirx.const(0x1, T.uint16)) << tirx.const(9, T.uint16)),
            tirx.Select(
                mantissa == tirx.const(1, T.uint16),
                tirx.const(0x1800, T.uint16),
                tirx.const(0, T.uint16),
            ),
        ),
    )


def _tir_u8_to_f8_e4m3_to_f16_naive(nbit: int, val: tirx.PrimExpr, dtype: str):
    assert nbit == 8
    assert dtype == T.float16
    val_u16 = val.astype(T.uint16)
    s_f16 = (val_u16 >> tirx.const(7, T.uint16)) << tirx.const(15, T.uint16)
    exponent = (val_u16 >> tirx.const(3, T.uint16)) & tirx.const(0xF, T.uint16)
    mantissa = val_u16 & tirx.const(0x7, T.uint16)
    normal_f16 = ((exponent + tirx.const(8, T.uint16)) << tirx.const(10, T.uint16)) | (
        mantissa << tirx.const(7, T.uint16)
    )
    subnormal_f16 = _tir_u8_to_f8_e4m3_subnormal_to_f16_bits(mantissa)
    magnitude_f16 = tirx.Select(
        exponent == tirx.const(0, T.uint16),
        subnormal_f16,
        tirx.Select(
            (exponent == tirx.const(0xF, T.uint16))
            & (mantissa == tirx.const(0x7, T.uint16)),
            tirx.const(0x7E00, T.uint16),
            normal_f16,
        ),
    )
    return tirx.reinterpret(T.float16, s_f16 | magnitude_f16)


QN = T.symbolic("QN")


@tilelang.jit(out_idx=[-1])
def unpack(convert, nbit, per, storage_dtype, out_dtype, block=64):
    # Out[n, p] = convert(nbit, V[n], p): field p of each packed value.
    @T.prim_func
    def main(V: T.Tensor((QN,), storage_dtype),
             Out: T.Tensor((QN, per), out_dtype)):
        with T.Kernel(T.ceildiv(QN, block), threads=64) as bx:
            for i, p in T.Parallel(block, per):
                if bx * block + i < QN:
                    Out[bx * block + i, p] = convert(
                        nbit, V[bx * block + i], p, dtype=out_dtype)
    return main


def _fields(v, nbit, per):
    """The unsigned nbit fields of the integers v, lowest first."""
    v = v.to(torch.int64) & ((1 << (nbit * per)) - 1)
    return torch.stack([(v >> (nbit * p)) & ((1 << nbit) - 1)
                        for p in range(per)], dim=-1)


def test_int_unpacking_helpers_sign_extend_every_field(backend, gen):
    v = torch.randint(-(1 << 31), 1 << 31, (300,), generator=gen)
    v[:16] = torch.arange(16) * 0x11111111  # every nibble value
    fields = _fields(v, 4, 8)
    signed = torch.where(fields >= 8, fields - 16, fields)
    u32 = unpack(_tir_u32_to_int_to_float, 4, 8, "uint32", "float32")
    out = u32(v.to(torch.int64).numpy().astype("uint32"))
    assert torch.equal(torch.from_numpy(out), signed.to(torch.float32))
    i8 = unpack(_tir_packed_int_to_int_to_float(8), 4, 2, "int8", "float16")
    v8 = torch.arange(-128, 128, dtype=torch.int8)
    assert torch.equal(i8(v8), torch.where(
        _fields(v8, 4, 2) >= 8, _fields(v8, 4, 2) - 16,
        _fields(v8, 4, 2)).to(torch.float16))


def test_fp4_to_f32_helper_decodes_every_code(backend):
    codes = torch.arange(16)
    packed = (codes.repeat(8, 1).T << (4 * torch.arange(8))).sum(dim=1)
    out = unpack(_tir_u32_to_f4_to_f32, 4, 8, "uint32", "float32")(
        packed.numpy().astype("uint32"))
    e, s = codes & 7, codes >> 3
    ref = torch.where(e == 0, torch.zeros(16),
                      (1 - 2 * s) * torch.exp2(e.to(torch.float32) - 7))
    assert torch.equal(torch.from_numpy(out), ref[:, None].expand(16, 8))


def _e4m3_value(b):
    s, e, m = b >> 7, (b >> 3) & 15, b & 7
    if e == 15 and m == 7:
        return float("nan")
    mag = m * 2.0 ** -9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
    return -mag if s else mag


def test_e4m3_to_f16_helper_decodes_every_byte(backend):
    def convert(nbit, val, pos, dtype):
        return _tir_u8_to_f8_e4m3_to_f16_naive(nbit, val, dtype)

    out = unpack(convert, 8, 1, "uint8", "float16")(
        torch.arange(256).to(torch.uint8))[:, 0]
    ref = torch.tensor([_e4m3_value(b) for b in range(256)]).to(torch.float16)
    torch.testing.assert_close(out, ref, rtol=0, atol=0, equal_nan=True)
