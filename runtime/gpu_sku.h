// The SKU string of a GPU, the model key that tuning results are stored
// under (ARCHITECTURE.md, "Two keys"): the device's name with each space
// turned into '-', then its count of multiprocessors / compute units.
#ifndef KILN_RUNTIME_GPU_SKU_H_
#define KILN_RUNTIME_GPU_SKU_H_

#include <string>

#include "absl/strings/string_view.h"

namespace kiln::runtime {

// GpuSku("NVIDIA H200", 132, "SM") == "NVIDIA-H200-132SM". Pure.
std::string GpuSku(absl::string_view name, int units, absl::string_view unit);

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_GPU_SKU_H_
