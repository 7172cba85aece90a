/* Compiling and kernel lookup: NVRTC needs no GPU, so these run everywhere. */
#include "runner.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *multiply_src =
    "__global__ void multiply_them(float *dest, const float *a, const float *b, int n)\n"
    "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) dest[i] = a[i] * b[i]; }\n";

static kiln_module *compile_ok(const char *src, const kiln_compile_opts *opts) {
  kiln_module *m = NULL;
  kiln_status s = kiln_module_from_source(src, opts, &m);
  if (s != KILN_OK) FAIL("compile failed: %s: %s", kiln_status_name(s), kiln_last_error());
  return m;
}

TEST(status_names_and_strings) {
  ASSERT_STR_EQ(kiln_status_name(KILN_OK), "KILN_OK");
  ASSERT_STR_EQ(kiln_status_name(KILN_ERROR_COMPILE), "KILN_ERROR_COMPILE");
  ASSERT_STR_EQ(kiln_status_string(KILN_ERROR_NO_DRIVER), "no CUDA driver could be loaded");
  ASSERT_STR_EQ(kiln_status_name((kiln_status)999), "KILN_ERROR_UNKNOWN");
}

TEST(compile_gives_ptx_cubin_and_signature) {
  kiln_compile_opts opts = {.arch = "sm_90"};
  kiln_module *m = compile_ok(multiply_src, &opts);
  size_t ptx_size = 0, cubin_size = 0;
  ASSERT_CONTAINS(kiln_module_ptx(m, &ptx_size), ".entry");
  ASSERT(ptx_size > 100);
  const unsigned char *cubin = kiln_module_cubin(m, &cubin_size);
  ASSERT(cubin != NULL);
  ASSERT(cubin_size > 100);
  ASSERT(memcmp(cubin,
                "\x7f"
                "ELF",
                4) == 0);
  ASSERT_STR_EQ(kiln_module_arch(m), "sm_90");
  ASSERT_EQ(kiln_module_function_count(m), 1);
  kiln_function *f = NULL;
  ASSERT_OK(kiln_module_get_function(m, "multiply_them", &f));
  ASSERT_EQ(kiln_function_param_count(f), 4);
  const kiln_param *p = kiln_function_params(f);
  ASSERT_EQ(p[0].cls, KILN_PARAM_PTR);
  ASSERT_EQ(p[1].cls, KILN_PARAM_PTR);
  ASSERT_EQ(p[2].cls, KILN_PARAM_PTR);
  ASSERT_EQ(p[3].cls, KILN_PARAM_I32);
  ASSERT_EQ(p[3].size, 4);
  kiln_module_free(m);
}

TEST(compile_error_has_the_log) {
  kiln_compile_opts opts = {.arch = "sm_90"};
  kiln_module *m = NULL;
  ASSERT_STATUS(
      kiln_module_from_source("__global__ void k() {\n  undefined_thing = 1;\n}\n", &opts, &m),
      KILN_ERROR_COMPILE);
  ASSERT_CONTAINS(kiln_last_error(), "undefined_thing");
  ASSERT(m != NULL);
  ASSERT_CONTAINS(kiln_module_log(m), "kernel.cu(2)");
  ASSERT_EQ(kiln_module_function_count(m), 0);
  kiln_module_free(m);
}

TEST(compile_finds_toolkit_headers) {
  kiln_compile_opts opts = {.arch = "sm_90"};
  kiln_module *m = compile_ok("#include <cuda_fp16.h>\n"
                              "__global__ void h(__half *x) { x[0] = __float2half(1.0f); }\n",
                              &opts);
  kiln_function *f = NULL;
  ASSERT_OK(kiln_module_get_function(m, "h", &f));
  kiln_module_free(m);
}

