#include "server/tuning/tuning_record.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"

namespace kiln::server::tuning {
namespace {

std::string Join(const google::protobuf::Map<std::string, int64_t>& m) {
  std::map<std::string, int64_t> sorted(m.begin(), m.end());
  if (sorted.empty()) return "-";
  return absl::StrJoin(sorted, ",", absl::PairFormatter("="));
}

std::string Micros(double us) {
  if (us >= 10000) return absl::StrFormat("%.2f ms", us / 1000);
  return absl::StrFormat("%.1f us", us);
}

}  // namespace

void SetTimes(const std::vector<double>& times_us,
              kiln::v1::CandidateResult* candidate) {
  if (times_us.empty()) return;
  std::vector<double> t = times_us;
  std::sort(t.begin(), t.end());
  const auto rank = [&](double q) {
    const size_t i = static_cast<size_t>(std::ceil(q * t.size()));
    return t[std::min(t.size() - 1, i == 0 ? 0 : i - 1)];
  };
  const size_t n = t.size();
  candidate->set_median_us(n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2);
  candidate->set_p10_us(rank(0.10));
  candidate->set_p90_us(rank(0.90));
  candidate->set_min_us(t.front());
  candidate->set_max_us(t.back());
  candidate->set_runs(static_cast<int32_t>(n));
}

std::string StatusName(kiln::v1::CandidateStatus status) {
  switch (status) {
    case kiln::v1::CANDIDATE_STATUS_COMPILED:
      return "compiled";
    case kiln::v1::CANDIDATE_STATUS_PRUNED:
      return "pruned";
    case kiln::v1::CANDIDATE_STATUS_BENCHMARKED:
      return "ok";
    case kiln::v1::CANDIDATE_STATUS_FAILED:
      return "failed";
    case kiln::v1::CANDIDATE_STATUS_WRONG:
      return "wrong";
    default:
      return "-";
  }
}

std::string FormatCandidateTable(const kiln::v1::AutotuneResult& result) {
  std::vector<const kiln::v1::CandidateResult*> rows;
  for (const auto& c : result.candidates()) rows.push_back(&c);
  const auto ran = [](const kiln::v1::CandidateResult* c) {
    return c->status() == kiln::v1::CANDIDATE_STATUS_BENCHMARKED;
  };
  std::stable_sort(rows.begin(), rows.end(), [&](auto* a, auto* b) {
    if (ran(a) != ran(b)) return ran(a);
    if (ran(a)) return a->median_us() < b->median_us();
    return a->index() < b->index();
  });
  size_t width = 6;
  for (auto* c : rows) width = std::max(width, c->label().size());
  std::string out = absl::StrFormat(
      "%-*s  %-8s %12s  %-25s %5s  %s\n", static_cast<int>(width), "CONFIG",
      "STATUS", "MEDIAN", "SPREAD (p10 - p90)", "RUNS", "VS BEST");
  const double best = result.best_median_us();
  for (auto* c : rows) {
    const std::string label = c->label().empty() ? "(none)" : c->label();
    if (ran(c)) {
      absl::StrAppendFormat(
          &out, "%-*s  %-8s %12s  %-25s %5d  %s%s\n", static_cast<int>(width),
          label, StatusName(c->status()), Micros(c->median_us()),
          absl::StrCat(Micros(c->p10_us()), " - ", Micros(c->p90_us())),
          c->runs(),
          best > 0 ? absl::StrFormat("%.2fx", c->median_us() / best)
                   : std::string("-"),
          c->label() == result.best_label() ? "  <- chosen"
          : c->reason().empty()             ? ""
                                            : "  " + c->reason());
    } else {
      absl::StrAppendFormat(
          &out, "%-*s  %-8s %12s  %-25s %5s  %s\n", static_cast<int>(width),
          label, StatusName(c->status()), "-", "-", "-", c->reason());
    }
  }
  return out;
}

std::string ExplainTuning(const kiln::v1::AutotuneResult& result,
                          const std::string& key_text) {
  int ok = 0, pruned = 0, failed = 0, wrong = 0;
  for (const auto& c : result.candidates()) {
    switch (c.status()) {
      case kiln::v1::CANDIDATE_STATUS_BENCHMARKED:
        ++ok;
        break;
      case kiln::v1::CANDIDATE_STATUS_PRUNED:
        ++pruned;
        break;
      case kiln::v1::CANDIDATE_STATUS_WRONG:
        ++wrong;
        break;
      default:
        ++failed;
        break;
    }
  }
  std::string out = absl::StrCat(
      "autotuning result (kiln tune): the fastest configuration of kernel '",
      result.kernel_name(), "' on ", result.device_sku(), " (target ",
      result.target(), ") for shapes in bucket ", Join(result.shape_bucket()),
      "\n\n", "tuning key   ", result.tuning_key(), "\n  = SHA-256 of:\n");
  size_t start = 0;
  while (start < key_text.size()) {
    size_t end = key_text.find('\n', start);
    if (end == std::string::npos) end = key_text.size();
    absl::StrAppend(&out, "    ", key_text.substr(start, end - start), "\n");
    start = end + 1;
  }
  absl::StrAppend(
      &out, "tuned at     ", Join(result.shape()), "\n", "fixed        ",
      Join(result.fixed_bindings()), "\n", "chosen       ",
      result.best_label().empty() ? "(no tunables)" : result.best_label(),
      " (median ", Micros(result.best_median_us()), ")\n", "binary key   ",
      result.best_kernel_key(), "  (kiln cache show it: the chosen kernel)\n",
      "candidates   ", result.candidates_size(), ": ", ok, " ran, ", pruned,
      " pruned, ", failed, " failed, ", wrong, " wrong\n", "checked with ",
      result.reference().empty() ? "(nothing ran)" : result.reference(), "\n",
      absl::StrFormat("tuning took  %.1f s, ", result.tuning_ms() / 1000),
      absl::FormatTime("%Y-%m-%d %H:%M:%S UTC",
                       absl::FromUnixSeconds(
                           static_cast<int64_t>(result.created_unix_seconds())),
                       absl::UTCTimeZone()),
      "\n\n", FormatCandidateTable(result));
  return out;
}

}  // namespace kiln::server::tuning
