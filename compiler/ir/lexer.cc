#include "compiler/ir/lexer.h"

#include <array>
#include <cerrno>
#include <cstdlib>

#include "compiler/ir/format.h"

namespace kiln::compiler {
namespace {

constexpr std::array<std::string_view, 36> kKeywords = {
    "kernel",   "tune",    "in",          "where",       "assume",
    "grid",     "threads", "cluster",     "alloc",       "shared",
    "fragment", "local",   "layout",      "copy",        "fill",
    "clear",    "gemm",    "reduce",      "cumsum",      "atomic_add",
    "parallel", "for",     "serial",      "unroll",      "pipelined",
    "if",       "else",    "let",         "rasterize",   "true",
    "false",    "inf",     "transpose_a", "transpose_b", "clear_accum",
    "policy",
};

// Punctuation, longest first so that maximal munch works by first match.
constexpr std::string_view kPuncts[] = {
    "->", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "+=", "-=", "*=",
    "/=", "(",  ")",  "[",  "]",  "{",  "}",  ",",  ":",  ".",  "+",  "-",
    "*",  "/",  "%",  "&",  "|",  "^",  "~",  "!",  "<",  ">",  "=",
};

bool IsIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHexDigit(char c) {
  return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

class Lexer {
 public:
  explicit Lexer(std::string_view text) : text_(text) {}

  std::vector<Token> Run() {
    std::vector<Token> tokens;
    while (true) {
      SkipSpaceAndComments();
      Token t = Next();
      bool stop = t.kind == TokenKind::kEnd || t.kind == TokenKind::kError;
      tokens.push_back(std::move(t));
      if (stop) break;
    }
    if (tokens.back().kind == TokenKind::kError) {
      Token end;
      end.loc = tokens.back().loc;
      tokens.push_back(end);
    }
    return tokens;
  }

 private:
  char Peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  bool AtEnd() const { return pos_ >= text_.size(); }
  void Advance() {
    if (text_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }

  void SkipSpaceAndComments() {
    while (!AtEnd()) {
      char c = Peek();
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        Advance();
      } else if (c == '/' && Peek(1) == '/') {
        while (!AtEnd() && Peek() != '\n') Advance();
      } else {
        return;
      }
    }
  }

  Token Make(TokenKind kind, std::string text, Loc loc) {
    Token t;
    t.kind = kind;
    t.text = std::move(text);
    t.loc = loc;
    return t;
  }

  Token Next() {
    Loc loc{line_, col_};
    if (AtEnd()) return Make(TokenKind::kEnd, "", loc);
    char c = Peek();
    if (IsIdentStart(c)) return Ident(loc);
    if (IsDigit(c)) return Number(loc);
    for (std::string_view p : kPuncts) {
      if (text_.substr(pos_, p.size()) == p) {
        for (size_t i = 0; i < p.size(); ++i) Advance();
        return Make(TokenKind::kPunct, std::string(p), loc);
      }
    }
    unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      return Make(TokenKind::kError,
                  StrCat("unexpected character '", std::string(1, c), "'"),
                  loc);
    }
    return Make(TokenKind::kError,
                fmt::format("unexpected byte 0x{:02x} (only ASCII is allowed "
                            "outside comments)",
                            u),
                loc);
  }

  Token Ident(Loc loc) {
    size_t start = pos_;
    while (!AtEnd() && (IsIdentStart(Peek()) || IsDigit(Peek()))) Advance();
    std::string_view word = text_.substr(start, pos_ - start);
    if (word.size() > kMaxIdentLength) {
      return Make(TokenKind::kError,
                  StrCat("identifier is ", word.size(),
                         " characters long; the limit is ", kMaxIdentLength),
                  loc);
    }
    if (word == "inf") {
      Token t = Make(TokenKind::kFloat, "inf", loc);
      t.float_value = __builtin_inf();
      return t;
    }
    return Make(TokenKind::kIdent, std::string(word), loc);
  }

  Token Number(Loc loc) {
    size_t start = pos_;
    if (Peek() == '0' && (Peek(1) == 'x' || Peek(1) == 'X')) {
      Advance();
      Advance();
      size_t digits = pos_;
      while (!AtEnd() && IsHexDigit(Peek())) Advance();
      if (pos_ == digits) {
        return Make(TokenKind::kError, "hex literal has no digits", loc);
      }
      return IntToken(text_.substr(digits, pos_ - digits), 16, loc,
                      text_.substr(start, pos_ - start));
    }
    while (!AtEnd() && IsDigit(Peek())) Advance();
    bool is_float = false;
    if (Peek() == '.' && !IsIdentStart(Peek(1))) {
      is_float = true;
      Advance();
      while (!AtEnd() && IsDigit(Peek())) Advance();
    }
    if (Peek() == 'e' || Peek() == 'E') {
      size_t save_pos = pos_;
      int save_col = col_;
      Advance();
      if (Peek() == '+' || Peek() == '-') Advance();
      if (!IsDigit(Peek())) {
        pos_ = save_pos;
        col_ = save_col;
        return Make(TokenKind::kError, "malformed exponent in float literal",
                    loc);
      }
      while (!AtEnd() && IsDigit(Peek())) Advance();
      is_float = true;
    }
    if (IsIdentStart(Peek())) {
      return Make(TokenKind::kError,
                  StrCat("malformed number '",
                         text_.substr(start, pos_ - start + 1), "'"),
                  loc);
    }
    std::string spelling(text_.substr(start, pos_ - start));
    if (!is_float) return IntToken(spelling, 10, loc, spelling);
    errno = 0;
    double v = std::strtod(spelling.c_str(), nullptr);
    if (errno == ERANGE && (v > 1 || v < -1)) {
      return Make(TokenKind::kError,
                  StrCat("float literal ", spelling, " is out of range"), loc);
    }
    Token t = Make(TokenKind::kFloat, spelling, loc);
    t.float_value = v;
    return t;
  }

  Token IntToken(std::string_view digits, int base, Loc loc,
                 std::string_view spelling) {
    int64_t v = 0;
    for (char d : digits) {
      int digit = IsDigit(d) ? d - '0' : (d | 0x20) - 'a' + 10;
      if (__builtin_mul_overflow(v, base, &v) ||
          __builtin_add_overflow(v, digit, &v)) {
        return Make(
            TokenKind::kError,
            StrCat("integer literal ", spelling, " does not fit in 64 bits"),
            loc);
      }
    }
    Token t = Make(TokenKind::kInt, std::string(spelling), loc);
    t.int_value = v;
    return t;
  }

  std::string_view text_;
  size_t pos_ = 0;
  int line_ = 1;
  int col_ = 1;
};

}  // namespace

std::vector<Token> Lex(std::string_view text) { return Lexer(text).Run(); }

bool IsKeyword(std::string_view word) {
  for (std::string_view k : kKeywords) {
    if (k == word) return true;
  }
  return false;
}

std::string DescribeToken(const Token& token) {
  switch (token.kind) {
    case TokenKind::kEnd:
      return "end of input";
    case TokenKind::kError:
      return "invalid token";
    default:
      return StrCat("'", token.text, "'");
  }
}

}  // namespace kiln::compiler
