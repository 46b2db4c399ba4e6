// Internal to the GPU code generators: the kernel-source emitter shared by
// kernel_source.cc (statements, allocation, the kernel), tile_ops.cc (copy,
// fill, atomic_add, parallel, cumsum, gemm), reduce_op.cc and
// pipelined_loop.cc (the shared-memory ring). Not a public interface.
#ifndef KILN_COMPILER_CODEGEN_GPU_KERNEL_SOURCE_INTERNAL_H_
#define KILN_COMPILER_CODEGEN_GPU_KERNEL_SOURCE_INTERNAL_H_

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/arith/prover.h"
#include "compiler/codegen/gpu/expr_emitter.h"
#include "compiler/codegen/gpu/fragment_plan.h"
#include "compiler/codegen/gpu/kernel_plan.h"
#include "compiler/codegen/gpu/kernel_source.h"
#include "compiler/ir/const_fold.h"
#include "compiler/ir/diagnostic.h"
#include "compiler/ir/dtype.h"
#include "compiler/ir/format.h"
#include "compiler/ir/ir.h"
#include "compiler/ir/region_slices.h"

namespace kiln::compiler::gpu::internal {

#define KILN_GPU_RETURN_IF_ERROR(expr)   \
  do {                                   \
    absl::Status kiln_st_ = (expr);      \
    if (!kiln_st_.ok()) return kiln_st_; \
  } while (0)

inline constexpr int64_t kSmemAlign = 128;

// x rounded up to a multiple of `align`.
inline int64_t RoundUp(int64_t x, int64_t align) {
  return (x + align - 1) / align * align;
}

inline std::string At(const Loc& l) { return StrCat(l.line, ":", l.col); }

inline int64_t StorageBytes(DType t, int64_t elems) {
  if (t == DType::kI4 || t == DType::kU4) return (elems + 1) / 2;
  if (t == DType::kBool) return elems;
  return elems * (DTypeBits(t) / 8);
}

// A global tensor or a tile, as the emitter addresses it.
struct Buf {
  bool tensor = false;
  DType dtype = DType::kF32;
  Scope scope = Scope::kGlobal;
  std::string code;                  // C++ name of the base pointer / array
  std::vector<Expr> shape;           // IR dims (tiles: Int)
  std::vector<int64_t> dims;         // tiles: constant dims
  std::vector<std::string> strides;  // tensors: C++ stride per dim
  const RegisterFragment* reg = nullptr;
  const RowFragment* row = nullptr;    // a register row vector
  const OwnedFragment* own = nullptr;  // thread-owned registers
  std::string packed_from;             // mma A operands packed from this acc
  std::string layout;  // rank-2 shared tiles: the layout typedef name
  int64_t pad = 0;
};

// One region operand: its slices (compiler/ir/region_slices.h) over a
// buffer of the emitter.
struct Access : RegionSlices {
  const Buf* buf = nullptr;
  std::string name;

  std::vector<Expr> Indices(const std::vector<Expr>& ivs,
                            bool drop_unit) const {
    return RegionSlices::Indices(ivs, drop_unit, /*fold_sums=*/false);
  }
  Expr Load(const std::vector<Expr>& ivs) const {
    return Expr::Load(name, Indices(ivs, false));
  }
  // The edge predicate of a tensor operand; true for tiles.
  Expr Guard(const std::vector<Expr>& idx) const {
    if (!buf->tensor) return Expr::Bool(true);
    return InBounds(idx, buf->shape);
  }
};

inline Stmt MakeStmt(auto node, Loc loc = {}) {
  Stmt s;
  s.loc = loc;
  s.node = std::move(node);
  return s;
}
inline Stmt StoreOf(const std::string& name, std::vector<Expr> idx, Expr value,
                    AssignOp op = AssignOp::kSet) {
  StoreStmt st;
  st.name = name;
  st.indices = std::move(idx);
  st.value = std::move(value);
  st.op = op;
  return MakeStmt(std::move(st));
}
inline Stmt Guarded(Expr guard, Stmt then_s, std::optional<Stmt> else_s) {
  if (guard.kind == ExprKind::kBool && guard.bool_value) return then_s;
  IfStmt s;
  s.cond = std::move(guard);
  s.then_body.push_back(std::move(then_s));
  if (else_s) {
    s.has_else = true;
    s.else_body.push_back(std::move(*else_s));
  }
  return MakeStmt(std::move(s));
}

class Emitter {
 public:
  Emitter(const Kernel& k, const KernelPlan& plan, const GpuDialect& dialect)
      : k_(k), kp_(plan), plan_(plan.fragments), dialect_(dialect) {}

