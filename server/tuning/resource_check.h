// Pruning candidates that exceed what the device allows, from their launch
// metadata: dynamic shared memory per block, registers per thread (ptxas's
// report) and registers per block, and threads per block. The limits are
// those of the target's architecture (CUDA compute capability tables); the
// CPU target has none (its tiles live on a 64 MiB stack the runtime gives
// every worker thread).
#ifndef KILN_SERVER_TUNING_RESOURCE_CHECK_H_
#define KILN_SERVER_TUNING_RESOURCE_CHECK_H_

#include <string>
#include <string_view>

namespace kiln::server::tuning {

// "" when the kernel fits `target`; else the reason, e.g. "needs 262144
// bytes of shared memory per block; sm_90 allows 232448". Metadata that
// does not parse is a reason too.
std::string ResourceExcess(std::string_view metadata_text,
                           const std::string& target);

// "" when ptxas reported no register spills; else e.g. "spills registers
// to local memory (ptxas: 96 bytes of spill stores, 96 of spill loads,
// 128-byte stack)". The autotuner prunes spilling candidates when some
// candidate does not spill.
std::string SpillReport(std::string_view metadata_text);

}  // namespace kiln::server::tuning

#endif  // KILN_SERVER_TUNING_RESOURCE_CHECK_H_
