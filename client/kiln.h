/* kiln.h: the C ABI of the Kiln client, for Python (ctypes) and other
 * languages. A thin layer over kiln::client::Client (client/client.h):
 * connect to kilnd, or run embedded (compiler and cache in this process);
 * compile a tile-IR kernel into a kernel handle; launch the handle with no
 * further call to the daemon.
 *
 * Conventions:
 * - Every function that can fail returns an int status: 0 (KILN_OK) on
 *   success, otherwise a code with the values of absl::StatusCode / gRPC
 *   (3 invalid argument, 5 not found, 14 unavailable, ...). The message of
 *   the last failure on the calling thread is kiln_last_error().
 * - Strings are NUL-terminated UTF-8. Strings returned by kiln_kernel_*
 *   live as long as the kernel.
 * - Handles are thread-safe: any number of threads may compile with one
 *   client and launch one kernel at once.
 * - Library version: kiln_version(). The ABI only grows (new functions, new
 *   trailing fields guarded by a struct size), never changes.
 */
#ifndef KILN_CLIENT_KILN_H_
#define KILN_CLIENT_KILN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_OK 0

#if defined(__GNUC__)
#define KILN_API __attribute__((visibility("default")))
#else
#define KILN_API
#endif

typedef struct kiln_client kiln_client;
typedef struct kiln_kernel kiln_kernel;

/* "MAJOR.MINOR.PATCH" of this library. */
KILN_API const char* kiln_version(void);

/* The message of the last failing call on this thread ("" if none). Valid
 * until the next failing call on this thread. */
KILN_API const char* kiln_last_error(void);

/* Connects to the kilnd at `address` (NULL or "" for the default unix
 * socket; "/path", "unix:/path", or "host:port"), waiting at most
 * `timeout_seconds` for it to accept (<= 0: 2 s). */
KILN_API int kiln_connect(const char* address, double timeout_seconds,
                          kiln_client** out);

/* An embedded client: compiler and cache in this process, no daemon.
 * `cache_dir` NULL or "" means the default ($XDG_CACHE_HOME/kiln or
 * ~/.cache/kiln). `worker_threads` <= 0 means one per core. */
KILN_API int kiln_embedded(const char* cache_dir, int worker_threads,
                           kiln_client** out);

/* Frees a client (NULL is ignored). Kernels it returned stay valid. */
KILN_API void kiln_client_free(kiln_client* client);

/* A tunable or fixed symbol's value for kiln_compile. */
typedef struct kiln_binding {
  const char* name;
  int64_t value;
} kiln_binding;

/* Compiles (or fetches from the cache) `kernel` of the tile-IR program
 * `ir_text` for `target` ("auto", "cpu", "sm_90a", ...; NULL means "auto").
 * `kernel` may be NULL when the program has one kernel. `filename` (may be
 * NULL) names the source in diagnostics. `timeout_seconds` <= 0 means no
 * deadline. On failure the error message carries every diagnostic as
 * FILE:LINE:COL lines. */
KILN_API int kiln_compile(kiln_client* client, const char* ir_text,
                          const char* kernel, const char* target,
                          const kiln_binding* bindings, size_t num_bindings,
                          const char* filename, double timeout_seconds,
                          kiln_kernel** out);

/* The stored kernel with binary key `key` (64 hex characters). */
KILN_API int kiln_get_kernel(kiln_client* client, const char* key,
                             kiln_kernel** out);

/* Builds a kernel from a handle's parts (for handles stored by the caller):
 * the binary and its metadata text (compiler/docs/kernel-handle.md). */
KILN_API int kiln_kernel_from_parts(const void* binary, size_t binary_size,
                                    const char* metadata, kiln_kernel** out);

KILN_API void kiln_kernel_free(kiln_kernel* kernel);

/* Parts of the handle. */
KILN_API const char* kiln_kernel_key(const kiln_kernel* kernel);
KILN_API const char* kiln_kernel_name(const kiln_kernel* kernel);
KILN_API const char* kiln_kernel_target(const kiln_kernel* kernel);
/* "memory", "local", "remote" (cache tiers), "compiled", or "" when
 * unknown. */
