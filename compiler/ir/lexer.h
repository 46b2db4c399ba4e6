// Lexer: tile-IR text to tokens (compiler/docs/tile-ir.md §1).
#ifndef KILN_COMPILER_IR_LEXER_H_
#define KILN_COMPILER_IR_LEXER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/ir/ir.h"

namespace kiln::compiler {

enum class TokenKind { kIdent, kInt, kFloat, kPunct, kEnd, kError };

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string
      text;  // identifier, punctuation, literal spelling, or error message
  Loc loc;
  int64_t int_value = 0;
  double float_value = 0;
};

// Splits `text` into tokens, ending with one kEnd token. A malformed token
// (bad character, literal out of range) becomes a kError token whose `text`
// is the message, and lexing stops there (the kError is followed by kEnd).
std::vector<Token> Lex(std::string_view text);

// True for the reserved words of the language (not dtype names).
bool IsKeyword(std::string_view word);

// Longest accepted identifier.
inline constexpr size_t kMaxIdentLength = 128;

// A printable rendering of a token for diagnostics: 'name', '->', end of input.
std::string DescribeToken(const Token& token);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_IR_LEXER_H_
