/* The C side of bench/transfer.py: the driver's own copies of pageable and of page-locked
 * host memory, with nothing in front of them.
 *
 *   transfer REPEATS BYTES...
 *
 * For each size, prints the bandwidth in GB/s of each repeat of:
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

#include <cuda.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void die_cu(const char *call, CUresult rc) {
  const char *name = NULL;
  if (cuGetErrorName(rc, &name) != CUDA_SUCCESS) name = "an unknown CUresult";
  fprintf(stderr, "transfer: %s failed: %s (%d)\n", call, name, (int)rc);
  exit(1);
}

#define CHECK(call)                                          \
  do {                                                       \
    CUresult check_rc_ = (call);                             \
    if (check_rc_ != CUDA_SUCCESS) die_cu(#call, check_rc_); \
  } while (0)

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static long parse(const char *s) {
  char *end;
  long v = strtol(s, &end, 10);
  if (*end || v < 1) {
    fprintf(stderr, "transfer: '%s' is not a positive count\n", s);
    exit(2);
  }
  return v;
}

static void fill(unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 131 + 7);
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
  printf("    \"%s\": [", name);
  for (long r = 0; r < repeats; r++) {
    double t = now_s();
    if (to_device) CHECK(cuMemcpyHtoD(dev, host, n));
    else CHECK(cuMemcpyDtoH(host, dev, n));
    t = now_s() - t;
    printf("%s%.3f", r ? ", " : "", (double)n / t / 1e9);
  }
  printf("]%s\n", last ? "" : ",");
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s REPEATS BYTES...\n", argv[0]);
    return 2;
  }
  long repeats = parse(argv[1]);
  CUdevice dev;
  CUcontext ctx;
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
  printf("{\n");
  for (int a = 2; a < argc; a++) {
    size_t n = (size_t)parse(argv[a]);
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
