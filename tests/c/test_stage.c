/* The stager: large pageable copies split into chunks over several threads. Each test runs in
 * its own process, so each sets the staging variables before its first copy. */
#include "runner.h"

#include <pthread.h>

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Bytes that differ from chunk to chunk (the period, 251, is prime), so a chunk copied to the
 * wrong place or twice shows. */
static void pattern(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)((i % 251) * 7 + seed + (i / 4096));
}

/* Chunks of one page and four threads: a 64 KiB copy is already 16 chunks. */
static void small_chunks(void) {
  setenv("KILN_STAGING_MIN", "0", 1);
  setenv("KILN_STAGING_CHUNK", "4096", 1);
  setenv("KILN_STAGING_THREADS", "4", 1);
}

TEST(staging_settings_come_from_the_environment) {
  setenv("KILN_STAGING_MIN", "4k", 1);
  setenv("KILN_STAGING_CHUNK", "5000", 1); /* whole pages: 8192 */
  setenv("KILN_STAGING_THREADS", "3", 1);
  kiln_staging_info info;
  kiln_staging_get_info(&info);
  ASSERT_EQ(info.min_bytes, 4096);
  ASSERT_EQ(info.chunk_bytes, 8192);
  ASSERT(info.threads >= 1 && info.threads <= 3); /* at most the CPUs this process may use */
  ASSERT_EQ(info.copies, 0);
  ASSERT_EQ(info.bytes, 0);
}

TEST(staging_settings_that_are_not_sizes_fall_back) {
  setenv("KILN_STAGING_MIN", "off", 1);
  setenv("KILN_STAGING_CHUNK", "lots", 1);
  kiln_staging_info info;
  kiln_staging_get_info(&info);
  ASSERT_EQ(info.min_bytes, SIZE_MAX);
  ASSERT(info.chunk_bytes >= 4096 && info.chunk_bytes % 4096 == 0);
}

TEST(gpu_staged_copies_keep_every_byte) {
  small_chunks();
  kiln_test_require_gpu();
  static const size_t sizes[] = {1,     2,       4095,          4096,         4097,
                                 8191,  8192,    8193,          3 * 4096 + 1, 65521,
                                 65536, 1000003, (4 << 20) + 17};
  static const size_t offsets[] = {0, 1, 3, 7};
  size_t most = (4 << 20) + 17 + 8;
  unsigned char *src = malloc(most), *dst = malloc(most);
  ASSERT(src && dst);
  kiln_stream stream = NULL;
  ASSERT_OK(kiln_stream_create(KILN_STREAM_NON_BLOCKING, 0, &stream));
  kiln_staging_info before, after;
  kiln_staging_get_info(&before);
  unsigned copies = 0;
  for (size_t i = 0; i < COUNT(sizes); i++) {
    size_t n = sizes[i];
    kiln_deviceptr d = 0, e = 0;
    ASSERT_OK(kiln_mem_alloc(n, &d));
    ASSERT_OK(kiln_mem_alloc(n, &e));
    for (size_t j = 0; j < COUNT(offsets); j++) {
      /* Synchronous, host pointers at odd addresses on both sides. */
      unsigned char *s = src + offsets[j], *t = dst + offsets[COUNT(offsets) - 1 - j];
      pattern(s, n, (unsigned)(i * 4 + j));
      memset(t, 0xee, n);
      ASSERT_OK(kiln_memcpy_htod(d, s, n));
      ASSERT_OK(kiln_memcpy_dtoh(t, d, n));
      if (memcmp(s, t, n))
        FAIL("%zu bytes at offset %zu: synchronous round trip differs", n, offsets[j]);
      /* Stream-ordered: in, a device copy, out, all on one stream. */
      pattern(s, n, (unsigned)(i * 4 + j + 100));
      memset(t, 0xee, n);
      ASSERT_OK(kiln_memcpy_htod_async(d, s, n, stream));
      ASSERT_OK(kiln_memcpy_dtod_async(e, d, n, stream));
      ASSERT_OK(kiln_memcpy_dtoh_async(t, e, n, stream));
      if (memcmp(s, t, n))
        FAIL("%zu bytes at offset %zu: stream round trip differs", n, offsets[j]);
      copies += 4;
    }
    ASSERT_OK(kiln_stream_synchronize(stream));
    ASSERT_OK(kiln_mem_free(d));
    ASSERT_OK(kiln_mem_free(e));
  }
  kiln_staging_get_info(&after);
  ASSERT_EQ(after.copies - before.copies, copies);

  /* Page-locked memory goes to the DMA engine directly. */
  void *pinned = NULL;
  kiln_deviceptr d = 0;
  ASSERT_OK(kiln_host_alloc(1 << 20, &pinned));
  ASSERT_OK(kiln_mem_alloc(1 << 20, &d));
  pattern(pinned, 1 << 20, 9);
  ASSERT_OK(kiln_memcpy_htod(d, pinned, 1 << 20));
  ASSERT_OK(kiln_memcpy_dtoh(dst, d, 1 << 20));
  ASSERT(memcmp(pinned, dst, 1 << 20) == 0);
  kiln_staging_get_info(&before);
  ASSERT_EQ(before.copies - after.copies, 1); /* only the pageable copy back */
  ASSERT_OK(kiln_mem_free(d));
  ASSERT_OK(kiln_host_free(pinned));
  ASSERT_OK(kiln_stream_destroy(stream));
  free(src);
  free(dst);
}

