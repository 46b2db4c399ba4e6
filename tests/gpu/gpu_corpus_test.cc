// Every corpus kernel on the GPU, checked against the CPU target on the same
// fresh random inputs (ragged shapes included): both targets compile the
// same program in process (compiler::Compile), the CPU runtime and the CUDA
// runtime launch it, and every tensor (inputs included: some are updated in
// place) is compared element by element with a tolerance per dtype. A table
// of the results is printed at the end. Without a GPU every test is skipped
// (GTEST_SKIP, with the reason), never passed.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "gtest/gtest.h"
#include "runtime/cpu/cpu_kernel.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/cuda_kernel.h"
#include "tests/compiler/corpus_util.h"
#include "tests/e2e/dtype_codec.h"
#include "tests/e2e/host_tensor.h"

namespace kiln::gpu_test {
namespace {

using e2e::HostTensor;
using e2e::Rng;
using runtime::ArgValue;
using runtime::DType;
using Ints = std::map<std::string, int64_t>;

struct Case {
  std::string file;
  std::string kernel;
  Ints bindings;                          // tunables
  Ints symbols;                           // dynamic symbols
  std::map<std::string, double> scalars;  // scalar params (by value)
  // Integer ranges for some tensors: name -> [lo, hi].
  std::map<std::string, std::pair<double, double>> ranges;
  std::map<std::string, std::vector<int64_t>> strides;
  std::string label;  // extra text for the test name
  bool sm90_only = false;
  // Only on the Hopper path (sm_90a): the case does not fit the
  // mma.sync path (it compiles to a clear error there).
  bool wgmma_only = false;
  // Text replaced throughout the program before it is compiled (e.g. the
  // block size, which programs fix).
  std::vector<std::pair<std::string, std::string>> edits;
  // Float tensors some of whose elements are made NaN, +inf and -inf.
  std::vector<std::string> specials;
  // Tensors given these contents (row-major) instead of random ones.
  std::map<std::string, std::vector<double>> values;
};

// A grouped-GEMM case of moe_gemm.tile: segments of `counts` rows, their
// offsets and the tile map of BM-row tiles (`extra` slots past the last).
Case MoeCase(const std::string& kernel, const Ints& bindings,
             const std::vector<int64_t>& counts, int64_t n, int64_t k,
             int64_t extra) {
  const int64_t bm = bindings.at("BM");
  std::vector<double> offsets{0}, tiles;
  for (size_t e = 0; e < counts.size(); ++e) {
    for (int64_t r = 0; r < counts[e]; r += bm) {
      tiles.push_back(static_cast<double>(e));
      tiles.push_back(offsets.back() + static_cast<double>(r));
    }
    offsets.push_back(offsets.back() + static_cast<double>(counts[e]));
  }
  for (int64_t j = 0; j < extra; ++j) {
    tiles.push_back(static_cast<double>(counts.size()));
    tiles.push_back(offsets.back() + static_cast<double>(j * bm));
  }
  const auto experts = static_cast<int64_t>(counts.size());
  Case c{"moe_gemm.tile",
         kernel,
         bindings,
         {{"M", static_cast<int64_t>(offsets.back())},
          {"N", n},
          {"K", k},
          {"E", experts},
          {"E1", experts + 1},
          {"T", static_cast<int64_t>(tiles.size() / 2)}}};
  c.values = {{"Offsets", offsets}, {"Tiles", tiles}};
  c.ranges = {{"SA", {0.01, 0.1}}, {"SW", {0.01, 0.1}}};
  return c;
}

// How gtest (and ctest's listing) shows a case: file and kernel, not bytes.
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.file << ":" << c.kernel << (c.label.empty() ? "" : " ") << c.label;
}

std::vector<Case> Cases() {
  const double kScale = 1.0 / std::sqrt(128.0);
  std::vector<Case> c = {
      {"adam_step.tile",
       "adam_step",
       {{"BN", 1024}},
       {{"N", 5000}},
       {{"lr", 1e-3},
        {"beta1", 0.9},
        {"beta2", 0.999},
        {"eps", 1e-8},
        {"weight_decay", 0.01},
        {"c1", 10.0},
        {"c2", 1000.0}},
       {{"Vel", {0.0, 1.0}}}},
      {"batched_gemm.tile",
       "batched_gemm",
       {{"BM", 64}, {"BN", 64}, {"BK", 32}},
       {{"BATCH", 3}, {"M", 200}, {"K", 100}, {"N", 150}},
       {},
       {},
       {{"B", {0, 150, 1}}}},
      {"dequant_int4.tile",
       "dequant_i4",
       {{"BN", 64}, {"BK", 128}},
       {{"N", 100}, {"K", 256}, {"G", 2}}},
      {"dequant_int4.tile",
       "unpack_i4_bytes",
       {{"BN", 64}, {"BK", 128}},
       {{"N", 100}, {"KB", 128}, {"K", 256}, {"G", 2}}},
      {"dropout.tile",
       "dropout",
       {{"BM", 16}, {"BN", 128}},
       {{"M", 50}, {"N", 300}},
       {{"seed", 12345}, {"p", 0.25}, {"training", 1}}},
      {"elementwise_broadcast.tile",
       "elementwise_broadcast",
       {{"BM", 32}, {"BN", 64}},
       {{"M", 70}, {"N", 130}},
       {{"alpha", 0.5}, {"act", 1}},
       {},
       {{"X", {1, 70}}},
       "gelu"},
      {"elementwise_broadcast.tile",
       "elementwise_broadcast",
       {{"BM", 64}, {"BN", 128}},
       {{"M", 70}, {"N", 130}},
       {{"alpha", 0.5}, {"act", 2}},
       {},
       {{"X", {1, 70}}},
       "silu"},
      {"flash_attention_fwd.tile",
       "flash_attention_fwd",
       {{"BM", 64}, {"BN", 64}, {"STAGES", 2}},
       {{"B", 2}, {"S", 200}, {"H", 3}},
       {{"sm_scale", kScale}}},
      {"flash_attention_fwd.tile",
       "flash_attention_fwd",
       {{"BM", 128}, {"BN", 64}, {"STAGES", 1}},
       {{"B", 1}, {"S", 333}, {"H", 2}},
       {{"sm_scale", kScale}},
       {},
       {},
       "bm128"},
      {"flash_attention_fwd.tile",
       "flash_attention_fwd_causal",
       {{"BM", 64}, {"BN", 64}, {"STAGES", 2}},
       {{"B", 2}, {"S", 200}, {"H", 3}},
       {{"sm_scale", kScale}}},
      {"flash_attention_bwd.tile",
       "flash_attention_bwd_preprocess",
       {{"BR", 64}},
       {{"B", 2}, {"S", 200}, {"H", 3}}},
      // dQ gathers atomic adds from several blocks: the GPU's order differs
      // from the CPU's, within the f32 tolerance.
      {"flash_attention_bwd.tile",
       "flash_attention_bwd",
       {{"BN", 64}, {"STAGES", 2}},
       {{"B", 2}, {"S", 200}, {"H", 4}, {"HK", 2}},
       {{"sm_scale", 0.125}, {"G", 2}},
       {{"Lse", {2, 4}}},
       {},
       "gqa"},
      {"flash_attention_bwd.tile",
       "flash_attention_bwd_causal",
       {{"BN", 32}, {"STAGES", 2}},
       {{"B", 1}, {"S", 333}, {"H", 3}, {"HK", 3}},
       {{"sm_scale", 0.125}, {"G", 1}},
       {{"Lse", {2, 4}}}},
      {"gemm.tile",
       "gemm",
       {{"BM", 128}, {"BN", 128}, {"BK", 32}, {"STAGES", 3}},
       {{"M", 300}, {"N", 264}, {"K", 200}}},
      {"gemm.tile",
       "gemm",
       {{"BM", 64}, {"BN", 64}, {"BK", 64}, {"STAGES", 2}},
       {{"M", 130}, {"N", 70}, {"K", 77}},
       {},
       {},
       {},
       "unaligned"},
      {"gemm_bias_gelu.tile",
       "gemm_bias_gelu",
       {{"BM", 64}, {"BN", 64}, {"BK", 32}},
       {{"M", 200}, {"N", 130}, {"K", 96}}},
      {"gemm_fp8.tile",
       "gemm_fp8",
       {{"BM", 128}, {"BN", 128}, {"BK", 128}, {"STAGES", 3}},
       {{"M", 256}, {"N", 384}, {"K", 256}},
       {{"scale_a", 0.5}, {"scale_b", 2.0}},
       {},
       {},
       "",
       true},
      {"gemm_int8.tile",
       "gemm_int8",
       {{"BM", 64}, {"BN", 64}, {"BK", 64}, {"THREADS", 128}},
       {{"M", 130}, {"N", 100}, {"K", 64}},
       {},
       {{"AT", {-8, 8}}, {"B", {-8, 8}}}},
      {"gemm_splitk.tile",
       "gemm_splitk",
       {{"BM", 32}, {"BN", 64}, {"BK", 32}, {"SPLIT", 4}},
       {{"M", 64}, {"N", 96}, {"K", 1000}}},
      {"gemm_w4a16.tile",
       "gemm_w4a16",
       {{"BM", 16}, {"BN", 64}, {"BK", 64}, {"STAGES", 2}},
       {{"M", 40}, {"N", 130}, {"K", 256}, {"G", 2}}},
      {"inclusive_scan.tile",
       "inclusive_scan",
       {{"BM", 1}, {"BN", 256}},
       {{"M", 7}, {"N", 1000}}},
      {"inclusive_scan.tile", "segment_suffix_sum", {}, {{"NSEG", 5}}},
      {"layernorm.tile", "layernorm", {{"BM", 2}}, {{"M", 9}}},
      {"losses.tile",
       "cross_entropy",
       {{"BM", 1}, {"BV", 1024}},
       {{"M", 7}, {"V", 3000}},
       {{"ignore_index", -100}},
       {{"Labels", {-1, 2999}}}},
      {"losses.tile",
       "huber_loss",
       {{"BN", 1024}},
       {{"N", 5000}},
       {{"delta", 0.5}}},
      // Paged decode: page indices from a block table, loaded a stage
      // ahead of the chunk's copies; chunks smaller than a page (BN 16,
      // PS 32) and whole pages in four stages over a 64-row wgmma tile.
      {"paged_decode.tile",
       "paged_decode_split",
       {{"BH", 16}, {"BN", 16}, {"STAGES", 2}},
       {{"B", 3},
        {"HKV", 2},
        {"G", 5},
        {"P", 20},
        {"PS", 32},
        {"MAXP", 6},
        {"NS", 3}},
       {{"sm_scale", kScale}},
       {{"BlockTable", {0, 19}}, {"Lens", {0, 192}}}},
      {"paged_decode.tile",
       "paged_decode_split",
       {{"BH", 64}, {"BN", 64}, {"STAGES", 4}},
       {{"B", 2},
        {"HKV", 2},
        {"G", 8},
        {"P", 30},
        {"PS", 64},
        {"MAXP", 12},
        {"NS", 2}},
       {{"sm_scale", kScale}},
       {{"BlockTable", {0, 29}}, {"Lens", {0, 768}}},
       {},
       "bh64"},
      {"paged_decode.tile",
       "paged_decode_combine",
       {{"BH", 16}},
       {{"B", 3}, {"HKV", 2}, {"G", 5}, {"NS", 3}},
       {},
       {{"LsePart", {-4, 4}}}},
      // MLA decode: one latent KV row of 512 + 64 dims per token shared by
      // every head (its latent part serves both GEMMs), 64-head tiles over
      // two warpgroups; 16 heads (rows past them computed, not stored) in
      // three splits, and 128 heads in pages of two chunks.
      {"mla_decode.tile",
       "mla_decode_split",
       {{"BN", 64}, {"STAGES", 1}},
       {{"B", 3}, {"H", 16}, {"P", 20}, {"PS", 64}, {"MAXP", 6}, {"NS", 3}},
       {{"sm_scale", kScale * 0.5}},
       {{"BlockTable", {0, 19}}, {"Lens", {0, 384}}}},
      {"mla_decode.tile",
       "mla_decode_split",
       {{"BN", 32}, {"STAGES", 2}},
       {{"B", 2}, {"H", 128}, {"P", 30}, {"PS", 64}, {"MAXP", 12}, {"NS", 2}},
       {{"sm_scale", kScale * 0.5}},
       {{"BlockTable", {0, 29}}, {"Lens", {0, 768}}},
       {},
       "h128"},
      // Warp-specialised on sm_90a (the producer reads each chunk's page
      // from the block table and loads it by TMA, two stages ahead of
      // 64-token chunks): 128 heads over ragged lengths in pages of one
      // chunk, and 16 heads in pages of 32 tokens (a chunk's rows past its
      // page arrive as zeros and are masked).
      {"mla_decode.tile",
       "mla_decode_split",
       {{"BN", 64}, {"STAGES", 2}},
       {{"B", 3}, {"H", 128}, {"P", 40}, {"PS", 64}, {"MAXP", 12}, {"NS", 2}},
       {{"sm_scale", kScale * 0.5}},
       {{"BlockTable", {0, 39}}, {"Lens", {0, 768}}},
       {},
       "bn64"},
      {"mla_decode.tile",
       "mla_decode_split",
       {{"BN", 64}, {"STAGES", 2}},
       {{"B", 3}, {"H", 16}, {"P", 40}, {"PS", 32}, {"MAXP", 12}, {"NS", 3}},
       {{"sm_scale", kScale * 0.5}},
       {{"BlockTable", {0, 39}}, {"Lens", {0, 384}}},
       {},
       "ps32"},
      {"mla_decode.tile",
       "mla_decode_combine",
       {{"BH", 8}},
       {{"B", 3}, {"H", 16}, {"NS", 3}},
       {},
       {{"LsePart", {-4, 4}}}},
      {"quantize.tile", "quantize_fp8_e4m3", {{"BM", 1}}, {{"M", 5}}},
      {"quantize.tile",
       "quantize_fp8_e5m2",
       {},
       {{"M", 70}, {"N", 200}},
       {{"inv_scale", 4.0}}},
      {"quantize.tile", "quantize_q15", {}, {{"N", 3000}}},
      // Run-time region extents and starts, clipped to the tile: past the
      // tile (70), before it (-3); a masked grouped-GEMM epilogue whose
      // counts run from negative to past the tile; tile loads at indices
      // outside the tile.
      {"runtime_extents.tile",
       "prefix_roundtrip",
       {},
       {{"B", 3}, {"S", 100}},
       {{"n", 70}},
       {},
       {},
       "n70"},
      {"runtime_extents.tile",
       "prefix_roundtrip",
       {},
       {{"B", 3}, {"S", 50}},
       {{"n", -3}},
       {},
       {},
       "n-3"},
      {"runtime_extents.tile",
       "prefix_accumulate",
       {},
       {{"N", 300}},
       {{"n", 100}}},
      {"runtime_extents.tile",
       "segment_gemm",
       {{"BM", 64}, {"BN", 128}, {"BK", 32}},
       {{"M", 320}, {"K", 70}, {"N", 200}, {"G", 5}},
       {},
       {{"Counts", {-5, 100}}}},
      {"runtime_extents.tile",
       "table_lookup",
       {{"BN", 128}},
       {{"N", 300}},
       {},
       {{"Idx", {-100, 200}}}},
      // NaN through max, min and the reductions; isnan / isinf; integer
      // division, modulo and ceildiv by zero and by negative divisors.
      {"numerics.tile",
       "nan_rows",
       {},
       {{"M", 10}},
       {},
       {},
       {},
       "",
       false,
       false,
       {},
       {"X", "Y"}},
      // Atomic max= / min= from every block: f32, f16, f64 and i32.
      {"numerics.tile",
       "col_extrema",
       {},
       {{"M", 93}},
       {},
       {},
       {},
       "",
       false,
       false,
       {},
       {"X"}},
      // bits / from_bits_* of f32, f16 and f64; NaN and infinities in the
      // f32 and f64 inputs (a narrow NaN's payload is left open).
      {"numerics.tile",
       "bit_patterns",
       {},
       {{"N", 300}},
       {},
       {},
       {},
       "",
       false,
       false,
       {},
       {"X", "D"}},
      // floor, ceil, round (ties to even) and trunc, f32 and f16.
      {"numerics.tile",
       "roundings",
       {},
       {{"N", 300}},
       {},
       {},
       {},
       "",
       false,
       false,
       {},
       {"X", "H"}},
      {"numerics.tile",
       "int_division",
       {},
       {{"N", 300}},
       {},
       {{"A", {-50, 50}}, {"B", {-4, 4}}}},
      // Shared-memory atomics: a histogram's `+=` / `max=` / `min=` at
      // keys read from memory (i32, i16, f32 and f16 shared tiles, and an
      // i32 fragment GPUs keep in shared memory).
      {"numerics.tile",
       "shared_histogram",
       {},
       {{"N", 700}},
       {},
       {{"Keys", {-40, 40}},
        {"Count", {0, 10}},
        {"Pairs", {0, 10}},
        {"Hits", {0, 10}}}},
      {"rmsnorm.tile",
       "rmsnorm",
       {{"BM", 1}, {"BN", 512}},
       {{"M", 5}, {"N", 1500}},
       {{"eps", 1e-5}}},
      {"row_reduce.tile",
       "row_stats",
       {{"BM", 4}, {"BN", 128}},
       {{"M", 10}, {"N", 300}}},
      {"row_reduce.tile",
       "col_sum_f64",
       {{"BM", 64}, {"BN", 64}},
       {{"M", 200}, {"N", 150}}},
      {"softmax.tile",
       "softmax",
       {{"BM", 1}, {"BN", 256}},
       {{"M", 6}, {"N", 1500}}},
      {"stencil_blur.tile",
       "stencil_blur",
       {{"BM", 8}, {"BN", 128}},
       {{"M", 20}, {"N", 300}}},
      {"topk.tile", "topk", {{"BM", 16}}, {{"T", 40}}, {{"normalize", 1}}},
      {"transpose.tile", "transpose", {{"TILE", 32}}, {{"M", 70}, {"N", 100}}},
  };
  // Thread-owned fragments (fragment_plan.h step 7) in wider tiles: whole
  // 16-byte chunks, ragged last tiles and rows, and (N = 2001) rows that
  // start misaligned, so most chunks go element by element. "owned whole":
  // rows that start aligned (N a multiple of the chunk), so every block but
  // the last takes the unchecked chunks (EmitOwnedCopy's whole-region
  // test) and the edge block the checked ones. "owned split": whole row
  // blocks of aligned rows with a ragged last column tile, so each block's
  // serial loops run their whole tiles unchecked and then the edge tile
  // checked (plan_full_tiles.cc).
  for (Case o : std::vector<Case>{
           {"softmax.tile",
            "softmax",
            {{"BM", 4}, {"BN", 256}},
            {{"M", 9}, {"N", 1500}}},
           {"rmsnorm.tile",
            "rmsnorm",
            {{"BM", 4}, {"BN", 1024}},
            {{"M", 7}, {"N", 2001}},
            {{"eps", 1e-5}}},
           {"layernorm.tile", "layernorm", {{"BM", 4}}, {{"M", 9}}},
           {"quantize.tile", "quantize_fp8_e4m3", {{"BM", 2}}, {{"M", 5}}},
           {"softmax.tile",
            "softmax",
            {{"BM", 4}, {"BN", 256}},
            {{"M", 9}, {"N", 1536}},
            {},
            {},
            {},
            "owned whole"},
           {"rmsnorm.tile",
            "rmsnorm",
            {{"BM", 4}, {"BN", 1024}},
            {{"M", 7}, {"N", 3072}},
            {{"eps", 1e-5}},
            {},
            {},
            "owned whole"},
           {"softmax.tile",
            "softmax",
            {{"BM", 4}, {"BN", 256}},
            {{"M", 8}, {"N", 1544}},
            {},
            {},
            {},
            "owned split"},
           {"rmsnorm.tile",
            "rmsnorm",
            {{"BM", 4}, {"BN", 1024}},
            {{"M", 8}, {"N", 2056}},
            {{"eps", 1e-5}},
            {},
            {},
            "owned split"},
       }) {
    if (o.label.empty()) o.label = "owned";
    c.push_back(o);
  }
  // Attention with two warpgroups over the query rows (on sm_90a: two
  // consumer warpgroups beside the TMA producer).
  for (const char* kernel :
       {"flash_attention_fwd", "flash_attention_fwd_causal"}) {
    Case t256{"flash_attention_fwd.tile",
              kernel,
              {{"BM", 128}, {"BN", 64}, {"STAGES", 2}},
              {{"B", 2}, {"S", 333}, {"H", 2}},
              {{"sm_scale", kScale}}};
    t256.label = "t256";
    t256.edits = {{"threads(128)", "threads(256)"}};
    c.push_back(t256);
    // More tiles than an H200 holds blocks (on sm_90a the persistent
    // blocks walk them; the producer loads each tile's Q once the
    // consumers are done with the last), an odd number of query tiles
    // (9: causal blocks walk mirrored pairs, the middle tile alone) and a
    // ragged last one: 252 tiles, 140 causal pairs.
    Case walk = t256;
    walk.bindings = {{"BM", 128}, {"BN", 128}, {"STAGES", 2}};
    walk.symbols = {{"B", 4}, {"S", 1100}, {"H", 7}};
    walk.label = "t256 persistent";
    walk.edits.push_back({"BM * BN <= 8192", "BM * BN <= 16384"});
    c.push_back(walk);
    // The same with Q's heads 129 elements apart (rows of 258 bytes: no
    // tensor map), so the persistent blocks take the cp.async fallback:
    // each tile's Q copied by the consumers, a barrier between tiles.
    Case fallback = walk;
    fallback.label = "t256 persistent cp.async";
    fallback.edits.push_back(
        {"Q: f16[B, S, H, 128]",
         "Q: f16[B, S, H, 128] strides [S * H * 129, H * 129, 129, 1]"});
    fallback.strides = {{"Q", {1100 * 7 * 129, 7 * 129, 129, 1}}};
    c.push_back(fallback);
  }
  // Mixture-of-experts grouped GEMMs (moe_gemm.tile): a launch sized by
  // the tile map, copy starts and the expert index loaded from it (on
  // sm_90a the TMA producer evaluates them per tile), skewed segments
  // (empty, one row, several tiles, ending inside a tile), slots past the
  // last tile, ragged N and K; and the tile map built on the device over
  // three chunks of experts.
  Case moe128 =
      MoeCase("moe_gemm", {{"BM", 128}, {"BN", 256}, {"BK", 64}, {"STAGES", 3}},
              {130, 0, 1, 300, 7}, 520, 200, 3);
  moe128.label = "bm128";
  c.push_back(moe128);
  Case moe64 =
      MoeCase("moe_gemm", {{"BM", 64}, {"BN", 128}, {"BK", 64}, {"STAGES", 3}},
              {70, 5, 0, 200}, 136, 72, 0);
  moe64.label = "bm64";
  c.push_back(moe64);
  Case fp8 = MoeCase("moe_gemm_fp8",
                     {{"BM", 128}, {"BN", 128}, {"BK", 128}, {"STAGES", 3}},
                     {3, 260, 0, 40}, 264, 256, 2);
  fp8.sm90_only = true;
  c.push_back(fp8);
  {
    std::vector<int64_t> counts;
    for (int64_t e = 0; e < 150; ++e) {
      counts.push_back(e % 7 == 3 ? 0 : (e * 53) % 150);
    }
    Case map = MoeCase("moe_tile_map", {{"BM", 64}, {"EP", 64}, {"TP", 64}},
                       counts, 1, 1, 5);
    map.values.erase("Tiles");  // the output
    c.push_back(map);
  }
  // The Hopper GEMM's shape (128 x 256 over two consumer warpgroups) on
  // more tiles than an H200 holds blocks at once, ragged in M and N: on
  // sm_90a the persistent blocks store several tiles each through TMA.
  Case wide{"gemm.tile",
            "gemm",
            {{"BM", 128}, {"BN", 256}, {"BK", 64}, {"STAGES", 2}},
            {{"M", 2000}, {"N", 2056}, {"K", 136}}};
  wide.label = "t256 persistent";
  wide.edits = {{"threads(128)", "threads(256)"}};
  c.push_back(wide);
  // The same in clusters of two blocks along x (sm_90a: each block loads
  // half of the A tile and multicasts it to both), with an odd number of
  // column tiles (9: the last pair's second block has no tile).
  Case pairs = wide;
  pairs.label = "t256 cluster";
  pairs.edits.push_back(
      {"threads(256) (bx, by)", "threads(256) cluster(2, 1, 1) (bx, by)"});
  c.push_back(pairs);
  // K a whole number of 64-deep tiles, M and N ragged: the interior blocks
  // take the mma.sync main loop's whole-tile version (straight-line
  // copies, the last tile copied again into the free slot), the edge
  // blocks the general loop, in one launch.
  Case whole{"gemm.tile",
             "gemm",
             {{"BM", 128}, {"BN", 128}, {"BK", 64}, {"STAGES", 3}},
             {{"M", 300}, {"N", 264}, {"K", 320}}};
  whole.label = "whole k";
  c.push_back(whole);
  // FP8 over more tiles than resident blocks, ragged in M: on sm_90a each
  // stage is freed as soon as its promoted products are in, C is stored
  // straight from the accumulator through TMA, and the program's
  // cluster(2, 1, 1) pairs blocks that multicast A (17 column tiles: odd).
  Case fp8_wide{"gemm_fp8.tile",
                "gemm_fp8",
                {{"BM", 128}, {"BN", 128}, {"BK", 128}, {"STAGES", 3}},
                {{"M", 1000}, {"N", 2056}, {"K", 512}},
                {{"scale_a", 0.5}, {"scale_b", 2.0}}};
  fp8_wide.label = "persistent";
  fp8_wide.sm90_only = true;
  c.push_back(fp8_wide);
  // FP8 in 128 x 256 tiles: each warpgroup's product is promoted 128
  // columns at a time (a 64-register chunk beside the 128-register
  // accumulator), ragged in N (2056 = 8 tiles and 8 columns) and M.
  Case fp8_256 = fp8_wide;
  fp8_256.bindings = {{"BM", 128}, {"BN", 256}, {"BK", 128}, {"STAGES", 3}};
  fp8_256.label = "bn256";
  // (The mma.sync path keeps the accumulator's promotion tile in shared
  // memory: 272 KiB at this size.)
  fp8_256.wgmma_only = true;
  c.push_back(fp8_256);
  // Block-scaled FP8 (DeepSeek-V3's recipe): every 128-column K step is
  // multiplied into its own tile and added with that step's row and block
  // scales; ragged M and N, K a whole number of groups plus 32 columns,
  // more tiles than resident blocks.
  for (int64_t bm : {64, 128}) {
    Case scaled{"gemm_fp8_blockscaled.tile",
                "gemm_fp8_blockscaled",
                {{"BM", bm}, {"STAGES", 3}},
                {{"M", 1000}, {"N", 2056}, {"K", 544}, {"KG", 5}, {"NG", 17}},
                {},
                {{"SA", {0, 1}}, {"SB", {0, 1}}}};
    scaled.label = bm == 64 ? "bm64" : "bm128";
    scaled.sm90_only = true;
    c.push_back(scaled);
  }
  // Packed variable-length causal GQA prefill: sequences of equal lengths,
  // a cached prefix (more keys than queries), fewer keys than queries (rows
  // that see no key), empty ones, a grid sized by the scalar MaxQ longer
  // than every sequence. On sm_90a the TMA producer evaluates the
  // sequence's first rows (loaded from CuQ / CuK) per tile; the second
  // case has more tiles than resident blocks (persistent walk).
  for (int64_t bm : {64, 128}) {
    const std::vector<std::pair<int64_t, int64_t>> lens =
        bm == 64
            ? std::vector<std::pair<int64_t, int64_t>>{{37, 37}, {1, 1},
                                                       {0, 0},   {130, 200},
                                                       {20, 5},  {0, 9},
                                                       {64, 64}}
            : std::vector<std::pair<int64_t, int64_t>>{
                  {300, 300}, {1, 1},     {257, 400}, {500, 500},
                  {0, 0},     {129, 129}, {64, 30},   {77, 77}};
    std::vector<double> cu_q{0}, cu_k{0};
    for (auto [q, k] : lens) {
      cu_q.push_back(cu_q.back() + static_cast<double>(q));
      cu_k.push_back(cu_k.back() + static_cast<double>(k));
    }
    Case varlen{"flash_attention_varlen.tile",
                "flash_attention_varlen",
                {{"BM", bm}, {"BN", bm}, {"STAGES", 2}},
                {{"TQ", static_cast<int64_t>(cu_q.back())},
                 {"TK", static_cast<int64_t>(cu_k.back())},
                 {"NB", static_cast<int64_t>(cu_q.size())},
                 {"H", bm == 64 ? 4 : 8},
                 {"HK", 2}},
                {{"MaxQ", bm == 64 ? 150 : 500}, {"sm_scale", kScale}}};
    varlen.values = {{"CuQ", cu_q}, {"CuK", cu_k}};
    varlen.label = bm == 64 ? "bm64" : "bm128 persistent";
    c.push_back(varlen);
  }
  // The paged KV-cache write, plain and with RoPE: distinct slots (29 is
  // coprime to the 80 slots) with every fourth token padding, a ragged
  // last block, positions one past each end of the cos/sin table.
  std::vector<double> slots;
  for (int64_t i = 0; i < 37; ++i) {
    slots.push_back(i % 4 == 3 ? -1 : static_cast<double>(i * 29 % 80));
  }
  Case kv_write{"kv_cache_write.tile",
                "kv_cache_write",
                {{"BT", 16}},
                {{"T", 37}, {"H", 2}, {"P", 5}, {"S", 16}}};
  kv_write.values = {{"Slots", slots}};
  c.push_back(kv_write);
  Case rope_write{
      "kv_cache_write.tile",
      "rope_kv_cache_write",
      {{"BT", 32}},
      {{"T", 37}, {"H", 2}, {"G", 3}, {"MAXPOS", 50}, {"P", 5}, {"S", 16}}};
  rope_write.ranges = {{"Positions", {-1, 50}}};
  rope_write.values = {{"Slots", slots}};
  c.push_back(rope_write);
  // FP8 in 128 x 192 tiles: each warpgroup's whole 64 x 192 product (96
  // registers, written by its first wgmma without zeroing) beside the
  // accumulator; 11 column tiles, the last 136 columns wide, in pairs.
  Case fp8_192 = fp8_256;
  fp8_192.bindings = {{"BM", 128}, {"BN", 192}, {"BK", 128}, {"STAGES", 4}};
  fp8_192.label = "bn192";
  c.push_back(fp8_192);
  return c;
}

std::string CorpusDir() {
  if (const char* d = std::getenv("KILN_CORPUS_DIR")) return d;
  return KILN_CORPUS_DIR;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Bytes of storage a tensor of `shape`/`strides` spans.
int64_t StorageBytes(DType t, const std::vector<int64_t>& shape,
                     std::vector<int64_t> strides) {
  if (strides.empty()) {
    strides.assign(shape.size(), 1);
    for (size_t d = shape.size(); d-- > 1;) {
      strides[d - 1] = strides[d] * shape[d];
    }
  }
  int64_t last = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return 0;
    last += (shape[d] - 1) * strides[d];
  }
  const int64_t elems = last + 1;
  if (t == DType::kI4 || t == DType::kU4) return (elems + 1) / 2;
  return elems * e2e::ElementBytes(t);
}

std::pair<double, double> Tolerance(DType t) {
  switch (t) {
    case DType::kF64:
      return {1e-9, 1e-9};
    case DType::kF32:
      return {2e-3, 2e-3};
    case DType::kF16:
      return {1e-2, 1e-2};
    case DType::kBF16:
      return {3e-2, 3e-2};
    case DType::kF8E4M3:
      return {2e-2, 0.13};
    case DType::kF8E5M2:
      return {2e-2, 0.26};
    default:
      return {0, 0};
  }
}

struct Row {
  std::string name, bindings, shape, result;
  int64_t elements = 0;
  double max_abs = 0;
};
std::vector<Row>& Rows() {
  static std::vector<Row> rows;
  return rows;
}

class TablePrinter : public ::testing::Environment {
 public:
  void TearDown() override {
    if (Rows().empty()) return;
    std::printf("\n%-44s %-28s %-30s %10s %11s  %s\n", "kernel", "tunables",
                "shape", "elements", "max |diff|", "result");
    for (const Row& r : Rows()) {
      std::printf("%-44s %-28s %-30s %10lld %11.3g  %s\n", r.name.c_str(),
                  r.bindings.c_str(), r.shape.c_str(),
                  static_cast<long long>(r.elements), r.max_abs,
                  r.result.c_str());
    }
    int pass = 0;
    for (const Row& r : Rows()) pass += r.result == "ok";
    std::printf("GPU vs CPU: %d of %zu cases agree\n", pass, Rows().size());
  }
};
const auto* const kPrinter =
    ::testing::AddGlobalTestEnvironment(new TablePrinter);

std::string Join(const Ints& m) {
  std::string s;
  for (const auto& [k, v] : m) {
    s += (s.empty() ? "" : " ") + k + "=" + std::to_string(v);
  }
  return s;
}

class GpuCorpusTest : public ::testing::TestWithParam<Case> {};

TEST_P(GpuCorpusTest, MatchesCpuTarget) {
  absl::StatusOr<std::vector<runtime::cuda::DeviceInfo>> devices =
      runtime::cuda::ListDevices();
  if (!devices.ok()) {
    GTEST_SKIP() << "no GPU here: " << devices.status().message();
  }
  const Case& c = GetParam();
  const runtime::cuda::DeviceInfo& dev = (*devices)[0];
  if (c.sm90_only && dev.cc_major < 9) {
    GTEST_SKIP() << c.kernel << " needs sm_90 (clusters); device is "
                 << dev.arch();
  }
  std::string source = ReadFile(CorpusDir() + "/" + c.file);
  ASSERT_FALSE(source.empty()) << "cannot read " << CorpusDir() << "/" << c.file
                               << " (set KILN_CORPUS_DIR)";
  for (const auto& [from, to] : c.edits) {
    ASSERT_NE(source.find(from), std::string::npos)
        << c.file << " has no '" << from << "' to edit";
    for (size_t at = source.find(from); at != std::string::npos;
         at = source.find(from, at + to.size())) {
      source.replace(at, from.size(), to);
    }
  }
  compiler::CompileOptions o;
  o.kernel = c.kernel;
  o.bindings = c.bindings;
  o.filename = c.file;
  o.target = "cpu";
  auto cpu = compiler::Compile(source, o);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  // Hopper runs its own path (sm_90a: wgmma); KILN_GPU_TARGET picks
  // another target the device runs (e.g. sm_90, the mma.sync path).
  const char* forced = std::getenv("KILN_GPU_TARGET");
  o.target = forced && *forced   ? std::string(forced)
             : dev.cc_major >= 9 ? std::string("sm_90a")
             : dev.cc_minor == 0 ? std::string("sm_80")
                                 : dev.arch();
  auto gpu = compiler::Compile(source, o);
  if (c.wgmma_only && o.target != "sm_90a") {
    ASSERT_FALSE(gpu.ok()) << "expected " << o.target << " to refuse it";
    GTEST_SKIP() << c.kernel << " (" << c.label
                 << ") is for sm_90a: " << gpu.status().message();
  }
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto cpu_kernel = runtime::CpuKernel::Load(cpu->binary, cpu->metadata);
  ASSERT_TRUE(cpu_kernel.ok()) << cpu_kernel.status();
  auto gpu_kernel = runtime::cuda::CudaKernel::Load(gpu->binary, gpu->metadata);
  ASSERT_TRUE(gpu_kernel.ok()) << gpu_kernel.status();
  const runtime::KernelMetadata& md = (*cpu_kernel)->metadata();

  Rng rng(0x6b696c6e ^ std::hash<std::string>()(c.kernel + c.label));
  std::vector<std::unique_ptr<HostTensor>> host, result;
  std::vector<runtime::cuda::DeviceBuffer> device;
  std::vector<ArgValue> cpu_args, gpu_args;
  std::string shape_text;
  for (const runtime::MetadataParam& p : md.params) {
    if (!p.is_tensor) {
      auto it = c.scalars.find(p.name);
      ASSERT_NE(it, c.scalars.end()) << "no value for scalar " << p.name;
      const double v = it->second;
      ArgValue a;
      switch (p.dtype) {
        case DType::kF32:
          a = ArgValue::F32(static_cast<float>(v));
          break;
        case DType::kF64:
          a = ArgValue::F64(v);
          break;
        case DType::kI32:
          a = ArgValue::I32(static_cast<int32_t>(v));
          break;
        case DType::kI64:
          a = ArgValue::I64(static_cast<int64_t>(v));
          break;
        case DType::kU32:
          a = ArgValue::U32(static_cast<uint32_t>(v));
          break;
        case DType::kBool:
          a = ArgValue::Bool(v != 0);
          break;
        default:
          FAIL() << "scalar dtype of " << p.name;
      }
      cpu_args.push_back(a);
      gpu_args.push_back(a);
      continue;
    }
    std::vector<int64_t> shape;
    for (const runtime::MetadataDim& d : p.shape) {
      if (!d.is_symbol()) {
        shape.push_back(d.value);
        continue;
      }
      auto it = c.symbols.find(d.symbol);
      ASSERT_NE(it, c.symbols.end()) << "no value for symbol " << d.symbol;
      shape.push_back(it->second);
    }
    std::vector<int64_t> strides;
    if (auto it = c.strides.find(p.name); it != c.strides.end()) {
      strides = it->second;
    }
    auto t = std::make_unique<HostTensor>(p.dtype, shape, strides);
    double lo = -1, hi = 1;
    if (auto it = c.ranges.find(p.name); it != c.ranges.end()) {
      lo = it->second.first;
      hi = it->second.second;
    } else if (!e2e::IsFloat(p.dtype)) {
      lo = p.dtype == DType::kBool ? 0 : e2e::IntMin(p.dtype);
      hi = p.dtype == DType::kBool ? 1 : e2e::IntMax(p.dtype);
      if (p.dtype == DType::kI64 || p.dtype == DType::kI32) {
        lo = -1000;
        hi = 1000;
      }
    }
    t->FillRandom(rng, lo, hi);
    if (auto it = c.values.find(p.name); it != c.values.end()) {
      ASSERT_EQ(static_cast<int64_t>(it->second.size()), t->num_elements())
          << "values of " << p.name;
      t->SetValues(it->second);
    }
    if (std::find(c.specials.begin(), c.specials.end(), p.name) !=
        c.specials.end()) {
      // Whole rows of NaN and of -inf when 2-D, and scattered ones.
      const double inf = std::numeric_limits<double>::infinity();
      const int64_t count = t->num_elements();
      const int64_t row = shape.size() == 2 ? shape[1] : count;
      for (int64_t i = 0; i < count; ++i) {
        if (i / row == 3 || i % 29 == 5) t->Set(i, std::nan(""));
        if (i / row == 6 || i % 37 == 11) t->Set(i, -inf);
        if (i % 41 == 17) t->Set(i, inf);
      }
    }
    const int64_t bytes = StorageBytes(p.dtype, shape, strides);
    auto buf = runtime::cuda::DeviceBuffer::Allocate(bytes);
    ASSERT_TRUE(buf.ok()) << buf.status();
    ASSERT_TRUE(buf->CopyFrom(t->data(), bytes).ok());
    cpu_args.push_back(t->Arg());
    gpu_args.push_back(ArgValue::Tensor(buf->data(), p.dtype, shape, strides));
    std::string s;
    for (int64_t x : shape) s += (s.empty() ? "" : "x") + std::to_string(x);
    if (shape_text.size() < 28) {
      shape_text += (shape_text.empty() ? "" : " ") + s;
    }
    result.push_back(std::make_unique<HostTensor>(*t));
    host.push_back(std::move(t));
    device.push_back(std::move(*buf));
  }
  // Both launches; the GPU one on the default stream, then synchronise.
  absl::Status st = (*gpu_kernel)->Launch(gpu_args, nullptr);
  ASSERT_TRUE(st.ok()) << st;
  st = (*cpu_kernel)->Launch(cpu_args);
  ASSERT_TRUE(st.ok()) << st;
  auto drv = runtime::cuda::Driver::Get();
  ASSERT_TRUE(drv.ok());
  st = (*drv)->Check((*drv)->api().cuCtxSynchronize(), "cuCtxSynchronize");
  ASSERT_TRUE(st.ok()) << "kernel failed on the GPU: " << st;

  Row row;
  row.name = c.file.substr(0, c.file.size() - 5) + ":" + c.kernel +
             (c.label.empty() ? "" : " (" + c.label + ")") + " " + o.target;
  row.bindings = Join(c.bindings);
  row.shape = shape_text.substr(0, 30);
  int64_t bad = 0;
  std::string first_bad;
  size_t ti = 0;
  for (const runtime::MetadataParam& p : md.params) {
    if (!p.is_tensor) continue;
    HostTensor& want = *host[ti];
    HostTensor& got = *result[ti];
    const int64_t bytes =
        StorageBytes(p.dtype, want.shape(),
                     c.strides.count(p.name) ? c.strides.at(p.name)
                                             : std::vector<int64_t>{});
    ASSERT_TRUE(device[ti].CopyTo(got.data(), bytes).ok());
    auto [atol, rtol] = Tolerance(p.dtype);
    const std::vector<double> w = want.Values(), g = got.Values();
    row.elements += static_cast<int64_t>(w.size());
    for (size_t i = 0; i < w.size(); ++i) {
      const bool both_nan = std::isnan(w[i]) && std::isnan(g[i]);
      const bool same_inf = std::isinf(w[i]) && w[i] == g[i];
      const double diff = std::fabs(w[i] - g[i]);
      if (both_nan || same_inf) continue;
      if (std::isfinite(diff)) row.max_abs = std::max(row.max_abs, diff);
      if (!(diff <= atol + rtol * std::fabs(w[i]))) {
        if (bad++ == 0) {
          first_bad = p.name + "[" + std::to_string(i) + "]: cpu " +
                      std::to_string(w[i]) + " gpu " + std::to_string(g[i]);
        }
      }
    }
    ++ti;
  }
  row.result = bad == 0 ? "ok" : std::to_string(bad) + " differ";
  Rows().push_back(row);
  EXPECT_EQ(bad, 0) << "first difference: " << first_bad;
}

INSTANTIATE_TEST_SUITE_P(Corpus, GpuCorpusTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string n = info.param.kernel +
                                           (info.param.label.empty()
                                                ? ""
                                                : "_" + info.param.label);
                           return ::kiln::compiler::testing::TestNameOf(n);
                         });

TEST(GpuDeviceTest, DiscoveryReportsTheDevice) {
  absl::StatusOr<std::vector<runtime::cuda::DeviceInfo>> devices =
      runtime::cuda::ListDevices();
  if (!devices.ok()) {
    GTEST_SKIP() << "no GPU here: " << devices.status().message();
  }
  for (const runtime::cuda::DeviceInfo& d : *devices) {
    std::printf("device %d: %s, %s, %d SMs, %.1f GiB, sku %s\n", d.ordinal,
                d.name.c_str(), d.arch().c_str(), d.sm_count,
                d.total_memory / 1073741824.0, d.sku().c_str());
    EXPECT_GE(d.cc_major, 7);
    EXPECT_GT(d.sm_count, 0);
    EXPECT_GT(d.total_memory, 0);
    EXPECT_NE(d.sku().find(std::to_string(d.sm_count) + "SM"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace kiln::gpu_test
