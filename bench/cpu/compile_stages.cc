#include "bench/cpu/compile_stages.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench/cpu/tunables.h"
#include "compiler/compile.h"
#include "compiler/ir/parser.h"

namespace kiln::bench {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

std::vector<CompileStageRow> MeasureCompileStages(const std::string& corpus_dir,
                                                  int reps,
                                                  const std::string& filter) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(corpus_dir)) {
    if (entry.path().extension() == ".tile") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<CompileStageRow> rows;
  for (const std::filesystem::path& path : files) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    const std::string source = text.str();
    const std::string file = path.filename().string();
    compiler::ParseResult parsed = compiler::Parse(source);
    if (!parsed.ok()) {
      rows.push_back({file, "-", "-", "does not parse"});
      continue;
    }
    for (const compiler::Kernel& k : parsed.program.kernels) {
      if ((file + ":" + k.name).find(filter) == std::string::npos) continue;
      CompileStageRow row;
      row.file = file;
      row.kernel = k.name;
      const std::vector<Bindings> valid = ValidBindings(k);
      if (valid.empty()) {
        row.error = "no valid tunables";
        rows.push_back(row);
        continue;
      }
      row.bindings = BindingsText(valid.front());
      compiler::CompileOptions options;
      options.kernel = k.name;
      options.bindings = valid.front();
      options.filename = file;
      std::vector<double> parse, passes, codegen, total;
      for (int r = 0; r < reps && row.error.empty(); ++r) {
        absl::StatusOr<compiler::CompiledKernel> c =
            compiler::Compile(source, options);
        if (!c.ok()) {
          row.error = std::string(c.status().message());
          break;
        }
        parse.push_back(c->timings.parse_verify_ms);
        passes.push_back(c->timings.passes_ms);
        codegen.push_back(c->timings.codegen_ms);
        total.push_back(c->timings.total_ms);
      }
      if (row.error.empty()) {
        row.parse_verify_ms = Median(parse);
        row.passes_ms = Median(passes);
        row.codegen_ms = Median(codegen);
        row.total_ms = Median(total);
      }
      rows.push_back(row);
    }
  }
  return rows;
}

}  // namespace kiln::bench
