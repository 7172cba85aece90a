/* The C side of bench/launch.py: what the driver API costs with nothing in front of it.
 *
 *   baseline CUBIN KERNEL LAUNCHES ROUND_TRIPS REPEATS
 *
 * KERNEL is the entry name in CUBIN of multiply_them(float *dest, const float *a,
 * const float *b, int n) (the bench declares it extern "C", so the plain name). Prints one
 * JSON object on stdout, every figure in microseconds per operation, one per repeat:
 *
 *   launch_us           a loop of LAUNCHES async cuLaunchKernel (grid 1, block 256), then
 *                       cuCtxSynchronize, divided by LAUNCHES
 *   roundtrip_kept_us   2 x cuMemcpyHtoD of 400 floats from pageable memory, a launch of
 *                       block 400, cuMemcpyDtoH of 400 floats, device buffers allocated once
 *   roundtrip_alloc_us  the same with cuMemAlloc/cuMemFree of the three buffers per round trip
 *                       (what PyCUDA's In/Out do)
 *
 * Each measurement is checked to compute a*b exactly before it is timed, and runs once untimed
 * first so that no repeat pays for first-use costs. It works in the primary context of device
 * 0, the one kiln and the Python peers share.
 *
 * Build: cc -O2 -Wall -Wextra -I/usr/local/cuda/include baseline.c \
 *            -L/usr/local/cuda/lib64/stubs -lcuda -o baseline
 * (the stub only satisfies the linker; the driver's libcuda.so.1 is loaded at run time).
 */
#define _POSIX_C_SOURCE 200809L

#define BENCH_NAME "baseline"
#include "bench.h"

#include <errno.h>
#include <string.h>

#define LAUNCH_N 256     /* elements (and threads) of the launch-overhead kernel */
#define ROUND_TRIP_N 400 /* elements (and threads) of the seed round trip */

static void *xmalloc(size_t n) {
  void *p = malloc(n);
  if (!p) {
    fprintf(stderr, "baseline: out of host memory (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

static long parse_count(const char *s, const char *what) {
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < 1) {
    fprintf(stderr, "baseline: %s must be a positive integer, not '%s'\n", what, s);
    exit(2);
  }
  return v;
}

static void *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "baseline: cannot open %s: %s\n", path, strerror(errno));
    exit(1);
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  if (size <= 0) {
    fprintf(stderr, "baseline: %s is empty or unreadable\n", path);
    exit(1);
  }
  char *data = xmalloc((size_t)size);
  if (fread(data, 1, (size_t)size, f) != (size_t)size) {
    fprintf(stderr, "baseline: cannot read %s\n", path);
    exit(1);
  }
  fclose(f);
  return data;
}

/* Small multiples of powers of two: every product is exact in float, so the device's a*b and
 * this program's agree bit for bit whatever either side's rounding. */
static void fill_inputs(float *a, float *b, int n) {
  for (int i = 0; i < n; i++) {
    a[i] = (float)(i % 37) * 0.25f + 1.0f;
    b[i] = (float)(i % 11) * 0.5f - 2.0f;
  }
}

static void expect_products(const float *dest, const float *a, const float *b, int n,
                            const char *what) {
  for (int i = 0; i < n; i++) {
    if (dest[i] != a[i] * b[i]) {
      fprintf(stderr, "baseline: %s computed dest[%d] = %g, expected %g\n", what, i,
              (double)dest[i], (double)(a[i] * b[i]));
      exit(1);
    }
  }
}

static void launch(CUfunction fn, unsigned threads, CUdeviceptr dest, CUdeviceptr a, CUdeviceptr b,
                   int n) {
  void *params[] = {&dest, &a, &b, &n};
  CHECK(cuLaunchKernel(fn, 1, 1, 1, threads, 1, 1, 0, NULL, params, NULL));
}

/* a) async launches, then one synchronize, per launch. */
static double time_launches(CUfunction fn, CUdeviceptr dest, CUdeviceptr a, CUdeviceptr b,
                            long count) {
  double t0 = bench_now_us();
  for (long i = 0; i < count; i++) launch(fn, LAUNCH_N, dest, a, b, LAUNCH_N);
  CHECK(cuCtxSynchronize());
  return (bench_now_us() - t0) / (double)count;
}

/* b) the seed round trip into buffers that stay allocated. */
static void round_trip_kept(CUfunction fn, const CUdeviceptr dev[3], float *dest, const float *a,
                            const float *b) {
  const size_t bytes = ROUND_TRIP_N * sizeof(float);
  CHECK(cuMemcpyHtoD(dev[1], a, bytes));
  CHECK(cuMemcpyHtoD(dev[2], b, bytes));
  launch(fn, ROUND_TRIP_N, dev[0], dev[1], dev[2], ROUND_TRIP_N);
  CHECK(cuMemcpyDtoH(dest, dev[0], bytes));
}

/* c) the same, allocating and freeing the device buffers every time. */
static void round_trip_alloc(CUfunction fn, float *dest, const float *a, const float *b) {
  const size_t bytes = ROUND_TRIP_N * sizeof(float);
  CUdeviceptr dev[3];
  for (int i = 0; i < 3; i++) CHECK(cuMemAlloc(&dev[i], bytes));
  round_trip_kept(fn, dev, dest, a, b);
  for (int i = 0; i < 3; i++) CHECK(cuMemFree(dev[i]));
}