  absl::StatusOr<KernelSource> Run();

 private:
  // ---- output
  void Line(const std::string& s) {
    out_.append(static_cast<size_t>(indent_) * 2, ' ');
    out_ += s;
    out_ += '\n';
  }
  void Open(const std::string& s) {
    Line(s + " {");
    ++indent_;
  }
  void Close(const std::string& tail = "}") {
    --indent_;
    Line(tail);
  }
  // Barriers are placed lazily: pend_r_/pend_w_ hold the shared buffers
  // read/written since the last barrier; an op that reads or writes what
  // is pending-written, or writes what is pending-read, gets one first.
  // Waits for the tile copies TryFastCopy left in flight, if any.
  void WaitForCopies() {
    if (!async_pending_) return;
    Line("kiln::cp_async_wait<0>();");
    async_pending_ = false;
  }
  void Barrier() {
    // The cp.async copies of earlier statements land before any thread
    // passes (TryFastCopy leaves them in flight until a reader's barrier).
    WaitForCopies();
    // wgmma reads shared memory through the async proxy: generic writes
    // (stores, cp.async) are fenced before the barrier that publishes them.
    if (!plan_.wgmma_tiles.empty()) Line("kiln::fence_proxy_async();");
    // Warp-specialised kernels: the producer warpgroup has left; the
    // consumer warpgroups synchronise among themselves.
    Line(kp_.ws.loop ? StrCat("kiln::consumer_sync<", threads_, ">();")
                     : std::string("__syncthreads();"));
    pend_r_.clear();
    pend_w_.clear();
  }
  void Sync(const std::set<std::string>& r, const std::set<std::string>& w) {
    bool need = false;
    // (A buffer conflicts with itself and with the tiles sharing its
    // bytes: PlanSharedLayout.)
    auto hits = [&](const std::string& n, const std::set<std::string>& pend) {
      for (const std::string& m : pend) {
        if (SameBytes(n, m)) return true;
      }
      return false;
    };
    for (const std::string& n : r) need |= hits(n, pend_w_);
    for (const std::string& n : w) need |= hits(n, pend_w_) || hits(n, pend_r_);
    if (need) Barrier();
  }
  void Touch(const std::set<std::string>& r, const std::set<std::string>& w) {
    pend_r_.insert(r.begin(), r.end());
    pend_w_.insert(w.begin(), w.end());
  }
  void Flush() {
    if (!pend_r_.empty() || !pend_w_.empty()) Barrier();
  }
  // Hopper wgmma groups are waited for lazily inside a statement sequence
  // (EmitBlock, a pipelined loop's body): a group stays in flight until a
  // statement touches its accumulator or writes one of its operands; then
  // wgmma_wait<N> leaves the N younger groups running (groups complete in
  // order). Control flow and the end of the sequence wait for all.
  struct WgGroup {
    std::string acc_code;            // the accumulator's registers
    std::set<std::string> acc;       // its tile (read or written: wait)
    std::set<std::string> operands;  // A and B (written: wait)
  };
  void WgWaitFor(const Stmt& s);
  // After a wgmma group is issued: wait at once outside a sequence, else
  // record it in flight.
  void WgIssued(const GemmStmt& g, const std::string& acc_code);
  void WgFlush();
  std::vector<WgGroup> wg_groups_;
  int wg_lazy_ = 0;  // > 0: inside a sequence that flushes at its end
  // The shared buffers a statement reads and writes (whole subtree); by
  // default a buffer is shared when Shared() says so (after its alloc was
  // emitted), else when `shared` does.
  using SharedPred = std::function<bool(const std::string&)>;
  void Accesses(const Stmt& s, std::set<std::string>* r,
                std::set<std::string>* w,
                const SharedPred* shared = nullptr) const;

