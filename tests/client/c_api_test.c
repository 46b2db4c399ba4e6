/* The C ABI (client/kiln.h) from C: embedded mode, compile, launch, check,
 * and the error paths. Exits 0 when every check passes; prints each failure.
 * argv[1]: a fresh cache directory. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "client/kiln.h"

static int failures = 0;
#define CHECK(cond)                                                           \
  do {                                                                        \
    if (!(cond)) {                                                            \
      fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__, \
              __LINE__, #cond, kiln_last_error());                            \
      ++failures;                                                             \
    }                                                                         \
  } while (0)

static const char* kScale =
    "kernel scale(X: f32[N], Y: f32[N], a: f32)\n"
    "  tune B in [64, 128]\n"
    "  grid(ceildiv(N, B)) threads(32) (bx) {\n"
    "  alloc fragment T: f32[B]\n"
    "  copy X[bx * B:+B] -> T\n"
    "  parallel (i) in (B) {\n"
    "    T[i] = T[i] * a\n"
    "  }\n"
    "  copy T -> Y[bx * B:+B]\n"
    "}\n";

static kiln_arg Tensor(float* data, const int64_t* shape) {
  kiln_arg a;
  memset(&a, 0, sizeof a);
  a.is_tensor = 1;
  a.dtype = "f32";
  a.data = data;
  a.rank = 1;
  a.shape = shape;
  return a;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: c_api_test CACHE_DIR\n");
    return 2;
  }
  CHECK(strlen(kiln_version()) > 0);
  kiln_client* client = NULL;
  int rc = kiln_embedded(argv[1], 1, &client);
  CHECK(rc == KILN_OK);
  if (rc != KILN_OK) return 1;

  kiln_binding binding = {"B", 128};
  kiln_kernel* kernel = NULL;
  rc = kiln_compile(client, kScale, "scale", "cpu", &binding, 1, "scale.tile",
                    0, &kernel);
  CHECK(rc == KILN_OK);
  if (rc != KILN_OK) return 1;
  CHECK(strlen(kiln_kernel_key(kernel)) == 64);
  CHECK(strcmp(kiln_kernel_name(kernel), "scale") == 0);
  CHECK(strcmp(kiln_kernel_target(kernel), "cpu") == 0);
  CHECK(strcmp(kiln_kernel_tier(kernel), "compiled") == 0);
  CHECK(strncmp(kiln_kernel_metadata(kernel), "kiln-kernel 1", 13) == 0);
  const void* binary = NULL;
  size_t size = kiln_kernel_binary(kernel, &binary);
  CHECK(size > 4 && memcmp(binary, "\177ELF", 4) == 0);

  enum { kN = 1000 };
  static float x[kN], y[kN];
  for (int i = 0; i < kN; ++i) {
    x[i] = sinf((float)i);
    y[i] = NAN;
  }
  int64_t shape[1] = {kN};
  kiln_arg args[3];
  args[0] = Tensor(x, shape);
  args[1] = Tensor(y, shape);
  memset(&args[2], 0, sizeof args[2]);
  args[2].dtype = "f32";
  float a = 3.0f;
  memcpy(args[2].scalar, &a, sizeof a);
  CHECK(kiln_kernel_launch(kernel, args, 3, NULL) == KILN_OK);
  for (int i = 0; i < kN; ++i) {
    if (y[i] != x[i] * a) {
      fprintf(stderr, "y[%d] = %g, expected %g\n", i, y[i], x[i] * a);
      ++failures;
      break;
    }
  }

  /* A handle rebuilt from its parts launches the same. */
  kiln_kernel* copy = NULL;
  CHECK(kiln_kernel_from_parts(binary, size, kiln_kernel_metadata(kernel),
                               &copy) == KILN_OK);
  if (copy != NULL) {
    memset(y, 0, sizeof y);
    CHECK(kiln_kernel_launch(copy, args, 3, NULL) == KILN_OK);
    CHECK(y[kN - 1] == x[kN - 1] * a);
    kiln_kernel_free(copy);
  }

  /* Errors: code 3 (invalid argument) with a message, never a crash. */
  args[0].dtype = "f16";
  CHECK(kiln_kernel_launch(kernel, args, 3, NULL) == 3);
  CHECK(strstr(kiln_last_error(), "'X'") != NULL);
  args[0].dtype = "complex128";
  CHECK(kiln_kernel_launch(kernel, args, 3, NULL) == 3);
  CHECK(strstr(kiln_last_error(), "complex128") != NULL);
  CHECK(kiln_kernel_launch(kernel, args, 2, NULL) == 3);
  kiln_kernel* bad = NULL;
  CHECK(kiln_compile(client, "kernel (", NULL, "cpu", NULL, 0, "bad.tile", 0,
                     &bad) == 3);
  CHECK(strstr(kiln_last_error(), "bad.tile:1:") != NULL);
  CHECK(bad == NULL);
  CHECK(kiln_compile(client, kScale, NULL, "cpu", NULL, 0, NULL, 0, &bad) == 3);
  CHECK(kiln_compile(NULL, kScale, NULL, NULL, NULL, 0, NULL, 0, &bad) == 3);
  CHECK(kiln_get_kernel(client, "zz", &bad) == 3);
  CHECK(kiln_kernel_from_parts("junk", 4, "not metadata", &bad) == 3);
  kiln_client* nobody = NULL;
  CHECK(kiln_connect("/nonexistent/kilnd.sock", 0.5, &nobody) == 14);

  /* Fetched by key from the cache. */
  kiln_kernel* fetched = NULL;
  CHECK(kiln_get_kernel(client, kiln_kernel_key(kernel), &fetched) == KILN_OK);
  if (fetched != NULL) {
    CHECK(strcmp(kiln_kernel_tier(fetched), "local") == 0);
    kiln_kernel_free(fetched);
  }

  /* Autotuning: the chosen bindings come back as JSON, then from the
   * cache. */
  kiln_binding tune_shape = {"N", 2048};
  char* json = NULL;
  CHECK(kiln_autotune(client, kScale, "scale", "cpu", &tune_shape, 1, NULL, 0,
                      NULL, 0, NULL, 0, 0, 0, 0, &json) == KILN_OK);
  CHECK(json != NULL && strstr(json, "\"best\": {\"B\": ") != NULL);
  CHECK(json != NULL && strstr(json, "\"cached\": false") != NULL);
  CHECK(json != NULL &&
        strstr(json, "\"status\":\"CANDIDATE_STATUS_BENCHMARKED\"") != NULL);
  kiln_string_free(json);
  json = NULL;
  CHECK(kiln_autotune(client, kScale, "scale", "cpu", &tune_shape, 1, NULL, 0,
                      NULL, 0, NULL, 0, 0, 0, 0, &json) == KILN_OK);
  CHECK(json != NULL && strstr(json, "\"cached\": true") != NULL);
  kiln_string_free(json);
  json = NULL;
  /* Explicit configs: B=64 only (a new shape bucket, so it is tuned), and
   * B=96, which is not one of B's values, is listed as excluded. */
  const char* config_names[] = {"B"};
  const int64_t config_values[] = {64, 96};
  tune_shape.value = 100;
  CHECK(kiln_autotune(client, kScale, "scale", "cpu", &tune_shape, 1, NULL, 0,
                      config_names, 1, config_values, 2, 0, 0, 0,
                      &json) == KILN_OK);
  CHECK(json != NULL && strstr(json, "\"best_label\": \"B=64\"") != NULL);
  CHECK(json != NULL && strstr(json, "\"candidates\": 1,") != NULL);
  CHECK(json != NULL && strstr(json, "\"excluded\": [\"B=96: ") != NULL);
  kiln_string_free(json);
  json = NULL;
  CHECK(kiln_autotune(client, kScale, "scale", "cpu", &tune_shape, 1, NULL, 0,
                      NULL, 0, config_values, 2, 0, 0, 0, &json) == 3);
  CHECK(strstr(kiln_last_error(), "config_names") != NULL);
  CHECK(kiln_autotune(client, kScale, "scale", "cpu", NULL, 0, NULL, 0, NULL,
                      0, NULL, 0, 0, 0, 0, &json) == 3);
  CHECK(strstr(kiln_last_error(), "no shape for symbol N") != NULL);
  CHECK(json == NULL);
  kiln_string_free(NULL);

  kiln_kernel_free(kernel);
  kiln_client_free(client);
  kiln_client_free(NULL);
  if (failures == 0) printf("c_api_test: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