KILN_API const char* kiln_kernel_tier(const kiln_kernel* kernel);
KILN_API const char* kiln_kernel_metadata(const kiln_kernel* kernel);
KILN_API const char* kiln_kernel_compile_log(const kiln_kernel* kernel);
/* Sets *data to the binary and returns its size in bytes. */
KILN_API size_t kiln_kernel_binary(const kiln_kernel* kernel,
                                   const void** data);

/* One launch argument. For a tensor: is_tensor = 1, dtype its element type
 * name as in the tile IR ("f16", "f32", "i4", ...), data its first element
 * (a device pointer for GPU targets), rank dims in shape[] (elements) and
 * strides[] (elements; NULL for row-major). For a scalar: is_tensor = 0,
 * dtype its type, and `scalar` its value's bytes (little-endian, as
 * kiln::runtime::ArgValue::Scalar stores them). */
typedef struct kiln_arg {
  int32_t is_tensor;
  const char* dtype;
  void* data;
  int32_t rank;
  const int64_t* shape;
  const int64_t* strides;
  uint8_t scalar[8];
} kiln_arg;

/* Launches `kernel` with `args` (in the kernel's parameter order). GPU
 * targets enqueue on `stream` (a CUstream, or a hipStream_t for gfx
 * targets; NULL for the default stream) and return without waiting; the CPU
 * target runs every block and returns when they are done (stream is
 * ignored). Arguments are checked against the metadata first: dtype, rank,
 * shapes, strides, assumptions. */
KILN_API int kiln_kernel_launch(const kiln_kernel* kernel, const kiln_arg* args,
                                size_t num_args, void* stream);

/* Autotunes `kernel` of `ir_text` for `target` (NULL means "auto") at the
 * problem shape `shape` (a value for every symbol of the kernel; results are
 * stored for the shape's power-of-two bucket), with `fixed` symbols or
 * tunables fixed. With num_configs > 0 only those configurations are
 * candidates, in that order: config i binds tunable config_names[j] to
 * config_values[i * num_config_names + j] (configs breaking the kernel's
 * constraints are left out and listed in "excluded"). `max_candidates` <= 0
 * means the default (256); `force` non-zero tunes again even when a result
 * is stored; `timeout_seconds` <= 0 means no deadline. On success
 * `*out_json` is a JSON object to free with kiln_string_free:
 *   {"tuning_key": "<64 hex>", "cached": false, "kernel": "gemm",
 *    "target": "cpu", "best": {"BM": 64, "BN": 128},
 *    "best_label": "BM=64,BN=128", "best_kernel_key": "<64 hex>",
 *    "best_median_us": 812.5, "candidates": 39, "ran": 37,
 *    "excluded": ["BM=48,BN=64: ..."], "result": {...}}
 * where "result" is the whole AutotuneResult of proto/kiln.proto in
 * protobuf's JSON mapping with the proto field names (every candidate with
 * its status, reason and timings; 64-bit integers as strings). Compile the
 * chosen kernel with kiln_compile and the "best" bindings (it is cached: a
 * hit). Errors as kiln_compile, and 9 (failed
 * precondition) when the target has no device where the tuning runs or no
 * candidate ran correctly. */
KILN_API int kiln_autotune(kiln_client* client, const char* ir_text,
                           const char* kernel, const char* target,
                           const kiln_binding* shape, size_t num_shape,
                           const kiln_binding* fixed, size_t num_fixed,
                           const char* const* config_names,
                           size_t num_config_names,
                           const int64_t* config_values, size_t num_configs,
                           int max_candidates, int force,
                           double timeout_seconds, char** out_json);

/* Frees a string returned by the library (NULL is ignored). */
KILN_API void kiln_string_free(char* s);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif /* KILN_CLIENT_KILN_H_ */