  // ---- names and values
  absl::StatusOr<CExpr> VarValue(const std::string& name) {
    auto it = vars_.find(name);
    if (it == vars_.end()) {
      return absl::InvalidArgumentError("unknown name '" + name + "'");
    }
    return CExpr{it->second.first, it->second.second};
  }
  // Emits `const T name = value;` for a let and names its value.
  absl::Status DeclareLet(const LetStmt& l);
  ExprEmitter Exprs() {
    return ExprEmitter(
        [this](const std::string& n) { return VarValue(n); },
        [this](const std::string& n, const std::vector<Expr>& idx) {
          return LoadValue(n, idx);
        },
        [this](const Expr& d) {
          // A row vector's element, in a loop over a register fragment.
          const Buf* b = d.kind == ExprKind::kLoad ? FindBuf(d.name) : nullptr;
          return !reg_q_.empty() && b != nullptr && b->row != nullptr;
        });
  }
  absl::StatusOr<CExpr> Value(const Expr& e) { return Exprs().Emit(e); }
  absl::StatusOr<std::string> Index(const Expr& e) { return Exprs().Index(e); }

  const Buf* FindBuf(const std::string& n) const {
    auto it = bufs_.find(n);
    return it == bufs_.end() ? nullptr : &it->second;
  }
  // The storage offset of an element (C++ long long), or for register
  // fragments the register index.
  absl::StatusOr<std::string> Offset(const Buf& b,
                                     const std::vector<Expr>& idx);
  absl::StatusOr<CExpr> LoadValue(const std::string& name,
                                  const std::vector<Expr>& idx);
  // `shared_atomic`: the store's mark (ir.h StoreStmt); a `+=`, `max=` or
  // `min=` then updates a shared element atomically, as a tensor's always.
  absl::StatusOr<std::string> StoreCode(const std::string& name,
                                        const std::vector<Expr>& idx,
                                        AssignOp op, const Expr& value,
                                        bool shared_atomic = false);
  absl::StatusOr<Access> MakeAccess(const Region& r);

  // ---- statements
  absl::Status EmitBlock(const Block& b, bool element);
  absl::Status EmitStmt(const Stmt& s, bool element);
  absl::Status EmitAlloc(const AllocStmt& a);
  absl::Status EmitTileOp(const Stmt& s);
  absl::Status EmitFor(const ForStmt& f, bool element);
  // A loop's C++ variable (bound for the body) and its start (0 when
  // absent) and stop.
  struct LoopRange {
    std::string var, start, stop;
  };
  absl::StatusOr<LoopRange> BindLoop(const ForStmt& f);
  // A ring tile's stage `slot` (a C++ int expression), in its storage type.
  std::string RingSlot(const CopyStmt& c, const std::string& slot);
  // Points every ring tile at its stage `slot`.
  void PointRingAt(const std::vector<const CopyStmt*>& ring,
                   const std::string& slot);
  absl::Status EmitPipelined(const ForStmt& f, const Loc& loc);
  absl::Status EmitRasterize(const RasterizeStmt& r);