TEST(compile_takes_code_with_no_execution_space_as_device_code) {
  /* A helper and a global with no __device__, as nvcc compiles them for the host: NVRTC
   * refuses both as host code unless -default-device, which kiln adds (once: given already,
   * under either of its names, it is not given twice). */
  const char *src = "int scale = 3;\nint twice(int x) { return 2 * x; }\n"
                    "__global__ void k(int *p) { p[0] = twice(scale); }\n";
  const char *given[][1] = {{"-default-device"}, {"--device-as-default-execution-space"}};
  for (int i = -1; i < 2; i++) {
    kiln_compile_opts opts = {
        .arch = "sm_90", .options = i < 0 ? NULL : given[i], .n_options = i < 0 ? 0 : 1};
    kiln_module *m = compile_ok(src, &opts);
    kiln_function *f = NULL;
    ASSERT_OK(kiln_module_get_function(m, "k", &f));
    ASSERT_CONTAINS(kiln_module_ptx(m, NULL), ".global .align 4 .u32 scale");
    kiln_module_free(m);
  }
}

TEST(compile_rejects_an_unknown_arch) {
  kiln_compile_opts opts = {.arch = "sm_12"};
  kiln_module *m = NULL;
  ASSERT_STATUS(kiln_module_from_source(multiply_src, &opts, &m), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "sm_12");
  ASSERT_CONTAINS(kiln_last_error(), "sm_90");
  opts.arch = "banana";
  ASSERT_STATUS(kiln_module_from_source(multiply_src, &opts, &m), KILN_ERROR_INVALID);
  ASSERT(m == NULL);
}

TEST(compile_table_returns_the_same_module) {
  const char *o1[] = {"-DSCALE=2"};
  kiln_compile_opts a = {.arch = "sm_90", .options = o1, .n_options = 1};
  kiln_module *m1 = compile_ok(multiply_src, &a);
  kiln_module *m2 = compile_ok(multiply_src, &a);
  ASSERT(m1 == m2);
  const char *o2[] = {"-DSCALE=3"};
  kiln_compile_opts b = {.arch = "sm_90", .options = o2, .n_options = 1};
  kiln_module *m3 = compile_ok(multiply_src, &b);
  ASSERT(m3 != m1);
  kiln_compile_opts c = {.arch = "sm_80", .options = o1, .n_options = 1};
  kiln_module *m4 = compile_ok(multiply_src, &c);
  ASSERT(m4 != m1);
  ASSERT_STR_EQ(kiln_module_arch(m4), "sm_80");
  kiln_module_free(m1);
  kiln_module_free(m2);
  kiln_module_free(m3);
  kiln_module_free(m4);
}

/* Compiles multiply_src with -DSCALE=i and frees it, or keeps it when held is not NULL;
 * whether the in-process table answered. */
static int compile_numbered(int i, kiln_module **held) {
  char opt[32];
  snprintf(opt, sizeof opt, "-DSCALE=%d", i);
  const char *o[] = {opt};
  kiln_compile_opts opts = {.arch = "sm_90", .options = o, .n_options = 1};
  kiln_cache_stats before, after;
  kiln_cache_get_stats(&before);
  kiln_module *m = compile_ok(multiply_src, &opts);
  kiln_cache_get_stats(&after);
  if (held) *held = m;
  else kiln_module_free(m);
  return after.memory_hits == before.memory_hits + 1;
}

TEST(compile_table_keeps_a_bounded_number_of_unheld_modules) {
  ASSERT_EQ(kiln_module_table_set_limit(3), (size_t)256);
  kiln_module *held = NULL;
  ASSERT_EQ(compile_numbered(100, &held), 0);
  for (int i = 101; i < 106; i++) ASSERT_EQ(compile_numbered(i, NULL), 0);
  /* Held or not, at most the bound: the held one and the two used last. */
  ASSERT_EQ(kiln_module_table_count(), (size_t)3);
  ASSERT_EQ(compile_numbered(105, NULL), 1);
  ASSERT_EQ(compile_numbered(104, NULL), 1);
  ASSERT_EQ(compile_numbered(101, NULL), 0); /* freed: compiled again (from the disk cache) */
  kiln_module *again = NULL;
  ASSERT_EQ(compile_numbered(100, &again), 1); /* held: never freed, though the oldest */
  ASSERT(again == held);
  kiln_module_free(again);
  ASSERT_EQ(kiln_module_table_set_limit(1), (size_t)3);
  ASSERT_EQ(kiln_module_table_count(), (size_t)1); /* the held 100 alone */
  ASSERT_EQ(compile_numbered(101, NULL), 0);
  ASSERT_EQ(kiln_module_table_count(), (size_t)1); /* 101 went as soon as it was let go */
  /* Let go while the table is over its bound: it goes at once. */
  ASSERT_EQ(kiln_module_table_set_limit(0), (size_t)1);
  ASSERT_EQ(kiln_module_table_count(), (size_t)1);
  kiln_module_free(held);
  ASSERT_EQ(kiln_module_table_count(), (size_t)0);
  ASSERT_EQ(compile_numbered(100, NULL), 0);
  ASSERT_EQ(kiln_module_table_count(), (size_t)0);
  kiln_module_table_set_limit(256);
}

