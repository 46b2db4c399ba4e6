// Where each tile of a GPU kernel lives and how fragments map to threads:
// the GPU layout inference, for any vendor (gpu_dialect.h gives the matrix
// instruction's accumulator shape and the wave size). Fragments that only
// meet element-wise ops in their own index space (fill, whole-tile copies,
// `parallel` bodies indexing them by the loop variables, row reductions,
// atomic_add) and are the accumulator of matrix-core GEMMs are held in
// registers in the matrix instruction's accumulator layout (kiln/mma,
// AccLayout); every other fragment lives in shared memory (LDS). 16-bit
// shared tiles that feed matrix-core GEMMs get a swizzled layout
// (kiln/shared_layout).
//
// 1. Collect every tile with its scope, dtype and constant shape.
// 2. For each gemm whose operands are whole 16-bit shared-memory tiles and
//    whose accumulator is a whole f32 rank-2 fragment, choose a warp grid
//    from the policy (square / full_row / full_col) such that every warp
//    owns whole 16x16 tiles; the accumulator becomes a candidate.
// 3. Drop candidates used any other way (as a gemm operand, a region slice,
//    cumsum, a reduce destination, a `parallel` index other than its own
//    loop variables, a `parallel` mixing two register layouts), to a
//    fixpoint; then drop the largest while the register budget is exceeded.
// 4. Mark the operand tiles of the remaining tensor-core gemms swizzled.
// 6. A operands in registers (where the dialect's accumulator layout is an
//    A-operand layout): a 16-bit fragment written only by a copy from a
//    register accumulator and read only as the A operand of tensor-core
//    gemms whose accumulators have the same row layout.
// 5. Row vectors: 1-D f32 fragments that meet only row reductions of
//    register accumulators (one warp per row), fills, whole copies,
//    `parallel`s over their rows (storing only into registers) and
//    `parallel`s over an accumulator reading them by row are held in
//    registers too, in the accumulator's row layout.
// 7. Thread-owned fragments (owned_fragments.cc): a rank-1 or rank-2
//    fragment met only by whole copies, fills, `parallel`s over its own
//    index space (every register fragment there of one layout, no
//    accumulator) and row reductions of it is held in registers, each
//    thread owning chunks of `vec` adjacent columns (kiln::OwnLayout), so
//    element-wise and memory-bound kernels run without shared memory or
//    barriers and copy whole chunks with vector loads and stores. The
//    register budget holds where most of them are live at once (a staging
//    tile dying in the copy that fills the next shares its registers; a
//    fused reduction's temporary takes none).
// 8. Their row vectors (owned_rows.cc): a rank-1 f32 fragment met only by
//    fills, row reductions of thread-owned fragments, `parallel`s over its
//    rows (storing only into such vectors) and reads inside the owned
//    fragments' `parallel`s is held in registers by the lanes of each row
//    (kiln::OwnRowLayout), its reductions ending in a butterfly.
// Register counts and the warp grid follow the dialect's accumulator tile
// (16 x 8 per mma.sync, 16 x 16 per MFMA) and wave size (32, 64).
#ifndef KILN_COMPILER_CODEGEN_GPU_FRAGMENT_PLAN_H_
#define KILN_COMPILER_CODEGEN_GPU_FRAGMENT_PLAN_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "compiler/codegen/gpu/gpu_dialect.h"
#include "compiler/ir/ir.h"

