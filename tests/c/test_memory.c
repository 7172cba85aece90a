/* Stream-ordered memory, the pool, page-locked host memory, streams and events from C. */
#include "runner.h"

TEST(streams_and_memory_without_a_driver_are_statuses) {
  /* This process has not opened the driver yet: point it at none, GPU or not. */
  setenv("KILN_CUDA_PATH", "/nonexistent/libcuda.so.1", 1);
  kiln_stream stream = (kiln_stream)1;
  kiln_deviceptr p = 1;
  void *host = (void *)1;
  kiln_status s = kiln_stream_create(0, 0, &stream);
  ASSERT_EQ(s, KILN_ERROR_NO_DRIVER);
  ASSERT_CONTAINS(kiln_last_error(), "/nonexistent/libcuda.so.1");
  ASSERT(stream == NULL);
  s = kiln_mem_alloc_async(16, NULL, &p);
  ASSERT(s == KILN_ERROR_NO_DRIVER || s == KILN_ERROR_NO_DEVICE);
  ASSERT_EQ(p, 0);
  s = kiln_host_alloc(16, &host);
  ASSERT(s == KILN_ERROR_NO_DRIVER || s == KILN_ERROR_NO_DEVICE);
  ASSERT(host == NULL);
}

TEST(gpu_stream_ordered_copies_and_events) {
  kiln_test_require_gpu();
  kiln_stream stream = NULL;
  kiln_event start = NULL, end = NULL;
  ASSERT_EQ(kiln_stream_create(KILN_STREAM_NON_BLOCKING, 0, &stream), KILN_OK);
  ASSERT_EQ(kiln_event_create(1, &start), KILN_OK);
  ASSERT_EQ(kiln_event_create(1, &end), KILN_OK);
  size_t n = 1 << 20;
  unsigned char *host = NULL;
  ASSERT_EQ(kiln_host_alloc(n, (void **)&host), KILN_OK);
  for (size_t i = 0; i < n; i++) host[i] = (unsigned char)(i * 7);
  kiln_deviceptr a = 0, b = 0;
  ASSERT_EQ(kiln_mem_alloc_async(n, stream, &a), KILN_OK);
  ASSERT_EQ(kiln_mem_alloc_async(n, stream, &b), KILN_OK);
  unsigned long long work = kiln_work_count();
  ASSERT_EQ(kiln_event_record(start, stream), KILN_OK);
  ASSERT_EQ(kiln_stream_wait_event(NULL, start), KILN_OK);
  ASSERT_EQ(kiln_memcpy_htod_async(a, host, n, stream), KILN_OK);
  ASSERT_EQ(kiln_memcpy_dtod_async(b, a, n, stream), KILN_OK);
  ASSERT_EQ(kiln_memset_async(a, 0, n, stream), KILN_OK);
  memset(host, 0xff, n);
  ASSERT_EQ(kiln_memcpy_dtoh_async(host, b, n, stream), KILN_OK);
  ASSERT_EQ(kiln_event_record(end, stream), KILN_OK);
  ASSERT_EQ(kiln_stream_synchronize(stream), KILN_OK);
  /* Four copies and memsets queued, and a wait for an event, after which the legacy stream may
   * hold back what comes later; recording an event is no work. */
  ASSERT_EQ(kiln_work_count(), work + 5);
  for (size_t i = 0; i < n; i++) ASSERT_EQ(host[i], (unsigned char)(i * 7));
  int done = 0;
  ASSERT_EQ(kiln_event_query(end, &done), KILN_OK);
  ASSERT_EQ(done, 1);
  float ms = -1;
  ASSERT_EQ(kiln_event_elapsed_ms(start, end, &ms), KILN_OK);
  ASSERT(ms >= 0);
  /* A copy past the allocation is refused before the driver sees it. */
  ASSERT_EQ(kiln_memcpy_htod_async(a, host, n + 1, stream), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "runs past its allocation");
  ASSERT_EQ(kiln_mem_free_async(a, n, stream), KILN_OK);
  ASSERT_EQ(kiln_mem_free_async(b, n, stream), KILN_OK);
  ASSERT_EQ(kiln_stream_synchronize(stream), KILN_OK);
  kiln_pool_stats ps;
  ASSERT_EQ(kiln_pool_get_stats(&ps), KILN_OK);
  ASSERT(ps.reserved >= 2 * n); /* freed, yet kept for reuse */
  ASSERT_EQ(kiln_pool_trim(0), KILN_OK);
  ASSERT_EQ(kiln_pool_get_stats(&ps), KILN_OK);
  ASSERT(ps.reserved < 2 * n);
  int least, greatest;
  ASSERT_EQ(kiln_stream_priority_range(&least, &greatest), KILN_OK);
  kiln_stream bad = NULL;
  ASSERT_EQ(kiln_stream_create(0, least + 1, &bad), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "priority");
  ASSERT_EQ(kiln_host_free(host), KILN_OK);
  ASSERT_EQ(kiln_event_destroy(start), KILN_OK);
  ASSERT_EQ(kiln_event_destroy(end), KILN_OK);
  ASSERT_EQ(kiln_stream_destroy(stream), KILN_OK);
}

TEST(gpu_out_of_memory_says_how_much) {
  kiln_test_require_gpu();
  kiln_deviceptr p = 0;
  ASSERT_EQ(kiln_mem_alloc_async((size_t)1 << 50, NULL, &p), KILN_ERROR_OUT_OF_MEMORY);
  ASSERT_CONTAINS(kiln_last_error(), "asked for 1125899906842624 bytes");
  ASSERT_CONTAINS(kiln_last_error(), "free");
}