  // Runs `body` once per element of `extents` (constants), spread over the
  // threads; the loop variables are bound to `ivs` names. With `reg` the
  // elements are a register fragment's own (fully unrolled).
  absl::Status ForElements(
      const std::vector<Expr>& extents, const RegisterFragment* reg,
      const std::string& reg_layout,
      const std::function<absl::Status(const std::vector<Expr>&)>& body,
      const Buf* row = nullptr, bool lane0_only = false);
  absl::Status ElementBody(const Block& b);
  // Runs `body` once per register of the thread-owned fragment `own`
  // (unrolled), its element's indices bound to `ivs` names.
  absl::Status ForOwned(
      const Buf& own,
      const std::function<absl::Status(const std::vector<Expr>&)>& body);
  // Binds the element in register `q` (C++) of `own`, offset by `col_add`
  // columns (C++, may be empty), to names and runs `body` in its context.
  absl::Status AtOwned(
      const Buf& own, const std::string& q, const std::string& col_add,
      const std::function<absl::Status(const std::vector<Expr>&)>& body);
  // Element stores into tensors of a parallel body over the thread-owned
  // fragment `own` (parallel variables `vars`) that can be made a chunk at
  // a time (chunked_stores.cc): every tensor store of the body writes the
  // chunk's consecutive elements of a contiguous innermost dim, all or
  // none, and the body reads none of those tensors. Empty when not.
  std::vector<const StoreStmt*> ChunkedStores(
      const Block& body, const std::vector<std::string>& vars,
      const Buf& own) const;
  // ForOwned a chunk at a time, the `stores` kept in chunk buffers while
  // `body` runs over the chunk's elements and then stored by one vector
  // access each (element stores where unaligned).
  absl::Status ForOwnedChunks(
      const Buf& own, const std::vector<const StoreStmt*>& stores,
      const std::function<absl::Status(const std::vector<Expr>&)>& body);
  struct ChunkStore {
    std::string raw, on, off;  // the chunk buffer, made or not, its offset
    std::string u;             // the element's place in the chunk
  };
  absl::Status EmitChunkStore(const StoreStmt& n, const ChunkStore& cs);
  // A copy with a thread-owned fragment on one side: whole chunks by
  // vector accesses where the other side is a contiguous tensor row.
  // `whole`: the region is known inside the tensor and aligned (a split
  // loop's first part), so the chunks go untested.
  absl::Status EmitOwnedCopy(const Access& src, const Access& dst,
                             bool whole = false);
  // Whether that copy moves whole chunks: `x` (the other side) a tensor
  // whose innermost dim is contiguous and carries the fragment's columns.
  bool OwnedChunks(const Access& x, const Buf& owned) const;
  // The statement copying one element (guarded at tensor edges).
  absl::Status EmitRegisterBoxStore(const Access& src, const Access& dst,
                                    const FragmentBox& box);
  absl::Status CopyElement(const Access& src, const Access& dst,
                           const std::vector<Expr>& si,
                           const std::vector<Expr>& di);

  absl::Status EmitCopy(const CopyStmt& c, const Stmt& at);
  // The C++ test that the elements an owned fragment of `dims` moves
  // through tensor region `x` lie wholly inside the tensor, in aligned
  // chunks of `vec` elements (`chunk_bytes` bytes): the first element
  // aligned, every free row dim's stride a multiple of `vec`.
  // Without `bounds`, only the alignment.
  absl::StatusOr<std::string> WholeRegion(const Access& x,
                                          const std::vector<int64_t>& dims,
                                          int vec, int64_t chunk_bytes,
                                          bool bounds = true);
  // `at`: the copy statement (for a staged store, its first), whose
  // planned TMA store (kp_.tma.stores) applies; null for ring copies.
  bool TryFastCopy(const Access& src, const Access& dst, const Stmt* at,
                   const std::string& dst_ptr_override, bool wait,
                   absl::Status* st);
  // What TryFastCopy emits for a global-to-shared tile: the copy, the
  // copy known whole (g2s_tile_async<..., true>), or `kiln_whole &=` the
  // test that it is whole (g2s_tile_whole).
  enum class G2sMode { kCopy, kCopyWhole, kTestWhole };
  G2sMode g2s_mode_ = G2sMode::kCopy;
  // The tensor map (index into kp_.tma.maps) through which the copy `at`
  // stores a register accumulator with TMA (kiln::r2g_acc_tma) into the
  // planned staging chunks (PlanTmaStores); -1 where none was planned.
  absl::StatusOr<int> TmaStoreMap(const Stmt* at) const;
  // A planned staged store (kp_.epilogue): `copy Acc -> X` then
  // `copy X -> G[...]` stored straight from the accumulator.
  absl::Status EmitStagedStore(const Stmt& first, const Stmt& second);
  absl::Status EmitFill(const FillStmt& f, const Loc& loc);
  absl::Status EmitGemm(const GemmStmt& g, const Loc& loc);

