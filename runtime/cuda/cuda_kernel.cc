#include "runtime/cuda/cuda_kernel.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/cuda/cuda_device.h"

namespace kiln::runtime::cuda {
namespace {
constexpr int kFuncMaxDynamicShared = 8;
constexpr int64_t kDefaultShared = 48 * 1024;

// cuLaunchKernelEx's configuration for `grid` and `block` in clusters of
// `cx` blocks along x; `attr` (the cluster dimension) is filled in and
// must outlive the configuration.
LaunchConfig ClusterConfig(const std::array<unsigned, 3>& grid,
                           const std::array<unsigned, 3>& block, unsigned cx,
                           int64_t shared_bytes, CUstream stream,
                           LaunchAttribute* attr) {
  attr->id = kLaunchAttributeClusterDimension;
  attr->value.cluster = {cx, 1, 1};
  LaunchConfig config;
  config.grid_x = grid[0];
  config.grid_y = grid[1];
  config.grid_z = grid[2];
  config.block_x = block[0];
  config.block_y = block[1];
  config.block_z = block[2];
  config.shared_bytes = static_cast<unsigned>(shared_bytes);
  config.stream = stream;
  config.attrs = attr;
  config.num_attrs = 1;
  return config;
}
}  // namespace

absl::StatusOr<std::unique_ptr<CudaKernel>> CudaKernel::Load(
    std::string_view cubin, std::string_view metadata_text, int ordinal) {
  absl::StatusOr<KernelMetadata> md = ParseKernelMetadata(metadata_text);
  if (!md.ok()) return md.status();
  return Load(cubin, std::move(*md), ordinal);
}

absl::StatusOr<std::unique_ptr<CudaKernel>> CudaKernel::Load(
    std::string_view cubin, KernelMetadata metadata, int ordinal) {
  if (metadata.target.rfind("sm_", 0) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metadata target '", metadata.target, "' is not a CUDA target"));
  }
  absl::StatusOr<const Driver*> d = Driver::Get();
  if (!d.ok()) return d.status();
  absl::StatusOr<DeviceInfo> dev = UseDevice(ordinal);
  if (!dev.ok()) return dev.status();
  if (metadata.shared_bytes > dev->max_shared_optin) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel '", metadata.name, "' needs ",
                     metadata.shared_bytes, " bytes of shared memory; ",
                     dev->name, " allows ", dev->max_shared_optin));
  }
  std::unique_ptr<CudaKernel> k(new CudaKernel(*d, std::move(metadata)));
  const DriverApi& api = (*d)->api();
  // The cubin must outlive nothing: the driver copies it.
  std::string image(cubin);
  if (absl::Status s = (*d)->Check(
          api.cuModuleLoadData(&k->module_, image.data()), "cuModuleLoadData");
      !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(s.message(), " (kernel for ",
                                               k->metadata_.target, ", device ",
                                               dev->arch(), ")"));
  }
  if (absl::Status s =
          (*d)->Check(api.cuModuleGetFunction(&k->function_, k->module_,
                                              k->metadata_.entry.c_str()),
                      "cuModuleGetFunction");
      !s.ok()) {
    return s;
  }
  if (k->metadata_.shared_bytes > kDefaultShared) {
    if (absl::Status s = (*d)->Check(
            api.cuFuncSetAttribute(k->function_, kFuncMaxDynamicShared,
                                   static_cast<int>(k->metadata_.shared_bytes)),
            "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
        !s.ok()) {
      return s;
    }
  }
  // A persistent kernel launches as many blocks as can be resident at once
  // (the occupancy calculator: registers, shared memory, threads).
  int per_sm = 1;
  if (k->metadata_.persistent) {
    int64_t threads = 1;
    for (const auto& b : k->metadata_.block) {
      threads *= b.AsConstant().value_or(1);
    }
    if (absl::Status s =
            (*d)->Check(api.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                            &per_sm, k->function_, static_cast<int>(threads),
                            static_cast<size_t>(k->metadata_.shared_bytes)),
                        "cuOccupancyMaxActiveBlocksPerMultiprocessor");
        !s.ok()) {
      return s;
    }
  }
  k->resident_blocks_ =
      int64_t{std::max(1, dev->sm_count)} * std::max(1, per_sm);
  // Clusters (kernels that multicast between the blocks of a pair): along
  // x only, launched with cuLaunchKernelEx.
  const KernelMetadata& md = k->metadata_;
  const int64_t cx = md.cluster[0].AsConstant().value_or(0);
  const bool along_x = md.cluster[1].AsConstant().value_or(0) == 1 &&
                       md.cluster[2].AsConstant().value_or(0) == 1;
  if (cx != 1 || !along_x) {
    if (cx < 1 || cx > 8 || !along_x) {
      return absl::InvalidArgumentError(absl::StrCat(
          "kernel '", md.name,
          "': clusters other than (1..8, 1, 1) are not supported"));
    }
    if (api.cuLaunchKernelEx == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "kernel '", md.name, "' runs in clusters of ", cx,
          " blocks, which needs cuLaunchKernelEx (a CUDA 12 driver)"));
    }
    k->cluster_x_ = static_cast<unsigned>(cx);
    // A persistent kernel's resident blocks, as whole clusters (the
    // device may fit fewer clusters than SMs / cluster size).
    int clusters = 0;
    if (md.persistent && api.cuOccupancyMaxActiveClusters != nullptr) {
      LaunchAttribute attr;
      const LaunchConfig config = ClusterConfig(
          {k->cluster_x_, 1, 1},
          {static_cast<unsigned>(md.block[0].AsConstant().value_or(1)), 1, 1},
          k->cluster_x_, md.shared_bytes, nullptr, &attr);
      if (api.cuOccupancyMaxActiveClusters(&clusters, k->function_, &config) !=
          0) {
        clusters = 0;
      }
    }
    k->resident_blocks_ =
        clusters > 0 ? int64_t{clusters} * cx
                     : std::max<int64_t>(cx, k->resident_blocks_ / cx * cx);
  }
  return k;
}

