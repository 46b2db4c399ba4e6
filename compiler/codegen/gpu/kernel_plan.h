// The decisions of GPU code generation for one specialised kernel, made by
// the planning passes (plan_kernel.h) before anything is printed and read by
// the emitter (kernel_source.h), which decides none of them itself:
// fragment layouts, the launch and the order blocks walk the grid in, the
// warp-specialised TMA pipeline (Hopper), cluster pairs, the epilogue path
// and whether shared tiles share bytes. `kiln compile --print-plan` prints
// it (PrintPlan); two spellings of one kernel give the same plan.
#ifndef KILN_COMPILER_CODEGEN_GPU_KERNEL_PLAN_H_
#define KILN_COMPILER_CODEGEN_GPU_KERNEL_PLAN_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "compiler/codegen/gpu/fragment_plan.h"
#include "compiler/codegen/gpu/trip_trend.h"
#include "compiler/codegen/metadata_writer.h"
#include "compiler/ir/ir.h"

namespace kiln::compiler::gpu {

// A top-level loop of the kernel body and the facts proven about it.
struct LoopFacts {
  const ForStmt* loop = nullptr;
  std::string var;
  // Its bounds with the lets before it resolved (trip_trend.h).
  Expr start, stop;
  Trend start_along_x = Trend::kConstant;
  Trend stop_along_x = Trend::kConstant;
};

// The order blocks take the program's grid in.
enum class Walk {
  kGrid,            // blockIdx as launched
  kRasterised,      // the program's rasterize(...) panels
  kLongestFirstX,   // x decreasing: the longest blocks start first
  kMirroredPairsX,  // persistent: x = g - 1 - p then x = p (equal pairs)
};
std::string_view WalkName(Walk w);

struct LaunchPlan {
  int64_t threads = 0;         // the program's threads(...)
  int64_t launch_threads = 0;  // + a producer warpgroup when warp-specialised
  // As many blocks as are resident walk the grid (a block's next tile is
  // loaded while it finishes the one before).
  bool persistent = false;
  Walk walk = Walk::kGrid;
  // Blocks per cluster along x (2: a pair sharing `multicast_tile`'s loads).
  int cluster_x = 1;
  std::string multicast_tile;
  // __launch_bounds__' minimum blocks per multiprocessor; 0: none given
  // (memory-bound kernels: ptxas chooses registers for occupancy).
  int min_blocks = 1;
  // Warp-specialised blocks of more than 256 threads: the producer's
  // registers per thread after setmaxnreg (it issues TMA only); the
  // consumers share what it gives back. 0: the default, 40 (56 for a
  // multicast pair). CUDA code generation renders again with the minimum,
  // 24, where ptxas spilled at the default (GenerateCuda).
  int producer_regs = 0;
};

// The producer's registers per thread after setmaxnreg (LaunchPlan).
inline int ProducerRegs(const LaunchPlan& l) {
  if (l.producer_regs > 0) return l.producer_regs;
  // (The multicast loads of a cluster pair need a few more.)
  return l.cluster_x > 1 ? 56 : 40;
}
constexpr int kMinProducerRegs = 24;  // setmaxnreg's least

// A fused ring loop software-pipelined by one gemm (FA3's intra-warpgroup
// overlap): statements [0, prefix_end) of `stmts` (the body without its ring
// copies) end with the first wgmma gemm; [b_begin, end) are the last wgmma
// gemm and the statements before it that write only its accumulator.
// Iteration k runs its prefix, then [b_begin, end) of iteration k - 1 (that
// gemm runs under the rest of iteration k), then [prefix_end, b_begin),
// waiting for the gemm of k - 1 before statement wait_at (the first to
// write what it reads). Each ring tile is read by the prefix only (waited
// for at iteration k, freed once the first gemm completes), by the rest of
// A (waited for at k, freed when k ends), or by B only (waited for and
// freed at k - 1).
enum class RingUse { kNone, kPrefix, kA, kB };
struct OverlapPlan {
  std::vector<const Stmt*> stmts;
  size_t prefix_end = 0, b_begin = 0, wait_at = 0;
  // Tile names: the two gemms' accumulators, and the last gemm's A operand
  // when it is held in registers (else empty).
  std::string g0_acc, g1_acc, g1_a;
  std::map<std::string, RingUse> use;  // by ring tile
};

// A top-level pipelined loop run as a producer warpgroup issuing TMA loads
// into an mbarrier ring and the program's threads consuming it (Hopper).
struct WarpSpecialisedPlan {
  const ForStmt* loop = nullptr;  // null: no warp specialisation
  int64_t stages = 0;
  // The body does more than accumulate wgmma gemms (attention): each gemm
  // is waited for at once, each stage freed when its iteration ends.
  bool fused = false;
  int consumer_warpgroups = 0;
  // The loop's bounds as the producer evaluates them (lets resolved).
  Expr start, stop;
  // The ring's tiles (destinations of the loop's copies), in body order.
  std::vector<std::string> ring_tiles;
  // Top-level copies before the loop into tiles only the loop reads: the
  // producer loads them per tile (attention's Q).
  std::set<const Stmt*> preloads;
  std::vector<std::string> preload_tiles;
  // The rasterize statements before the loop (the producer walks the same
  // order).
  std::vector<const RasterizeStmt*> rasterize;
  // Top-level lets before the loop that the copies' starts name (values
  // from parameters, block indices and elements of tensors the kernel never
  // writes): the producer evaluates them at the top of each tile.
  std::vector<const LetStmt*> producer_lets;
  // Lets of the loop's body the ring copies' starts name (a page index
  // read from a block table), over the loop variable and the producer's
  // names: the producer evaluates them for each iteration it loads. In
  // body order.
  std::vector<const LetStmt*> loop_lets;
  // A fused body with registers to spare is software-pipelined.
  std::optional<OverlapPlan> overlap;
};

// A `pipelined` loop's multi-stage ring of shared tiles: the copies issued
// `stages - 1` iterations ahead into rotating buffers (cp.async where the
// target has it; elsewhere the copies complete at issue).
struct RingPlan {
  const ForStmt* loop = nullptr;
  int64_t stages = 0;
  std::vector<const CopyStmt*> copies;  // in body order
  std::vector<std::string> tiles;       // their destinations
  // Top-level lets of the body a ring copy's source depends on (a page
  // index loaded from a block table): each issue evaluates them again for
  // the iteration it loads, S - 1 ahead. In body order.
  std::vector<const LetStmt*> lets;
  // The warp-specialised loop with every copy from a tensor in the ring:
  // the producer's TMA ring takes it, this ring is its fallback.
  bool tma = false;
  // A second version with straight-line copies, taken when every copy is
  // a whole aligned tile at each iteration (a GEMM main loop whose copies
  // move affinely with the loop variable).
  bool whole_tile_version = false;
};

// A serial loop run in two parts (plan_full_tiles.cc): first the
// iterations at which every listed copy between a tensor and a thread-owned
// fragment moves a region wholly inside the tensor, in aligned chunks (the
// copies unchecked; conditions the in-bounds facts decide folded away),
// then the remaining iterations as written (the edge tiles).
struct FullTilesPlan {
  const ForStmt* loop = nullptr;
  std::vector<const Stmt*> copies;  // in body order
  // Each copy's tensor region at the loop's first and second iteration
  // (the body's lets resolved): aligned at both, aligned at every one.
  std::vector<Region> first, second;
  // The first part ends before this iteration: the loop's start when a
  // region is outside its tensor from the start (over names bound before
  // the loop).
  Expr full_stop;
  // What holds at every iteration of the first part (over the loop
  // variable and names bound before the loop): every listed region inside
  // its tensor.
  std::vector<Expr> facts;
};

// The kernel's output path.
struct EpiloguePlan {
  // First statements of `copy Acc -> X; copy X -> T[...]` pairs stored
  // straight from the accumulator (X not allocated).
  std::set<const Stmt*> staged_stores;
  std::set<std::string> elided_tiles;
  std::vector<std::string> descriptions;  // "acc_o -> O (Os elided)"
};

// One placed byte range of the block's dynamic shared memory.
struct SharedRegion {
  std::string name;  // a tile, or kiln_qoff<i> (a per-tile load's 2nd slot)
  int64_t lo = 0, hi = 0;  // bytes [lo, hi) from the window's base
};

struct SharedPlan {
  // Tiles with disjoint lives share bytes (no asynchronous reader behind
  // the barriers: no warp specialisation, no wgmma).
  bool alias = false;
  // Each shared tile's life: the top-level statements using it.
  std::map<std::string, std::pair<int, int>> lives;