/* A compile and its memo; the memo must be there. */
static kiln_module *compile_memo(const char *src, const kiln_compile_opts *opts,
                                 kiln_compile_memo **memo) {
  kiln_module *m = NULL;
  kiln_status s = kiln_module_from_source_memo(src, opts, &m, memo);
  if (s != KILN_OK) FAIL("compile failed: %s: %s", kiln_status_name(s), kiln_last_error());
  return m;
}

/* The module a memo recalls, or NULL; a recall is a memory hit and says so in the report. */
static kiln_module *recall(const kiln_compile_memo *memo) {
  kiln_cache_stats before, after;
  kiln_cache_get_stats(&before);
  kiln_module *m = NULL;
  int hit = kiln_module_recall(memo, &m);
  kiln_cache_get_stats(&after);
  ASSERT_EQ(hit, m != NULL);
  ASSERT_EQ(after.memory_hits, before.memory_hits + (hit ? 1 : 0));
  if (hit) {
    kiln_compile_report r;
    kiln_compile_last_report(&r);
    ASSERT_EQ(r.origin, KILN_ORIGIN_MEMORY);
  }
  return m;
}

TEST(compile_memo_recalls_only_what_a_compile_would_give) {
  ASSERT_EQ(kiln_module_recall(NULL, &(kiln_module *){NULL}), 0);
  kiln_compile_memo_free(NULL);
  unsetenv("KILN_LINEINFO");
  setenv("KILN_ARCH", "sm_80", 1);
  kiln_compile_memo *memo = NULL;
  kiln_module *m = compile_memo(multiply_src, NULL, &memo);
  ASSERT(memo != NULL);
  kiln_compile_report first;
  kiln_compile_last_report(&first);
  kiln_module *again = recall(memo);
  ASSERT(again == m);
  kiln_compile_report r;
  kiln_compile_last_report(&r);
  ASSERT_STR_EQ(r.key, first.key);
  kiln_module_free(again);
  /* What the compile read from the environment, changed: the arch it chose... */
  setenv("KILN_ARCH", "sm_90", 1);
  ASSERT(recall(memo) == NULL);
  kiln_module *m90 = compile_ok(multiply_src, NULL);
  ASSERT_STR_EQ(kiln_module_arch(m90), "sm_90");
  kiln_module_free(m90);
  setenv("KILN_ARCH", "sm_80", 1);
  ASSERT((again = recall(memo)) == m);
  kiln_module_free(again);
  /* ... and the default -lineinfo. */
  setenv("KILN_LINEINFO", "0", 1);
  ASSERT(recall(memo) == NULL);
  unsetenv("KILN_LINEINFO");
  ASSERT((again = recall(memo)) == m);
  kiln_module_free(again);
  /* Names that only begin as theirs are other variables. */
  setenv("KILN_ARCHS", "sm_90", 1);
  setenv("KILN_LINEINFO_", "0", 1);
  ASSERT((again = recall(memo)) == m);
  kiln_module_free(again);
  unsetenv("KILN_ARCHS");
  unsetenv("KILN_LINEINFO_");

  /* An arch the options name, and -lineinfo given: the environment no longer matters. */
  const char *o[] = {"-lineinfo"};
  kiln_compile_opts named = {.arch = "sm_90", .options = o, .n_options = 1};
  kiln_compile_memo *memo90 = NULL;
  kiln_module *n = compile_memo(multiply_src, &named, &memo90);
  ASSERT(memo90 != NULL && n != m);
  setenv("KILN_ARCH", "sm_75", 1);
  setenv("KILN_LINEINFO", "0", 1);
  ASSERT((again = recall(memo90)) == n);
  kiln_module_free(again);
  unsetenv("KILN_LINEINFO");
  setenv("KILN_ARCH", "sm_80", 1);

  /* Device debugging turned on: a different build (-G, debug sections), never the memo's. */
  kiln_compile_set_device_debug(1);
  ASSERT(recall(memo) == NULL);
  kiln_module *debug = compile_ok(multiply_src, NULL);
  ASSERT(debug != m);
  size_t ptx_size = 0;
  ASSERT(strstr(kiln_module_ptx(debug, &ptx_size), ".debug_info") != NULL);
  ASSERT(strstr(kiln_module_ptx(m, &ptx_size), ".debug_info") == NULL);
  kiln_module_free(debug);
  kiln_compile_set_device_debug(0);
  ASSERT((again = recall(memo)) == m);
  kiln_module_free(again);

  /* The table's bound holds: a memo holds no module, and one freed is not recalled. */
  kiln_module_free(n);
  kiln_module_free(m);
  ASSERT_EQ(kiln_module_table_set_limit(0), (size_t)256);
  ASSERT_EQ(kiln_module_table_count(), (size_t)0);
  ASSERT(recall(memo) == NULL);
  ASSERT(recall(memo90) == NULL);
  kiln_module_table_set_limit(256);
  kiln_compile_memo_free(memo);
  kiln_compile_memo_free(memo90);

  /* A source that reaches a header file gets no memo: its key depends on the working folder
   * and its freshness on the file. */
  char dir[] = "/tmp/kiln-memo-XXXXXX", path[64];
  ASSERT(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/value.h", dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT(fd >= 0);
  ASSERT_EQ(write(fd, "#define VALUE 3\n", 16), 16);
  close(fd);
  const char *inc[] = {dir};
  kiln_compile_opts with_dir = {.include_dirs = inc, .n_include_dirs = 1};
  kiln_compile_memo *none = (kiln_compile_memo *)&none;
  m = compile_memo("#include \"value.h\"\n__global__ void k(int *p) { *p = VALUE; }\n", &with_dir,
                   &none);
  ASSERT(none == NULL);
  kiln_module_free(m);
  unlink(path);
  rmdir(dir);
}

TEST(lookup_plain_mangled_and_extern_c) {
  kiln_compile_opts opts = {.arch = "sm_90"};
  kiln_module *m = compile_ok("extern \"C\" __global__ void plain(int *p) { *p = 1; }\n"
                              "__global__ void cpp(int *p, unsigned n) { *p = n; }\n"
                              "namespace ns { __global__ void inner(double *p) { *p = 2; } }\n",
                              &opts);
  kiln_function *f = NULL;
  ASSERT_OK(kiln_module_get_function(m, "plain", &f));
  ASSERT_STR_EQ(kiln_function_name(f), "plain");
  ASSERT_EQ(kiln_function_params(f)[0].cls, KILN_PARAM_B64); /* extern "C": no types */
  ASSERT_OK(kiln_module_get_function(m, "cpp", &f));
  ASSERT_STR_EQ(kiln_function_name(f), "_Z3cppPij");
  ASSERT_EQ(kiln_function_params(f)[1].cls, KILN_PARAM_U32);
  kiln_function *g = NULL;
  ASSERT_OK(kiln_module_get_function(m, "_Z3cppPij", &g));
  ASSERT(f == g);
  ASSERT_OK(kiln_module_get_function(m, "ns::inner", &f));
  ASSERT_OK(kiln_module_get_function(m, "inner", &g));
  ASSERT(f == g);
  kiln_module_free(m);
}

TEST(lookup_overloads_are_ambiguous) {
  kiln_compile_opts opts = {.arch = "sm_90"};
  kiln_module *m = compile_ok("__global__ void k(int *p) { *p = 1; }\n"
                              "__global__ void k(float *p) { *p = 1; }\n",
                              &opts);
  kiln_function *f = NULL;
  ASSERT_STATUS(kiln_module_get_function(m, "k", &f), KILN_ERROR_AMBIGUOUS);
  ASSERT_CONTAINS(kiln_last_error(), "_Z1kPi");
  ASSERT_CONTAINS(kiln_last_error(), "_Z1kPf");
  ASSERT_OK(kiln_module_get_function(m, "_Z1kPf", &f));
  kiln_module_free(m);
}

TEST(lookup_unknown_lists_kernels) {
  kiln_compile_opts opts = {.arch = "sm_90"};
  kiln_module *m = compile_ok(multiply_src, &opts);
  kiln_function *f = NULL;
  ASSERT_STATUS(kiln_module_get_function(m, "multiply", &f), KILN_ERROR_NOT_FOUND);
  ASSERT_CONTAINS(kiln_last_error(), "'multiply'");
  ASSERT_CONTAINS(kiln_last_error(), "multiply_them");
  ASSERT(f == NULL);
  kiln_module_free(m);
}

TEST(lookup_name_expression) {
  const char *names[] = {"axpy<float>", "axpy<double>"};
  kiln_compile_opts opts = {.arch = "sm_90", .name_expressions = names, .n_name_expressions = 2};
  kiln_module *m = compile_ok("template <typename T>\n"
                              "__global__ void axpy(T a, const T *x, T *y, int n)\n"
                              "{ int i = threadIdx.x; if (i < n) y[i] += a * x[i]; }\n",
                              &opts);
  kiln_function *f = NULL, *d = NULL;
  ASSERT_OK(kiln_module_get_function(m, "axpy<float>", &f));
  ASSERT_OK(kiln_module_get_function(m, "axpy<double>", &d));
  ASSERT(f != d);
  ASSERT_EQ(kiln_function_params(f)[0].cls, KILN_PARAM_F32);
  ASSERT_EQ(kiln_function_params(d)[0].cls, KILN_PARAM_F64);
  ASSERT_STATUS(kiln_module_get_function(m, "axpy", &f), KILN_ERROR_AMBIGUOUS);
  kiln_module_free(m);
}

TEST(no_driver_is_a_status) {
  setenv("KILN_CUDA_PATH", "/nonexistent/libcuda.so.1", 1);
  int n = -1;
  ASSERT_STATUS(kiln_device_count(&n), KILN_ERROR_NO_DRIVER);
  ASSERT_CONTAINS(kiln_last_error(), "no CUDA driver could be loaded");
  ASSERT_EQ(n, 0);
  kiln_deviceptr p = 1;
  ASSERT_STATUS(kiln_mem_alloc(16, &p), KILN_ERROR_NO_DRIVER);
  ASSERT_EQ(p, 0);
  /* Compiling still works. */
  kiln_module *m = compile_ok(multiply_src, NULL);
  kiln_module_free(m);
}

/* A kiln_wait_fn that counts its calls and never waits. */
static kiln_status count_wait(void *arg, kiln_stream stream) {
  (void)stream;
  ++*(int *)arg;
  return KILN_ERROR_INTERRUPTED;
}

/* kiln_compile_opts' counts, arrays and flags as kiln.h allows them, or KILN_ERROR_INVALID naming
 * the field: never a count below 0 taken as a huge one, a NULL array read, nor a flag ignored. */
TEST(compile_options_counts_and_arrays_are_checked) {
  static const char *src = "__global__ void k(int *p) { p[0] = 1; }";
  const char *dirs[] = {"/tmp", NULL}, *names[] = {"a.h"}, *texts[] = {NULL};
  struct {
    kiln_compile_opts opts;
    const char *says;
  } cases[] = {
      {{.arch = "sm_90", .n_include_dirs = -7}, "n_include_dirs is -7"},
      {{.arch = "sm_90", .n_options = -1}, "n_options is -1"},
      {{.arch = "sm_90", .n_name_expressions = -3}, "n_name_expressions is -3"},
      {{.arch = "sm_90", .n_options = 5}, "n_options is 5, but its array is NULL"},
      {{.arch = "sm_90", .n_headers = 1, .header_names = names},
       "n_headers (header_sources) is 1, but its array is NULL"},
      {{.arch = "sm_90", .include_dirs = dirs, .n_include_dirs = 2}, "include_dirs[1] is NULL"},
      {{.arch = "sm_90", .header_names = names, .header_sources = texts, .n_headers = 1},
       "header 0 has no source"},
      {{.arch = "sm_90", .flags = KILN_COMPILE_NO_CACHE | 0x40u},
       "flags 0x41 has bits no KILN_COMPILE_* names (0x40)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    kiln_module *m = NULL;
    ASSERT_STATUS(kiln_module_from_source(src, &cases[i].opts, &m), KILN_ERROR_INVALID);
    ASSERT_CONTAINS(kiln_last_error(), cases[i].says);
    ASSERT(m == NULL);
  }
}

TEST(launch_shape_checked_before_the_device) {
  setenv("KILN_CUDA_PATH", "/nonexistent/libcuda.so.1", 1); /* any device use would fail */
  kiln_compile_opts opts = {.arch = "sm_90"};
  kiln_module *m = compile_ok(multiply_src, &opts);
  kiln_function *f = NULL;
  ASSERT_OK(kiln_module_get_function(m, "multiply_them", &f));
  uint64_t ptr = 0;
  int n = 0;
  void *params[] = {&ptr, &ptr, &ptr, &n};
  kiln_launch_config zero_grid = {.grid = {0, 1, 1}, .block = {1, 1, 1}};
  ASSERT_STATUS(kiln_function_launch(f, &zero_grid, params), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "grid.x is 0");
  /* with the driver's CUresult for it, named without a driver */
  ASSERT_EQ(kiln_last_cuda_result(), 1);
  ASSERT_STR_EQ(kiln_cuda_result_name(kiln_last_cuda_result()), "CUDA_ERROR_INVALID_VALUE");
  kiln_launch_config big_block = {.grid = {1, 1, 1}, .block = {2048, 1, 1}};
  ASSERT_STATUS(kiln_function_launch(f, &big_block, params), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "1024");
  ASSERT_EQ(kiln_last_cuda_result(), 1);
  kiln_launch_config fine = {.grid = {1, 1, 1}, .block = {32, 1, 1}};
  ASSERT_STATUS(kiln_function_launch(f, &fine, params), KILN_ERROR_NO_DRIVER);
  /* The same checks without a launch, and before a call's wait could be asked for. */
  ASSERT_STATUS(kiln_function_check_launch(f, &zero_grid), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "grid.x is 0");
  ASSERT_STATUS(kiln_function_check_launch(f, &fine), KILN_ERROR_NO_DRIVER);
  int waits = 0;
  float out[4];
  kiln_transfer t = {0, KILN_OUT, out, sizeof out};
  ASSERT_STATUS(kiln_function_call_waiting(f, &zero_grid, params, &t, 1, NULL, count_wait, &waits),
                KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_function_call_waiting(f, &fine, params, &t, 1, NULL, count_wait, &waits),
                KILN_ERROR_NO_DRIVER);
  ASSERT_STATUS(kiln_function_call_async_waiting(f, &fine, params, &t, 1, count_wait, &waits),
                KILN_ERROR_NO_DRIVER);
  ASSERT_EQ(waits, 0);
  /* Transfers kiln.h does not allow, refused before any copy: a direction that is none of the
   * three, and a size whose rounding or sum would wrap around. */
  kiln_transfer odd = {0, (kiln_transfer_dir)5, out, sizeof out};
  ASSERT_STATUS(kiln_function_call(f, &fine, params, &odd, 1, NULL), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "transfer 0 is malformed");
  kiln_transfer huge[2] = {{0, KILN_IN, out, SIZE_MAX}, {1, KILN_IN, out, SIZE_MAX / 2 + 1}};
  ASSERT_STATUS(kiln_function_call(f, &fine, params, huge, 1, NULL), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "more than memory holds");
  huge[0].nbytes = SIZE_MAX / 2 + 1;
  ASSERT_STATUS(kiln_function_call(f, &fine, params, huge, 2, NULL), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "transfer 1's");
  /* Whether the GPU reaches an address needs the driver; 0 needs nothing. */
  int reachable = -1;
  ASSERT_OK(kiln_pointer_reachable(0, &reachable));
  ASSERT_EQ(reachable, 1);
  ASSERT_STATUS(kiln_pointer_reachable((kiln_deviceptr)(uintptr_t)out, &reachable),
                KILN_ERROR_NO_DRIVER);
  kiln_module_free(m);
}

/* What nvcc's -keep leaves is written only into fresh or regular files: a FIFO planted at one
 * of the names is refused at once (opening it to write would wait for a reader), a symlink is
 * not written through. */
TEST(module_save_never_waits_on_a_fifo_nor_follows_a_symlink) {
  kiln_compile_opts opts = {.arch = "sm_90"};
  kiln_module *m = compile_ok(multiply_src, &opts);
  char dir[] = "/tmp/kiln-keep-XXXXXX", path[256], target[256];
  ASSERT(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/kernel.ptx", dir);
  ASSERT_EQ(mkfifo(path, 0600), 0);
  ASSERT_STATUS(kiln_module_save(m, multiply_src, dir), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "not a regular file");
  unlink(path);
  snprintf(target, sizeof target, "%s/elsewhere", dir);
  FILE *f = fopen(target, "w");
  ASSERT(f != NULL);
  fputs("keep me", f);
  fclose(f);
  ASSERT_EQ(symlink(target, path), 0);
  ASSERT_STATUS(kiln_module_save(m, multiply_src, dir), KILN_ERROR_INVALID);
  char buf[16] = {0};
  f = fopen(target, "r");
  ASSERT(f != NULL);
  ASSERT(fread(buf, 1, sizeof buf - 1, f) == 7);
  fclose(f);
  ASSERT_STR_EQ(buf, "keep me");
  unlink(path);
  ASSERT_OK(kiln_module_save(m, multiply_src, dir)); /* and a plain folder takes them all */
  struct stat st;
  ASSERT_EQ(stat(path, &st), 0);
  ASSERT(S_ISREG(st.st_mode) && st.st_size > 100);
  const char *names[] = {"kernel.cu", "kernel.ptx", "kernel.cubin", "kernel.log", "elsewhere"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    unlink(path);
  }
  rmdir(dir);
  kiln_module_free(m);
}

TEST(module_serialize_round_trip_and_damage) {
  kiln_compile_opts opts = {.arch = "sm_90"};
  kiln_module *m = compile_ok(multiply_src, &opts);
  unsigned char *data = NULL;
  size_t size = 0;
  ASSERT_OK(kiln_module_serialize(m, &data, &size));
  ASSERT(data != NULL);
  ASSERT(size > 88);
  kiln_module *back = NULL;
  ASSERT_OK(kiln_module_deserialize(data, size, &back));
  size_t a = 0, b = 0;
  const void *cubin = kiln_module_cubin(m, &a), *cubin_back = kiln_module_cubin(back, &b);
  ASSERT_EQ(a, b);
  ASSERT(memcmp(cubin, cubin_back, a) == 0);
  ASSERT_STR_EQ(kiln_module_ptx(back, NULL), kiln_module_ptx(m, NULL));
  ASSERT_STR_EQ(kiln_module_arch(back), "sm_90");
  kiln_function *f = NULL;
  ASSERT_OK(kiln_module_get_function(back, "multiply_them", &f));
  ASSERT_EQ(kiln_function_param_count(f), 4);
  ASSERT_EQ(kiln_function_params(f)[3].cls, KILN_PARAM_I32);
  kiln_module_free(back);
  /* One flipped byte anywhere in the body, a short read, nothing: refused, never loaded. */
  data[size - 1] ^= 1;
  ASSERT_STATUS(kiln_module_deserialize(data, size, &back), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "checksum");
  ASSERT(back == NULL);
  ASSERT_STATUS(kiln_module_deserialize(data, size - 7, &back), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_module_deserialize(NULL, 0, &back), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "too few");
  free(data);
  kiln_module_free(m);
}
