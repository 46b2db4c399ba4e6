#include "compiler/codegen/gpu/generated_line.h"

#include <sstream>

#include "compiler/ir/format.h"

namespace kiln::compiler::gpu {

std::vector<std::string> SplitLines(const std::string& source) {
  std::vector<std::string> lines;
  std::istringstream in(source);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

std::string DescribeGeneratedLine(const std::vector<std::string>& lines,
                                  int64_t n) {
  if (n < 1 || n > static_cast<int64_t>(lines.size())) return "";
  std::string out = StrCat("  generated line ", n, " | ", lines[n - 1], "\n");
  for (int64_t i = n - 1; i >= 0; --i) {
    const std::string& s = lines[i];
    const size_t p = s.find("// tile ");
    if (p == std::string::npos) continue;
    const std::string loc = s.substr(p + 8);
    const size_t end = loc.find_first_of(": ", loc.find(':') + 1);
    StrAppend(&out, "  from the tile-IR statement at line:col ",
              loc.substr(0, end), "\n");
    break;
  }
  return out;
}

std::string AnnotateLog(const std::string& log, const std::string& source,
                        const std::regex& diag, int line_group) {
  const std::vector<std::string> lines = SplitLines(source);
  std::string out;
  std::istringstream in(log);
  for (std::string l; std::getline(in, l);) {
    out += l + "\n";
    std::smatch m;
    if (!std::regex_match(l, m, diag)) continue;
    out += DescribeGeneratedLine(lines, std::stoll(m[line_group].str()));
  }
  return out;
}

}  // namespace kiln::compiler::gpu
