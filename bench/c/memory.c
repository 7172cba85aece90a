/* The C side of bench/memory.py: what the driver's allocation and pinned copies cost with
 * nothing in front of them.
 *
 *   memory ALLOCS BIG_BYTES REPEATS
 *
 * Prints one JSON object, one value per repeat:
 *
 *   alloc_free_us        cuMemAlloc + cuMemFree of 4 KiB, per pair (a loop of ALLOCS)
 *   alloc_free_async_us  cuMemAllocAsync + cuMemFreeAsync of 4 KiB on the default stream, per
 *                        pair, from the device's pool with its release threshold raised (what
 *                        kiln's pool does), then one synchronize
 *   htod_dtoh_us         cuMemcpyHtoD then cuMemcpyDtoH of BIG_BYTES between page-locked host
 *                        memory (cuMemHostAlloc) and a device buffer allocated once
 *
 * The copies are checked to bring back every byte before they are timed. Device 0's primary
 * context, as kiln uses.
 *
 * Build: cc -O2 -Wall -Wextra -I/usr/local/cuda/include memory.c \
 *            -L/usr/local/cuda/lib64/stubs -lcuda -o memory
 */
#define _POSIX_C_SOURCE 200809L

#include <cuda.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void die_cu(const char *call, CUresult rc) {
  const char *name = NULL;
  if (cuGetErrorName(rc, &name) != CUDA_SUCCESS) name = "an unknown CUresult";
  fprintf(stderr, "memory: %s failed: %s (%d)\n", call, name, (int)rc);
  exit(1);
}

#define CHECK(call)                                          \
  do {                                                       \
    CUresult check_rc_ = (call);                             \
    if (check_rc_ != CUDA_SUCCESS) die_cu(#call, check_rc_); \
  } while (0)

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static long parse(const char *s) {
  char *end;
  long v = strtol(s, &end, 10);
  if (*end || v < 1) {
    fprintf(stderr, "memory: '%s' is not a positive count\n", s);
    exit(2);
  }
  return v;
}

static void print_series(const char *name, const double *v, long n, int last) {
  printf("  \"%s\": [", name);
  for (long i = 0; i < n; i++) printf("%s%.4f", i ? ", " : "", v[i]);
  printf("]%s\n", last ? "" : ",");
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s ALLOCS BIG_BYTES REPEATS\n", argv[0]);
    return 2;
  }
  long allocs = parse(argv[1]), repeats = parse(argv[3]);
  size_t big = (size_t)parse(argv[2]);
  CUdevice dev;
  CUcontext ctx;
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
  CUmemoryPool pool;
  CHECK(cuDeviceGetDefaultMemPool(&pool, dev));
  cuuint64_t keep = UINT64_MAX;
  CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));

  unsigned char *host = NULL, *back = NULL;
  CUdeviceptr dbig;
  CHECK(cuMemHostAlloc((void **)&host, big, 0));
  CHECK(cuMemHostAlloc((void **)&back, big, 0));
  CHECK(cuMemAlloc(&dbig, big));
  for (size_t i = 0; i < big; i++) host[i] = (unsigned char)(i * 131 + 7);
  CHECK(cuMemcpyHtoD(dbig, host, big));
  CHECK(cuMemcpyDtoH(back, dbig, big));
  if (memcmp(host, back, big) != 0) {
    fprintf(stderr, "memory: the pinned round trip did not bring the bytes back\n");
    return 1;
  }

  double *sync = calloc((size_t)repeats, sizeof *sync), *async = calloc((size_t)repeats, sizeof *async);
  double *copy = calloc((size_t)repeats, sizeof *copy);
  if (!sync || !async || !copy) return 1;
  CUdeviceptr p;
  for (long r = -1; r < repeats; r++) { /* r = -1: untimed warm-up */
    double t0 = now_us();
    for (long i = 0; i < allocs; i++) {
      CHECK(cuMemAlloc(&p, 4096));
      CHECK(cuMemFree(p));
    }
    double t1 = now_us();
    for (long i = 0; i < allocs; i++) {
      CHECK(cuMemAllocAsync(&p, 4096, NULL));
      CHECK(cuMemFreeAsync(p, NULL));
    }
    CHECK(cuCtxSynchronize());
    double t2 = now_us();
    CHECK(cuMemcpyHtoD(dbig, host, big));
    CHECK(cuMemcpyDtoH(back, dbig, big));
    double t3 = now_us();
    if (r >= 0) {
      sync[r] = (t1 - t0) / (double)allocs;
      async[r] = (t2 - t1) / (double)allocs;
      copy[r] = t3 - t2;
    }
  }
  printf("{\n");
  print_series("alloc_free_us", sync, repeats, 0);
  print_series("alloc_free_async_us", async, repeats, 0);
  print_series("htod_dtoh_us", copy, repeats, 1);
  printf("}\n");
  return 0;
}