  // ---- warp-specialised TMA rings (cuda/hopper/tma_loop.cc)
  // The TMA loads of one ring copy (recorded while the consumer side is
  // emitted; the producer is emitted from them).
  struct TmaCopy {
    int map = 0;                     // index into kp_.tma.maps
    int rank = 2;                    // of the tensor map
    std::vector<std::string> coord;  // per map dim (innermost first), C++
    int64_t panels = 1, panel_elems = 0, panel_bytes = 0;
    int64_t off0 = 0, ring_off = 0, slot = 0;  // shared-memory offsets
    // Rows each block of a cluster pair loads and multicasts to both (half
    // the tile's); 0: not multicast.
    int64_t half_rows = 0;
    int64_t bytes() const { return panels * panel_bytes; }
  };
  static int64_t Bytes(const std::vector<TmaCopy>& copies) {
    int64_t n = 0;
    for (const TmaCopy& t : copies) n += t.bytes();
    return n;
  }
  // The TMA copy of a whole tile of a tensor into a wgmma operand tile
  // (its tensor map planned in kp_.tma.maps); `half_rows` as above.
  absl::StatusOr<TmaCopy> MakeTmaCopy(const CopyStmt& c, int64_t half_rows);
  // The producer's loads of one tile copy into `dst` (C++ of a shared
  // address) completing on barrier `bar`.
  void EmitTmaLoads(const TmaCopy& t, const std::string& dst,
                    const std::string& bar);
  // A top-level copy before a persistent kernel's ring loop, issued by the
  // producer (kp_.ws.preloads): the consumers wait for it instead (or copy it
  // themselves when the runtime built no tensor maps).
  absl::Status EmitWsPreCopy(const Stmt& s);
  // Emits the consumer loop of kp_.ws.loop (called from EmitPipelined with
  // its range, ring copies and stage count) and records what the producer
  // issues.
  absl::Status EmitWsConsumer(const ForStmt& f, const LoopRange& range,
                              const std::vector<const CopyStmt*>& ring,
                              int64_t stages);
  // The planned software-pipelined fused loop (kp_.ws.overlap), over the
  // ring copies `ring`.
  absl::Status EmitOverlapped(const OverlapPlan& o, const LoopRange& range,
                              const std::vector<const CopyStmt*>& ring,
                              int64_t stages);
  void AllAccesses(const Stmt& s, std::set<std::string>* r,
                   std::set<std::string>* w) const;
  // A ring's barriers: group g's barrier for a slot (one group, all the
  // ring's tiles, unless the loop is fused: a group per tile), the wait
  // for its loads of ring iteration `it`, and the consumers' release.
  std::string BarIndex(int group, const std::string& slot) const;
  void WaitFull(int group, const std::string& slot, const std::string& it);
  // (`when`: a C++ condition and "&& ", or empty.)
  void ReleaseEmpty(int group, const std::string& slot,
                    const std::string& when = "");
  // Lane 0 of each consumer warp frees this tile's slot of the tiles the
  // producer loads per tile (kp_.ws.preloads), when `when` (as above) holds.
  void ReleasePre(const std::string& when = "");
  // The setup both roles run and the producer warpgroup's branch, as text
  // (emitted by EmitProducer after the consumers).
  absl::StatusOr<std::string> ProducerCode();
  absl::Status EmitProducer();
  // `for (tile ...) { bx = ...; by = ...;` over the program's grid, for a
  // persistent kernel (one open brace: the caller closes it).
  std::string TileLoopHead() const;
  // In a cluster pair: the block's x from its pair's (bx = 2 * bx + rank).
  std::string PairX() const;
  // The generated m64nNk16 wgmma instruction wrapper for these operands
  // (its definition goes before the kernel); returns its name.
  // With `a_regs`, the form that takes A from registers.
  std::string WgmmaInstr(int64_t n, DType dtype, bool trans_a, bool trans_b,
                         bool a_regs = false);
  absl::Status EmitReduce(const ReduceStmt& r, const Loc& loc);
  // A parallel and the row reduction of an owned fragment it writes
  // (plan.fused_reductions), emitted as the reduction with the parallel's
  // body run at each element of the source's chunks.
  absl::Status EmitFusedReduction(const Stmt& parallel, const Stmt& reduce);
  absl::Status EmitCumsum(const CumsumStmt& c, const Loc& loc);
  absl::Status EmitAtomicAdd(const AtomicAddStmt& a, const Loc& loc);
  absl::Status EmitParallel(const ParallelStmt& p, const Loc& loc);
  // The parallel's body with its element-index comparisons in 32 bits
  // against bounds it emits before the element loop (tile_ops.cc); and,
  // when a run-time test (`all_true`, C++) shows that every element passes
  // those comparisons, the body with them replaced by `true` (a mask over
  // a tile wholly inside the sequence or below the causal diagonal).
  struct HoistedBody {
    Block body;
    Block all_true_body;
    std::string all_true;  // empty: no such test
    Block uniform_body;    // monotone comparisons replaced by tile bools
    std::string uniform;   // empty: no such test
  };
  absl::StatusOr<HoistedBody> HoistElementComparisons(
      const ParallelStmt& p, const std::vector<Expr>& extents);

