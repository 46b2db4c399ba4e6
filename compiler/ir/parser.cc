// Recursive-descent parser for the tile IR.
//
// 1. Lex the whole text (the lexer stops at the first bad token).
// 2. Parse kernels one by one. A syntax error inside a kernel is recorded and
//    parsing resumes at the next `kernel` keyword, so one broken kernel does
//    not hide errors in the others.
// 3. Nesting of statements and expressions is bounded by kMaxNestingDepth so
//    that no input can exhaust the stack.
#include "compiler/ir/parser.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "compiler/ir/format.h"
#include "compiler/ir/lexer.h"
#include "compiler/ir/parser_internal.h"

namespace kiln::compiler {
namespace parser_internal {

ParseResult Parser::Run() {
  ParseResult result;
  if (Peek().kind == TokenKind::kEnd) {
    result.errors.push_back(
        {Peek().loc, "a program holds at least one kernel; found none"});
    return result;
  }
  while (Peek().kind != TokenKind::kEnd) {
    try {
      result.program.kernels.push_back(ParseKernel());
    } catch (const SyntaxError& e) {
      result.errors.push_back(e.diag);
      // Resynchronise at the next `kernel`, never at the error token itself.
      if (Peek().kind != TokenKind::kEnd && Peek().kind != TokenKind::kError)
        ++pos_;
      while (Peek().kind != TokenKind::kEnd &&
             Peek().kind != TokenKind::kError && !IsWord("kernel")) {
        ++pos_;
      }
      if (Peek().kind == TokenKind::kError) {
        if (Peek().text != e.diag.message)
          result.errors.push_back({Peek().loc, Peek().text});
        break;
      }
    }
  }
  return result;
}

Kernel Parser::ParseKernel() {
  Kernel k;
  k.loc = ExpectWord("kernel").loc;
  // Any identifier names a kernel (`kernel gemm(...)`): the position makes
  // it unambiguous, and kernel names are what users search for.
  if (Peek().kind != TokenKind::kIdent) Expected("a kernel name");
  k.name = Take().text;
  ExpectPunct("(");
  if (!IsPunct(")")) {
    do {
      k.params.push_back(ParseParam());
    } while (AcceptPunct(","));
  }
  ExpectPunct(")");
  while (true) {
    if (AcceptWord("tune")) {
      do {
        k.tunables.push_back(ParseTunable());
      } while (AcceptPunct(","));
    } else if (AcceptWord("where")) {
      ParseExprList(&k.constraints);
    } else if (AcceptWord("assume")) {
      ParseExprList(&k.assumptions);
    } else {
      break;
    }
  }
  if (!IsWord("grid")) Expected("'tune', 'where', 'assume' or 'grid'");
  Take();
  ExpectPunct("(");
  ParseExprList(&k.grid);
  ExpectPunct(")");
  if (k.grid.size() > 3) {
    Fail(k.grid[3].loc, "a grid has at most 3 dimensions");
  }
  ExpectWord("threads");
  ExpectPunct("(");
  k.threads = ParseExpr();
  ExpectPunct(")");
  if (IsWord("cluster")) {
    Loc loc = Take().loc;
    ExpectPunct("(");
    ParseExprList(&k.cluster);
    ExpectPunct(")");
    if (k.cluster.size() != 3) {
      Fail(loc, StrCat("cluster takes 3 extents, found ", k.cluster.size()));
    }
  }
  ExpectPunct("(");
  do {
    k.block_vars.push_back(ExpectName("a block index name").first);
  } while (AcceptPunct(","));
  ExpectPunct(")");
  k.body = ParseBlock();
  return k;
}

Param Parser::ParseParam() {
  Param p;
  auto [name, loc] = ExpectName("a parameter name");
  p.name = name;
  p.loc = loc;
  ExpectPunct(":");
  p.dtype = ExpectDType();
  if (AcceptPunct("[")) {
    p.is_tensor = true;
    do {
      const Token& t = Peek();
      if (t.kind == TokenKind::kInt) {
        p.shape.push_back(Expr::Int(Take().int_value, t.loc));
      } else {
        auto [sym, sym_loc] = ExpectName("a dim (an integer or a symbol)");
        p.shape.push_back(Expr::Var(sym, sym_loc));
      }
    } while (AcceptPunct(","));
    ExpectPunct("]");
    if (AcceptWord("strides")) {
      ExpectPunct("[");
      ParseExprList(&p.strides);
      ExpectPunct("]");
    }
  }
  return p;
}

Tunable Parser::ParseTunable() {
  Tunable t;
  auto [name, loc] = ExpectName("a tunable name");
  t.name = name;
  t.loc = loc;
  ExpectWord("in");
  ExpectPunct("[");
  do {
    t.candidates.push_back(ExpectInt("an integer candidate"));
  } while (AcceptPunct(","));
  ExpectPunct("]");
  return t;
}

Block Parser::ParseBlock() {
  ExpectPunct("{");
  Block body;
  while (!IsPunct("}")) {
    if (Peek().kind == TokenKind::kEnd) Expected("'}'");
    body.push_back(ParseStmt());
  }
  Take();
  return body;
}

Stmt Parser::ParseStmt() {
  const Token& t = Peek();
  DepthGuard guard(this, t.loc);
  Stmt s;
  s.loc = t.loc;
  if (t.kind != TokenKind::kIdent) Expected("a statement");
  const std::string word = t.text;
  if (word == "alloc") {
    Take();
    s.node = ParseAlloc();
  } else if (word == "copy") {
    Take();
    CopyStmt c;
    c.src = ParseRegion();
    ExpectPunct("->");
    c.dst = ParseRegion();
    s.node = std::move(c);
  } else if (word == "fill") {
    Take();
    FillStmt f;
    f.dst = ParseRegion();
    ExpectPunct(",");
    f.value = ParseExpr();
    s.node = std::move(f);
  } else if (word == "clear") {
    Take();
    FillStmt f;
    f.dst = ParseRegion();
    f.value = Expr::Int(0, t.loc);
    f.is_clear = true;
    s.node = std::move(f);
  } else if (word == "gemm") {
    Take();
    s.node = ParseGemm();
  } else if (word == "reduce") {
    Take();
    s.node = ParseReduce();
  } else if (word == "cumsum") {
    Take();
    s.node = ParseCumsum();
  } else if (word == "atomic_add") {
    Take();
    AtomicAddStmt a;
    a.dst = ParseRegion();
    ExpectPunct(",");
    a.src = ParseRegion();
    s.node = std::move(a);
  } else if (word == "parallel") {
    Take();
    s.node = ParseParallel();
  } else if (word == "for") {
    Take();
    s.node = ParseFor();
  } else if (word == "if") {
    Take();
    s.node = ParseIf();
  } else if (word == "let") {
    Take();
    LetStmt l;
    l.name = ExpectName("a name").first;
    ExpectPunct("=");
    l.value = ParseExpr();
    s.node = std::move(l);
  } else if (word == "rasterize") {
    Take();
    s.node = ParseRasterize();
  } else if (!IsKeyword(word) && !ParseDType(word) && IsPunct("[", 1)) {
    s.node = ParseStore();
  } else {
    Expected("a statement");
  }
  return s;
}

AllocStmt Parser::ParseAlloc() {
  AllocStmt a;
  if (AcceptWord("shared")) {
    a.scope = Scope::kShared;
  } else if (AcceptWord("fragment")) {
    a.scope = Scope::kFragment;
  } else if (AcceptWord("local")) {
    a.scope = Scope::kLocal;
  } else {
    Expected("a scope ('shared', 'fragment' or 'local')");
  }
  a.name = ExpectName("a tile name").first;
  ExpectPunct(":");
  a.dtype = ExpectDType();
  ExpectPunct("[");
  ParseExprList(&a.shape);
  ExpectPunct("]");
  if (AcceptWord("layout")) {
    if (AcceptWord("row_major")) {
      a.layout.kind = Layout::Kind::kRowMajor;
    } else if (IsWord("swizzle") || IsWord("padded")) {
      a.layout.kind = Take().text == "swizzle" ? Layout::Kind::kSwizzle
                                               : Layout::Kind::kPadded;
      ExpectPunct("(");
      a.layout.param = ExpectInt("an integer");
      ExpectPunct(")");
    } else {
      Expected("a layout ('row_major', 'swizzle(N)' or 'padded(N)')");
    }
  }
  return a;
}

GemmStmt Parser::ParseGemm() {
  GemmStmt g;
  g.a = ParseRegion();
  ExpectPunct(",");
  g.b = ParseRegion();
  ExpectPunct("->");
  g.c = ParseRegion();
  while (true) {
    if (AcceptWord("transpose_a")) {
      g.transpose_a = true;
    } else if (AcceptWord("transpose_b")) {
      g.transpose_b = true;
    } else if (AcceptWord("clear_accum")) {
      g.clear_accum = true;
    } else if (AcceptWord("policy")) {
      ExpectPunct("=");
      if (AcceptWord("square")) {
        g.policy = GemmPolicy::kSquare;
      } else if (AcceptWord("full_row")) {
        g.policy = GemmPolicy::kFullRow;
      } else if (AcceptWord("full_col")) {
        g.policy = GemmPolicy::kFullCol;
      } else {
        Expected("a policy ('square', 'full_row' or 'full_col')");
      }
    } else {
      break;
    }
  }
  return g;
}

std::optional<bool> Parser::AcceptBoolOption(std::string_view name) {
  if (!IsPunct(",") || !IsWord(name, 1)) return std::nullopt;
  Take();
  Take();
  ExpectPunct("=");
  return ExpectBoolWord();
}

int64_t Parser::ParseDimArg() {
  ExpectPunct(",");
  ExpectWord("dim");
  ExpectPunct("=");
  return ExpectInt("an integer dim");
}

ReduceStmt Parser::ParseReduce() {
  ReduceStmt r;
  ExpectPunct(".");
  if (AcceptWord("sum")) {
    r.op = ReduceKind::kSum;
  } else if (AcceptWord("max")) {
    r.op = ReduceKind::kMax;
  } else if (AcceptWord("min")) {
    r.op = ReduceKind::kMin;
  } else if (AcceptWord("absmax")) {
    r.op = ReduceKind::kAbsMax;
  } else {
    Expected("a reduction ('sum', 'max', 'min' or 'absmax')");
  }
  r.src = ParseRegion();
  ExpectPunct("->");
  r.dst = ParseRegion();
  r.dim = ParseDimArg();
  if (auto v = AcceptBoolOption("clear")) r.clear = *v;
  return r;
}

CumsumStmt Parser::ParseCumsum() {
  CumsumStmt c;
  c.src = ParseRegion();
  ExpectPunct("->");
  c.dst = ParseRegion();
  c.dim = ParseDimArg();
  if (auto v = AcceptBoolOption("reverse")) c.reverse = *v;
  return c;
}

ParallelStmt Parser::ParseParallel() {
  ParallelStmt p;
  ExpectPunct("(");
  do {
    p.vars.push_back(ExpectName("a loop variable").first);
  } while (AcceptPunct(","));
  ExpectPunct(")");
  ExpectWord("in");
  const Token& open = ExpectPunct("(");
  ParseExprList(&p.extents);
  ExpectPunct(")");
  if (p.extents.size() != p.vars.size()) {
    Fail(open.loc,
         StrCat("parallel binds ", p.vars.size(), " variables but gives ",
                p.extents.size(), " extents"));
  }
  p.body = ParseBlock();
  return p;
}

ForStmt Parser::ParseFor() {
  ForStmt f;
  f.var = ExpectName("a loop variable").first;
  ExpectWord("in");
  if (AcceptWord("serial")) {
    f.loop = LoopKind::kSerial;
  } else if (AcceptWord("unroll")) {
    f.loop = LoopKind::kUnroll;
  } else if (AcceptWord("pipelined")) {
    f.loop = LoopKind::kPipelined;
  } else {
    Expected("a loop kind ('serial', 'unroll' or 'pipelined')");
  }
  ExpectPunct("(");
  f.stop = ParseExpr();
  if (AcceptPunct(",")) {
    if (f.loop == LoopKind::kPipelined && IsWord("stages")) {
      // pipelined(n, stages=S)
    } else {
      f.start = std::move(f.stop);
      f.stop = ParseExpr();
      if (f.loop == LoopKind::kPipelined) ExpectPunct(",");
    }
  } else if (f.loop == LoopKind::kPipelined) {
    Expected("',' and 'stages=' (a pipelined loop names its stages)");
  }
  if (f.loop == LoopKind::kPipelined) {
    ExpectWord("stages");
    ExpectPunct("=");
    f.stages = ParseExpr();
  }
  ExpectPunct(")");
  f.body = ParseBlock();
  return f;
}

IfStmt Parser::ParseIf() {
  IfStmt s;
  s.cond = ParseExpr();
  s.then_body = ParseBlock();
  if (IsWord("else")) {
    const Token& else_tok = Take();
    s.has_else = true;
    if (IsWord("if")) {
      DepthGuard guard(this, else_tok.loc);
      Stmt nested;
      nested.loc = Take().loc;
      nested.node = ParseIf();
      s.else_body.push_back(std::move(nested));
    } else {
      s.else_body = ParseBlock();
    }
  }
  return s;
}

RasterizeStmt Parser::ParseRasterize() {
  RasterizeStmt r;
  ExpectPunct("(");
  ExpectWord("panel");
  ExpectPunct("=");
  r.panel = ParseExpr();
  if (AcceptPunct(",")) {
    ExpectWord("order");
    ExpectPunct("=");
    if (AcceptWord("row")) {
      r.order = RasterOrder::kRow;
    } else if (AcceptWord("column")) {
      r.order = RasterOrder::kColumn;
    } else {
      Expected("'row' or 'column'");
    }
  }
  ExpectPunct(")");
  return r;
}

StoreStmt Parser::ParseStore() {
  StoreStmt s;
  s.name = Take().text;
  ExpectPunct("[");
  ParseExprList(&s.indices);
  ExpectPunct("]");
  static constexpr std::pair<std::string_view, AssignOp> kOps[] = {
      {"=", AssignOp::kSet},  {"+=", AssignOp::kAdd}, {"-=", AssignOp::kSub},
      {"*=", AssignOp::kMul}, {"/=", AssignOp::kDiv},
  };
  for (const auto& [spelling, op] : kOps) {
    if (AcceptPunct(spelling)) {
      s.op = op;
      s.value = ParseExpr();
      return s;
    }
  }
  // `max=` / `min=`: the word, then '=' (the lexer has no such operator).
  for (AssignOp op : {AssignOp::kMax, AssignOp::kMin}) {
    const std::string_view word = op == AssignOp::kMax ? "max" : "min";
    if (IsWord(word) && IsPunct("=", 1)) {
      Take();
      Take();
      s.op = op;
      s.value = ParseExpr();
      return s;
    }
  }
  Expected("'=', '+=', '-=', '*=', '/=', 'max=' or 'min='");
}

Region Parser::ParseRegion() {
  Region r;
  auto [name, loc] = ExpectName("a tile or tensor name");
  r.name = name;
  r.loc = loc;
  if (AcceptPunct("[")) {
    r.has_slices = true;
    do {
      Slice s;
      if (IsPunct(":") && (IsPunct(",", 1) || IsPunct("]", 1))) {
        Take();
        s.kind = Slice::Kind::kFull;
      } else {
        s.start = ParseExpr();
        if (AcceptPunct(":")) {
          ExpectPunct("+");
          s.kind = Slice::Kind::kRange;
          s.extent = ParseExpr();
        } else {
          s.kind = Slice::Kind::kIndex;
        }
      }
      r.slices.push_back(std::move(s));
    } while (AcceptPunct(","));
    ExpectPunct("]");
  }
  return r;
}

}  // namespace parser_internal

ParseResult Parse(std::string_view text) {
  if (text.size() > kMaxSourceBytes) {
    ParseResult result;
    result.errors.push_back(
        {Loc{1, 1}, StrCat("source is ", text.size(), " bytes; the limit is ",
                           kMaxSourceBytes)});
    return result;
  }
  return parser_internal::Parser(Lex(text)).Run();
}

}  // namespace kiln::compiler
