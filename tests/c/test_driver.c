/* The driver, device and context queries, kernel attributes, module variables and the memory
 * calls beside them: every argument check before the driver is opened, then on the GPU. */
#include "runner.h"

#include "../../engine/src/driver.h"

static const char *globals_src =
    "__constant__ float coeffs[16];\n"
    "__device__ int counter;\n"
    "namespace ns { __device__ double table[4]; }\n"
    "extern \"C\" __global__ void apply(float *out, int n)\n"
    "{ int i = threadIdx.x; if (i < n) out[i] = coeffs[i] + (float)ns::table[0];\n"
    "  if (i == 0) { atomicAdd(&counter, 1); if (n < 0) printf(\"never\\n\"); } }\n";

TEST(driver_calls_check_arguments_before_the_driver) {
  setenv("KILN_CUDA_PATH", "/nonexistent/libcuda.so.1", 1);
  int v = -1;
  ASSERT_STATUS(kiln_device_get_attribute(0, -1, &v), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "is not a CUdevice_attribute");
  ASSERT_EQ(v, 0);
  ASSERT_STATUS(kiln_device_get_attribute(-2, 1, &v), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "device -2 does not exist");
  ASSERT_STATUS(kiln_context_pop(&v), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "no context is pushed on this thread");
  ASSERT_EQ(v, -1);
  ASSERT_STATUS(kiln_context_push(-1), KILN_ERROR_INVALID);
  uintptr_t handle = 1;
  ASSERT_STATUS(kiln_context_handle(-1, &handle), KILN_ERROR_INVALID);
  ASSERT_EQ(handle, 0);
  size_t limit = 7;
  ASSERT_STATUS(kiln_context_get_limit(99, &limit), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "limit 99 is not a CUlimit");
  ASSERT_EQ(limit, 0);
  ASSERT_STATUS(kiln_context_set_cache_config(7), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "not a CUfunc_cache");
  ASSERT_STATUS(kiln_context_set_shared_config(3), KILN_ERROR_INVALID);
  kiln_compile_opts opts = {.arch = "sm_90"};
  kiln_module *m = NULL;
  kiln_function *f = NULL;
  ASSERT_OK(kiln_module_from_source(globals_src, &opts, &m));
  ASSERT_OK(kiln_module_get_function(m, "apply", &f));
  ASSERT_STATUS(kiln_function_get_attribute(f, 99, &v), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "not a CUfunction_attribute");
  ASSERT_STATUS(kiln_function_set_attribute(f, 4, 8), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "function attribute 4 is read-only");
  ASSERT_STATUS(kiln_function_set_cache_config(f, 9), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_function_get_attribute(f, 4, &v), KILN_ERROR_NO_DRIVER);
  kiln_module_free(m);
  ASSERT_STATUS(kiln_memset_d32(0x1002, 0, 4), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "aligned to 4 bytes");
  ASSERT_STATUS(kiln_memset_d16(0x1001, 0, 4), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_memset_d32(0x1000, 0, SIZE_MAX / 2), KILN_ERROR_INVALID);
  kiln_deviceptr p = 5;
  size_t pitch = 5;
  ASSERT_STATUS(kiln_mem_alloc_pitch(64, 64, 3, &p, &pitch), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "4, 8 or 16 bytes, not 3");
  ASSERT_EQ(p, 0);
  ASSERT_STATUS(kiln_mem_alloc_pitch(0, 64, 4, &p, &pitch), KILN_ERROR_INVALID);
  void *host = (void *)1;
  ASSERT_STATUS(kiln_host_alloc_with_flags(64, 8, &host), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "0x8 has others");
  ASSERT(host == NULL);
  char buf[64];
  ASSERT_STATUS(kiln_host_register(buf, 0, 0), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_host_register(buf, sizeof buf, 4), KILN_ERROR_INVALID);
  kiln_event e = (kiln_event)1;
  ASSERT_STATUS(kiln_event_create_with_flags(KILN_EVENT_INTERPROCESS, &e), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "cannot time");
  ASSERT(e == NULL);
  ASSERT_STATUS(kiln_event_create_with_flags(16, &e), KILN_ERROR_INVALID);
  char id[8];
  ASSERT_STATUS(kiln_device_pci_bus_id(0, id, sizeof id), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_device_from_pci_bus_id("", &v), KILN_ERROR_INVALID);
  ASSERT(kiln_driver_header_version() >= 12000);
}

