// What an autotuning result looks like stored and printed: the cache entry
// under the tuning key (blobs "tuning.pb", the kiln.v1.AutotuneResult
// message, and "tuning.txt", this file's explanation of it for `kiln cache
// show`), timing statistics, and the candidate table `kiln tune` prints.
#ifndef KILN_SERVER_TUNING_TUNING_RECORD_H_
#define KILN_SERVER_TUNING_TUNING_RECORD_H_

#include <string>
#include <vector>

#include "proto/kiln.pb.h"

namespace kiln::server::tuning {

inline constexpr char kTuningResultBlob[] = "tuning.pb";
inline constexpr char kTuningTextBlob[] = "tuning.txt";
// The text the tuning key hashes (TuningKeyText), for `kiln cache explain`;
// binary entries keep theirs under the same name.
inline constexpr char kTuningKeyTextBlob[] = "key.txt";

// Sets median, p10, p90, min, max and runs of `candidate` from `times_us`
// (nearest-rank percentiles; nothing for an empty list).
void SetTimes(const std::vector<double>& times_us,
              kiln::v1::CandidateResult* candidate);

// "ok", "pruned", "failed", "wrong", "compiled".
std::string StatusName(kiln::v1::CandidateStatus status);

// The candidates as a table, fastest first, then the others in index
// order: CONFIG STATUS MEDIAN SPREAD(p10-p90) RUNS VS-BEST, and the reason
// of each candidate that did not run.
std::string FormatCandidateTable(const kiln::v1::AutotuneResult& result);

// The text of the "tuning.txt" blob: what the entry holds and what its key
// is made of (`key_text`, TuningKeyText), then the table.
std::string ExplainTuning(const kiln::v1::AutotuneResult& result,
                          const std::string& key_text);

}  // namespace kiln::server::tuning

#endif  // KILN_SERVER_TUNING_TUNING_RECORD_H_
