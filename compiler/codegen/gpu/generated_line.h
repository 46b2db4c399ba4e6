// Ties a toolchain diagnostic on generated GPU source back to the source
// line and to the tile-IR statement that produced it (the emitter writes a
// `// tile LINE:COL` marker before every tile op). Shared by the NVRTC and
// hiprtc wrappers.
#ifndef KILN_COMPILER_CODEGEN_GPU_GENERATED_LINE_H_
#define KILN_COMPILER_CODEGEN_GPU_GENERATED_LINE_H_

#include <cstdint>
#include <regex>
#include <string>
#include <vector>

namespace kiln::compiler::gpu {

// `source` split into lines (without the newlines).
std::vector<std::string> SplitLines(const std::string& source);

// "  generated line N | TEXT\n" plus, when a `// tile L:C` marker precedes
// line N (1-based), "  from the tile-IR statement at line:col L:C\n"; empty
// when N is out of range.
std::string DescribeGeneratedLine(const std::vector<std::string>& lines,
                                  int64_t n);

// A toolchain's log with, after every diagnostic line (a full match of
// `diag` whose capture group `line_group` is the generated line number),
// DescribeGeneratedLine of that line of `source`.
std::string AnnotateLog(const std::string& log, const std::string& source,
                        const std::regex& diag, int line_group);

}  // namespace kiln::compiler::gpu

#endif  // KILN_COMPILER_CODEGEN_GPU_GENERATED_LINE_H_