  // Does an op on these buffers touch shared memory (so needs a barrier)?
  bool Shared(const std::string& n) const {
    const Buf* b = FindBuf(n);
    return b && !b->tensor && !b->reg && !b->row && !b->own &&
           b->packed_from.empty() && b->scope != Scope::kLocal;
  }

  const Kernel& k_;
  const KernelPlan& kp_;      // every decision (kernel_plan.h)
  const FragmentPlan& plan_;  // kp_.fragments
  const GpuDialect& dialect_;
  std::string out_;
  int indent_ = 0;
  std::map<std::string, std::pair<std::string, Type>> vars_;
  std::map<std::string, Buf> bufs_;
  std::set<std::string> pend_r_, pend_w_;
  // A tile copy's cp.async group is committed but not waited for: the next
  // Barrier() waits (its tile is in pend_w_, so its first reader, or any
  // writer of its bytes, gets that barrier), and copies of several
  // statements stay in flight together. Not inside a pipelined loop
  // (`pipelined_` > 0), whose ring counts groups: there each waits at once.
  bool async_pending_ = false;
  int pipelined_ = 0;
  std::map<std::string, std::string> wgmma_instrs_;  // name -> definition
  // Inside a pipelined ring whose wgmma groups are waited for by the loop.
  bool defer_wgmma_wait_ = false;
  // Warp specialisation (kp_.ws, planned): its stage count, TMA copies and
  // bounds' C++ code, and the tensor maps the kernel takes.
  // An fp8 gemm's accumulator and product registers per thread together at
  // most (40 of a consumer's 232 left for addresses): a product that does
  // not fit beside the accumulator is taken in column chunks (128 x 256
  // tiles: 128 + 64 registers), else whole (128 x 192: 96 + 96, each
  // warpgroup's A tile read once per stage).
  static constexpr int64_t kFp8Regs = 192;
  int ws_groups_ = 1;  // barrier groups of the ring (fused: one per tile)
  int64_t ws_stages_ = 0;
  LoopRange ws_range_;
  std::vector<TmaCopy> ws_copies_;
  // The planned per-tile loads (kp_.ws.preloads, attention's Q): the
  // producer loads them for each tile (TMA, onto kiln_qfull) once the
  // consumers have freed the tiles (kiln_qempty: after the ring loop's last
  // read of them), so a tile's Q lands while the block finishes the one
  // before.
  std::vector<TmaCopy> ws_pre_copies_;  // (ring_off: the second slot's)
  // Do two buffers share any byte (or are they the same buffer)?
  bool SameBytes(const std::string& a, const std::string& b) const;
  int64_t threads_ = 0;
  // Register-fragment element context: the register index variable and the
  // element index variables it stands for.
  std::string reg_q_;
  std::vector<std::string> reg_vars_;
  std::string reg_layout_;
  // Thread-owned element context: the register index (C++) and the
  // element index variables it stands for.
  std::string own_q_;
  std::vector<std::string> own_vars_;
  // The chunked stores of the ForOwnedChunks running.
  std::map<const StoreStmt*, ChunkStore> chunk_stores_;
  // Row-vector context: the register index and the row variable.
  std::string row_q_;
  std::string row_var_;
  // Inside a row `parallel` over owned rows that stores to a tensor: the
  // condition (OwnRowLayout::lead) under which a tensor store is made.
  std::string store_lead_;
  // While EmitFusedReduction runs: the parallel whose body the reduction
  // runs at each source element before combining it.
  const ParallelStmt* fused_producer_ = nullptr;
  const Block* fused_body_ = nullptr;  // its body, in the version emitted
  int uid_ = 0;