CudaKernel::~CudaKernel() {
  if (module_) driver_->api().cuModuleUnload(module_);
}

absl::Status CudaKernel::Launch(absl::Span<const ArgValue> args,
                                CUstream stream) const {
  auto check = [](const std::array<int64_t, 3>& grid,
                  const std::array<int64_t, 3>&) -> absl::Status {
    for (int64_t g : grid) {
      if (g > 0x7fffffff) {
        return absl::InvalidArgumentError(
            absl::StrCat("grid dim ", g, " is too large for CUDA"));
      }
    }
    if (grid[1] > 65535 || grid[2] > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("grid (", grid[0], ", ", grid[1], ", ", grid[2],
                       ") exceeds CUDA's 65535 limit on y and z"));
    }
    return absl::OkStatus();
  };
  auto enqueue = [&](const GpuBinding& bound, void** params) {
    // A persistent kernel walks the grid itself: as many blocks as are
    // resident at once (the launch reads only the grid and the block).
    // In clusters along x, it walks the grid in groups of cluster_x_
    // blocks along x (the grid's x extent rounded up).
    GpuBinding persistent;
    if (metadata_.persistent) {
      const uint64_t cx = cluster_x_;
      const uint64_t blocks = (uint64_t{bound.grid[0]} + cx - 1) / cx * cx *
                              bound.grid[1] * bound.grid[2];
      persistent.grid = {static_cast<unsigned>(std::min<uint64_t>(
                             blocks, static_cast<uint64_t>(resident_blocks_))),
                         1, 1};
      persistent.block = bound.block;
    }
    const GpuBinding& b = metadata_.persistent ? persistent : bound;
    if (cluster_x_ == 1) {
      return driver_->Check(
          CallLaunchKernel(driver_->api().cuLaunchKernel, function_, b,
                           metadata_.shared_bytes, stream, params),
          "cuLaunchKernel");
    }
    if (b.grid[0] % cluster_x_ != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("grid x extent ", b.grid[0],
                       " is not a multiple of the cluster's ", cluster_x_));
    }
    LaunchAttribute attr;
    const LaunchConfig config = ClusterConfig(
        b.grid, b.block, cluster_x_, metadata_.shared_bytes, stream, &attr);
    return driver_->Check(
        driver_->api().cuLaunchKernelEx(&config, function_, params, nullptr),
        "cuLaunchKernelEx");
  };
  if (metadata_.tensor_maps.empty()) {
    return launcher_.Launch(metadata_, args, check, enqueue);
  }
  // The tensor maps and their flag follow the symbols.
  std::shared_ptr<const TensorMaps> maps = BuildTensorMaps(args);
  return launcher_.Launch(metadata_, args, check, enqueue, maps->params);
}

