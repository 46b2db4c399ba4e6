#include "tests/compiler/corpus_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <type_traits>
#include <variant>

#include "compiler/ir/dtype.h"

namespace kiln::compiler::testing {
namespace fs = std::filesystem;

fs::path TestDataDir() { return fs::path(KILN_TEST_DATA_DIR); }

std::vector<fs::path> CorpusFiles() {
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry :
       fs::directory_iterator(TestDataDir() / "corpus")) {
    if (entry.is_regular_file() && entry.path().extension() == ".tile") {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

fs::path GoldenPath(const fs::path& corpus_file) {
  return TestDataDir() / "golden" / corpus_file.filename();
}

bool UpdateGoldens() {
  const char* value = std::getenv("KILN_UPDATE_GOLDENS");
  return value != nullptr && std::string_view(value) == "1";
}

std::string ReadFileOrDie(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    return "";
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteFileOrDie(const fs::path& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out) ADD_FAILURE() << "cannot write " << path;
}

namespace {

bool IsWordChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

}  // namespace

int ReplaceWord(std::string* text, std::string_view from, std::string_view to) {
  int count = 0;
  size_t pos = 0;
  while ((pos = text->find(from, pos)) != std::string::npos) {
    const size_t end = pos + from.size();
    const bool word_start = pos == 0 || !IsWordChar((*text)[pos - 1]);
    const bool word_end = end == text->size() || !IsWordChar((*text)[end]);
    if (word_start && word_end) {
      text->replace(pos, from.size(), to);
      pos += to.size();
      ++count;
    } else {
      pos = end;
    }
  }
  return count;
}

bool ReplaceFirst(std::string* text, std::string_view from,
                  std::string_view to) {
  const size_t pos = text->find(from);
  if (pos == std::string::npos) return false;
  text->replace(pos, from.size(), to);
  return true;
}

bool ExceedsGfx90aSharedMemory(std::string_view kernel) {
  return kernel == "gemm_fp8_blockscaled" || kernel == "mla_decode_split";
}

std::string TestNameOf(std::string text) {
  for (char& c : text) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return text;
}

std::string StripComments(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    if (text.compare(i, 2, "//") == 0) {
      while (i < text.size() && text[i] != '\n') ++i;
    } else {
      out.push_back(text[i++]);
    }
  }
  return out;
}

// ------------------------------------------------------------------ features

namespace {

class FeatureWalker {
 public:
  explicit FeatureWalker(std::set<std::string>* out) : out_(*out) {}

  void Walk(const Kernel& k) {
    params_.clear();
    for (const Param& p : k.params) {
      params_.insert(p.name);
      Add("dtype:", DTypeName(p.dtype));
      if (!p.is_tensor) {
        Add("param:scalar");
        continue;
      }
      Add("param:tensor");
      if (!p.strides.empty()) Add("param:strides");
      for (const Expr& d : p.shape) {
        Add(d.kind == ExprKind::kInt ? "param:constant_dim"
                                     : "param:symbol_dim");
      }
    }
    if (!k.tunables.empty()) Add("header:tune");
    if (!k.constraints.empty()) Add("header:where");
    if (!k.assumptions.empty()) Add("header:assume");
    for (const Expr& e : k.constraints) WalkExpr(e);
    for (const Expr& e : k.assumptions) WalkExpr(e);
    Add("launch:grid", std::to_string(k.grid.size()));
    for (const Expr& e : k.grid) WalkExpr(e);
    Add(k.threads.kind == ExprKind::kInt ? "launch:threads_constant"
                                         : "launch:threads_expr");
    WalkExpr(k.threads);
    if (!k.cluster.empty()) Add("launch:cluster");
    for (const Expr& e : k.cluster) WalkExpr(e);
    WalkBlock(k.body, /*in_parallel=*/false);
  }

 private:
  void Add(std::string_view a, std::string_view b = "") {
    out_.insert(std::string(a) + std::string(b));
  }

  void WalkBlock(const Block& block, bool in_parallel) {
    for (const Stmt& s : block) {
      std::visit([&](const auto& n) { Visit(n, in_parallel); }, s.node);
    }
  }

  void WalkRegion(const Region& r) {
    if (!r.has_slices) {
      Add("region:whole");
      return;
    }
    for (const Slice& s : r.slices) {
      switch (s.kind) {
        case Slice::Kind::kIndex:
          Add("region:index");
          WalkExpr(s.start);
          break;
        case Slice::Kind::kRange:
          Add("region:range");
          WalkExpr(s.start);
          WalkExpr(s.extent);
          break;
        case Slice::Kind::kFull:
          Add("region:full");
          break;
      }
    }
    Add(params_.count(r.name) ? "region:tensor" : "region:tile");
  }

  void WalkExpr(const Expr& e) {
    switch (e.kind) {
      case ExprKind::kInt:
        Add("expr:int");
        break;
      case ExprKind::kFloat:
        Add(std::isinf(e.float_value) ? "expr:inf" : "expr:float");
        break;
      case ExprKind::kBool:
        Add(e.bool_value ? "expr:true" : "expr:false");
        break;
      case ExprKind::kVar:
        Add("expr:var");
        break;
      case ExprKind::kUnary:
        Add("unary:", UnaryOpSpelling(e.unary_op));
        break;
      case ExprKind::kBinary:
        Add("binary:", BinaryOpSpelling(e.binary_op));
        break;
      case ExprKind::kCall:
        Add("call:", e.name);
        break;
      case ExprKind::kCast:
        Add("expr:cast");
        Add("dtype:", DTypeName(e.dtype));
        break;
      case ExprKind::kLoad:
        Add(params_.count(e.name) ? "load:tensor" : "load:tile");
        break;
    }
    for (const Expr& a : e.args) WalkExpr(a);
  }

  void Visit(const AllocStmt& a, bool) {
    Add("stmt:alloc");
    Add("scope:", ScopeName(a.scope));
    Add("dtype:", DTypeName(a.dtype));
    switch (a.layout.kind) {
      case Layout::Kind::kNone:
        Add("layout:none");
        break;
      case Layout::Kind::kRowMajor:
        Add("layout:row_major");
        break;
      case Layout::Kind::kSwizzle:
        Add("layout:swizzle", std::to_string(a.layout.param));
        break;
      case Layout::Kind::kPadded:
        Add("layout:padded");
        break;
    }
    for (const Expr& e : a.shape) WalkExpr(e);
  }
  void Visit(const CopyStmt& c, bool) {
    Add("stmt:copy");
    WalkRegion(c.src);
    WalkRegion(c.dst);
  }
  void Visit(const FillStmt& f, bool) {
    Add(f.is_clear ? "stmt:clear" : "stmt:fill");
    WalkRegion(f.dst);
    if (!f.is_clear) WalkExpr(f.value);
  }
  void Visit(const GemmStmt& g, bool) {
    Add("stmt:gemm");
    if (g.transpose_a) Add("gemm:transpose_a");
    if (g.transpose_b) Add("gemm:transpose_b");
    if (g.clear_accum) Add("gemm:clear_accum");
    Add("gemm:policy=", PolicyName(g.policy));
    WalkRegion(g.a);
    WalkRegion(g.b);
    WalkRegion(g.c);
  }
  void Visit(const ReduceStmt& r, bool) {
    Add("stmt:reduce");
    Add("reduce:", ReduceName(r.op));
    Add("reduce:dim=", std::to_string(r.dim));
    Add(r.clear ? "reduce:clear=true" : "reduce:clear=false");
    WalkRegion(r.src);
    WalkRegion(r.dst);
  }
  void Visit(const CumsumStmt& c, bool) {
    Add("stmt:cumsum");
    Add(c.reverse ? "cumsum:reverse=true" : "cumsum:reverse=false");
    WalkRegion(c.src);
    WalkRegion(c.dst);
  }
  void Visit(const AtomicAddStmt& a, bool) {
    Add("stmt:atomic_add");
    WalkRegion(a.dst);
    WalkRegion(a.src);
  }
  void Visit(const ParallelStmt& p, bool) {
    Add("stmt:parallel");
    Add("parallel:rank", std::to_string(p.vars.size()));
    for (const Expr& e : p.extents) WalkExpr(e);
    WalkBlock(p.body, /*in_parallel=*/true);
  }
  void Visit(const ForStmt& f, bool in_parallel) {
    Add("stmt:for");
    Add("loop:", LoopName(f.loop));
    if (f.start) {
      Add("loop:start");
      WalkExpr(*f.start);
    }
    if (in_parallel) Add("loop:in_parallel");
    WalkExpr(f.stop);
    if (f.stages) WalkExpr(*f.stages);
    WalkBlock(f.body, in_parallel);
  }
  void Visit(const IfStmt& s, bool in_parallel) {
    Add(in_parallel ? "stmt:if_in_parallel" : "stmt:if_uniform");
    if (s.has_else) {
      Add("stmt:else");
      if (s.else_body.size() == 1 &&
          std::holds_alternative<IfStmt>(s.else_body[0].node)) {
        Add("stmt:else_if");
      }
    }
    WalkExpr(s.cond);
    WalkBlock(s.then_body, in_parallel);
    WalkBlock(s.else_body, in_parallel);
  }
  void Visit(const LetStmt& l, bool in_parallel) {
    Add(in_parallel ? "stmt:let_in_parallel" : "stmt:let_uniform");
    WalkExpr(l.value);
  }
  void Visit(const StoreStmt& s, bool in_parallel) {
    Add("stmt:store");
    Add("store:", AssignOpSpelling(s.op));
    if (!in_parallel) Add("store:outside_parallel");
    for (const Expr& e : s.indices) WalkExpr(e);
    WalkExpr(s.value);
  }
  void Visit(const RasterizeStmt& r, bool) {
    Add("stmt:rasterize");
    Add(r.order == RasterOrder::kRow ? "rasterize:row" : "rasterize:column");
    WalkExpr(r.panel);
  }

  std::set<std::string>& out_;
  std::set<std::string> params_;
};

}  // namespace

std::set<std::string> Features(const Program& program) {
  std::set<std::string> features;
  if (program.kernels.size() > 1) features.insert("program:multi_kernel");
  FeatureWalker walker(&features);
  for (const Kernel& k : program.kernels) walker.Walk(k);
  return features;
}

std::set<std::string> AllFeatures() {
  std::set<std::string> all = {
      "program:multi_kernel",
      "param:scalar",
      "param:tensor",
      "param:strides",
      "param:constant_dim",
      "param:symbol_dim",
      "header:tune",
      "header:where",
      "header:assume",
      "launch:grid1",
      "launch:grid2",
      "launch:grid3",
      "launch:threads_constant",
      "launch:threads_expr",
      "launch:cluster",
      "stmt:alloc",
      "stmt:copy",
      "stmt:fill",
      "stmt:clear",
      "stmt:gemm",
      "stmt:reduce",
      "stmt:cumsum",
      "stmt:atomic_add",
      "stmt:parallel",
      "stmt:for",
      "stmt:if_uniform",
      "stmt:if_in_parallel",
      "stmt:else",
      "stmt:else_if",
      "stmt:let_uniform",
      "stmt:let_in_parallel",
      "stmt:store",
      "stmt:rasterize",
      "scope:shared",
      "scope:fragment",
      "scope:local",
      "layout:none",
      "layout:row_major",
      "layout:swizzle32",
      "layout:swizzle64",
      "layout:swizzle128",
      "layout:padded",
      "gemm:transpose_a",
      "gemm:transpose_b",
      "gemm:clear_accum",
      "gemm:policy=square",
      "gemm:policy=full_row",
      "gemm:policy=full_col",
      "reduce:sum",
      "reduce:max",
      "reduce:min",
      "reduce:absmax",
      "reduce:dim=0",
      "reduce:dim=1",
      "reduce:clear=true",
      "reduce:clear=false",
      "cumsum:reverse=true",
      "cumsum:reverse=false",
      "parallel:rank1",
      "parallel:rank2",
      "loop:serial",
      "loop:unroll",
      "loop:pipelined",
      "loop:start",
      "loop:in_parallel",
      "store:outside_parallel",
      "rasterize:row",
      "rasterize:column",
      "region:whole",
      "region:index",
      "region:range",
      "region:full",
      "region:tensor",
      "region:tile",
      "expr:int",
      "expr:float",
      "expr:inf",
      "expr:true",
      "expr:false",
      "expr:var",
      "expr:cast",
      "load:tensor",
      "load:tile",
  };
  for (int t = 0; t <= static_cast<int>(DType::kU4); ++t) {
    all.insert(std::string("dtype:") +
               std::string(DTypeName(static_cast<DType>(t))));
  }
  for (UnaryOp op : {UnaryOp::kNeg, UnaryOp::kNot, UnaryOp::kBitNot}) {
    all.insert(std::string("unary:") + std::string(UnaryOpSpelling(op)));
  }
  for (int op = 0; op <= static_cast<int>(BinaryOp::kOr); ++op) {
    all.insert(std::string("binary:") +
               std::string(BinaryOpSpelling(static_cast<BinaryOp>(op))));
  }
  for (AssignOp op : {AssignOp::kSet, AssignOp::kAdd, AssignOp::kSub,
                      AssignOp::kMul, AssignOp::kDiv}) {
    all.insert(std::string("store:") + std::string(AssignOpSpelling(op)));
  }
  for (const char* fn :
       {"ceildiv", "min", "max", "abs", "exp", "exp2", "log", "log2", "sqrt",
        "rsqrt", "tanh", "sigmoid", "erf", "fma", "select"}) {
    all.insert(std::string("call:") + fn);
  }
  return all;
}

}  // namespace kiln::compiler::testing