  // ---- a split loop's first part (kp_.full_tiles, full_tiles.cc): the
  // plan being printed, the prover holding its facts, and the integer lets
  // in scope (nullopt: a let whose value the prover cannot read).
  const FullTilesPlan* full_ = nullptr;
  std::unique_ptr<Prover> facts_;
  std::vector<std::map<std::string, std::optional<Expr>>> known_lets_;
  bool folded_parallel_ = false;
  std::set<std::string> fold_ints_;  // the folded parallel's indices
  // Whether the prover reads `e` as written: integers, integer names,
  // arithmetic, comparisons and min/max/ceildiv/select/abs.
  bool IntegerOnly(const Expr& e) const;
  absl::Status EmitFullTilesFor(const ForStmt& f, const FullTilesPlan& p);
  // A condition the facts decide (its lets resolved), else nullopt.
  std::optional<bool> Decide(const Expr& cond);
  void NoteLet(const LetStmt& l);
  // The known lets' values, inner scopes over outer ones.
  std::map<std::string, Expr> KnownLets() const;
  // `b` with the `if`s the facts decide made `if (true)` or dropped.
  Block FoldDecided(const Block& b);
};

// Is `r` a region of tensor parameter `p` that a whole rank-2 tile of
// `dims` fills as a TMA box does: the tensor's innermost dim contiguous,
// the tile's columns along it, its rows along one other ranged (or whole)
// dim, a single index in every other dim, at most 5 dims?
bool IsTileRegion(const Param& p, const Region& r,
                  const std::vector<int64_t>& dims);
// Whether a rank-2 tile of `dims` (padded by `pad` columns) moves to and
// from a tensor of dtype `tensor` in 16-byte chunks: unpadded, of the
// tensor's dtype (not 4-bit), its rows whole chunks.
bool ChunkedRows(DType tile, const std::vector<int64_t>& dims, int64_t pad,
                 DType tensor);
// Whether a tensor region (per dim: free, and its extent) is a tile of
// `dims`: exactly two free dims of those extents, the second the tensor's
// innermost, which is contiguous. Those two dims (rows, columns), or
// nullopt.
std::optional<std::array<size_t, 2>> TensorTileRegion(
    const std::vector<int64_t>& dims, const std::vector<bool>& free,
    const std::vector<Expr>& extents, bool inner_contiguous);
// TensorTileRegion for a region of tensor parameter `p` as the emitter
// addresses it (MakeAccess: a dim is free unless indexed; its extent the
// slice's, or the tensor's for a whole dim).
std::optional<std::array<size_t, 2>> ParamTileRegion(
    const Param& p, const Region& r, const std::vector<int64_t>& dims);
// Whether a tensor region (per dim: free, and its extent) fills a rank-1
// tile of `n` elements as one row: its only free dim the innermost, which
// is contiguous, of extent n.
bool TensorRowRegion(int64_t n, const std::vector<bool>& free,
                     const std::vector<Expr>& extents, bool inner_contiguous);
// TensorRowRegion for a region of tensor parameter `p` as the emitter
// addresses it (as ParamTileRegion).
bool ParamRowRegion(const Param& p, const Region& r, int64_t n);
// Names used by a region (its buffer and the names in its slices).
void RegionUses(const Region& r, std::set<std::string>* used);
// Uses of names in `b` outside the statement `skip` (and what it nests).
void UsesOutside(const Block& b, const Stmt* skip, std::set<std::string>* used);
// Names used by a block (loads, regions, stores) and declared in it.
void CollectUses(const Block& b, std::set<std::string>* used,
                 std::set<std::string>* declared);
// Names an expression uses (variables and loaded buffers).
void ExprUses(const Expr& e, std::set<std::string>* used);
// Of `lets` (in body order), those `need` names, directly or through a
// later one of them, in body order; their uses are added to `need`.
std::vector<const LetStmt*> LetsNeeded(const std::vector<const LetStmt*>& lets,
                                       std::set<std::string>* need);
// Whether an integer expression is affine in `var` with a literal
// coefficient (sums, differences, negation, products with an integer
// literal; other terms free of `var`).
bool AffineIn(const Expr& e, const std::string& var);
// Such an expression as (coefficient, the rest): e = coefficient * var +
// rest, the rest free of `var`.
std::optional<std::pair<int64_t, Expr>> AffineSplit(const Expr& e,
                                                    const std::string& var);

}  // namespace kiln::compiler::gpu::internal

#endif  // KILN_COMPILER_CODEGEN_GPU_KERNEL_SOURCE_INTERNAL_H_