typedef struct round_trips {
  int index;
  char error[512];
} round_trips;

static void *run_round_trips(void *p) {
  round_trips *r = p;
  size_t most = 300007;
  unsigned char *src = malloc(most), *dst = malloc(most);
  kiln_deviceptr d = 0;
  if (!src || !dst || kiln_mem_alloc(most, &d)) {
    snprintf(r->error, sizeof r->error, "setup failed: %s", kiln_last_error());
    return NULL;
  }
  for (int k = 0; k < 40 && !r->error[0]; k++) {
    size_t n = most - (size_t)(k * 7919 + r->index * 104729) % 250000;
    pattern(src, n, (unsigned)(r->index * 64 + k));
    memset(dst, 0, n);
    if (kiln_memcpy_htod(d, src, n) || kiln_memcpy_dtoh(dst, d, n))
      snprintf(r->error, sizeof r->error, "copy failed: %s", kiln_last_error());
    else if (memcmp(src, dst, n))
      snprintf(r->error, sizeof r->error, "round trip %d of %zu bytes differs", k, n);
  }
  kiln_mem_free(d);
  free(src);
  free(dst);
  return NULL;
}

TEST(gpu_staged_copies_from_many_threads) {
  small_chunks();
  kiln_test_require_gpu();
  enum { THREADS = 8 };
  pthread_t t[THREADS];
  round_trips r[THREADS];
  for (int i = 0; i < THREADS; i++) {
    memset(&r[i], 0, sizeof r[i]);
    r[i].index = i;
    ASSERT_EQ(pthread_create(&t[i], NULL, run_round_trips, &r[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < THREADS; i++)
    if (r[i].error[0]) FAIL("thread %d: %s", i, r[i].error);
  kiln_staging_info info;
  kiln_staging_get_info(&info);
  ASSERT_EQ(info.copies, THREADS * 40 * 2);
}

TEST(gpu_staged_copy_after_an_illegal_address_fails) {
  small_chunks();
  kiln_test_require_gpu();
  size_t n = 1 << 20;
  unsigned char *host = malloc(n);
  ASSERT(host);
  pattern(host, n, 1);
  kiln_deviceptr d = 0;
  ASSERT_OK(kiln_mem_alloc(n, &d));
  ASSERT_OK(kiln_memcpy_htod(d, host, n)); /* the ring and its threads exist now */
  kiln_module *m = NULL;
  ASSERT_OK(
      kiln_module_from_source("__global__ void poke(int *p) { p[threadIdx.x] = 42; }", NULL, &m));
  kiln_function *f = NULL;
  ASSERT_OK(kiln_module_get_function(m, "poke", &f));
  uint64_t bad = 0x10;
  void *params[] = {&bad};
  kiln_launch_config cfg = {.grid = {1, 1, 1}, .block = {32, 1, 1}};
  ASSERT_OK(kiln_function_launch(f, &cfg, params));
  /* The copy waits for the kernel, which fails: an error, not a hang or a partial success. */
  kiln_status s = kiln_memcpy_dtoh(host, d, n);
  ASSERT(s == KILN_ERROR_CUDA || s == KILN_ERROR_LAUNCH);
  ASSERT_CONTAINS(kiln_last_error(), "CUDA_ERROR_ILLEGAL_ADDRESS");
  s = kiln_memcpy_htod(d, host, n);
  ASSERT(s == KILN_ERROR_CUDA || s == KILN_ERROR_LAUNCH);
  ASSERT_CONTAINS(kiln_last_error(), "CUDA_ERROR_ILLEGAL_ADDRESS");
  free(host);
  /* No frees through the driver: the context is lost; the process ends. */
}
