/* What the driver-only C programs of bench/ share: stopping on a failed driver call, a clock,
 * counts from the command line and JSON series. A program defines BENCH_NAME (its name in
 * messages) before including this. */
#ifndef KILN_BENCH_H
#define KILN_BENCH_H

#include <cuda.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline void bench_die_cu(const char *call, CUresult rc) {
  const char *name = NULL;
  if (cuGetErrorName(rc, &name) != CUDA_SUCCESS) name = "an unknown CUresult";
  fprintf(stderr, "%s: %s failed: %s (%d)\n", BENCH_NAME, call, name, (int)rc);
  exit(1);
}

#define CHECK(call)                                                \
  do {                                                             \
    CUresult check_rc_ = (call);                                   \
    if (check_rc_ != CUDA_SUCCESS) bench_die_cu(#call, check_rc_); \
  } while (0)

/* Device 0's primary context made current, the one kiln and the Python peers share. */
static inline CUdevice bench_context(void) {
  CUdevice dev;
  CUcontext ctx;
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
  return dev;
}

static inline double bench_now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static inline long bench_count(const char *s) {
  char *end;
  long v = strtol(s, &end, 10);
  if (*end || end == s || v < 1) {
    fprintf(stderr, "%s: '%s' is not a positive count\n", BENCH_NAME, s);
    exit(2);
  }
  return v;
}

/* "  \"name\": [v0, v1, ...]," (no comma after the last). */
static inline void bench_series(const char *name, const double *v, long n, int last) {
  printf("  \"%s\": [", name);
  for (long i = 0; i < n; i++) printf("%s%.4f", i ? ", " : "", v[i]);
  printf("]%s\n", last ? "" : ",");
}

#endif