TEST(driver_calls_without_a_driver_are_statuses) {
  setenv("KILN_CUDA_PATH", "/nonexistent/libcuda.so.1", 1);
  ASSERT_STATUS(kiln_driver_init(), KILN_ERROR_NO_DRIVER);
  ASSERT_CONTAINS(kiln_last_error(), "/nonexistent/libcuda.so.1");
  int v = -1;
  ASSERT_STATUS(kiln_driver_version(&v), KILN_ERROR_NO_DRIVER);
  ASSERT_EQ(v, 0);
  ASSERT_STATUS(kiln_device_get_attribute(0, 1, &v), KILN_ERROR_NO_DRIVER);
  ASSERT_STATUS(kiln_context_push(0), KILN_ERROR_NO_DRIVER);
  ASSERT_EQ(kiln_context_depth(), 0);
  uintptr_t handle = 1;
  ASSERT_STATUS(kiln_context_handle(0, &handle), KILN_ERROR_NO_DRIVER);
  ASSERT_EQ(handle, 0);
  ASSERT_EQ(kiln_device_current(), 0);
  size_t limit = 1;
  ASSERT_STATUS(kiln_context_get_limit(1, &limit), KILN_ERROR_NO_DRIVER);
  ASSERT_STATUS(kiln_memset_d32(0x1000, 0, 4), KILN_ERROR_NO_DRIVER);
  ASSERT_STATUS(kiln_memcpy_dtod(0x1000, 0x2000, 4), KILN_ERROR_NO_DRIVER);
  kiln_event e = NULL;
  ASSERT_STATUS(kiln_event_create_with_flags(KILN_EVENT_BLOCKING_SYNC, &e), KILN_ERROR_NO_DRIVER);
  kiln_deviceptr dp = 1;
  unsigned flags = 1;
  void *host = &flags;
  ASSERT_STATUS(kiln_host_get_device_pointer(&flags, &dp), KILN_ERROR_NO_DRIVER);
  ASSERT_STATUS(kiln_host_get_flags(&flags, &flags), KILN_ERROR_NO_DRIVER);
  ASSERT_STATUS(kiln_pointer_host_address(0x1000, 4, &host), KILN_ERROR_NO_DRIVER);
  ASSERT(dp == 0 && flags == 0 && host == NULL);
  /* What a program's end calls: with no device set up, there is nothing to wait for. */
  ASSERT_OK(kiln_synchronize_all());
}

TEST(module_variables_are_found_in_the_ptx_before_the_device) {
  setenv("KILN_CUDA_PATH", "/nonexistent/libcuda.so.1", 1);
  kiln_compile_opts opts = {.arch = "sm_90"};
  kiln_module *m = NULL;
  ASSERT_OK(kiln_module_from_source(globals_src, &opts, &m));
  ASSERT_EQ(kiln_module_global_count(m), 3); /* printf's string literal is not one */
  ASSERT_STR_EQ(kiln_module_global_name(m, 0), "coeffs");
  ASSERT_STR_EQ(kiln_module_global_name(m, 1), "counter");
  ASSERT_STR_EQ(kiln_module_global_name(m, 2), "_ZN2ns5tableE");
  ASSERT(kiln_module_global_name(m, 3) == NULL);
  kiln_deviceptr p = 9;
  size_t size = 9;
  ASSERT_STATUS(kiln_module_get_global(m, "coef", &p, &size), KILN_ERROR_NOT_FOUND);
  ASSERT_CONTAINS(kiln_last_error(),
                  "no variable 'coef' in the module; it has coeffs, counter, ns::table "
                  "(_ZN2ns5tableE)");
  ASSERT_EQ(p, 0);
  ASSERT_EQ(size, 0);
  ASSERT_STATUS(kiln_module_get_global(m, "", &p, &size), KILN_ERROR_INVALID);
  /* Known names reach the device, which this process has none of. */
  ASSERT_STATUS(kiln_module_get_global(m, "ns::table", &p, &size), KILN_ERROR_NO_DRIVER);
  ASSERT_STATUS(kiln_module_get_global(m, "table", &p, &size), KILN_ERROR_NO_DRIVER);
  kiln_module_free(m);
  kiln_module *none = NULL;
  ASSERT_OK(kiln_module_from_source("__global__ void k(int *p) { *p = 1; }\n", &opts, &none));
  ASSERT_STATUS(kiln_module_get_global(none, "x", &p, &size), KILN_ERROR_NOT_FOUND);
  ASSERT_CONTAINS(kiln_last_error(), "has no __device__ or __constant__ variables");
  kiln_module_free(none);
}

