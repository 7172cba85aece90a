/* Memory and events shared with another process (IPC), peer access and copies between
 * devices, from C. */
#include "runner.h"

TEST(ipc_and_peer_calls_check_arguments_before_the_driver) {
  /* Anything that reached the driver would be NO_DRIVER: each refusal is kiln's own. */
  setenv("KILN_CUDA_PATH", "/nonexistent/libcuda.so.1", 1);
  kiln_ipc_mem_handle h;
  kiln_ipc_event_handle eh;
  memset(&h, 0, sizeof h);
  memset(&eh, 0, sizeof eh);
  kiln_deviceptr p = 7;
  size_t size = 7;
  kiln_event e = (kiln_event)1;
  int can = 7;
  ASSERT_EQ(sizeof h.bytes, 64);
  ASSERT_STATUS(kiln_ipc_mem_get_handle(0, &h), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "address 0 is no allocation");
  ASSERT_STATUS(kiln_ipc_mem_get_handle(0x1000, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_ipc_mem_open(&h, 2, &p, &size), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "KILN_IPC_LAZY_ENABLE_PEER_ACCESS (1); 0x2 has others");
  ASSERT_EQ(p, 0);
  ASSERT_EQ(size, 0);
  ASSERT_STATUS(kiln_ipc_mem_open(NULL, 0, &p, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_ipc_mem_close(0), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_ipc_event_get_handle(NULL, &eh), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "the event is NULL");
  ASSERT_STATUS(kiln_ipc_event_open(NULL, &e), KILN_ERROR_INVALID);
  ASSERT(e == NULL);
  ASSERT_STATUS(kiln_device_can_access_peer(-1, 0, &can), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "device -1 does not exist");
  ASSERT_EQ(can, 0);
  ASSERT_STATUS(kiln_context_enable_peer_access(1, 4), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "flags 0");
  ASSERT_STATUS(kiln_context_enable_peer_access(-2, 0), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_context_disable_peer_access(-2), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_memcpy_peer(0x1000, -1, 0x2000, 0, 16), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "device -1 does not exist");
  ASSERT_STATUS(kiln_memcpy_peer_async(0x1000, 0, 0x2000, -3, 16, NULL), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "device -3 does not exist");
  /* A 3D copy between devices checks its shape first, as kiln_memcpy_3d does. */
  unsigned char host[64];
  kiln_copy_side src = kiln_test_copy_side(KILN_COPY_HOST, host, sizeof host, 0, 16, 0);
  kiln_copy_side dst = kiln_test_copy_side(KILN_COPY_DEVICE, NULL, 0, 0x1000, 8, 0);
  ASSERT_STATUS(kiln_memcpy_3d_peer(&src, 0, &dst, 0, 16, 2, 1), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "destination's pitch (8 bytes");
  dst.pitch = 16;
  ASSERT_STATUS(kiln_memcpy_3d_peer(&src, 0, &dst, 0, 16, 5, 1), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "reaches 80 bytes into its source, which has 64");
  ASSERT_STATUS(kiln_memcpy_3d_peer_async(&src, 0, &dst, -1, 16, 2, 1, NULL), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "device -1 does not exist");
  /* What passes every check reaches for the driver. */
  kiln_status s = kiln_ipc_mem_open(&h, KILN_IPC_LAZY_ENABLE_PEER_ACCESS, &p, NULL);
  ASSERT(s == KILN_ERROR_NO_DRIVER || s == KILN_ERROR_NO_DEVICE);
  s = kiln_memcpy_peer(0x1000, 0, 0x2000, 0, 16);
  ASSERT(s == KILN_ERROR_NO_DRIVER || s == KILN_ERROR_NO_DEVICE);
  s = kiln_memcpy_3d_peer(&src, 0, &dst, 0, 16, 2, 1);
  ASSERT(s == KILN_ERROR_NO_DRIVER || s == KILN_ERROR_NO_DEVICE);
}

TEST(gpu_ipc_handles_and_peer_copies_on_one_device) {
  kiln_test_require_gpu();
  size_t n = 4096;
  kiln_deviceptr a = 0, b = 0;
  ASSERT_OK(kiln_mem_alloc(n, &a));
  ASSERT_OK(kiln_mem_alloc(n, &b));
  kiln_ipc_mem_handle h, zero;
  memset(&zero, 0, sizeof zero);
  ASSERT_OK(kiln_ipc_mem_get_handle(a, &h));
  ASSERT(memcmp(&h, &zero, sizeof h) != 0);
  /* A handle names a whole allocation: an address inside one is refused. */
  ASSERT_STATUS(kiln_ipc_mem_get_handle(a + 256, &h), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "is 256 bytes into its allocation");
  ASSERT_STATUS(kiln_ipc_mem_get_handle(0x10, &h), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "is not device memory of the current context");
  int pools = 0;
  ASSERT_OK(kiln_device_get_attribute(kiln_device_current(), 115, &pools)); /* POOLS_SUPPORTED */
  if (pools) {
    kiln_deviceptr pooled = 0;
    ASSERT_OK(kiln_mem_alloc_async(n, NULL, &pooled));
    ASSERT_STATUS(kiln_ipc_mem_get_handle(pooled, &h), KILN_ERROR_INVALID);
    ASSERT_CONTAINS(kiln_last_error(), "stream-ordered pool");
    ASSERT_OK(kiln_mem_free_async(pooled, n, NULL));
  }
  /* CUDA opens a handle only in another process: opening one's own is a sentence. */
  ASSERT_OK(kiln_ipc_mem_get_handle(a, &h));
  kiln_deviceptr mapped = 1;
  ASSERT_STATUS(kiln_ipc_mem_open(&h, KILN_IPC_LAZY_ENABLE_PEER_ACCESS, &mapped, NULL),
                KILN_ERROR_CUDA);
  ASSERT_EQ(kiln_last_cuda_result(), 201); /* CUDA_ERROR_INVALID_CONTEXT */
  ASSERT_CONTAINS(kiln_last_error(), "made in this process");
  ASSERT_EQ(mapped, 0);
  /* Events: only an interprocess one without timing has a handle. */
  kiln_event timed = NULL, shared = NULL;
  kiln_ipc_event_handle eh;
  ASSERT_OK(kiln_event_create(1, &timed));
  kiln_status s = kiln_ipc_event_get_handle(timed, &eh);
  ASSERT(s != KILN_OK);
  ASSERT_CONTAINS(kiln_last_error(), "KILN_EVENT_INTERPROCESS | KILN_EVENT_DISABLE_TIMING");
  ASSERT_OK(
      kiln_event_create_with_flags(KILN_EVENT_INTERPROCESS | KILN_EVENT_DISABLE_TIMING, &shared));
  ASSERT_OK(kiln_ipc_event_get_handle(shared, &eh));
  ASSERT_OK(kiln_event_destroy(timed));
  ASSERT_OK(kiln_event_destroy(shared));
  /* Peer access: a device is not its own peer. */
  int device = kiln_device_current(), can = 7;
  ASSERT_OK(kiln_device_can_access_peer(device, device, &can));
  ASSERT_EQ(can, 0);
  ASSERT_STATUS(kiln_context_enable_peer_access(device, 0), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "not its own peer");
  /* A peer copy within one device works as a device-to-device one, sizes checked. */
  unsigned char *host = malloc(n), *back = malloc(n);
  for (size_t i = 0; i < n; i++) host[i] = (unsigned char)(i * 13 + 5);
  ASSERT_OK(kiln_memcpy_htod(a, host, n));
  ASSERT_OK(kiln_memset_d8(b, 0, n));
  ASSERT_OK(kiln_memcpy_peer(b, device, a, device, n));
  ASSERT_OK(kiln_memcpy_dtoh(back, b, n));
  ASSERT(memcmp(host, back, n) == 0);
  ASSERT_STATUS(kiln_memcpy_peer(b + 16, device, a, device, n), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "runs past its allocation");
  ASSERT_STATUS(kiln_memcpy_peer(b, device, 0x10, device, 16), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "source 0x10 is not device memory");
  ASSERT_OK(kiln_memset_d8(b, 0, n));
  kiln_stream stream = NULL;
  ASSERT_OK(kiln_stream_create(0, 0, &stream));
  ASSERT_OK(kiln_memcpy_peer_async(b, device, a, device, n / 2, stream));
  ASSERT_OK(kiln_stream_synchronize(stream));
  ASSERT_OK(kiln_memcpy_dtoh(back, b, n));
  ASSERT(memcmp(host, back, n / 2) == 0);
  ASSERT_EQ(back[n / 2], 0);
  /* A 3D peer copy on one device: rows 16 bytes wide, from a pitch of 64 to one of 32. */
  ASSERT_OK(kiln_memset_d8(b, 0, n));
  kiln_copy_side src = kiln_test_copy_side(KILN_COPY_DEVICE, NULL, 0, a, 64, 0);
  kiln_copy_side dst = kiln_test_copy_side(KILN_COPY_DEVICE, NULL, 0, b, 32, 0);
  src.x_in_bytes = 8;
  ASSERT_OK(kiln_memcpy_3d_peer(&src, device, &dst, device, 16, 4, 1));
  ASSERT_OK(kiln_memcpy_dtoh(back, b, n));
  for (size_t r = 0; r < 4; r++) {
    ASSERT(memcmp(back + r * 32, host + r * 64 + 8, 16) == 0);
    ASSERT_EQ(back[r * 32 + 16], 0);
  }
  dst.pitch = 2048; /* 4 rows 2048 bytes apart run past the 4096 bytes */
  ASSERT_STATUS(kiln_memcpy_3d_peer(&src, device, &dst, device, 16, 4, 1), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "runs past its allocation");
  ASSERT_OK(kiln_stream_destroy(stream));
  free(host);
  free(back);
  ASSERT_OK(kiln_mem_free(a));
  ASSERT_OK(kiln_mem_free(b));
}
