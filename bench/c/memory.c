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

#define BENCH_NAME "memory"
#include "bench.h"

#include <string.h>

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s ALLOCS BIG_BYTES REPEATS\n", argv[0]);
    return 2;
  }
  long allocs = bench_count(argv[1]), repeats = bench_count(argv[3]);
  size_t big = (size_t)bench_count(argv[2]);
  CUdevice dev = bench_context();
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

  double *sync = calloc((size_t)repeats, sizeof *sync),
         *async = calloc((size_t)repeats, sizeof *async);
  double *copy = calloc((size_t)repeats, sizeof *copy);
  if (!sync || !async || !copy) return 1;
  CUdeviceptr p;
  for (long r = -1; r < repeats; r++) { /* r = -1: untimed warm-up */
    double t0 = bench_now_us();
    for (long i = 0; i < allocs; i++) {
      CHECK(cuMemAlloc(&p, 4096));
      CHECK(cuMemFree(p));
    }
    double t1 = bench_now_us();
    for (long i = 0; i < allocs; i++) {
      CHECK(cuMemAllocAsync(&p, 4096, NULL));
      CHECK(cuMemFreeAsync(p, NULL));
    }
    CHECK(cuCtxSynchronize());
    double t2 = bench_now_us();
    CHECK(cuMemcpyHtoD(dbig, host, big));
    CHECK(cuMemcpyDtoH(back, dbig, big));
    double t3 = bench_now_us();
    if (r >= 0) {
      sync[r] = (t1 - t0) / (double)allocs;
      async[r] = (t2 - t1) / (double)allocs;
      copy[r] = t3 - t2;
    }
  }
  printf("{\n");
  bench_series("alloc_free_us", sync, repeats, 0);
  bench_series("alloc_free_async_us", async, repeats, 0);
  bench_series("htod_dtoh_us", copy, repeats, 1);
  printf("}\n");
  return 0;
}
