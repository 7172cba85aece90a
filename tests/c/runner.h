/* A small test runner in libuv's shape: TEST(name) functions listed in one table (list.h),
 * each run in its own process so a crash fails one test, typed asserts that print both
 * sides, and SKIP with a reason. The last line is `N passed, N failed, N skipped`. */
#ifndef KILN_TEST_RUNNER_H
#define KILN_TEST_RUNNER_H

#include "kiln.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST(name)             \
  void kiln_test_##name(void); \
  void kiln_test_##name(void)

#define KILN_TEST_SKIP_CODE 77

#define TEST_COUNT(a) (sizeof(a) / sizeof((a)[0]))

#define FAIL(...)                                     \
  do {                                                \
    fprintf(stderr, "  %s:%d: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__);                     \
    fprintf(stderr, "\n");                            \
    exit(1);                                          \
  } while (0)

#define SKIP(...)                   \
  do {                              \
    fprintf(stderr, "  skipped: "); \
    fprintf(stderr, __VA_ARGS__);   \
    fprintf(stderr, "\n");          \
    exit(KILN_TEST_SKIP_CODE);      \
  } while (0)

#define ASSERT(expr)                                  \
  do {                                                \
    if (!(expr)) FAIL("assertion failed: %s", #expr); \
  } while (0)

#define ASSERT_EQ(a, b)                                                                          \
  do {                                                                                           \
    int64_t kiln_a_ = (int64_t)(a), kiln_b_ = (int64_t)(b);                                      \
    if (kiln_a_ != kiln_b_) FAIL("%s == %s: %" PRId64 " != %" PRId64, #a, #b, kiln_a_, kiln_b_); \
  } while (0)

#define ASSERT_STR_EQ(a, b)                                                    \
  do {                                                                         \
    const char *kiln_a_ = (a), *kiln_b_ = (b);                                 \
    if (!kiln_a_ || !kiln_b_ || strcmp(kiln_a_, kiln_b_) != 0)                 \
      FAIL("%s == %s: \"%s\" != \"%s\"", #a, #b, kiln_a_ ? kiln_a_ : "(null)", \
           kiln_b_ ? kiln_b_ : "(null)");                                      \
  } while (0)

#define ASSERT_CONTAINS(hay, needle)                                                           \
  do {                                                                                         \
    const char *kiln_h_ = (hay), *kiln_n_ = (needle);                                          \
    if (!kiln_h_ || !strstr(kiln_h_, kiln_n_))                                                 \
      FAIL("%s does not contain \"%s\": \"%s\"", #hay, kiln_n_, kiln_h_ ? kiln_h_ : "(null)"); \
  } while (0)

/* A kiln call that must succeed; on failure prints the status and kiln_last_error(). */
#define ASSERT_OK(call)                                                        \
  do {                                                                         \
    kiln_status kiln_s_ = (call);                                              \
    if (kiln_s_ != KILN_OK)                                                    \
      FAIL("%s: %s: %s", #call, kiln_status_name(kiln_s_), kiln_last_error()); \
  } while (0)

/* A kiln call that must fail with `status`. */
#define ASSERT_STATUS(call, status)                                         \
  do {                                                                      \
    kiln_status kiln_s_ = (call);                                           \
    if (kiln_s_ != (status))                                                \
      FAIL("%s: expected %s, got %s (%s)", #call, kiln_status_name(status), \
           kiln_status_name(kiln_s_), kiln_last_error());                   \
  } while (0)

/* Skips the test when there is no usable GPU, saying why; with KILN_REQUIRE_GPU=1 (the GPU
 * machine's runs) that is a failure instead. */
void kiln_test_require_gpu(void);

/* Removes a folder and everything under it, read-only parts too. */
void kiln_test_remove_tree(const char *dir);

/* A number no earlier run is likely to have drawn. NVRTC and the driver keep what ptxas made
 * in the user's compute cache (~/.nv/ComputeCache) across processes, keyed by the PTX, and
 * leave ptxas's log empty when they answer from it: a test of that log compiles code made
 * new with this number. */
unsigned kiln_test_nonce(void);

/* A side of a 2D or 3D copy: host memory of `size` bytes at host, or device memory. */
kiln_copy_side kiln_test_copy_side(unsigned kind, const void *host, size_t size,
                                   kiln_deviceptr device, size_t pitch, size_t height);

#endif