namespace kiln::compiler::gpu {

// Whether a region is its whole buffer (no slice, or every slice full).
inline bool Whole(const Region& r) {
  if (!r.has_slices) return true;
  for (const Slice& s : r.slices) {
    if (s.kind != Slice::Kind::kFull) return false;
  }
  return true;
}

// Union-find over tile names (the planners' classes of tiles that must
// share a layout).
struct NameClasses {
  std::map<std::string, std::string> parent;
  std::string Find(const std::string& x) {
    auto it = parent.find(x);
    if (it == parent.end() || it->second == x) return x;
    return parent[x] = Find(it->second);
  }
  void Union(const std::string& a, const std::string& b) {
    const std::string ra = Find(a), rb = Find(b);
    if (ra != rb) parent[ra] = rb;
  }
};

// The swizzle span of a wgmma operand tile (and of a TMA box) whose rows
// are `row_bytes` long: the widest of 128, 64 and 32 bytes that divides a
// row (kiln::WgmmaTile::kSpan); a span of columns is one swizzle panel.
inline int64_t SwizzleSpanBytes(int64_t row_bytes) {
  return row_bytes % 128 == 0 ? 128 : row_bytes % 64 == 0 ? 64 : 32;
}

struct TileInfo {
  Scope scope = Scope::kShared;
  DType dtype = DType::kF32;
  std::vector<int64_t> dims;
  Layout layout;
};

// A register fragment in the matrix instruction's accumulator layout; the
// instruction tile (tile_m x tile_n, tile_regs per lane) is the dialect's.
// With `warpgroup` (wgmma, kiln::WgAccLayout), warps_m / warps_n count
// warpgroups of 4 warps and the tile is 64 x 8 (4 registers per lane).
struct RegisterFragment {
  int64_t m = 0, n = 0;
  int warps_m = 1, warps_n = 1;
  int tile_m = 16, tile_n = 8, tile_regs = 4;
  bool warpgroup = false;
  int64_t regs() const {
    return (m / warps_m / tile_m) * (n / warps_n / tile_n) * tile_regs;
  }
  bool operator==(const RegisterFragment& o) const {
    return m == o.m && n == o.n && warps_m == o.warps_m &&
           warps_n == o.warps_n && warpgroup == o.warpgroup;
  }
};

// The constant box [start, start + extent) per dim that a region of a
// two-dim register fragment of `m` x `n` names (every dim ranged or full,
// starts and extents constants, inside the fragment); nullopt otherwise.
struct FragmentBox {
  int64_t start[2], extent[2];
};
std::optional<FragmentBox> RegisterBox(const Region& r, int64_t m, int64_t n);
inline std::optional<FragmentBox> RegisterBox(const Region& r,
                                              const RegisterFragment& f) {
  return RegisterBox(r, f.m, f.n);
}

// A 1-D fragment indexed by the rows of register accumulators: each thread
// holds the rows it owns in the accumulator layout (kiln::RowLayout), the
// lanes of a row group holding the same values.
// Or (`owned`) indexed by the rows of thread-owned fragments of one layout
// (OwnedFragment): register k of a thread holds the row of its chunk k
// (kiln::OwnRowLayout), the lanes whose chunks share a row holding the same
// value (owned_rows.cc).
struct RowFragment {
  int64_t m = 0;
  int warps_m = 1, warps_n = 1;
  int tile_m = 16, rows_per_lane = 2;
  bool warpgroup = false;  // rows of a wgmma accumulator (kiln::WgRowLayout)
  // Rows of thread-owned fragments: their layout (cols > 0).
  int64_t own_cols = 0, own_threads = 0;
  int own_vec = 0;
  // A row's lanes span several waves: reductions meet in the scratch.
  bool own_across_waves = false;
  bool owned() const { return own_cols > 0; }
  // Chunks of one row each thread holds: a row wider than the block's
  // chunks (own_cols / own_vec a multiple of own_threads) lies in
  // own_group consecutive chunks of every thread, which share one register
  // (kiln::OwnRowLayout); otherwise 1.
  int64_t own_group() const {
    const int64_t chunks = own_cols / own_vec;
    return chunks > own_threads && chunks % own_threads == 0
               ? chunks / own_threads
               : 1;
  }
  // Lanes holding one row (owned rows): the chunks of a row over the chunks
  // of it each thread holds.
  int64_t own_lanes() const { return own_cols / own_vec / own_group(); }
  int64_t regs() const {
    return owned() ? m * own_cols / own_threads / own_vec / own_group()
                   : m / warps_m / tile_m * rows_per_lane;
  }
};

// A fragment in registers owned chunk-wise by the threads: chunk g of
// `vec` adjacent columns (row-major over rows x cols, a rank-1 fragment one
// row) is thread g % threads's register chunk g / threads
// (kiln::OwnLayout).
struct OwnedFragment {
  int64_t rows = 1, cols = 0;  // rank 1: rows = 1
  int rank = 2;
  int64_t threads = 0;
  int vec = 1;
  int64_t regs() const { return rows * cols / threads; }
  bool operator==(const OwnedFragment& o) const {
    return rows == o.rows && cols == o.cols && threads == o.threads &&
           vec == o.vec;
  }
};

struct FragmentPlan {
  std::map<std::string, TileInfo> tiles;  // every alloc of the kernel
  std::map<std::string, RegisterFragment> registers;
  std::map<std::string, RowFragment> rows;
  // Fragments read or written element by element outside `parallel`:
  // every thread sees every element, so they stay in shared memory.
  std::set<std::string> uniform;
  // 16-bit fragments held in registers as mma A operands: the fragment's
  // only writer is a copy from this register accumulator (one warp per row
  // block) and its only readers are tensor-core gemms as A.
  std::map<std::string, std::string> packed;
  std::map<std::string, OwnedFragment> owned;
  std::set<std::string> swizzled;
  // 16-bit shared tiles read by wgmma: kiln::WgmmaTile, 1024-byte aligned.
  std::set<std::string> wgmma_tiles;
  // Printable layouts by tile (for --print-ir-after-all).
  std::map<std::string, std::string> Describe() const;
};

// The plan for a specialised kernel (every tile dim an integer constant);
// `threads` is the block size.
FragmentPlan PlanFragments(const Kernel& kernel, int64_t threads,
                           const GpuDialect& dialect);

// Step 7: the thread-owned fragments among those not planned otherwise
// (owned_fragments.cc); `budget` registers per thread at most in all.
void PlanOwned(const Kernel& kernel, int64_t threads, int64_t budget,
               FragmentPlan* plan);

// The row reduction `b[i + 1]` when it fuses with the `parallel` `b[i]`
// (plan.fused_reductions, plan_fused_reductions.cc), else null: it reduces
// a whole thread-owned fragment along its last dim, and the `parallel`
// runs over that fragment's index space storing only into it, with no
// register accumulator in its body.
const ReduceStmt* FusedReductionAfter(const Block& b, size_t i,
                                      const FragmentPlan& frag);

// The control flow around tile statements, for the plan steps that scan a
// kernel (owned_fragments.cc, owned_rows.cc): walks `b` and the bodies of
// its `if`s and `for`s, hands `outside` every expression read outside a
// tile op (lets, conditions, bounds, element stores' indices and values,
// rasterize panels), `stored` the name of every element stored outside a
// `parallel`, and `tile_op` every other statement (copies, fills,
// reductions, gemms, parallels, ...).
void WalkControlFlow(const Block& b,
                     const std::function<void(const Expr&)>& outside,
                     const std::function<void(const std::string&)>& stored,
                     const std::function<void(const Stmt&)>& tile_op);

// Step 8: row vectors of the thread-owned fragments held in registers
// (owned_rows.cc), for a dialect whose waves have `wave` lanes.
void PlanOwnedRows(const Kernel& kernel, int64_t wave, FragmentPlan* plan);

// The warpgroup grid for an M x N wgmma accumulator with K-deep steps over
// `threads` / 128 warpgroups: *wgs_m row slices of whole 64-row tiles and
// *wgs_n column slices of at most 256 columns in eights (kiln::WgAccLayout).
// Rows are split first (every warpgroup reads its own rows of A and all of
// B); columns only where the rows do not divide among the warpgroups, and
// only for 16-bit operands (an fp8 product is promoted per warpgroup) whose
// B slices start on the B tile's swizzle panels where B is N-major. Operand
// tiles need rows in eights of whole 32-byte chunks. False when none fits.
bool ChooseWarpgroups(int64_t m, int64_t n, int64_t k, int64_t threads,
                      const TileInfo& a, const TileInfo& b, bool transpose_b,
                      int* wgs_m, int* wgs_n);

// The warp grid for an M x N accumulator (nullopt when none fits).
bool ChooseWarps(int64_t m, int64_t n, int64_t warps, GemmPolicy policy,
                 int* warps_m, int* warps_n);

}  // namespace kiln::compiler::gpu

#endif  // KILN_COMPILER_CODEGEN_GPU_FRAGMENT_PLAN_H_
