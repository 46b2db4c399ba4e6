"""The kernels whose tile IR is kept as golden files (goldens/NAME.tile)."""

import kiln.language as T

import kernels


def cases():
    """NAME -> a callable returning the translated kernel."""
    M, N, K = T.symbolic("M"), T.symbolic("N"), T.symbolic("K")
    return {
        "gemm": lambda: kernels.matmul(M, N, K, 128, 128, 32, num_stages=3),
        "flash_attention_fwd": lambda: kernels.flashattn(2, 8, 512, 64, False),
        "flash_attention_fwd_causal":
            lambda: kernels.flashattn(2, 8, 512, 128, True, block_M=128),
        "softmax": lambda: kernels.softmax(M, N),
        "rms_norm": lambda: kernels.rms_norm(M, N),
        "scale_add_symbolic": lambda: kernels.scale_add(),
        # TileLang's own wording of causal and full attention, with the
        # Hopper path's tiles (two consumer warpgroups, two stages): one
        # spelling each in tests/codegen/phrasings.
        "attention_causal_tilelang": lambda: kernels.flashattn_tilelang(
            2, 8, 1024, 128, True, block_M=128, block_N=128, num_stages=2,
            threads=256),
        "attention_tilelang": lambda: kernels.flashattn_tilelang(
            2, 8, 1024, 128, False, block_M=128, block_N=128, num_stages=2,
            threads=256),
        # A grouped GEMM's launch sized by a tile map, DeepSeek-V3's expert
        # shapes (bench/gpu/moe.py times it beside the corpus spelling).
        "moe_gemm": lambda: kernels.moe_gemm(64, 4096, 7168),
        # TileLang's FP8 blockwise GEMM as written (bench.py blockscaled
        # times it beside the corpus spelling).
        "fp8_blockwise_gemm": lambda: kernels.fp8_blockwise_gemm(4096, 4096),
        # Packed causal GQA prefill as TileLang's varlen example writes it
        # (bench/gpu/varlen.py times it against SDPA on the padded batch).
        "flashattn_varlen": lambda: kernels.flashattn_varlen(
            8, 4, 16384, 16384, 32, 128, True, block_M=128, block_N=128,
            num_stages=2, threads=256, dtype="bfloat16"),
        # DeepSeek MLA decode over a paged latent cache as TileLang's paged
        # MLA example writes it (bench/gpu/mla.py times it).
        "mla_decode_paged": lambda: kernels.mla_decode_paged(
            8, 128, 8192, 512, 64, 64, 1024, num_split=4),
        "flash_attention_fwd_tunables":
            lambda: kernels.tuned_flashattn()(1, 4, 256, 64, False),
    }
