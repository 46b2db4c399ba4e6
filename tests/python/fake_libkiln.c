/* fake_libkiln.c: an in-memory stand-in for libkiln, built from
 * client/kiln.h by test_capi.py, so the ctypes layer is checked against the
 * real header. It compiles nothing: kiln_compile records its inputs and
 * fails when the IR contains "FAIL"; kiln_kernel_launch records a text
 * description of its arguments, readable with fake_last_call(). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/kiln.h"

struct kiln_client {
  int embedded;
};
struct kiln_kernel {
  char name[64];
};

static char last_error[256];
static char last_call[4096];

static void append(const char* fmt, long long a, long long b) {
  size_t n = strlen(last_call);
  snprintf(last_call + n, sizeof(last_call) - n, fmt, a, b);
}

const char* fake_last_call(void) { return last_call; }

const char* kiln_version(void) { return "0.0.0-fake"; }
const char* kiln_last_error(void) { return last_error; }

int kiln_connect(const char* address, double timeout_seconds,
                 kiln_client** out) {
  (void)timeout_seconds;
  (void)out;
  snprintf(last_error, sizeof(last_error), "no kilnd at '%s'", address);
  return 14;
}

int kiln_embedded(const char* cache_dir, int worker_threads,
                  kiln_client** out) {
  (void)cache_dir;
  (void)worker_threads;
  *out = calloc(1, sizeof(kiln_client));
  (*out)->embedded = 1;
  return KILN_OK;
}

void kiln_client_free(kiln_client* client) { free(client); }

int kiln_compile(kiln_client* client, const char* ir_text, const char* kernel,
                 const char* target, const kiln_binding* bindings,
                 size_t num_bindings, const char* filename,
                 double timeout_seconds, kiln_kernel** out) {
  (void)client;
  (void)timeout_seconds;
  snprintf(last_call, sizeof(last_call), "compile %s %s %s",
           kernel ? kernel : "(null)", target ? target : "(null)",
           filename ? filename : "(null)");
  for (size_t i = 0; i < num_bindings; ++i) {
    size_t n = strlen(last_call);
    snprintf(last_call + n, sizeof(last_call) - n, " %s=%lld", bindings[i].name,
             (long long)bindings[i].value);
  }
  if (strstr(ir_text, "FAIL") != NULL) {
    snprintf(last_error, sizeof(last_error), "%s:3:5: error: fake failure",
             filename ? filename : "?");
    return 3;
  }
  *out = calloc(1, sizeof(kiln_kernel));
  snprintf((*out)->name, sizeof((*out)->name), "%s", kernel ? kernel : "");
  return KILN_OK;
}

int kiln_get_kernel(kiln_client* client, const char* key, kiln_kernel** out) {
  (void)client;
  (void)out;
  snprintf(last_error, sizeof(last_error), "no kernel %s", key);
  return 5;
}

int kiln_autotune(kiln_client* client, const char* ir_text,
                  const char* kernel, const char* target,
                  const kiln_binding* shape, size_t num_shape,
                  const kiln_binding* fixed, size_t num_fixed,
                  const char* const* config_names, size_t num_config_names,
                  const int64_t* config_values, size_t num_configs,
                  int max_candidates, int force, double timeout_seconds,
                  char** out_json) {
  (void)client;
  (void)ir_text;
  (void)fixed;
  (void)max_candidates;
  (void)force;
  (void)timeout_seconds;
  (void)out_json;
  int n = snprintf(last_call, sizeof(last_call), "autotune %s %s %zu %zu",
                   kernel ? kernel : "(null)", target ? target : "(null)",
                   num_shape, num_fixed);
  for (size_t i = 0; i < num_shape && n > 0 && (size_t)n < sizeof(last_call);
       ++i) {
    n += snprintf(last_call + n, sizeof(last_call) - (size_t)n, " %s=%lld",
                  shape[i].name, (long long)shape[i].value);
  }
  for (size_t c = 0; c < num_configs && n > 0 && (size_t)n < sizeof(last_call);
       ++c) {
    n += snprintf(last_call + n, sizeof(last_call) - (size_t)n, " |");
    for (size_t j = 0;
         j < num_config_names && n > 0 && (size_t)n < sizeof(last_call); ++j) {
      n += snprintf(last_call + n, sizeof(last_call) - (size_t)n, " %s=%lld",
                    config_names[j],
                    (long long)config_values[c * num_config_names + j]);
    }
  }
  snprintf(last_error, sizeof(last_error), "the fake does not tune");
  return 12;
}

void kiln_string_free(char* s) { free(s); }

int kiln_kernel_from_parts(const void* binary, size_t binary_size,
                           const char* metadata, kiln_kernel** out) {
  (void)binary;
  (void)binary_size;
  *out = calloc(1, sizeof(kiln_kernel));
  snprintf((*out)->name, sizeof((*out)->name), "%s", metadata);
  return KILN_OK;
}

void kiln_kernel_free(kiln_kernel* kernel) { free(kernel); }

const char* kiln_kernel_key(const kiln_kernel* k) {
  (void)k;
  return "00ff";
}
const char* kiln_kernel_name(const kiln_kernel* k) { return k->name; }
const char* kiln_kernel_target(const kiln_kernel* k) {
  (void)k;
  return "cpu";
}
const char* kiln_kernel_tier(const kiln_kernel* k) {
  (void)k;
  return "compiled";
}
const char* kiln_kernel_metadata(const kiln_kernel* k) {
  (void)k;
  return "kiln-kernel 1";
}
const char* kiln_kernel_compile_log(const kiln_kernel* k) {
  (void)k;
  return "";
}
static const char kBinary[] = {'E', 'L', 'F'};
size_t kiln_kernel_binary(const kiln_kernel* k, const void** data) {
  (void)k;
  *data = kBinary;
  return sizeof(kBinary);
}

int kiln_kernel_launch(const kiln_kernel* kernel, const kiln_arg* args,
                       size_t num_args, void* stream) {
  snprintf(last_call, sizeof(last_call), "launch %s", kernel->name);
  append(" n=%lld stream=%llx", (long long)num_args,
         (long long)(uintptr_t)stream);
  for (size_t i = 0; i < num_args; ++i) {
    const kiln_arg* a = &args[i];
    size_t n = strlen(last_call);
    snprintf(last_call + n, sizeof(last_call) - n, " | %s",
             a->dtype ? a->dtype : "(null)");
    if (a->is_tensor) {
      append(" data=%llx rank=%lld", (long long)(uintptr_t)a->data, a->rank);
      for (int32_t d = 0; d < a->rank; ++d) {
        append(" %lld:%lld", a->shape[d], a->strides ? a->strides[d] : -1);
      }
    } else {
      uint64_t bits;
      memcpy(&bits, a->scalar, sizeof(bits));
      append(" scalar=%llx", (long long)bits, 0);
    }
  }
  /* Observable effect: a launch of "main" with an f32 first tensor doubles
   * it into the third (scale_add's X and Y), so outputs are checked too. */
  if (num_args >= 3 && args[0].is_tensor && args[2].is_tensor &&
      strcmp(args[0].dtype, "f32") == 0 && args[0].rank == 1) {
    const float* x = args[0].data;
    float* y = args[2].data;
    for (int64_t i = 0; i < args[0].shape[0]; ++i) y[i] = 2 * x[i];
  }
  return KILN_OK;
}