TEST(gpu_driver_device_and_context) {
  kiln_test_require_gpu();
  int version = 0;
  ASSERT_OK(kiln_driver_init());
  ASSERT_OK(kiln_driver_version(&version));
  ASSERT(version >= 12000);
  kiln_device_info info;
  ASSERT_OK(kiln_device_get_info(0, &info));
  int v = 0;
  ASSERT_OK(kiln_device_get_attribute(0, 1 /* MAX_THREADS_PER_BLOCK */, &v));
  ASSERT_EQ(v, info.max_threads_per_block);
  ASSERT_OK(kiln_device_get_attribute(0, 16 /* MULTIPROCESSOR_COUNT */, &v));
  ASSERT_EQ(v, info.multiprocessors);
  char id[32];
  ASSERT_OK(kiln_device_pci_bus_id(0, id, sizeof id));
  int found = -1;
  ASSERT_OK(kiln_device_from_pci_bus_id(id, &found));
  ASSERT_EQ(found, 0);
  ASSERT_STATUS(kiln_device_from_pci_bus_id("ffff:ff:1f.7", &found), KILN_ERROR_INVALID);
  /* The primary context's handle, got without changing which context is current. */
  uintptr_t handle = 0;
  CUcontext before = NULL, after = NULL;
  ASSERT_EQ(kiln__driver.CtxGetCurrent(&before), CUDA_SUCCESS);
  ASSERT_OK(kiln_context_handle(0, &handle));
  ASSERT(handle != 0);
  ASSERT_EQ(kiln__driver.CtxGetCurrent(&after), CUDA_SUCCESS);
  ASSERT(after == before || after == (CUcontext)handle);
  ASSERT_OK(kiln_context_push(0));
  ASSERT_EQ(kiln__driver.CtxGetCurrent(&after), CUDA_SUCCESS);
  ASSERT_EQ((uintptr_t)after, handle);
  ASSERT_EQ(kiln_context_depth(), 1);
  size_t stack = 0;
  ASSERT_OK(kiln_context_set_limit(0 /* STACK_SIZE */, 4096));
  ASSERT_OK(kiln_context_get_limit(0, &stack));
  ASSERT(stack >= 4096);
  int config = -1;
  ASSERT_OK(kiln_context_set_cache_config(1 /* PREFER_SHARED */));
  ASSERT_OK(kiln_context_get_cache_config(&config));
  ASSERT_EQ(config, 1);
  ASSERT_OK(kiln_context_set_cache_config(0));
  unsigned api = 0;
  ASSERT_OK(kiln_context_api_version(&api));
  ASSERT(api >= 3020);
  int popped = -1;
  ASSERT_OK(kiln_context_pop(&popped));
  ASSERT_EQ(popped, 0);
  ASSERT_EQ(kiln_context_depth(), 0);
  ASSERT_STATUS(kiln_context_pop(&popped), KILN_ERROR_INVALID);
}

TEST(gpu_module_variables_and_memsets) {
  kiln_test_require_gpu();
  kiln_module *m = NULL;
  ASSERT_OK(kiln_module_from_source(globals_src, NULL, &m));
  kiln_deviceptr c = 0, t = 0, count = 0;
  size_t size = 0;
  ASSERT_OK(kiln_module_get_global(m, "coeffs", &c, &size));
  ASSERT_EQ(size, 16 * sizeof(float));
  ASSERT_OK(kiln_module_get_global(m, "ns::table", &t, &size));
  ASSERT_EQ(size, 4 * sizeof(double));
  ASSERT_OK(kiln_module_get_global(m, "counter", &count, &size));
  ASSERT_EQ(size, sizeof(int));
  kiln_deviceptr again = 0;
  ASSERT_OK(kiln_module_get_global(m, "coeffs", &again, &size));
  ASSERT_EQ(again, c);
  float host[16];
  for (int i = 0; i < 16; i++) host[i] = (float)i * 0.5f;
  ASSERT_OK(kiln_memcpy_htod(c, host, sizeof host));
  ASSERT_STATUS(kiln_memcpy_htod(c, host, sizeof host + 4), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "runs past its allocation");
  double table[4] = {100, 0, 0, 0};
  ASSERT_OK(kiln_memcpy_htod(t, table, sizeof table));
  ASSERT_OK(kiln_memset_d32(count, 0, 1));
  kiln_deviceptr out = 0;
  ASSERT_OK(kiln_mem_alloc(16 * sizeof(float), &out));
  kiln_function *f = NULL;
  ASSERT_OK(kiln_module_get_function(m, "apply", &f));
  int n = 16;
  void *params[] = {&out, &n};
  kiln_launch_config cfg = {.grid = {1, 1, 1}, .block = {16, 1, 1}};
  ASSERT_OK(kiln_function_launch(f, &cfg, params));
  ASSERT_OK(kiln_function_launch(f, &cfg, params));
  float got[16];
  ASSERT_OK(kiln_synchronize_all());
  ASSERT_EQ(kiln_device_current(), 0);
  ASSERT_OK(kiln_memcpy_dtoh(got, out, sizeof got));
  for (int i = 0; i < 16; i++)
    if (got[i] != host[i] + 100.0f) FAIL("out[%d] = %g, want %g", i, got[i], host[i] + 100.0f);
  int launched = 0;
  ASSERT_OK(kiln_memcpy_dtoh(&launched, count, sizeof launched));
  ASSERT_EQ(launched, 2);
  /* memsets of every width, and a device-to-device copy */
  kiln_deviceptr a = 0, b = 0;
  ASSERT_OK(kiln_mem_alloc(64, &a));
  ASSERT_OK(kiln_mem_alloc(64, &b));
  unsigned char bytes[64];
  ASSERT_OK(kiln_memset_d8(a, 0x5a, 64));
  ASSERT_OK(kiln_memset_d16(a, 0x1234, 8));
  ASSERT_OK(kiln_memset_d32_async(a + 16, 0xdeadbeefu, 4, NULL));
  ASSERT_OK(kiln_memset_d16_async(a + 32, 0xabcd, 2, NULL));
  ASSERT_OK(kiln_memcpy_dtod(b, a, 64));
  ASSERT_OK(kiln_memcpy_dtoh(bytes, b, 64));
  uint16_t h16;
  uint32_t h32;
  memcpy(&h16, bytes, 2);
  ASSERT_EQ(h16, 0x1234);
  memcpy(&h32, bytes + 16, 4);
  ASSERT_EQ(h32, 0xdeadbeefu);
  memcpy(&h16, bytes + 34, 2);
  ASSERT_EQ(h16, 0xabcd);
  ASSERT_EQ(bytes[36], 0x5a);
  ASSERT_STATUS(kiln_memset_d32(a + 60, 0, 2), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "runs past its allocation");
  /* the allocation an address lies in: a module variable is its own */
  kiln_deviceptr base = 0;
  ASSERT_OK(kiln_mem_address_range(a + 40, &base, &size));
  ASSERT(base == a && size >= 64);
  ASSERT_OK(kiln_mem_address_range(t + 8, &base, &size));
  ASSERT(base == t && size == 4 * sizeof(double));
  ASSERT_STATUS(kiln_mem_address_range(8, &base, &size), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "0x8 is not device memory of the current context");
  ASSERT(kiln_last_cuda_result() != 0 && base == 0 && size == 0);
  size_t pitch = 0;
  kiln_deviceptr pitched = 0;
  ASSERT_OK(kiln_mem_alloc_pitch(100, 8, 4, &pitched, &pitch));
  ASSERT(pitch >= 100 && pitched != 0);
  static char page[8192] __attribute__((aligned(4096)));
  ASSERT_OK(kiln_host_register(page, sizeof page, KILN_HOST_PORTABLE));
  ASSERT_OK(kiln_memcpy_dtoh(page, b, 64));
  ASSERT_EQ((unsigned char)page[63], bytes[63]);
  ASSERT_STATUS(kiln_host_register(page, sizeof page, 0), KILN_ERROR_INVALID);
  ASSERT_OK(kiln_host_unregister(page));
  ASSERT_OK(kiln_mem_free(a));
  ASSERT_OK(kiln_mem_free(b));
  ASSERT_OK(kiln_mem_free(pitched));
  ASSERT_OK(kiln_mem_free(out));
  kiln_module_free(m);
}