/* kept: the device buffers to reuse (b); NULL allocates them per round trip (c). */
static double time_round_trips(CUfunction fn, const CUdeviceptr *kept, float *dest, const float *a,
                               const float *b, long count) {
  double t0 = bench_now_us();
  for (long i = 0; i < count; i++) {
    if (kept) round_trip_kept(fn, kept, dest, a, b);
    else round_trip_alloc(fn, dest, a, b);
  }
  CHECK(cuCtxSynchronize());
  return (bench_now_us() - t0) / (double)count;
}

static void print_series(const char *key, const double *v, long n, int last) {
  printf("  \"%s\": [", key);
  for (long i = 0; i < n; i++) printf("%s%.4f", i ? ", " : "", v[i]);
  printf("]%s\n", last ? "" : ",");
}

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s CUBIN KERNEL LAUNCHES ROUND_TRIPS REPEATS\n", argv[0]);
    return 2;
  }
  const char *kernel = argv[2];
  long launches = parse_count(argv[3], "LAUNCHES");
  long round_trips = parse_count(argv[4], "ROUND_TRIPS");
  long repeats = parse_count(argv[5], "REPEATS");
  void *image = read_file(argv[1]);

  CUdevice dev;
  CUcontext ctx;
  CUmodule module;
  CUfunction fn;
  int driver_version = 0;
  char device_name[256];
  CHECK(cuInit(0));
  CHECK(cuDriverGetVersion(&driver_version));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDeviceGetName(device_name, (int)sizeof device_name, dev));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
  CHECK(cuModuleLoadData(&module, image));
  CHECK(cuModuleGetFunction(&fn, module, kernel));

  /* Host buffers are plain malloc (pageable), as numpy arrays are. */
  const size_t launch_bytes = LAUNCH_N * sizeof(float);
  const size_t trip_bytes = ROUND_TRIP_N * sizeof(float);
  float *la = xmalloc(launch_bytes), *lb = xmalloc(launch_bytes), *ldest = xmalloc(launch_bytes);
  float *ta = xmalloc(trip_bytes), *tb = xmalloc(trip_bytes), *tdest = xmalloc(trip_bytes);
  fill_inputs(la, lb, LAUNCH_N);
  fill_inputs(ta, tb, ROUND_TRIP_N);

  CUdeviceptr ldev[3], tdev[3];
  for (int i = 0; i < 3; i++) {
    CHECK(cuMemAlloc(&ldev[i], launch_bytes));
    CHECK(cuMemAlloc(&tdev[i], trip_bytes));
  }
  CHECK(cuMemcpyHtoD(ldev[1], la, launch_bytes));
  CHECK(cuMemcpyHtoD(ldev[2], lb, launch_bytes));

  /* Correctness first: one of each, from a cleared output. */
  CHECK(cuMemsetD32(ldev[0], 0, LAUNCH_N));
  launch(fn, LAUNCH_N, ldev[0], ldev[1], ldev[2], LAUNCH_N);
  CHECK(cuMemcpyDtoH(ldest, ldev[0], launch_bytes));
  expect_products(ldest, la, lb, LAUNCH_N, "the launch loop's kernel");
  memset(tdest, 0, trip_bytes);
  round_trip_kept(fn, tdev, tdest, ta, tb);
  expect_products(tdest, ta, tb, ROUND_TRIP_N, "the round trip with buffers kept");
  memset(tdest, 0, trip_bytes);
  round_trip_alloc(fn, tdest, ta, tb);
  expect_products(tdest, ta, tb, ROUND_TRIP_N, "the round trip with cuMemAlloc per call");

  double *launch_us = xmalloc((size_t)repeats * sizeof(double));
  double *kept_us = xmalloc((size_t)repeats * sizeof(double));
  double *alloc_us = xmalloc((size_t)repeats * sizeof(double));
  time_launches(fn, ldev[0], ldev[1], ldev[2], launches / 10 + 1);
  for (long r = 0; r < repeats; r++)
    launch_us[r] = time_launches(fn, ldev[0], ldev[1], ldev[2], launches);
  time_round_trips(fn, tdev, tdest, ta, tb, round_trips / 10 + 1);
  for (long r = 0; r < repeats; r++)
    kept_us[r] = time_round_trips(fn, tdev, tdest, ta, tb, round_trips);
  time_round_trips(fn, NULL, tdest, ta, tb, round_trips / 10 + 1);
  for (long r = 0; r < repeats; r++)
    alloc_us[r] = time_round_trips(fn, NULL, tdest, ta, tb, round_trips);

  printf("{\n");
  printf("  \"device\": \"%s\",\n", device_name);
  printf("  \"driver_version\": %d,\n", driver_version);
  printf("  \"launches\": %ld,\n  \"round_trips\": %ld,\n", launches, round_trips);
  print_series("launch_us", launch_us, repeats, 0);
  print_series("roundtrip_kept_us", kept_us, repeats, 0);
  print_series("roundtrip_alloc_us", alloc_us, repeats, 1);
  printf("}\n");

  for (int i = 0; i < 3; i++) {
    CHECK(cuMemFree(ldev[i]));
    CHECK(cuMemFree(tdev[i]));
  }
  CHECK(cuModuleUnload(module));
  CHECK(cuDevicePrimaryCtxRelease(dev));
  free(image);
  free(la), free(lb), free(ldest), free(ta), free(tb), free(tdest);
  free(launch_us), free(kept_us), free(alloc_us);
  return 0;
}