namespace {

// CUtensorMapDataType for a dtype; -1 when TMA has no such element type.
int TensorMapType(DType t) {
  switch (t) {
    case DType::kF16:
      return 6;  // FLOAT16
    case DType::kBF16:
      return 9;  // BFLOAT16
    case DType::kF32:
      return 7;  // FLOAT32
    case DType::kF64:
      return 8;  // FLOAT64
    case DType::kI32:
      return 3;  // INT32
    case DType::kU32:
      return 2;  // UINT32
    case DType::kI64:
      return 5;  // INT64
    case DType::kI16:
      return 1;  // UINT16 (bits are copied as they are)
    case DType::kI8:
    case DType::kU8:
    case DType::kF8E4M3:
    case DType::kF8E5M2:
    case DType::kBool:
      return 0;  // UINT8
    default:
      return -1;
  }
}

bool SameTensors(const std::vector<ArgValue>& a, absl::Span<const ArgValue> b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].is_tensor || !b[i].is_tensor) continue;
    if (a[i].data != b[i].data || a[i].shape != b[i].shape ||
        a[i].strides != b[i].strides) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::shared_ptr<const CudaKernel::TensorMaps> CudaKernel::BuildTensorMaps(
    absl::Span<const ArgValue> args) const {
  {
    absl::MutexLock lock(&maps_mu_);
    if (maps_ != nullptr && SameTensors(maps_for_, args)) return maps_;
  }
  auto out = std::make_shared<TensorMaps>();
  out->maps.assign(metadata_.tensor_maps.size(), {});
  bool ok = driver_->api().cuTensorMapEncodeTiled != nullptr;
  for (size_t m = 0; ok && m < metadata_.tensor_maps.size(); ++m) {
    const MetadataTensorMap& spec = metadata_.tensor_maps[m];
    const ArgValue* arg = nullptr;
    for (size_t i = 0; i < metadata_.params.size() && i < args.size(); ++i) {
      if (metadata_.params[i].name == spec.param) arg = &args[i];
    }
    const int type = arg ? TensorMapType(arg->dtype) : -1;
    if (type < 0 || arg->shape.size() != spec.box.size()) {
      ok = false;
      break;
    }
    const size_t rank = arg->shape.size();
    const int64_t eb = DTypeBits(arg->dtype) / 8;
    std::vector<int64_t> strides = arg->strides;
    if (strides.empty()) {  // row-major
      strides.assign(rank, 1);
      for (size_t d = rank - 1; d-- > 0;) {
        strides[d] = strides[d + 1] * arg->shape[d + 1];
      }
    }
    uint64_t dims[5], gstrides[4];
    unsigned box[5], estrides[5];
    ok = strides[rank - 1] == 1 &&
         reinterpret_cast<uintptr_t>(arg->data) % 16 == 0;
    for (size_t d = 0; ok && d < rank; ++d) {
      const size_t src = rank - 1 - d;  // innermost first
      ok = arg->shape[src] > 0 && arg->shape[src] < (int64_t{1} << 32);
      dims[d] = static_cast<uint64_t>(arg->shape[src]);
      box[d] = static_cast<unsigned>(spec.box[d]);
      estrides[d] = 1;
      if (d > 0) {
        const int64_t bytes = strides[src] * eb;
        ok = ok && bytes > 0 && bytes % 16 == 0 && bytes < (int64_t{1} << 40);
        gstrides[d - 1] = static_cast<uint64_t>(bytes);
      }
    }
    if (!ok) break;
    const int swizzle = spec.swizzle == 128  ? 3
                        : spec.swizzle == 64 ? 2
                        : spec.swizzle == 32 ? 1
                                             : 0;
    // L2 promotion of 256 bytes; out-of-bounds elements read as zero.
    ok = driver_->api().cuTensorMapEncodeTiled(
             out->maps[m].opaque, type, static_cast<unsigned>(rank), arg->data,
             dims, gstrides, box, estrides, /*interleave=*/0, swizzle,
             /*l2_promotion=*/3, /*oob_fill=*/0) == 0;
  }
  out->ok = ok ? 1 : 0;
  for (TensorMap& m : out->maps) out->params.push_back(m.opaque);
  out->params.push_back(&out->ok);
  absl::MutexLock lock(&maps_mu_);
  maps_for_.assign(args.begin(), args.end());
  maps_ = out;
  return out;
}

}  // namespace kiln::runtime::cuda