TEST(gpu_function_attributes) {
  kiln_test_require_gpu();
  kiln_module *m = NULL;
  ASSERT_OK(kiln_module_from_source(
      "extern \"C\" __global__ void dyn(float *p) { extern __shared__ float s[];\n"
      "  s[threadIdx.x] = threadIdx.x; __syncthreads(); p[threadIdx.x] = s[31 - threadIdx.x]; }\n",
      NULL, &m));
  kiln_function *f = NULL;
  ASSERT_OK(kiln_module_get_function(m, "dyn", &f));
  int v = 0;
  ASSERT_OK(kiln_function_get_attribute(f, 0 /* MAX_THREADS_PER_BLOCK */, &v));
  ASSERT(v > 0 && v <= 1024);
  ASSERT_OK(kiln_function_get_attribute(f, 4 /* NUM_REGS */, &v));
  ASSERT(v > 0);
  ASSERT_OK(kiln_function_get_attribute(f, 6 /* BINARY_VERSION */, &v));
  ASSERT(v >= 75);
  ASSERT_STATUS(kiln_function_get_attribute(f, 999, &v), KILN_ERROR_INVALID);
  ASSERT_OK(kiln_function_set_attribute(f, 8 /* MAX_DYNAMIC_SHARED_SIZE_BYTES */, 64 << 10));
  ASSERT_OK(kiln_function_get_attribute(f, 8, &v));
  ASSERT_EQ(v, 64 << 10);
  ASSERT_OK(kiln_function_set_cache_config(f, 2 /* PREFER_L1 */));
  ASSERT_STATUS(kiln_function_set_cache_config(f, 9), KILN_ERROR_INVALID);
  kiln_deviceptr p = 0;
  ASSERT_OK(kiln_mem_alloc(32 * sizeof(float), &p));
  void *params[] = {&p};
  kiln_launch_config cfg = {.grid = {1, 1, 1}, .block = {32, 1, 1}, .shared = 60 << 10};
  ASSERT_OK(kiln_function_launch(f, &cfg, params));
  float got[32];
  ASSERT_OK(kiln_synchronize());
  ASSERT_OK(kiln_memcpy_dtoh(got, p, sizeof got));
  for (int i = 0; i < 32; i++) ASSERT_EQ(got[i], 31 - i);
  ASSERT_OK(kiln_mem_free(p));
  kiln_module_free(m);
}

