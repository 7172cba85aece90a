/* The C side of bench/transfer.py: the driver's own copies of pageable and of page-locked
 * host memory, with nothing in front of them.
 *
 *   transfer REPEATS BYTES...
 *
 * For each size, prints the bandwidth in GB/s of each repeat (of as many copies as make about
 * 8 MiB, at most 256, for the small sizes) of:
 *
 *   pageable_htod  cuMemcpyHtoD from malloc'd memory (written before, so its pages exist)
 *   pageable_dtoh  cuMemcpyDtoH into malloc'd memory (likewise)
 *   pinned_htod    cuMemcpyHtoD from cuMemHostAlloc memory
 *   pinned_dtoh    cuMemcpyDtoH into cuMemHostAlloc memory
 *
 * as one JSON object keyed by size. Each path is checked to bring every byte back before it is
 * timed. Device 0's primary context, as kiln uses.
 *
 * Build: cc -O2 -Wall -Wextra -I/usr/local/cuda/include transfer.c \
 *            -L/usr/local/cuda/lib64/stubs -lcuda -o transfer
 */
#define _POSIX_C_SOURCE 200809L

#define BENCH_NAME "transfer"
#include "bench.h"

#include <string.h>

static void fill(unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 131 + 7);
}

/* Copies in one timed repeat: enough that a small one is timed over about 8 MiB, as
 * bench/transfer.py times kiln's (a single copy of a few KiB is shorter than the clock's
 * jitter). */
static long transfer_copies(size_t n) {
  size_t c = ((size_t)8 << 20) / n;
  return c < 1 ? 1 : c > 256 ? 256 : (long)c;
}

/* One direction of one kind of host memory: checked once, then timed `repeats` times. */
static void measure(const char *name, int to_device, unsigned char *host, unsigned char *check,
                    CUdeviceptr dev, size_t n, long repeats, int last) {
  if (to_device) {
    fill(host, n);
    CHECK(cuMemcpyHtoD(dev, host, n));
    memset(check, 0, n);
    CHECK(cuMemcpyDtoH(check, dev, n));
    if (memcmp(host, check, n)) {
      fprintf(stderr, "transfer: %s did not bring the bytes over\n", name);
      exit(1);
    }
  } else {
    fill(check, n);
    CHECK(cuMemcpyHtoD(dev, check, n));
    memset(host, 0, n);
    CHECK(cuMemcpyDtoH(host, dev, n));
    if (memcmp(host, check, n)) {
      fprintf(stderr, "transfer: %s did not bring the bytes back\n", name);
      exit(1);
    }
  }
  long copies = transfer_copies(n);
  printf("    \"%s\": [", name);
  for (long r = 0; r < repeats; r++) {
    double t = bench_now_us();
    for (long c = 0; c < copies; c++) {
      if (to_device) CHECK(cuMemcpyHtoD(dev, host, n));
      else CHECK(cuMemcpyDtoH(host, dev, n));
    }
    t = (bench_now_us() - t) / 1e6;
    printf("%s%.3f", r ? ", " : "", (double)n * (double)copies / t / 1e9);
  }
  printf("]%s\n", last ? "" : ",");
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s REPEATS BYTES...\n", argv[0]);
    return 2;
  }
  long repeats = bench_count(argv[1]);
  bench_context();
  printf("{\n");
  for (int a = 2; a < argc; a++) {
    size_t n = (size_t)bench_count(argv[a]);
    unsigned char *pageable = malloc(n), *other = malloc(n), *pinned = NULL;
    CUdeviceptr d;
    if (!pageable || !other) {
      fprintf(stderr, "transfer: out of host memory for %zu bytes\n", n);
      return 1;
    }
    CHECK(cuMemHostAlloc((void **)&pinned, n, 0));
    CHECK(cuMemAlloc(&d, n));
    printf("  \"%zu\": {\n", n);
    measure("pageable_htod", 1, pageable, other, d, n, repeats, 0);
    measure("pageable_dtoh", 0, pageable, other, d, n, repeats, 0);
    measure("pinned_htod", 1, pinned, other, d, n, repeats, 0);
    measure("pinned_dtoh", 0, pinned, other, d, n, repeats, 1);
    printf("  }%s\n", a + 1 < argc ? "," : "");
    CHECK(cuMemFree(d));
    CHECK(cuMemFreeHost(pinned));
    free(pageable);
    free(other);
  }
  printf("}\n");
  return 0;
}