  // Placement (PlanSharedLayout), in bytes from the window's base (aligned
  // to 1024 bytes at run time when wgmma tiles are placed).
  int64_t scratch_offset = 0;  // the cross-warp reduction scratch: first
  int64_t scratch_bytes = 0;
  std::map<std::string, int64_t> offset;      // shared tile (stage 0)
  std::map<std::string, int64_t> slot_bytes;  // its bytes, aligned
  // A ring tile's stages 1 .. S - 1, adjacent slots from this offset.
  std::map<std::string, int64_t> ring_offset;
  // The TMA stores' staging chunks (two 8 KiB per consumer warpgroup);
  // -1: the window had no room, the accumulators are stored from
  // registers.
  int64_t tma_staging = -1;
  // The second slot of each per-tile load (ws.preload_tiles order); empty:
  // one slot (no room for two).
  std::vector<int64_t> preload_slots;
  std::vector<SharedRegion> regions;  // every placed range, in order
  int64_t window_bytes = 0;           // the end of the last range
  // Dynamic shared memory to launch with: the window, plus 1 KiB to align
  // its base where wgmma tiles need it.
  int64_t dynamic_bytes = 0;
};

// The Hopper tensor maps (TMA) a warp-specialised kernel takes, as kernel
// parameters kiln_map0.. built by the runtime from the metadata.
struct TmaPlan {
  std::vector<TensorMapSpec> maps;  // in the order the kernel takes them
  // Copies of a warpgroup accumulator to a tensor (for a staged pair, its
  // first copy) that go out through the staging chunks with TMA stores,
  // and their maps. Empty when the window had no room for the chunks
  // (shared.tma_staging).
  std::map<const Stmt*, TensorMapSpec> stores;
};

struct KernelPlan {
  FragmentPlan fragments;
  std::vector<LoopFacts> loops;  // the body's top-level loops, in order
  LaunchPlan launch;
  WarpSpecialisedPlan ws;
  EpiloguePlan epilogue;
  SharedPlan shared;
  TmaPlan tma;
  std::vector<RingPlan> rings;  // pipelined loops with a ring, body order
  std::vector<FullTilesPlan> full_tiles;  // serial loops split, body order
  // Row reductions of thread-owned fragments fused with the `parallel`
  // before them that writes their source (plan_fused_reductions.cc):
  // reduce statement -> that parallel, which is emitted inside the
  // reduction's loop over the source's chunks and not on its own.
  std::map<const Stmt*, const Stmt*> fused_reductions;
  bool FusedIntoAReduction(const Stmt* parallel) const {
    for (const auto& [r, p] : fused_reductions) {
      if (p == parallel) return true;
    }
    return false;
  }

  bool WarpSpecialised() const { return ws.loop != nullptr; }
  const RingPlan* RingOf(const ForStmt* loop) const {
    for (const RingPlan& r : rings) {
      if (r.loop == loop) return &r;
    }
    return nullptr;
  }
  const FullTilesPlan* FullTilesOf(const ForStmt* loop) const {
    for (const FullTilesPlan& f : full_tiles) {
      if (f.loop == loop) return &f;
    }
    return nullptr;
  }
};

// The plan as text, one decision a line, naming tiles and loop variables
// (no source locations, so equivalent spellings print the same).
std::string PrintPlan(const KernelPlan& plan);

}  // namespace kiln::compiler::gpu

#endif  // KILN_COMPILER_CODEGEN_GPU_KERNEL_PLAN_H_