TEST(managed_memory_and_2d_memsets_check_arguments_first) {
  setenv("KILN_CUDA_PATH", "/nonexistent/libcuda.so.1", 1);
  kiln_deviceptr p = 1;
  ASSERT_STATUS(kiln_mem_alloc_managed(64, 0, &p), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "attached GLOBAL (1) or HOST (2) when made, not 0");
  ASSERT_EQ(p, 0);
  ASSERT_STATUS(kiln_mem_alloc_managed(0, KILN_MEM_ATTACH_GLOBAL, &p), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_stream_attach_mem(NULL, 0x1000, 0, 3), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "GLOBAL (1), HOST (2) or SINGLE (4), not 3");
  ASSERT_STATUS(kiln_memset_2d(0x1000, 8, 0, 3, 2, 2), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "values of 1, 2 or 4 bytes, not 3");
  ASSERT_STATUS(kiln_memset_2d(0x1000, 6, 0, 4, 2, 2), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "at least a row's 8 and a multiple of 4, not 6");
  ASSERT_STATUS(kiln_memset_2d_async(0x1000, 10, 0, 4, 2, 2, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_memset_2d(0x1001, 8, 0, 4, 2, 2), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "aligned to 4 bytes");
  ASSERT_STATUS(kiln_memset_2d(0x1000, SIZE_MAX / 2, 0, 1, 1, 4), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "more than memory holds");
  /* Past the checks, no driver: a status, not a crash. */
  ASSERT_STATUS(kiln_memset_2d(0x1000, 8, 0, 4, 2, 2), KILN_ERROR_NO_DRIVER);
  ASSERT_STATUS(kiln_profiler_start(), KILN_ERROR_NO_DRIVER);
}

TEST(copies_in_2d_and_3d_check_their_shape_first) {
  setenv("KILN_CUDA_PATH", "/nonexistent/libcuda.so.1", 1);
  unsigned char host[256];
  kiln_copy_side h = kiln_test_copy_side(KILN_COPY_HOST, host, sizeof host, 0, 32, 8);
  kiln_copy_side d = kiln_test_copy_side(KILN_COPY_DEVICE, NULL, 0, 0x1000, 64, 8);
  ASSERT_OK(kiln_memcpy_3d_check(&h, &d, 32, 8, 1));
  ASSERT_STATUS(kiln_memcpy_3d_check(&h, &d, 33, 8, 1), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "source's pitch (32 bytes from one row to the next) is "
                                     "less than its rows' 33 bytes");
  h.x_in_bytes = 8; /* the rows start 8 bytes in: 32 of them no longer fit a pitch of 32 */
  ASSERT_STATUS(kiln_memcpy_3d_check(&h, &d, 32, 2, 1), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "less than its rows' 40 bytes (x_in_bytes 8");
  h.x_in_bytes = 0;
  /* A 2D copy's pitch of 0 is the width (the driver's reading): 8 rows of 32 fit 256 bytes,
   * 9 do not, and rows 8 bytes in would overlap the next. In 3D it stays too small. */
  h.pitch = 0;
  ASSERT_OK(kiln_memcpy_3d_check(&h, &d, 32, 8, 1));
  ASSERT_STATUS(kiln_memcpy_3d_check(&h, &d, 32, 9, 1), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "reaches 288 bytes into its source, which has 256");
  h.x_in_bytes = 8;
  ASSERT_STATUS(kiln_memcpy_3d_check(&h, &d, 24, 2, 1), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "source's pitch (24 bytes from one row to the next)");
  h.x_in_bytes = 0;
  /* In 3D too, as the driver reads them: a pitch of 0 is the width and a height of 0 the rows
   * the copy reaches, so two slices of two rows lie packed; slices of the 8 rows given reach
   * past the buffer. */
  ASSERT_STATUS(kiln_memcpy_3d_check(&h, &d, 32, 2, 2), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "reaches 320 bytes into its source, which has 256");
  h.height = 0;
  ASSERT_OK(kiln_memcpy_3d_check(&h, &d, 32, 2, 2));
  ASSERT_OK(kiln_memcpy_3d_check(&h, &d, 32, 4, 2));
  ASSERT_STATUS(kiln_memcpy_3d_check(&h, &d, 32, 4, 3), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "reaches 384 bytes into its source, which has 256");
  h.height = 8;
  h.pitch = 32;
  ASSERT_STATUS(kiln_memcpy_3d_check(&h, &d, 32, 9, 1), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "reaches 288 bytes into its source, which has 256");
  h.x_in_bytes = 1; /* one byte further: the last row runs one past the buffer */
  ASSERT_STATUS(kiln_memcpy_3d_check(&h, &d, 32, 8, 1), KILN_ERROR_INVALID);
  h.x_in_bytes = 0;
  /* Three slices of 8 rows: the third's fourth row ends 2 * 256 + 3 * 32 + 32 bytes in. */
  ASSERT_STATUS(kiln_memcpy_3d_check(&h, &d, 32, 4, 3), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "reaches 640 bytes");
  h.height = 2;
  ASSERT_STATUS(kiln_memcpy_3d_check(&h, &d, 32, 4, 2), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "source's slices hold 2 rows; the copy needs 4");
  h.height = 4;
  ASSERT_OK(kiln_memcpy_3d_check(&h, &d, 32, 4, 2));
  h.z = 1; /* one slice from slice 1: rows 4 to 7 of the buffer */
  ASSERT_OK(kiln_memcpy_3d_check(&h, &d, 32, 4, 1));
  h.z = 2;
  ASSERT_STATUS(kiln_memcpy_3d_check(&h, &d, 32, 4, 1), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "reaches 384 bytes into its source, which has 256");
  h.z = 0;
  d.y = SIZE_MAX / 2; /* offsets whose arithmetic wraps */
  ASSERT_STATUS(kiln_memcpy_3d_check(&h, &d, 32, 4, 1), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "reach past the end of memory");
  d.y = 0;
  h.y = SIZE_MAX; /* y + height wraps to a row inside the buffer: still refused */
  ASSERT_STATUS(kiln_memcpy_3d_check(&h, &d, 8, 2, 1), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "source's offsets reach past the end of memory");
  h.z = 1;
  ASSERT_STATUS(kiln_memcpy_3d_check(&h, &d, 8, 2, 1), KILN_ERROR_INVALID);
  h.y = 0;
  h.z = SIZE_MAX;
  ASSERT_STATUS(kiln_memcpy_3d_check(&h, &d, 8, 2, 2), KILN_ERROR_INVALID);
  h.z = 0;
  d.kind = 5; /* no kind the driver has */
  ASSERT_STATUS(kiln_memcpy_3d_check(&h, &d, 32, 4, 1), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "unified (4) memory or a CUDA array (3), not kind 5");
  d.kind = KILN_COPY_DEVICE;
  ASSERT_STATUS(kiln_memcpy_3d(NULL, &d, 32, 4, 1, 0), KILN_ERROR_INVALID);
  /* Past the checks, no driver: a status, not a crash. */
  ASSERT_STATUS(kiln_memcpy_3d(&h, &d, 32, 4, 1, 0), KILN_ERROR_NO_DRIVER);
  ASSERT_STATUS(kiln_memcpy_3d_async(&h, &d, 32, 4, 2, NULL), KILN_ERROR_NO_DRIVER);
}

TEST(gpu_copies_in_2d_and_3d) {
  kiln_test_require_gpu();
  enum { W = 24, H = 5, D = 3, PITCH = 64 };
  unsigned char src[D][H][W], back[D][H][W];
  for (int z = 0; z < D; z++)
    for (int y = 0; y < H; y++)
      for (int x = 0; x < W; x++) src[z][y][x] = (unsigned char)(z * 100 + y * 10 + x);
  kiln_deviceptr dev = 0;
  ASSERT_OK(kiln_mem_alloc((size_t)PITCH * H * D, &dev));
  kiln_copy_side h = kiln_test_copy_side(KILN_COPY_HOST, src, sizeof src, 0, W, H);
  kiln_copy_side d = kiln_test_copy_side(KILN_COPY_DEVICE, NULL, 0, dev, PITCH, H);
  ASSERT_OK(kiln_memcpy_3d(&h, &d, W, H, D, 0));
  memset(back, 0, sizeof back);
  kiln_copy_side b = kiln_test_copy_side(KILN_COPY_HOST, back, sizeof back, 0, W, H);
  ASSERT_OK(kiln_memcpy_3d(&d, &b, W, H, D, 0));
  ASSERT_EQ(memcmp(src, back, sizeof src), 0);
  /* One slice's rows 1 to 3, bytes 4 to 11, from slice 2 on the device, queued on a stream. */
  memset(back, 0, sizeof back);
  d.x_in_bytes = 4;
  d.y = 1;
  d.z = 2;
  b.x_in_bytes = 4;
  b.y = 1;
  kiln_stream s = NULL;
  ASSERT_OK(kiln_stream_create(0, 0, &s));
  ASSERT_OK(kiln_memcpy_3d_async(&d, &b, 8, 3, 1, s)); /* one slice, not the first */
  ASSERT_OK(kiln_stream_synchronize(s));
  ASSERT_OK(kiln_stream_destroy(s));
  ASSERT_EQ(back[0][1][4], src[2][1][4]);
  ASSERT_EQ(back[0][3][11], src[2][3][11]);
  ASSERT_EQ(back[0][1][3], 0);
  ASSERT_EQ(back[0][4][4], 0);
  /* A device side past its allocation is refused before the driver sees it. */
  d.x_in_bytes = d.y = d.z = 0;
  d.pitch = PITCH * 2;
  ASSERT_STATUS(kiln_memcpy_3d(&h, &d, W, H, D, 0), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "runs past its allocation");
  /* An extent so large that the address after it wraps below the allocation. */
  d.pitch = (size_t)1 << 20;
  d.y = ((size_t)1 << 44) - 1;
  d.height = 0;
  ASSERT_STATUS(kiln_memcpy_3d(&h, &d, 1, 1, 1, 0), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "runs past its allocation");
  ASSERT_OK(kiln_mem_free(dev));
}

TEST(gpu_managed_memory_2d_memsets_and_the_profiler) {
  kiln_test_require_gpu();
  kiln_deviceptr m = 0;
  ASSERT_OK(kiln_mem_alloc_managed(256, KILN_MEM_ATTACH_GLOBAL, &m));
  unsigned char *host = (unsigned char *)(uintptr_t)m; /* the host reaches managed memory */
  memset(host, 7, 256);
  ASSERT_OK(kiln_memset_2d(m, 64, 0xABCD, 2, 8, 3)); /* 3 rows of 16 bytes, 64 apart */
  ASSERT_OK(kiln_synchronize());
  for (int row = 0; row < 4; row++)
    for (int i = 0; i < 64; i++) {
      unsigned char want = row < 3 && i < 16 ? (i % 2 ? 0xAB : 0xCD) : 7;
      if (host[row * 64 + i] != want) FAIL("byte %d of row %d is %d", i, row, host[row * 64 + i]);
    }
  kiln_stream s = NULL;
  ASSERT_OK(kiln_stream_create(0, 0, &s));
  ASSERT_OK(kiln_stream_attach_mem(s, m, 0, KILN_MEM_ATTACH_SINGLE));
  ASSERT_OK(kiln_memset_2d_async(m + 192, 16, 0x11223344u, 4, 4, 4, s));
  ASSERT_OK(kiln_stream_synchronize(s));
  ASSERT_EQ(((uint32_t *)(uintptr_t)m)[48], 0x11223344u);
  ASSERT_OK(kiln_stream_attach_mem(s, m, 0, KILN_MEM_ATTACH_GLOBAL));
  ASSERT_OK(kiln_stream_synchronize(s));
  ASSERT_OK(kiln_stream_destroy(s));
  /* A stretch past the allocation is refused before the driver sees it. */
  ASSERT_STATUS(kiln_memset_2d(m, 128, 0, 1, 16, 3), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "runs past its allocation");
  ASSERT_OK(kiln_mem_free(m));
  ASSERT_OK(kiln_profiler_start());
  ASSERT_OK(kiln_profiler_stop());
}

/* A NULL where a call needs a pointer is KILN_ERROR_INVALID naming the call and the parameter,
 * before the driver is opened; the getters that return no status give 0, NULL or "". */
TEST(null_pointers_are_refused_not_followed) {
  kiln_launch_config cfg = {.grid = {1, 1, 1}, .block = {1, 1, 1}};
  int i = 0;
  size_t z = 0;
  kiln_deviceptr p = 0;
  ASSERT_STATUS(kiln_device_count(NULL), KILN_ERROR_INVALID);
  ASSERT_STR_EQ(kiln_last_error(), "kiln_device_count: count is NULL, and the call needs it");
  ASSERT_STATUS(kiln_device_get_info(0, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_device_get_attribute(0, 1, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_device_from_pci_bus_id("0000:01:00.0", NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_driver_version(NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_context_handle(0, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_context_get_limit(0, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_context_get_cache_config(NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_context_get_shared_config(NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_context_api_version(NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_module_from_source("__global__ void k() {}", NULL, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_module_from_image("x", 1, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_module_from_file("x.cubin", NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_module_get_function(NULL, "k", NULL), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "kiln_module_get_function: m is NULL");
  ASSERT_STATUS(kiln_module_get_global(NULL, "g", &p, &z), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_nvrtc_get_info(NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_compile_default_arch(NULL, 16), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_cache_get_info(NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_link(NULL, 0, NULL, NULL, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_function_get_attribute(NULL, 0, &i), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_function_set_attribute(NULL, 0, 0), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_function_set_cache_config(NULL, 0), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_function_launch(NULL, &cfg, NULL), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "kiln_function_launch: f is NULL");
  ASSERT_STATUS(kiln_function_check_launch(NULL, &cfg), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_function_launch_ex(NULL, &cfg, NULL, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_function_call(NULL, &cfg, NULL, NULL, 0, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_function_call_async(NULL, &cfg, NULL, NULL, 0), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_function_max_active_blocks(NULL, 32, 0, &i), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_function_suggested_block_size(NULL, 0, 0, &i, &i), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_function_available_dynamic_shared(NULL, 1, 32, &z), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_function_max_active_clusters(NULL, &cfg, NULL, &i), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_mem_alloc(16, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_mem_alloc_async(16, NULL, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_mem_alloc_managed(16, KILN_MEM_ATTACH_GLOBAL, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_mem_alloc_pitch(16, 2, 4, &p, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_mem_info(NULL, &z), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_mem_address_range(0, NULL, &z), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_pointer_reachable(0, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_pool_get_stats(NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_host_alloc(16, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_host_get_device_pointer(&i, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_host_get_flags(&i, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_pointer_host_address(0, 0, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_device_can_access_peer(0, 0, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_array_create(NULL, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_stream_create(0, 0, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_stream_query(NULL, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_stream_priority_range(&i, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_stream_is_capturing(NULL, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_event_create(1, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_event_query(NULL, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_event_elapsed_ms(NULL, NULL, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_graph_begin_capture(NULL, NULL), KILN_ERROR_INVALID);
  ASSERT(kiln_module_arch(NULL) == NULL && kiln_module_ptx(NULL, &z) == NULL && z == 0);
  ASSERT(kiln_module_cubin(NULL, &z) == NULL && z == 0);
  ASSERT_STR_EQ(kiln_module_log(NULL), "");
  ASSERT(kiln_module_function_count(NULL) == 0 && kiln_module_function_name(NULL, 0) == NULL);
  ASSERT(kiln_module_global_count(NULL) == 0 && kiln_module_global_name(NULL, 0) == NULL);
  ASSERT(kiln_function_name(NULL) == NULL && kiln_function_signature(NULL) == NULL);
  ASSERT(kiln_function_param_count(NULL) == 0 && kiln_function_params(NULL) == NULL);
  ASSERT(kiln_function_params_by_size(NULL) == 0);
  ASSERT(kiln_array_descriptor(NULL) == NULL && kiln_array_element_size(NULL) == 0);
  ASSERT(kiln_array_handle(NULL) == 0);
  ASSERT(kiln_module_recall(NULL, NULL) == 0);
  kiln_compile_last_report(NULL);
  kiln_cache_get_stats(NULL);
  kiln_staging_get_info(NULL);
}

/* A kernel that takes parameters, launched with no array of them, is refused before the driver
 * reads through NULL. */
TEST(gpu_a_launch_without_its_parameters_is_refused) {
  kiln_test_require_gpu();
  kiln_compile_opts opts = {.arch = NULL};
  kiln_module *m = NULL;
  kiln_function *f = NULL, *none = NULL;
  ASSERT_OK(kiln_module_from_source("extern \"C\" __global__ void k(int *p) { p[0] = 1; }\n"
                                    "extern \"C\" __global__ void none() {}\n",
                                    &opts, &m));
  ASSERT_OK(kiln_module_get_function(m, "k", &f));
  ASSERT_OK(kiln_module_get_function(m, "none", &none));
  kiln_launch_config cfg = {.grid = {1, 1, 1}, .block = {1, 1, 1}};
  ASSERT_STATUS(kiln_function_launch(f, &cfg, NULL), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "params is NULL, and kernel k takes 1 parameter");
  ASSERT_STATUS(kiln_function_launch_ex(f, &cfg, NULL, NULL), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_function_call(f, &cfg, NULL, NULL, 0, NULL), KILN_ERROR_INVALID);
  ASSERT_OK(kiln_function_launch(none, &cfg, NULL));
  ASSERT_OK(kiln_synchronize());
  kiln_module_free(m);
}

/* A call with nothing to do (zero bytes) succeeds and says so: the last error is cleared as by
 * any other success. A free of NULL leaves it, so that cleanup can run before it is read. */
TEST(gpu_calls_with_nothing_to_do_clear_the_last_error) {
  kiln_test_require_gpu();
  kiln_deviceptr p = 0;
  ASSERT_OK(kiln_mem_alloc(64, &p));
  char host[8] = {0};
  kiln_pool_stats stats;
#define KILN_TEST_CLEARS(call)                                               \
  do {                                                                       \
    ASSERT_STATUS(kiln_device_set_current(-1), KILN_ERROR_INVALID);          \
    ASSERT_OK(call);                                                         \
    if (kiln_last_error()[0]) FAIL(#call " left \"%s\"", kiln_last_error()); \
  } while (0)
  KILN_TEST_CLEARS(kiln_memcpy_htod(p, host, 0));
  KILN_TEST_CLEARS(kiln_memcpy_dtoh(host, p, 0));
  KILN_TEST_CLEARS(kiln_memcpy_htod_async(p, host, 0, NULL));
  KILN_TEST_CLEARS(kiln_memcpy_dtoh_async(host, p, 0, NULL));
  KILN_TEST_CLEARS(kiln_memcpy_dtod(p, p, 0));
  KILN_TEST_CLEARS(kiln_memcpy_dtod_async(p, p, 0, NULL));
  KILN_TEST_CLEARS(kiln_memset_async(p, 0, 0, NULL));
  KILN_TEST_CLEARS(kiln_memset_d8(p, 0, 0));
  KILN_TEST_CLEARS(kiln_memset_d16(p, 0, 0));
  KILN_TEST_CLEARS(kiln_memset_d32(p, 0, 0));
  KILN_TEST_CLEARS(kiln_memset_d16_async(p, 0, 0, NULL));
  KILN_TEST_CLEARS(kiln_memset_d32_async(p, 0, 0, NULL));
  KILN_TEST_CLEARS(kiln_memcpy_peer(p, 0, p, 0, 0));
  KILN_TEST_CLEARS(kiln_pointer_reachable(0, &(int){0}));
  KILN_TEST_CLEARS(kiln_pool_get_stats(&stats));
  KILN_TEST_CLEARS(kiln_pool_trim(0));
#undef KILN_TEST_CLEARS
  ASSERT_STATUS(kiln_device_set_current(-1), KILN_ERROR_INVALID);
  ASSERT_OK(kiln_mem_free(0));
  ASSERT_OK(kiln_mem_free_async(0, 0, NULL));
  ASSERT_OK(kiln_array_free(NULL));
  ASSERT_OK(kiln_host_free(NULL));
  ASSERT_OK(kiln_host_unregister(NULL));
  ASSERT_OK(kiln_stream_destroy(NULL));
  ASSERT_OK(kiln_event_destroy(NULL));
  ASSERT_CONTAINS(kiln_last_error(), "device -1 does not exist");
  ASSERT_OK(kiln_mem_free(p));
}
