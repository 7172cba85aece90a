/* What a source written for nvcc needs of the compile: nvcc's options, the target given as arch
 * and code, a cache folder of its own or none, the files nvcc keeps, the C headers NVRTC lacks,
 * and relocatable device code linked with the device runtime. NVRTC (and nvJitLink) need no
 * GPU: all but the last run everywhere. */
#include "runner.h"

#include "../../engine/src/dialect.h"
#include "../../engine/src/nvrtc.h"
#include "../../engine/src/stdheaders.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

static kiln_module *compile_ok(const char *src, const kiln_compile_opts *opts) {
  kiln_module *m = NULL;
  kiln_status s = kiln_module_from_source(src, opts, &m);
  if (s != KILN_OK)
    FAIL("compile failed: %s: %s\n%s", kiln_status_name(s), kiln_last_error(),
         m ? kiln_module_log(m) : "");
  return m;
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  ASSERT(f != NULL);
  fputs(text, f);
  fclose(f);
}

/* Files under dir and its subfolders. */
static int count_files(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat st;
    if (stat(path, &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) n += count_files(path);
    else if (strcmp(e->d_name, "stats") && strcmp(e->d_name, "locks") &&
             strncmp(e->d_name, "nvrtc-", 6))
      n++;
  }
  closedir(d);
  return n;
}

static const char *tiny_src = "__global__ void k(int *p) { p[threadIdx.x] = N; }\n";

TEST(compile_translates_nvcc_options) {
  char dir[] = "/tmp/kiln-nvcc-XXXXXX";
  ASSERT(mkdtemp(dir));
  char header[4200];
  snprintf(header, sizeof header, "%s/scale.h", dir);
  write_file(header, "#define SCALE 3\n");
  const char *src = "#include \"scale.h\"\n"
                    "constexpr int twice(int x) { return 2 * x; }\n"
                    "__global__ void k(int *p) { p[threadIdx.x] = twice(N) * SCALE; }\n";
  char n_def[24]; /* code new to ptxas, so that it runs and speaks (kiln_test_nonce) */
  snprintf(n_def, sizeof n_def, "N=%u", kiln_test_nonce() % 1000000);
  const char *options[] = {"-O3",
                           "-D",
                           n_def,
                           "-I",
                           dir,
                           "-Xptxas",
                           "-v",
                           "--expt-relaxed-constexpr",
                           "-lineinfo",
                           "-arch",
                           "sm_80",
                           "-Wno-deprecated-gpu-targets",
                           "-m64",
                           "-g",
                           "-lcudadevrt",
                           "-use_fast_math",
                           "-Xcompiler",
                           "-fPIC",
                           "--keep",
                           "-std=c++17",
                           "-e",
                           "k",
                           "--entries=k",
                           "-allow-unsupported-compiler",
                           "--default-stream",
                           "per-thread",
                           "-cudart=static",
                           "-lcurand",
                           "-lcublas",
                           "-noeh",
                           "-Xarchive",
                           "-x",
                           "-nohdinitlist"};
  kiln_compile_opts opts = {.options = options, .n_options = (int)TEST_COUNT(options)};
  kiln_module *m = compile_ok(src, &opts);
  /* -arch sm_80 is read as the arch, where no device's follows it (PyCUDA's order) */
  char device_arch[16];
  int n_devices = 0, gpu = kiln_device_count(&n_devices) == KILN_OK && n_devices > 0;
  ASSERT_OK(kiln_compile_default_arch(device_arch, sizeof device_arch));
  ASSERT_STR_EQ(kiln_module_arch(m), gpu ? device_arch : "sm_80");
  ASSERT_CONTAINS(kiln_module_log(m), "Used"); /* ptxas -v speaks in the log */
  kiln_module_free(m);
  kiln_test_remove_tree(dir);

  /* ptxas's options as nvcc takes them, a list split at commas: ptxas would read "-O3,-v" as
   * -O with the number "3,-v". nvcc puts each on a shell's command line, so blanks part them
   * too and double quotes go: ptxas would read "-v", quotes and all, as a file's name. */
  const char *lists[][3] = {{"-DN=1", "-Xptxas", "-O3,-v"},
                            {"-DN=1", "--ptxas-options=-v,,-O2", ""},
                            {"-DN=1", "-Xptxas=-O1,-v", ""},
                            {"-DN=1", "-Xptxas=\"-v\"", ""},
                            {"-DN=1", "-Xptxas", " -O2  \"-v\"\t"}};
  for (size_t i = 0; i < TEST_COUNT(lists); i++) {
    char n_new[24];
    snprintf(n_new, sizeof n_new, "-DN=%u", kiln_test_nonce() % 1000000);
    const char *list[3] = {n_new, lists[i][1], lists[i][2]};
    kiln_compile_opts l = {.arch = "sm_90", .options = list, .n_options = list[2][0] ? 3 : 2};
    m = compile_ok(tiny_src, &l);
    ASSERT_CONTAINS(kiln_module_log(m), "Used");
    kiln_module_free(m);
  }
  const char *unclosed[] = {"-Xptxas", "\"-v"};
  kiln_compile_opts open_quote = {.arch = "sm_90", .options = unclosed, .n_options = 2};
  ASSERT_STATUS(kiln_module_from_source(tiny_src, &open_quote, &m), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "open a \" they do not close");

  /* the target: -gencode, code=, and what disagrees */
  const char *gencode[] = {"-DN=1", "-gencode", "arch=compute_80,code=sm_86"};
  kiln_compile_opts g = {.options = gencode, .n_options = 3};
  m = compile_ok(tiny_src, &g);
  ASSERT_STR_EQ(kiln_module_arch(m), "sm_86");
  kiln_module_free(m);
  const char *n1[] = {"-DN=1"};
  kiln_compile_opts code = {.arch = "compute_80", .code = "sm_90", .options = n1, .n_options = 1};
  m = compile_ok(tiny_src, &code);
  ASSERT_STR_EQ(kiln_module_arch(m), "sm_90");
  kiln_module_free(m);
  kiln_compile_opts only_code = {.code = "sm_89", .options = n1, .n_options = 1};
  m = compile_ok(tiny_src, &only_code);
  ASSERT_STR_EQ(kiln_module_arch(m), "sm_89");
  kiln_module_free(m);
  kiln_compile_opts older = {.arch = "compute_90", .code = "sm_80", .options = n1, .n_options = 1};
  ASSERT_STATUS(kiln_module_from_source(tiny_src, &older, &m), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "code 'sm_80' is older than arch 'compute_90'");
  kiln_compile_opts several = {.arch = "sm_80,sm_90", .options = n1, .n_options = 1};
  ASSERT_STATUS(kiln_module_from_source(tiny_src, &several, &m), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "names several targets");
  /* an -arch of the options gives way to .arch, as PyCUDA's nvcc command line ends with it */
  const char *twice[] = {"-DN=1", "-arch=sm_80"};
  kiln_compile_opts follows = {.arch = "sm_90", .options = twice, .n_options = 2};
  m = compile_ok(tiny_src, &follows);
  ASSERT_STR_EQ(kiln_module_arch(m), "sm_90");
  kiln_module_free(m);
  const char *pair[] = {"-DN=1", "-arch=sm_80", "-code=sm_86"};
  kiln_compile_opts disagree = {.arch = "sm_90", .options = pair, .n_options = 3};
  ASSERT_STATUS(kiln_module_from_source(tiny_src, &disagree, &m), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "the arch is given twice, as 'sm_90' and 'sm_80'");
  const char *two_gencodes[] = {"-gencode=arch=compute_80,code=sm_80",
                                "-gencode=arch=compute_90,code=sm_90"};
  kiln_compile_opts gg = {.options = two_gencodes, .n_options = 2};
  ASSERT_STATUS(kiln_module_from_source(tiny_src, &gg, &m), KILN_ERROR_INVALID);
  const char *rdc_bad[] = {"-rdc=maybe"};
  kiln_compile_opts rb = {.arch = "sm_90", .options = rdc_bad, .n_options = 1};
  ASSERT_STATUS(kiln_module_from_source(tiny_src, &rb, &m), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "-rdc takes true or false, not 'maybe'");
  /* an option NVRTC does not know and kiln does not translate: NVRTC's refusal names it */
  const char *unknown[] = {"--no-such-option"};
  kiln_compile_opts u = {.arch = "sm_90", .options = unknown, .n_options = 1};
  ASSERT_STATUS(kiln_module_from_source(tiny_src, &u, &m), KILN_ERROR_COMPILE);
  ASSERT(m != NULL);
  ASSERT_CONTAINS(kiln_module_log(m), "--no-such-option");
  kiln_module_free(m);
}

TEST(compile_cache_dir_and_no_cache) {
  char own[] = "/tmp/kiln-own-cache-XXXXXX";
  ASSERT(mkdtemp(own));
  const char *env_dir = getenv("KILN_CACHE_DIR");
  const char *n2[] = {"-DN=2"};
  kiln_compile_opts opts = {.arch = "sm_90", .options = n2, .n_options = 1, .cache_dir = own};
  kiln_module *m = compile_ok(tiny_src, &opts);
  kiln_module_free(m);
  ASSERT_EQ(count_files(own), 1);
  ASSERT_EQ(count_files(env_dir), 0);
  /* No cache: compiled, nothing stored anywhere. */
  const char *n3[] = {"-DN=3"};
  kiln_cache_stats before, after;
  kiln_cache_get_stats(&before);
  kiln_compile_opts none = {.arch = "sm_90",
                            .options = n3,
                            .n_options = 1,
                            .flags = KILN_COMPILE_NO_CACHE,
                            .cache_dir = own};
  m = compile_ok(tiny_src, &none);
  kiln_module_free(m);
  kiln_cache_get_stats(&after);
  ASSERT_EQ(after.compiles, before.compiles + 1);
  ASSERT_EQ(after.stores, before.stores);
  ASSERT_EQ(count_files(own), 1);
  ASSERT_EQ(count_files(env_dir), 0);
  /* The usual folder is the environment's again. */
  const char *n4[] = {"-DN=4"};
  kiln_compile_opts usual = {.arch = "sm_90", .options = n4, .n_options = 1};
  m = compile_ok(tiny_src, &usual);
  kiln_module_free(m);
  ASSERT_EQ(count_files(env_dir), 1);
  kiln_test_remove_tree(own);
}

TEST(module_save_writes_what_nvcc_keeps) {
  char dir[] = "/tmp/kiln-keep-XXXXXX";
  ASSERT(mkdtemp(dir));
  const char *n5[] = {"-DN=5"};
  kiln_compile_opts opts = {.arch = "sm_90", .options = n5, .n_options = 1};
  kiln_module *m = compile_ok(tiny_src, &opts);
  ASSERT_OK(kiln_module_save(m, tiny_src, dir));
  const char *names[] = {"kernel.cu", "kernel.ptx", "kernel.cubin", "kernel.log"};
  for (size_t i = 0; i < TEST_COUNT(names); i++) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    struct stat st;
    if (stat(path, &st) != 0) FAIL("%s was not written", path);
    if (i < 3 && st.st_size == 0) FAIL("%s is empty", path);
  }
  ASSERT_STATUS(kiln_module_save(m, NULL, "/nonexistent/folder"), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "/nonexistent/folder/kernel.ptx cannot be written");
  kiln_module_free(m);
  kiln_test_remove_tree(dir);
}

static const char *std_headers_src =
    "#include <stdio.h>\n#include <stdlib.h>\n#include <math.h>\n#include <stdint.h>\n"
    "#include <assert.h>\n#include <limits.h>\n#include <float.h>\n#include <stddef.h>\n"
    "#include <string.h>\n#include <cstdio>\n#include <cstdlib>\n#include <cmath>\n"
    "#include <cstdint>\n#include <cassert>\n#include <climits>\n#include <cfloat>\n"
    "#include <cstddef>\n#include <cstring>\n"
    "__constant__ float inf = INFINITY;\n"
    "__global__ void k(float *p, double *d, int *q) {\n"
    "  int32_t a = INT32_MAX; std::uint64_t b = UINT64_MAX;\n"
    "  p[0] = std::sin(p[1]) + sinf(p[2]) + (float)M_PI + FLT_MAX + NAN + HUGE_VALF + inf;\n"
    "  d[0] = std::pow(d[1], 2.0) + HUGE_VAL + DBL_EPSILON;\n"
    "  q[0] = std::isnan(p[0]) + INT_MAX + CHAR_BIT + (int)a + (int)b + std::abs(q[1]);\n"
    "  assert(q[0] > 0); printf(\"%d\\n\", q[0]); std::printf(\"\\n\");\n"
    "  int *m = (int *)std::malloc(16); std::free(m); std::memcpy(q, q + 1, 4);\n"
    "  q[2] = (int)offsetof(float2, y) + EXIT_SUCCESS + EOF;\n"
    "}\n";

TEST(compile_supplies_the_c_headers_nvrtc_lacks) {
  const char *dialects[] = {NULL, "-std=c++11", "-std=c++14", "-std=c++17", "-std=c++20"};
  for (size_t i = 0; i < TEST_COUNT(dialects); i++) {
    kiln_compile_opts opts = {.arch = "sm_90", .options = &dialects[i], .n_options = !!dialects[i]};
    kiln_module *m = compile_ok(std_headers_src, &opts);
    if (kiln_module_log(m)[0])
      FAIL("%s: the log is not empty: %s", dialects[i], kiln_module_log(m));
    ASSERT_CONTAINS(kiln_module_ptx(m, NULL), "__assertfail");
    kiln_module_free(m);
  }
  /* NDEBUG turns assert off, as the C library's does. */
  const char *ndebug[] = {"-DNDEBUG"};
  kiln_compile_opts off = {.arch = "sm_90", .options = ndebug, .n_options = 1};
  kiln_module *m =
      compile_ok("#include <assert.h>\n__global__ void k(int *p) { assert(p[0]); }\n", &off);
  ASSERT(!strstr(kiln_module_ptx(m, NULL), "__assertfail"));
  kiln_module_free(m);
  /* The toolkit's headers compile as they did, beside kiln's and without warnings. */
  const char *toolkit =
      "#include <stdint.h>\n#include <limits.h>\n#include <cuda/std/cstdint>\n"
      "#include <cuda/std/climits>\n#include <cuda/std/type_traits>\n#include <cuda/std/limits>\n"
      "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n#include <cooperative_groups.h>\n"
      "#include <cuda/atomic>\n#include <math.h>\n#include <stdio.h>\n"
      "__global__ void k(cuda::std::uint32_t *p, __half h) { p[0] = (uint32_t)__half2float(h) + "
      "cuda::std::numeric_limits<int32_t>::max() + INT_MAX; }\n";
  kiln_compile_opts sm90 = {.arch = "sm_90"};
  m = compile_ok(toolkit, &sm90);
  if (kiln_module_log(m)[0]) FAIL("the log is not empty: %s", kiln_module_log(m));
  kiln_module_free(m);
  /* A stdio.h of the user's own wins, as it would under nvcc. */
  char dir[] = "/tmp/kiln-stdio-XXXXXX";
  ASSERT(mkdtemp(dir));
  char path[4200];
  snprintf(path, sizeof path, "%s/stdio.h", dir);
  write_file(path, "#define USERS_OWN_STDIO 1\n");
  const char *dirs[] = {dir};
  kiln_compile_opts own = {.arch = "sm_90", .include_dirs = dirs, .n_include_dirs = 1};
  m = compile_ok("#include <stdio.h>\n#if !USERS_OWN_STDIO\n#error kiln's stdio.h was used\n"
                 "#endif\n__global__ void k(int *p) {}\n",
                 &own);
  kiln_module_free(m);
  kiln_test_remove_tree(dir);
}

/* 1 when name is one of kiln's own C headers. */
static int is_kilns_header(const char *name) {
  if (strcmp(name, KILN__NVCC_HOST_HEADER) == 0) return 1;
  for (int i = 0; i < kiln__stdheaders_count(); i++)
    if (strcmp(kiln__stdheaders_name(i), name) == 0) return 1;
  return 0;
}

/* A kernel written for nvcc uses what nvcc's implicit host headers define without an #include
 * of its own (uint, int32_t, u_int64_t, std::size_t, M_PI, ...); it compiles here as it did
 * there, with no warning, beside a typedef of its own, <math.h> and <stdint.h> included after,
 * an -include of its own, and CUB (whose libcu++ defines int8_t to int32_t again). */
TEST(compile_sees_the_names_nvcc_gives_without_an_include) {
  const char *src =
      "typedef unsigned int uint;\n"
      "typedef int int32_t;\n"
      "__global__ void k(float *p, uint n, ushort s, ulong l, u_char c, u_short us, u_int ui,\n"
      "                  u_long ul, int8_t i8, int16_t i16, int32_t i32, u_int8_t u8,\n"
      "                  u_int16_t u16, u_int32_t u32, u_int64_t u64, std::size_t z,\n"
      "                  std::ptrdiff_t pd, ssize_t ss, off_t o, quad_t q, u_quad_t uq) {\n"
      "  p[0] = (float)M_PI + M_E + M_SQRT2 + M_1_PI + HUGE_VALF + MAXFLOAT;\n"
      "  p[1] = (float)HUGE_VAL + n + s + l + c + us + ui + ul + RAND_MAX + EXIT_SUCCESS;\n"
      "  p[2] = i8 + i16 + i32 + u8 + u16 + u32 + u64 + z + pd + ss + o + q + uq;\n"
      "  p[3] = std::sqrt(p[4]) + std::abs(p[5]) + std::isnan(p[6]) + std::pow(p[7], 2.0f) +\n"
      "         std::labs(-3l) + std::abs(-3) + std::float_t(1) + (std::nullptr_t() == nullptr);\n"
      "  int *h = (int *)std::malloc(4); std::free(h);\n"
      "  p[4] = INFINITY + NAN + (int64_t)INT_MAX + INT_MIN + UINT_MAX + CHAR_BIT + SCHAR_MIN +\n"
      "         CHAR_MAX + SHRT_MAX + USHRT_MAX + LONG_MAX + ULONG_MAX + LLONG_MIN + ULLONG_MAX;\n"
      "}\n"
      "static_assert(sizeof(int64_t) == 8 && LONG_MAX == LLONG_MAX, \"64-bit long\");\n"
      "struct two { int a; float b; };\n"
      "static_assert(offsetof(two, b) == 4, \"offsetof is a constant, as nvcc's is\");\n"
      "#include <math.h>\n#include <stdlib.h>\n#include <stdint.h>\n#include <cstddef>\n"
      "#include <cmath>\n#include <cstdlib>\n#include <stddef.h>\n#include <limits.h>\n"
      "#include <climits>\n"
      "__global__ void g(float *p) { p[0] = (float)M_PI_2 + EXIT_FAILURE + INFINITY + NAN +\n"
      "  std::sqrt(p[1]) + std::labs(2l) + offsetof(two, b); }\n";
  const char *own[] = {"-include", "mine.h"}, *hn[] = {"mine.h"}, *hs[] = {"#define MINE 2\n"};
  kiln_compile_opts opts = {.arch = "sm_90",
                            .options = own,
                            .n_options = 2,
                            .header_names = hn,
                            .header_sources = hs,
                            .n_headers = 1};
  for (int with_own = 0; with_own < 2; with_own++) {
    kiln_module *m = compile_ok(src, with_own ? &opts : &(kiln_compile_opts){.arch = "sm_90"});
    if (kiln_module_log(m)[0]) FAIL("the log is not empty: %s", kiln_module_log(m));
    kiln_module_free(m);
  }
  kiln_module *m = compile_ok("__global__ void k(int *p) { p[0] = MINE; }\n", &opts);
  /* The header adds no module variable, and CUB (libcu++'s <cuda/std/cmath>, which defines
   * INFINITY and NAN its own way) compiles after it without a warning. */
  ASSERT(!strstr(kiln_module_ptx(m, NULL), ".global .align"));
  kiln_module_free(m);
  /* The limits before CUB, libcu++'s <cuda/std/cmath> and <climits> (which define them and
   * INFINITY and NAN whatever came before) and <stdint.h>: no warning. */
  const char *libcu_after[] = {"#include <cub/block/block_reduce.cuh>\n#include <cuda/std/ctime>\n"
                               "__device__ float root(float x) { return cuda::std::sqrt(x); }\n",
                               "#include <cuda/std/cmath>\n#include <cuda/std/climits>\n"
                               "__device__ float root(float x) { return cuda::std::sqrt(x); }\n",
                               "#include <stdint.h>\n#include <limits.h>\n#include <math.h>\n"
                               "__device__ float root(float x) { return sqrtf(x); }\n"};
  for (size_t i = 0; i < TEST_COUNT(libcu_after); i++) {
    char text[1024];
    snprintf(text, sizeof text,
             "__device__ float before(float x) { return x < 0 ? x : INT_MAX - CHAR_BIT; }\n%s"
             "__global__ void k(float *p, int64_t n) {\n"
             "  p[0] = before(INFINITY) + (float)M_PI + (uint)1 + (int32_t)1 + (u_int8_t)1 +\n"
             "         std::sqrt(p[1]) + root(p[2]) + offsetof(float2, y) + n +\n"
             "         INFINITY + NAN + INT_MAX + (float)LLONG_MIN + CHAR_MIN; }\n",
             libcu_after[i]);
    m = compile_ok(text, &(kiln_compile_opts){.arch = "sm_90"});
    if (kiln_module_log(m)[0]) FAIL("the log is not empty: %s", kiln_module_log(m));
    kiln_module_free(m);
  }
  /* INFINITY and NAN are macros, as nvcc's kernels have them, wherever no text of the compile
   * names a header of CUB, thrust or libcu++ (which define them their own way). */
  const char *as_macros[] = {"",
                             "#include <stdio.h>\n#include <stdint.h>\n#include <type_traits>\n"};
  for (size_t i = 0; i < TEST_COUNT(as_macros); i++) {
    char text[512];
    snprintf(text, sizeof text,
             "%s#if !defined(INFINITY) || !defined(NAN) || INT_MAX != 0x7fffffff\n"
             "#error not as nvcc has them\n#endif\n"
             "__global__ void k(float *p) { p[0] = INFINITY + NAN; }\n",
             as_macros[i]);
    m = compile_ok(text, &(kiln_compile_opts){.arch = "sm_90"});
    ASSERT_STR_EQ(kiln_module_log(m), "");
    kiln_module_free(m);
  }
  /* The std functions are there when only an option spells std, and in every dialect. */
  const char *by_option[] = {"-DROOT(x)=std::sqrt(x)"}, *old[] = {"-std=c++03"};
  m = compile_ok("__global__ void k(float *p) { p[0] = ROOT(p[1]); }\n",
                 &(kiln_compile_opts){.arch = "sm_90", .options = by_option, .n_options = 1});
  kiln_module_free(m);
  m = compile_ok("__global__ void k(float *p, ssize_t n) { p[0] = std::abs(p[1]) + n; }\n",
                 &(kiln_compile_opts){.arch = "sm_90", .options = old, .n_options = 1});
  kiln_module_free(m);
}

/* C++ headers NVRTC lacks and nvcc's kernels include (<type_traits>, <limits>, <utility>, ...)
 * are libcu++'s with their names in std; with `using namespace std;` a plain abs, sqrt or min
 * stays the one built into device code, as under nvcc. An older dialect is told what it needs. */
TEST(compile_gives_cpp_headers_as_libcudacxx_ones) {
  const char *src =
      "#include <type_traits>\n#include <limits>\n#include <utility>\n#include <tuple>\n"
      "#include <initializer_list>\n#include <iterator>\n#include <numeric>\n#include <bit>\n"
      "#include <numbers>\n#include <ratio>\n#include <concepts>\n#include <atomic>\n"
      "#include <chrono>\n#include <stdbool.h>\n#include <cstdbool>\n#include <math.h>\n"
      "using namespace std;\n"
      "template <typename T> __device__ enable_if_t<is_floating_point<T>::value, T> top() {\n"
      "  return std::numeric_limits<T>::max(); }\n"
      "__global__ void k(float *p, int *q) {\n"
      "  float a = p[0], b = p[1]; std::swap(a, b);\n"
      "  tuple<int, float> t(1, 2.f); pair<int, int> pr = make_pair(3, 4);\n"
      "  int v[3] = {1, 2, 3};\n"
      "  p[0] = top<float>() + get<1>(t) + pr.second + accumulate(v, v + 3, 0) + a +\n"
      "         abs(p[2]) + sqrt(p[3]) + min(p[4], p[5]) + max(1, 2) + abs(-3) + fabs(p[6]) +\n"
      "         numbers::pi_v<float> + std::popcount(5u) + (std::is_same_v<int, int> ? 1 : 0);\n"
      "  q[0] = __bool_true_false_are_defined + std::ratio<2, 4>::num; }\n";
  kiln_module *m = compile_ok(src, &(kiln_compile_opts){.arch = "sm_90"});
  if (kiln_module_log(m)[0]) FAIL("the log is not empty: %s", kiln_module_log(m));
  kiln_module_free(m);
  /* <array>: libcu++'s array and get in std, and nothing that makes abs ambiguous */
  m = compile_ok(
      "#include <array>\n#include <cmath>\nusing namespace std;\n"
      "__global__ void k(int *q, float *p) {\n"
      "  std::array<int, 3> arr{4, 5, 6}; auto [x, y, z] = arr;\n"
      "  p[0] = abs(p[1]) + sqrt(p[2]) + abs(-3);\n"
      "  q[0] = arr[0] + get<2>(arr) + z + (int)std::tuple_size<array<int, 3>>::value; }\n",
      &(kiln_compile_opts){.arch = "sm_90"});
  if (kiln_module_log(m)[0]) FAIL("the log is not empty: %s", kiln_module_log(m));
  kiln_module_free(m);
  /* C++14: <type_traits> still, as the host's serves nvcc's C++14 programs. <limits> needs
   * C++17, and <type_traits> under C++11 C++14: such a source, refused so, is compiled again as
   * C++17, where nvcc has the host's headers of the older dialect. So is NVRTC's
   * <curand_kernel.h>, which includes libcu++. */
  const char *cxx14[] = {"-std=c++14"}, *cxx11[] = {"-std=c++11"};
  m = compile_ok("#include <type_traits>\n"
                 "__global__ void k(int *p) { p[0] = std::is_integral<long>::value; }\n",
                 &(kiln_compile_opts){.arch = "sm_90", .options = cxx14, .n_options = 1});
  kiln_module_free(m);
  const char *std_pair[] = {"-std", "c++11"}, *std_long[] = {"--std=c++14", "-DKILN_TEST_N=1"};
  struct {
    const char *src, **std;
    int n;
  } newer[] = {
      {"#include <type_traits>\n#include <limits>\n"
       "__global__ void k(float *p) { p[0] = std::numeric_limits<float>::max(); }\n",
       cxx14, 1},
      {"#include <type_traits>\n"
       "__global__ void k(int *p) { p[0] = std::is_integral<long>::value; }\n",
       cxx11, 1},
      {"#include <array>\n__global__ void k(int *p) { std::array<int, 2> a{}; p[0] = a[1]; }\n",
       std_pair, 2},
      {"#include <curand_kernel.h>\n__global__ void k(float *a) { curandState s;\n"
       "  curand_init(7, threadIdx.x, 0, &s); a[threadIdx.x] = curand_uniform(&s); }\n",
       std_long, 2},
  };
  for (size_t i = 0; i < TEST_COUNT(newer); i++) {
    m = compile_ok(
        newer[i].src,
        &(kiln_compile_opts){.arch = "sm_90", .options = newer[i].std, .n_options = newer[i].n});
    kiln_function *f = NULL;
    ASSERT_OK(kiln_module_get_function(m, "k", &f));
    kiln_module_free(m);
  }
  /* Refused for something else, the source's own error is what is said. */
  kiln_module *wrong = NULL;
  ASSERT_EQ(kiln_module_from_source(
                "#include <limits>\n__global__ void k(int *p) { p[0] = q; }\n",
                &(kiln_compile_opts){.arch = "sm_90", .options = cxx14, .n_options = 1}, &wrong),
            KILN_ERROR_COMPILE);
  ASSERT_CONTAINS(kiln_last_error(), "\"q\" is undefined");
  /* C++'s streams, host code, included by habit: only the stream templates are declared (for
   * the operators libraries declare, thrust's random engines'), and a use of one in device
   * code is refused as nvcc refuses it. */
  const char *streams = "#include <iostream>\n#include <fstream>\n#include <sstream>\n"
                        "#include <iomanip>\n#include <ostream>\n#include <istream>\n"
                        "using namespace std;\n__global__ void k(int *p) { p[0] = 1; }\n";
  for (int dialect = 0; dialect < 2; dialect++) {
    const char *std11[] = {"-std=c++11"};
    m = compile_ok(streams,
                   &(kiln_compile_opts){.arch = "sm_90", .options = std11, .n_options = dialect});
    if (kiln_module_log(m)[0]) FAIL("the log is not empty: %s", kiln_module_log(m));
    kiln_module_free(m);
  }
  kiln_module *bad = NULL;
  ASSERT_EQ(
      kiln_module_from_source("#include <iostream>\n__global__ void k() { std::cout << 1; }\n",
                              &(kiln_compile_opts){.arch = "sm_90"}, &bad),
      KILN_ERROR_COMPILE);
  ASSERT_CONTAINS(kiln_module_log(bad), "cout");
  kiln_module_free(bad);
  /* The containers and algorithms too: a whole program's host code that uses them is blanked,
   * its kernel kept; a kernel that uses one is refused, naming it. */
  m = compile_ok("#include <vector>\n#include <algorithm>\n#include <string>\n#include <map>\n"
                 "__global__ void k(int *p) { p[0] = 1; }\n"
                 "static void order(std::vector<int> &v) { std::sort(v.begin(), v.end()); }\n"
                 "int main() { std::vector<int> v(3); order(v); std::map<std::string, int> m; "
                 "return (int)m.size(); }\n",
                 &(kiln_compile_opts){.arch = "sm_90"});
  ASSERT_OK(kiln_module_get_function(m, "k", &(kiln_function *){NULL}));
  kiln_module_free(m);
  ASSERT_EQ(kiln_module_from_source(
                "#include <vector>\n__global__ void k(int *p) { std::vector<int> v; p[0] = 1; }\n",
                &(kiln_compile_opts){.arch = "sm_90"}, &bad),
            KILN_ERROR_COMPILE);
  ASSERT_CONTAINS(kiln_module_log(bad), "vector");
  kiln_module_free(bad);
  /* POSIX's timing headers and GCC's everything-at-once header, of whole programs */
  m = compile_ok("#include <unistd.h>\n#include <sys/time.h>\n#include <bits/stdc++.h>\n"
                 "__global__ void k(float *p) { p[0] = sqrtf(p[1]) + INT_MAX + FLT_EPSILON; }\n"
                 "double now() { struct timeval t; gettimeofday(&t, 0); usleep(1);\n"
                 "  return t.tv_sec + 1e-6 * t.tv_usec; }\n"
                 "int main() { std::vector<int> v; printf(\"%f\", now()); return 0; }\n",
                 &(kiln_compile_opts){.arch = "sm_90"});
  ASSERT_OK(kiln_module_get_function(m, "k", &(kiln_function *){NULL}));
  kiln_module_free(m);
  /* The rest of the host's C, C++ and POSIX headers that nvcc finds and NVRTC has not: each
   * included by habit compiles, in either dialect, and a host function using one is left out */
  static const char *const host[] = {"functional",
                                     "optional",
                                     "variant",
                                     "any",
                                     "span",
                                     "bitset",
                                     "valarray",
                                     "string_view",
                                     "charconv",
                                     "regex",
                                     "locale",
                                     "codecvt",
                                     "ios",
                                     "streambuf",
                                     "filesystem",
                                     "future",
                                     "condition_variable",
                                     "shared_mutex",
                                     "system_error",
                                     "typeinfo",
                                     "typeindex",
                                     "new",
                                     "scoped_allocator",
                                     "memory_resource",
                                     "execution",
                                     "version",
                                     "compare",
                                     "ranges",
                                     "format",
                                     "source_location",
                                     "coroutine",
                                     "stop_token",
                                     "semaphore",
                                     "latch",
                                     "barrier",
                                     "syncstream",
                                     "expected",
                                     "mdspan",
                                     "print",
                                     "stacktrace",
                                     "memory",
                                     "complex",
                                     "stdarg.h",
                                     "cstdarg",
                                     "errno.h",
                                     "cerrno",
                                     "ctype.h",
                                     "cctype",
                                     "signal.h",
                                     "csignal",
                                     "setjmp.h",
                                     "csetjmp",
                                     "locale.h",
                                     "clocale",
                                     "wchar.h",
                                     "cwchar",
                                     "wctype.h",
                                     "cwctype",
                                     "uchar.h",
                                     "cuchar",
                                     "fenv.h",
                                     "cfenv",
                                     "complex.h",
                                     "ccomplex",
                                     "stdalign.h",
                                     "cstdalign",
                                     "stdnoreturn.h",
                                     "iso646.h",
                                     "ciso646",
                                     "tgmath.h",
                                     "ctgmath",
                                     "memory.h",
                                     "strings.h",
                                     "malloc.h",
                                     "alloca.h",
                                     "sys/types.h",
                                     "sys/stat.h",
                                     "sys/mman.h",
                                     "sys/resource.h",
                                     "fcntl.h",
                                     "dirent.h",
                                     "dlfcn.h",
                                     "sched.h",
                                     "pthread.h",
                                     "getopt.h",
                                     "omp.h"};
  char all[4096];
  size_t used = 0;
  for (size_t i = 0; i < sizeof host / sizeof *host; i++) {
    used += (size_t)snprintf(all + used, sizeof all - used, "#include <%s>\n", host[i]);
    ASSERT(used < sizeof all);
  }
  used +=
      (size_t)snprintf(all + used, sizeof all - used, "%s",
                       "__global__ void k(float *p) { p[0] = sqrt(p[1]); }\n"
                       "static int say(const char *f, ...) { va_list a; va_start(a, f); int n = "
                       "vprintf(f, a); va_end(a); return n + isdigit(*f) + errno; }\n"
                       "int main() { std::complex<double> z(1, 2); std::function<int()> g = [] { "
                       "return 1; }; return say(\"%f\", z.real()) + g(); }\n");
  ASSERT(used < sizeof all);
  for (int dialect = 0; dialect < 2; dialect++) {
    const char *std11[] = {"-std=c++11"};
    m = compile_ok(all,
                   &(kiln_compile_opts){.arch = "sm_90", .options = std11, .n_options = dialect});
    ASSERT_OK(kiln_module_get_function(m, "k", &(kiln_function *){NULL}));
    kiln_module_free(m);
  }
  /* a kernel using one is refused, as nvcc refuses it (its functions are the host's) */
  ASSERT_EQ(kiln_module_from_source("#include <complex>\n__global__ void k(float *p) { "
                                    "std::complex<float> z(p[0], p[1]); p[2] = z.real(); }\n",
                                    &(kiln_compile_opts){.arch = "sm_90"}, &bad),
            KILN_ERROR_COMPILE);
  ASSERT_CONTAINS(kiln_module_log(bad), "namespace \"std\" has no member \"complex\"");
  kiln_module_free(bad);
  /* thrust's containers need the host's <memory>: refused saying so where the source names
   * <memory> too (else the header is not given, and NVRTC says it has none of the name);
   * thrust's device-side headers with <memory> or <complex> named compile */
  static const char *const thrust[][3] = {
      {"#include <thrust/functional.h>\n#include <memory>\n", "#include <thrust/device_vector.h>\n",
       "thrust's containers and algorithms need the host's"},
      {"", "#include <thrust/device_vector.h>\n", "cannot open source file \"memory\""}};
  for (int i = 0; i < 2; i++) {
    char text[256];
    snprintf(text, sizeof text, "%s%s__global__ void k(float *p) { p[0] = 1; }\n", thrust[i][0],
             thrust[i][1]);
    ASSERT_EQ(kiln_module_from_source(text, &(kiln_compile_opts){.arch = "sm_90"}, &bad),
              KILN_ERROR_COMPILE);
    ASSERT_CONTAINS(kiln_module_log(bad), thrust[i][2]);
    kiln_module_free(bad);
  }
  m = compile_ok("#include <thrust/functional.h>\n#include <memory>\n#include <complex>\n"
                 "__global__ void k(int *p) { p[0] = thrust::plus<int>()(p[1], p[2]); }\n",
                 &(kiln_compile_opts){.arch = "sm_90"});
  kiln_module_free(m);
}

/* kiln's C headers go to NVRTC only when some text of the compile can name a header: a source
 * that includes nothing costs no lookups for them (it gets the one header of nvcc's implicit
 * names alone, included first by every compile); one that reaches them by #include, by
 * __has_include, by nvcc's -include or through a header given in memory still gets them. */
TEST(compile_gives_its_c_headers_only_where_a_line_can_reach_them) {
  ASSERT_OK(kiln__nvrtc_load());
  const char **names = NULL, **sources = NULL;
  int n = -1;
  ASSERT_OK(kiln__stdheaders_select("__global__ void k(int *p) { p[0] = 1; }", NULL, &names,
                                    &sources, &n));
  ASSERT_EQ(n, 1);
  ASSERT_STR_EQ(names[0], KILN__NVCC_HOST_HEADER);
  /* Nor, spelling no std, the std names (some 130 using-declarations NVRTC would parse); nor,
   * spelling no pow, nvcc's pow template. */
  ASSERT(!strstr(sources[0], "using ::sqrt;"));
  ASSERT(!strstr(sources[0], "kiln_pow_arg_"));
  free(names);
  free(sources);
  ASSERT_OK(kiln__stdheaders_select("__global__ void k(float *p) { p[0] = pow(p[0], 2.0); }", NULL,
                                    &names, &sources, &n));
  ASSERT(strstr(sources[0], "kiln_pow_arg_") && !strstr(sources[0], "using ::sqrt;"));
  free(names);
  free(sources);
  ASSERT_OK(kiln__stdheaders_select("__global__ void k(float *p) { p[0] = std::sqrt(2.f); }", NULL,
                                    &names, &sources, &n));
  ASSERT_EQ(n, 1);
  ASSERT(strstr(sources[0], "using ::sqrt;") && strstr(sources[0], "kiln_pow_arg_"));
  free(names);
  free(sources);
  const char *hn[] = {"h.h"}, *quiet[] = {"#define H 1"}, *chained[] = {"#include <stdio.h>"};
  kiln_compile_opts own = {.header_names = hn, .header_sources = quiet, .n_headers = 1};
  ASSERT_OK(kiln__stdheaders_select("__global__ void k(int *p) { p[0] = 1; }", &own, &names,
                                    &sources, &n));
  ASSERT_EQ(n, 2); /* the nvcc names and the compile's own header, none of kiln's C headers */
  ASSERT_STR_EQ(names[0], KILN__NVCC_HOST_HEADER);
  ASSERT_STR_EQ(names[1], "h.h");
  free(names);
  free(sources);
  const char *reaching[] = {"#include <stdio.h>\n", "#if __has_include(<stdint.h>)\n#endif\n"};
  for (size_t i = 0; i < TEST_COUNT(reaching); i++) {
    ASSERT_OK(kiln__stdheaders_select(reaching[i], NULL, &names, &sources, &n));
    if (n == 0) FAIL("'%s' got none of kiln's headers", reaching[i]);
    for (int k = 0; k < n; k++) ASSERT(is_kilns_header(names[k]));
    free(names);
    free(sources);
  }
  /* The host's rarer headers only where a text of the compile names one: the source, through
   * a macro too, a header given in memory or an option's value. */
  const char *regex[] = {"#include <regex>\n"}, *forced_opt[] = {"--pre-include=pthread.h"};
  const struct {
    const char *src;
    kiln_compile_opts opts;
    const char *given, *not_given;
  } rare[] = {
      {"#include <cstdio>\n", {0}, "cstdio", "functional"},
      {"#include <functional>\n", {0}, "functional", "complex"},
      {"#include \"complex\"\n", {0}, "complex", "functional"},
      {"#define H <sys/types.h>\n#include H\n", {0}, "sys/types.h", "sys/stat.h"},
      {"#include \"h.h\"\n",
       {.header_names = hn, .header_sources = regex, .n_headers = 1},
       "regex",
       "locale"},
      {"#include <cstdio>\n", {.options = forced_opt, .n_options = 1}, "pthread.h", "sched.h"},
      /* a name is matched whole, and brackets that are no include's mark nothing */
      {"#include <cstdio>\nstruct any_t {};\ntemplate <class T> struct S {};\n"
       "__global__ void k(S<any_t> a, int n) { if (n < 2 && 3 > n) n = 1; }\n",
       {0},
       "cstdio",
       "any"}};
  for (size_t i = 0; i < TEST_COUNT(rare); i++) {
    ASSERT_OK(kiln__stdheaders_select(rare[i].src, &rare[i].opts, &names, &sources, &n));
    int given = 0, not_given = 0;
    for (int k = 0; k < n; k++) {
      given |= strcmp(names[k], rare[i].given) == 0;
      not_given |= strcmp(names[k], rare[i].not_given) == 0;
    }
    if (!given || not_given)
      FAIL("'%s': <%s> given %d (want 1), <%s> given %d (want 0)", rare[i].src, rare[i].given,
           given, rare[i].not_given, not_given);
    free(names);
    free(sources);
  }
  /* End to end, each way of reaching them. */
  kiln_compile_opts sm90 = {.arch = "sm_90"};
  kiln_module *m = compile_ok("__global__ void k(int *p) { p[0] = 1; }\n", &sm90);
  ASSERT_STR_EQ(kiln_module_log(m), "");
  kiln_module_free(m);
  m = compile_ok("#if !__has_include(<stdint.h>)\n#error no stdint.h\n#endif\n"
                 "__global__ void k(int *p) { p[0] = 1; }\n",
                 &sm90);
  kiln_module_free(m);
  const char *pre[] = {"-include", "stdio.h"};
  kiln_compile_opts forced = {.arch = "sm_90", .options = pre, .n_options = 2};
  m = compile_ok("__global__ void k(int *p) { p[0] = EOF; }\n", &forced);
  kiln_module_free(m);
  kiln_compile_opts through = {
      .arch = "sm_90", .header_names = hn, .header_sources = chained, .n_headers = 1};
  m = compile_ok("#include \"h.h\"\n__global__ void k(int *p) { p[0] = EOF; }\n", &through);
  kiln_module_free(m);
}

static const char *dynamic_src =
    "__global__ void child(int *p, int base) { p[threadIdx.x] = base + (int)threadIdx.x; }\n"
    "__global__ void parent(int *p) { child<<<1, 32>>>(p, 100); }\n";

TEST(compile_links_the_device_runtime) {
  kiln_compile_opts opts = {.arch = "sm_90", .flags = KILN_COMPILE_DEVICE_RUNTIME};
  kiln_module *m = compile_ok(dynamic_src, &opts);
  size_t size = 0;
  const unsigned char *cubin = kiln_module_cubin(m, &size);
  ASSERT(cubin != NULL && size > 64);
  ASSERT_EQ(cubin[16], 2); /* ET_EXEC: linked, no longer relocatable */
  kiln_function *f = NULL;
  ASSERT_OK(kiln_module_get_function(m, "parent", &f));
  ASSERT_OK(kiln_module_get_function(m, "child", &f));
  kiln_module_free(m);
  /* -rdc=true in nvcc's spelling is the same, and so is the folder given with -L */
  const char *rdc[] = {"-rdc=true", "-lcudadevrt", "-L/usr/local/cuda/lib64"};
  kiln_compile_opts spelled = {.arch = "sm_90", .options = rdc, .n_options = 3};
  m = compile_ok(dynamic_src, &spelled);
  ASSERT_EQ(
      kiln_module_cubin(m, NULL) ? ((const unsigned char *)kiln_module_cubin(m, NULL))[16] : 0, 2);
  kiln_module_free(m);
  kiln_compile_opts missing = {
      .arch = "sm_90", .flags = KILN_COMPILE_DEVICE_RUNTIME, .device_runtime = "/nonexistent"};
  ASSERT_STATUS(kiln_module_from_source(dynamic_src, &missing, &m), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "/nonexistent is neither libcudadevrt.a nor a folder");
  /* Without relocatable device code NVRTC refuses a launch in device code, and says why. */
  const char *no_rdc[] = {"-rdc=false"};
  kiln_compile_opts plain = {.arch = "sm_90", .options = no_rdc, .n_options = 1};
  m = NULL;
  ASSERT_STATUS(kiln_module_from_source(dynamic_src, &plain, &m), KILN_ERROR_COMPILE);
  ASSERT(m != NULL);
  ASSERT_CONTAINS(kiln_module_log(m), "device-side kernel launch");
  kiln_module_free(m);
}

TEST(compile_link_without_nvjitlink_needs_the_driver) {
  setenv("KILN_NVJITLINK_PATH", "/nonexistent/libnvJitLink.so", 1);
  setenv("KILN_CUDA_PATH", "/nonexistent/libcuda.so.1", 1);
  kiln_compile_opts opts = {.arch = "sm_90", .flags = KILN_COMPILE_DEVICE_RUNTIME};
  kiln_module *m = NULL;
  ASSERT_STATUS(kiln_module_from_source(dynamic_src, &opts, &m), KILN_ERROR_NO_DRIVER);
  ASSERT_CONTAINS(kiln_last_error(), "no CUDA driver could be loaded");
  ASSERT_CONTAINS(kiln_last_error(),
                  "linking relocatable device code needs nvJitLink or the CUDA driver, and "
                  "nvJitLink could not be opened (tried "
                  "KILN_NVJITLINK_PATH=/nonexistent/libnvJitLink.so)");
  ASSERT(m == NULL);
}

TEST(gpu_kernel_launches_a_kernel) {
  kiln_test_require_gpu();
  kiln_compile_opts opts = {.flags = KILN_COMPILE_DEVICE_RUNTIME};
  kiln_module *m = compile_ok(dynamic_src, &opts);
  kiln_function *parent = NULL;
  ASSERT_OK(kiln_module_get_function(m, "parent", &parent));
  kiln_deviceptr p = 0;
  ASSERT_OK(kiln_mem_alloc(32 * sizeof(int), &p));
  ASSERT_OK(kiln_memset_d32(p, 0, 32));
  void *params[] = {&p};
  kiln_launch_config cfg = {.grid = {1, 1, 1}, .block = {1, 1, 1}};
  ASSERT_OK(kiln_function_launch(parent, &cfg, params));
  ASSERT_OK(kiln_synchronize());
  int got[32];
  ASSERT_OK(kiln_memcpy_dtoh(got, p, sizeof got));
  for (int i = 0; i < 32; i++) ASSERT_EQ(got[i], 100 + i);
  ASSERT_OK(kiln_mem_free(p));
  kiln_module_free(m);
}

/* Two sources compiled as relocatable code left unlinked, then linked with the device runtime:
 * the parent calls into the other source (PyCUDA's DynamicModule). */
static const char *parent_src = "extern __global__ void child(int *p, int base);\n"
                                "__global__ void parent(int *p) { child<<<1, 32>>>(p, 7); }\n";
static const char *child_src =
    "__global__ void child(int *p, int base) { p[threadIdx.x] = base * (int)threadIdx.x; }\n";

static void *link_parent_and_child(const char *arch, size_t *size) {
  kiln_compile_opts opts = {.arch = arch, .flags = KILN_COMPILE_RELOCATABLE};
  kiln_module *parent = compile_ok(parent_src, &opts), *child = compile_ok(child_src, &opts);
  size_t np = 0, nc = 0;
  const unsigned char *cp = kiln_module_cubin(parent, &np), *cc = kiln_module_cubin(child, &nc);
  ASSERT(cp && cc);
  ASSERT_EQ(cp[16], 1); /* ET_REL: left unlinked */
  char runtime[4096];
  snprintf(runtime, sizeof runtime, "%s/lib64/libcudadevrt.a",
           getenv("CUDA_HOME") ? getenv("CUDA_HOME") : "/usr/local/cuda");
  kiln_link_input in[] = {
      {.kind = KILN_LINK_CUBIN, .data = cp, .size = np, .name = "parent.cubin"},
      {.kind = KILN_LINK_CUBIN, .data = cc, .size = nc, .name = "child.cubin"},
      {.kind = KILN_LINK_LIBRARY, .path = runtime},
  };
  void *cubin = NULL;
  ASSERT_OK(kiln_link(in, 3, kiln_module_arch(parent), &cubin, size));
  kiln_module_free(parent);
  kiln_module_free(child);
  return cubin;
}

TEST(compile_relocatable_then_link_several) {
  size_t size = 0;
  unsigned char *cubin = link_parent_and_child("sm_90", &size);
  ASSERT(size > 64 && memcmp(cubin,
                             "\x7f"
                             "ELF",
                             4) == 0);
  ASSERT_EQ(cubin[16], 2); /* ET_EXEC: linked */
  free(cubin);
  /* The parent alone does not link: its child and the runtime are missing. */
  kiln_compile_opts opts = {.arch = "sm_90", .flags = KILN_COMPILE_RELOCATABLE};
  kiln_module *parent = compile_ok(parent_src, &opts);
  size_t n = 0;
  const void *cp = kiln_module_cubin(parent, &n);
  kiln_link_input one = {.kind = KILN_LINK_CUBIN, .data = cp, .size = n};
  void *out = NULL;
  ASSERT_STATUS(kiln_link(&one, 1, "sm_90", &out, &size), KILN_ERROR_COMPILE);
  ASSERT_CONTAINS(kiln_last_error(), "Undefined reference");
  ASSERT(out == NULL);
  /* The driver's JIT options it would not take are refused before any linker is reached. */
  kiln_jit_option log_buffer = {.option = 3 /* CU_JIT_INFO_LOG_BUFFER */, .value = 0};
  ASSERT_STATUS(kiln_link_jit(&one, 1, "sm_90", &log_buffer, 1, &out, &size), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "link option 3");
  kiln_jit_option negative = {.option = 0 /* CU_JIT_MAX_REGISTERS */, .value = -1};
  ASSERT_STATUS(kiln_link_jit(&one, 1, "sm_90", &negative, 1, &out, &size), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_link_jit(&one, 1, "sm_90", NULL, 1, &out, &size), KILN_ERROR_INVALID);
  ASSERT(out == NULL);
  kiln_module_free(parent);
  /* What a link cannot take. */
  ASSERT_STATUS(kiln_link(&one, 0, "sm_90", &out, &size), KILN_ERROR_INVALID);
  kiln_link_input bad = {.kind = (kiln_link_kind)9, .data = "x", .size = 1};
  ASSERT_STATUS(kiln_link(&bad, 1, "sm_90", &out, &size), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "kind 9");
  kiln_link_input nothing = {.kind = KILN_LINK_CUBIN};
  ASSERT_STATUS(kiln_link(&nothing, 1, "sm_90", &out, &size), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_link(&one, 1, "compute_90", &out, &size), KILN_ERROR_INVALID);
  /* -dc, nvcc's spelling, is the same flag, and wins over -rdc=true's link. */
  const char *dc[] = {"-rdc=true", "-dc"};
  kiln_compile_opts spelled = {.arch = "sm_90", .options = dc, .n_options = 2};
  kiln_module *m = compile_ok(parent_src, &spelled);
  ASSERT_EQ(((const unsigned char *)kiln_module_cubin(m, NULL))[16], 1);
  kiln_module_free(m);
}

TEST(gpu_linked_module_launches_across_sources) {
  kiln_test_require_gpu();
  char arch[32];
  ASSERT_OK(kiln_compile_default_arch(arch, sizeof arch));
  size_t size = 0;
  void *cubin = link_parent_and_child(arch, &size);
  kiln_module *m = NULL;
  ASSERT_OK(kiln_module_from_image(cubin, size, &m));
  free(cubin);
  kiln_function *parent = NULL;
  ASSERT_OK(kiln_module_get_function(m, "parent", &parent));
  kiln_deviceptr p = 0;
  ASSERT_OK(kiln_mem_alloc(32 * sizeof(int), &p));
  ASSERT_OK(kiln_memset_d32(p, 0, 32));
  void *params[] = {&p};
  kiln_launch_config cfg = {.grid = {1, 1, 1}, .block = {1, 1, 1}};
  ASSERT_OK(kiln_function_launch(parent, &cfg, params));
  ASSERT_OK(kiln_synchronize());
  int got[32];
  ASSERT_OK(kiln_memcpy_dtoh(got, p, sizeof got));
  for (int i = 0; i < 32; i++) ASSERT_EQ(got[i], 7 * i);
  ASSERT_OK(kiln_mem_free(p));
  kiln_module_free(m);
}

/* The rewrite itself: a compound literal's parentheses become spaces, and nothing else moves. */
TEST(compound_literals_are_read_as_functional_casts) {
  const char *cases[][2] = {
      {"return (uchar3) {r, g, b};", "return  uchar3  {r, g, b};"},
      {"x = (float2){a, b}; f((int2){1, 2}, (S) {0});",
       "x =  float2 {a, b}; f( int2 {1, 2},  S  {0});"},
      {"#define MK(x) ((float2){x, x})", "#define MK(x) ( float2 {x, x})"},
      {"v = c ? (ns::P){1} : (P)\n{2};", "v = c ?  ns::P {1} :  P \n{2};"},
      {"uchar4 lut[] = {(uchar4){1, 2, 3, 4}, (uchar4){5}};",
       "uchar4 lut[] = { uchar4 {1, 2, 3, 4},  uchar4 {5}};"},
      {"T operator++(int) { return *this; } x = (float2){1'000, 2};",
       "T operator++(int) { return *this; } x =  float2 {1'000, 2};"},
      {"c = u8'a'; x = (float2){0x1'0, 2};", "c = u8'a'; x =  float2 {0x1'0, 2};"},
      {"y = .5'0; x = (float2){1.2'5, .2'5};", "y = .5'0; x =  float2 {1.2'5, .2'5};"},
  };
  for (size_t i = 0; i < TEST_COUNT(cases); i++) {
    char *got = kiln__dialect_compound_literals(cases[i][0]);
    if (!got || strcmp(got, cases[i][1]) != 0)
      FAIL("'%s' became '%s', not '%s'", cases[i][0], got ? got : "(nothing)", cases[i][1]);
    free(got);
  }
  /* Blocks after a condition or a declarator, casts without a brace, and literals in comments
   * and strings are left as they are: none of these has one to rewrite. */
  const char *untouched[] = {
      "if (x) { y = 1; } while (n) {} for (;;) {} switch (k) { }",
      "__global__ void k(float *p) { } void f(void) {} auto l = [](int) { return 1; };",
      "y = (float)x; z = (int) (w);",
      "// return (float3){1, 2, 3};\n/* (float2){a} */ s = \"(int2){1}\"; c = '(';",
      "struct S s = (struct S){1};",
      "T operator<(Foo) { } T operator--(int) {} template <> void f<int>(int) { }",
      "#if 0\n it's \n#endif\nif (x) {}",
  };
  for (size_t i = 0; i < TEST_COUNT(untouched); i++) {
    char *got = kiln__dialect_compound_literals(untouched[i]);
    if (got) FAIL("'%s' was rewritten as '%s'", untouched[i], got);
  }
}

/* A source with compound literals compiles, as under nvcc; one refused for another reason is
 * refused with NVRTC's first message, not the retry's. */
TEST(compile_takes_compound_literals_as_nvcc_does) {
  const char *src = "struct C { int v; __device__ C operator++(int) { return *this; } };\n"
                    "__device__ uchar3 rgb(unsigned char r, unsigned char g, unsigned char b) {\n"
                    "  return (uchar3) {r, g, b};\n}\n"
                    "__constant__ uchar2 lut[2] = {(uchar2){1, 2}, (uchar2){3, 4}};\n"
                    "#define PAIR(a, b) ((float2){(a), (b)})\n"
                    "__global__ void k(uchar3 *c, float2 *f, int n) {\n"
                    "  if (n) { c[0] = rgb(1, 2, 3); f[0] = PAIR(0.5f, n); }\n"
                    "}\n";
  kiln_compile_opts opts = {.arch = "sm_90"};
  kiln_module *m = compile_ok(src, &opts);
  kiln_module_free(m);
  const char *broken = "__global__ void k(float2 *f) {\n  f[0] = (float2){1, 2};\n"
                       "  f[1] = ;\n}\n";
  ASSERT_STATUS(kiln_module_from_source(broken, &opts, &m), KILN_ERROR_COMPILE);
  ASSERT_CONTAINS(kiln_last_error(), "kernel.cu(2)"); /* the first refusal: the literal's line */
}

/* "namespace std {" becomes "namespace cuda::std {", wherever it opens; comments, strings and
 * other namespaces are left. */
TEST(std_namespace_blocks_are_opened_as_cuda_std) {
  const char *src = "namespace std { template <> struct numeric_limits<Q>; }\n"
                    "// namespace std {\n"
                    "const char *s = \"namespace std {\"; namespace stdx { }\n"
                    "namespace  std\n{ }\n";
  const char *want = "namespace cuda::std { template <> struct numeric_limits<Q>; }\n"
                     "// namespace std {\n"
                     "const char *s = \"namespace std {\"; namespace stdx { }\n"
                     "namespace  cuda::std\n{ }\n";
  char *got = kiln__dialect_std_namespace(src);
  ASSERT(got != NULL);
  ASSERT_STR_EQ(got, want);
  free(got);
  ASSERT(kiln__dialect_std_namespace("namespace std::chrono { } using namespace std;") == NULL);
}

/* A specialization of std::numeric_limits for a type of the program's, as nvcc's host <limits>
 * takes it; a source refused for another reason keeps NVRTC's first message. */
TEST(compile_takes_a_numeric_limits_specialization_as_nvcc_does) {
  const char *src =
      "#include <limits>\n"
      "struct Q { float v; };\n"
      "namespace std {\n"
      "template <> struct numeric_limits<Q> {\n"
      "  static constexpr bool is_specialized = true;\n"
      "  __host__ __device__ static Q max() { return {1.f}; }\n"
      "};\n"
      "}\n"
      "__global__ void k(float *o)\n"
      "{ o[0] = std::numeric_limits<Q>::max().v + std::numeric_limits<int>::max(); }\n";
  kiln_compile_opts opts = {.arch = "sm_90"};
  kiln_module *m = compile_ok(src, &opts);
  kiln_module_free(m);
  const char *broken = "#include <limits>\nstruct Q { float v; };\n"
                       "namespace std {\ntemplate <> struct numeric_limits<Q> { };\n}\n"
                       "__global__ void k(float *o) { o[0] = ; }\n";
  ASSERT_STATUS(kiln_module_from_source(broken, &opts, &m), KILN_ERROR_COMPILE);
  ASSERT_CONTAINS(kiln_last_error(), "cannot be specialized"); /* the first refusal */
}

/* A class's constant of a floating type initialized in the class, on a line an error names,
 * becomes constexpr; other lines and other consts are left. */
TEST(inclass_constants_nvrtc_refused_become_constexpr) {
  const char *src = "struct S { const static float pi = 3.14f;\n"
                    "  static  const double d = 2.0; };\n"
                    "struct T { const static float e = 2.7f; };\n"
                    "__device__ const float *constp; static constant_t c;\n";
  const char *log = "kernel.cu(1): error: a member of type \"const float\" cannot have an "
                    "in-class initializer\n"
                    "kernel.cu(2): error: a member of type \"const double\" cannot have an "
                    "in-class initializer\n"
                    "kernel.cu(4): error: a member of type \"const float\" cannot have an "
                    "in-class initializer\n";
  const char *want = "struct S { constexpr static float pi = 3.14f;\n"
                     "  static  constexpr double d = 2.0; };\n"
                     "struct T { const static float e = 2.7f; };\n"
                     "__device__ const float *constp; static constant_t c;\n";
  char *got = kiln__dialect_inclass_constants(src, log);
  ASSERT(got != NULL);
  ASSERT_STR_EQ(got, want);
  free(got);
  ASSERT(kiln__dialect_inclass_constants(src, "kernel.cu(3): error: x\n") == NULL);
}

/* An array of no elements as a parameter or extern __shared__ memory loses its 0 on the lines
 * NVRTC refused; indexing by 0 on the same lines, and a line no error names, are left. */
TEST(zero_arrays_nvrtc_refused_lose_their_zero) {
  const char *log = "kernel.cu(1): error: the size of an array must be greater than zero\n"
                    "kernel.cu(2): error: the size of an array must be greater than zero\n"
                    "kernel.cu(4): error: the size of an array must be greater than zero\n";
  const char *src = "__global__ void k(int n[0], float *const p [ 0 ], int *out) {\n" /* 1 */
                    "  extern __shared__ float sh[0]; out[0] = n[1]; f(out[0]);\n"    /* 2 */
                    "  int keep[0];\n"                                                /* 3 */
                    "  return a[0]; g(x, y[0]); s.d[0]; float *q[0], &r[0];\n}\n";    /* 4 */
  const char *want = "__global__ void k(int n[ ], float *const p [   ], int *out) {\n"
                     "  extern __shared__ float sh[ ]; out[0] = n[1]; f(out[0]);\n"
                     "  int keep[0];\n"
                     "  return a[0]; g(x, y[0]); s.d[0]; float *q[ ], &r[ ];\n}\n";
  char *got = kiln__dialect_zero_arrays(src, log);
  ASSERT(got != NULL);
  ASSERT_STR_EQ(got, want);
  free(got);
  ASSERT(kiln__dialect_zero_arrays(src, "kernel.cu(3): error: x\n") == NULL);
}

/* Such arrays compile, as under nvcc; a class's member of no elements is still refused, with
 * NVRTC's own message. */
TEST(compile_takes_zero_arrays_as_nvcc_does) {
  const char *src = "__global__ void k(int n[0], int *out) {\n"
                    "  extern __shared__ int sh[0]; sh[0] = n[1]; out[0] = sh[0]; }\n";
  kiln_compile_opts opts = {.arch = "sm_90"};
  kiln_module *m = compile_ok(src, &opts);
  kiln_function *f;
  ASSERT_OK(kiln_module_get_function(m, "k", &f));
  ASSERT_EQ(kiln_function_param_count(f), 2);
  kiln_module_free(m);
  const char *member = "struct S { int n; float d[0]; };\n"
                       "__global__ void k(S *s, float *o) { o[0] = s->d[1]; }\n";
  ASSERT_STATUS(kiln_module_from_source(member, &opts, &m), KILN_ERROR_COMPILE);
  ASSERT_CONTAINS(kiln_last_error(), "the size of an array must be greater than zero");
  kiln_module_free(m);
}

/* Such a constant compiles, as under nvcc. */
TEST(compile_takes_a_float_constant_initialized_in_its_class_as_nvcc_does) {
  const char *src =
      "#define CUDART_PI_F 3.141592654f\n"
      "struct S { const static float pi = CUDART_PI_F; static const double d = 2; };\n"
      "__global__ void k(float *o) { o[0] = S::pi + (float)S::d; }\n";
  kiln_compile_opts opts = {.arch = "sm_90"};
  kiln_module *m = compile_ok(src, &opts);
  kiln_module_free(m);
}

/* A floating constant at namespace scope whose initialization NVRTC refused, and that folds,
 * becomes constexpr with the floating constants it names; one that calls a function, and
 * everything inside a body, are left. */
TEST(namespace_constants_nvrtc_refused_become_constexpr) {
  const char *src = "#define L 2.0\n"                                       /* 1 */
                    "const float a = 0.01; const int n = 4;\n"              /* 2 */
                    "static const double b = a * a / n + L;\n"              /* 3 */
                    "const float c = sqrtf(a);\n"                           /* 4 */
                    "namespace p { const float d = 1e-3f; }\n"              /* 5 */
                    "const float e = float(d) * -2.5e+1;\n"                 /* 6 */
                    "__global__ void k(float *x) { const float f = x[0];\n" /* 7 */
                    "  const float g = f * a; x[0] = g + b + c; }\n"        /* 8 */
                    "const float h = 1, i = h;\n"                           /* 9 */
                    "const float j = 2 * (float)M_PI;\n"                    /* 10 */
                    "const float m = j / 4 + FREQ * 2;\n"                   /* 11 */
                    "const float o = SQR(2);\n";                            /* 12 */
  const char *log = "kernel.cu(3): error: dynamic initialization is not supported for a "
                    "__device__ variable\n"
                    "kernel.cu(4): error: dynamic initialization is not supported for a "
                    "__device__ variable\n"
                    "kernel.cu(6): error: dynamic initialization is not supported for a "
                    "__device__ variable\n"
                    "kernel.cu(8): error: dynamic initialization is not supported for a "
                    "__device__ variable\n"
                    "kernel.cu(9): error: dynamic initialization is not supported for a "
                    "__device__ variable\n"
                    "kernel.cu(11): error: dynamic initialization is not supported for a "
                    "__device__ variable\n"
                    "kernel.cu(12): error: dynamic initialization is not supported for a "
                    "__device__ variable\n";
  const char *want = "#define L 2.0\n"
                     "constexpr float a = 0.01; const int n = 4;\n"
                     "static constexpr double b = a * a / n + L;\n"
                     "const float c = sqrtf(a);\n"
                     "namespace p { constexpr float d = 1e-3f; }\n"
                     "constexpr float e = float(d) * -2.5e+1;\n"
                     "__global__ void k(float *x) { const float f = x[0];\n"
                     "  const float g = f * a; x[0] = g + b + c; }\n"
                     "const float h = 1, i = h;\n"
                     "constexpr float j = 2 * (float)M_PI;\n"
                     "constexpr float m = j / 4 + FREQ * 2;\n"
                     "const float o = SQR(2);\n";
  char *got = kiln__dialect_namespace_constants(src, log);
  ASSERT(got != NULL);
  ASSERT_STR_EQ(got, want);
  free(got);
  ASSERT(kiln__dialect_namespace_constants(src, "kernel.cu(3): error: x\n") == NULL);
  ASSERT(kiln__dialect_namespace_constants(src,
                                           "kernel.cu(4): error: dynamic initialization is "
                                           "not supported for a __device__ variable\n") == NULL);
}

/* Such constants compile, as under nvcc, beside host code that is blanked. */
TEST(compile_takes_floating_constants_that_fold_as_nvcc_does) {
  const char *src = "const float dx = 0.1;\nconst float r = dx * dx;\n"
                    "const float s = sqrtf(dx);\n"
                    "__global__ void k(float *o) { o[0] = r; }\n"
                    "int main() { float *d; cudaMalloc(&d, 4); k<<<1, 1>>>(d); return 0; }\n";
  kiln_compile_opts opts = {.arch = "sm_90"};
  kiln_module *m = compile_ok(src, &opts);
  kiln_module_free(m);
}

/* The host functions of a whole program, where NVRTC refused them, become blanks; lines keep
 * their numbers. A function with __global__ or __device__, and an error outside any function,
 * are left: nothing is blanked then. */
TEST(host_functions_nvrtc_refused_are_blanked) {
  const char *src = "#include <stdio.h>\n"                        /* 1 */
                    "__global__ void k(int *p) { p[0] = '{'; }\n" /* 2 */
                    "/* a = b; struct */ int\n"                   /* 3 */
                    "main(void)\n"                                /* 4 */
                    "{ /* } */\n"                                 /* 5 */
                    "  cudaMalloc(0, 4); printf(\"}\");\n"        /* 6 */
                    "}\n"                                         /* 7 */
                    "namespace h { void f() { g(); } }\n"         /* 8 */
                    "extern \"C\" {\nvoid ok() { }\n}\n";         /* 9-11 */
  const char *log = "kernel.cu(6): error: identifier \"cudaMalloc\" is undefined\n"
                    "kernel.cu(8): error: identifier \"g\" is undefined\n"
                    "kernel.cu(10): warning #177-D: unused\n";
  char *got = kiln__dialect_host_functions(src, log);
  ASSERT(got != NULL);
  ASSERT_EQ(strlen(got), strlen(src));
  for (size_t i = 0; i < strlen(src); i++)
    if ((src[i] == '\n') != (got[i] == '\n')) FAIL("a newline moved at %zu", i);
  ASSERT_CONTAINS(got, "__global__ void k(int *p) { p[0] = '{'; }\n");
  ASSERT_CONTAINS(got, "namespace h {                   }\n");
  ASSERT_CONTAINS(got, "void ok() { }");
  if (strstr(got, "main") || strstr(got, "cudaMalloc") || strstr(got, "g()"))
    FAIL("a refused host function is left: '%s'", got);
  free(got);
  const char *kept[][2] = {
      {"__global__ void k(float *p) {\n  p[0] = x;\n}\n", "kernel.cu(2): error: x\n"},
      {"__host__ __device__ float f(float *p) {\n  return x;\n}\n", "kernel.cu(2): error: x\n"},
      {"std::vector<int> v;\nvoid f() { }\n", "kernel.cu(1): error: std\n"},
      {"void f() {\n  return x;\n}\n", "kernel.cu(2): warning: x\n"},
      /* a macro may hide __global__, or make a kernel: a head naming one is never host code */
      {"#define KERNEL extern \"C\" __global__\nKERNEL void k(float *x)\n{\n  x[0] = y;\n}\n",
       "kernel.cu(4): error: y\n"},
      {"#define DEFINE_KERNEL(name) __global__ void name(float *x) { x[0] = 1; }\n"
       "DEFINE_KERNEL(k1)\nint main() {\n  cudaMalloc(0, 4);\n}\n",
       "kernel.cu(4): error: cudaMalloc\n"},
      /* a kernel whose keyword lost its underscores: a mistake, not host code */
      {"_global_ void k(float *x)\n{\n  x[0] = 1;\n}\n",
       "kernel.cu(1): error: this declaration has no storage class or type specifier\n"
       "kernel.cu(1): error: expected a \";\"\n"},
  };
  for (size_t i = 0; i < TEST_COUNT(kept); i++) {
    got = kiln__dialect_host_functions(kept[i][0], kept[i][1]);
    if (got) FAIL("'%s' was rewritten as '%s'", kept[i][0], got);
  }
}

/* Host code nvcc compiles that hides from the namespace-scope reading: a head marked by a macro
 * that says only __host__, member functions defined in their class (a constructor with
 * initializers, a const method), and an explicit instantiation of a blanked host template.
 * A member marked __device__ stays, and so does a struct's head, even in an error's lines. */
TEST(host_members_macros_and_instantiations_nvrtc_refused_are_blanked) {
  const char *src = "#define HOST __host__\n"                            /* 1 */
                    "HOST void h(float **x) {\n  cudaMalloc(x, 4);\n}\n" /* 2-4 */
                    "struct B { float *p; B(int n) : p(0) {\n"           /* 5 */
                    "  cudaMalloc(&p, n); }\n"                           /* 6 */
                    "  void show() const {\n  std::cout << 1; }\n"       /* 7-8 */
                    "  __device__ float get() const { return *p; } };\n" /* 9 */
                    "template void up<float>(float *&, int);\n"          /* 10 */
                    "__global__ void k(float *x) { x[0] = 1; }\n";       /* 11 */
  const char *log = "kernel.cu(3): error: identifier \"cudaMalloc\" is undefined\n"
                    "kernel.cu(6): error: identifier \"cudaMalloc\" is undefined\n"
                    "kernel.cu(8): error: name followed by \"::\" must be a class or namespace\n"
                    "kernel.cu(10): error: up is not a template\n";
  char *got = kiln__dialect_host_functions(src, log);
  ASSERT(got != NULL);
  ASSERT_EQ(strlen(got), strlen(src));
  for (size_t i = 0; i < strlen(src); i++)
    if ((src[i] == '\n') != (got[i] == '\n')) FAIL("a newline moved at %zu", i);
  if (strstr(got, "cudaMalloc") || strstr(got, "cout") || strstr(got, "up<float>"))
    FAIL("a refused host function is left: '%s'", got);
  ASSERT_CONTAINS(got, "#define HOST __host__\n");
  ASSERT_CONTAINS(got, "struct B { float *p;");
  ASSERT_CONTAINS(got, "__device__ float get() const { return *p; } };\n");
  ASSERT_CONTAINS(got, "__global__ void k(float *x) { x[0] = 1; }\n");
  free(got);
  /* A macro that says more than __host__ may hide a kernel: its head is never host code; nor is
   * a kernel's explicit instantiation blanked. */
  const char *kept[][2] = {
      {"#define HD __host__ __device__\nHD float f(float *p) {\n  return x;\n}\n",
       "kernel.cu(3): error: x\n"},
      {"template __global__ void k<float>(float *);\n", "kernel.cu(1): error: x\n"},
      {"__device__ struct S f(int x) {\n  if (x) { return y; }\n}\n", "kernel.cu(2): error: y\n"},
  };
  for (size_t i = 0; i < TEST_COUNT(kept); i++) {
    got = kiln__dialect_host_functions(kept[i][0], kept[i][1]);
    if (got) FAIL("'%s' was rewritten as '%s'", kept[i][0], got);
  }
}

/* Such programs compile, as under nvcc; a kernel that calls a blanked constructor is refused. */
TEST(compile_takes_host_members_macros_and_instantiations_as_nvcc_does) {
  const char *src = "#ifdef __CUDACC__\n#define HOST __host__\n#else\n#define HOST\n#endif\n"
                    "HOST void h(float **x) { cudaMalloc(x, 4); }\n"
                    "struct B { float *p; B(int n) : p(0) { cudaMalloc(&p, n); } };\n"
                    "template <typename T> void up(T *&d, int n) { cudaMalloc(&d, n); }\n"
                    "template void up<float>(float *&, int);\n"
                    "__global__ void k(float *x) { x[0] = 1; }\n";
  kiln_compile_opts opts = {.arch = "sm_90"};
  kiln_module *m = compile_ok(src, &opts);
  kiln_module_free(m);
  const char *calls = "struct B { float *p; B(int n) { cudaMalloc(&p, n); } };\n"
                      "__global__ void k(float *x) { B b(4); x[0] = 1; }\n";
  ASSERT_STATUS(kiln_module_from_source(calls, &opts, &m), KILN_ERROR_COMPILE);
  ASSERT_CONTAINS(kiln_last_error(), "cudaMalloc");
}

/* A variable at namespace scope that nvcc keeps on the host, whose initializer NVRTC (putting it
 * on the device) refused, becomes blanks, an initializer's braces and lines with it; one the
 * source puts on the device itself, or through a macro, is left, as is a type defined with it. */
TEST(host_variables_nvrtc_refused_are_blanked) {
  const char *src = "const float2 G = make_float2(1, 2);\n"         /* 1 */
                    "__global__ void k(float *d) { d[0] = 1; }\n"   /* 2 */
                    "const float2 H = float2{1.f,\n sqrtf(2.f)};\n" /* 3-4 */
                    "float ok = 1;\n";                              /* 5 */
  const char *log = "kernel.cu(1): error: dynamic initialization is not supported for a "
                    "__device__ variable\n"
                    "kernel.cu(3): error: dynamic initialization is not supported for a "
                    "__device__ variable\n";
  char *got = kiln__dialect_host_functions(src, log);
  ASSERT(got != NULL);
  ASSERT_EQ(strlen(got), strlen(src));
  for (size_t i = 0; i < strlen(src); i++)
    if ((src[i] == '\n') != (got[i] == '\n')) FAIL("a newline moved at %zu", i);
  ASSERT_CONTAINS(got, "__global__ void k(float *d) { d[0] = 1; }\n");
  ASSERT_CONTAINS(got, "float ok = 1;\n");
  if (strstr(got, "G") || strstr(got, "H") || strstr(got, "sqrtf"))
    FAIL("a refused host variable is left: '%s'", got);
  free(got);
  const char *refusal = "kernel.cu(2): error: dynamic initialization is not supported for a "
                        "__device__ variable\n";
  /* A function before it whose head does not end its parameters' list (a trailing return
   * type, noexcept) is not taken into the variable's declaration. */
  const char *functions[] = {
      "__global__ auto k(float *d) -> void { d[0] = 1; }\nconst float2 G = make_float2(1, 2);\n",
      "constexpr float twice(float x) noexcept { return 2 * x; }\n"
      "const float2 G = make_float2(1, 2);\n",
  };
  for (size_t i = 0; i < TEST_COUNT(functions); i++) {
    got = kiln__dialect_host_functions(functions[i], refusal);
    ASSERT(got != NULL);
    const char *nl = strchr(functions[i], '\n');
    if (strncmp(got, functions[i], (size_t)(nl - functions[i])) != 0 || strstr(got, "G"))
      FAIL("'%s' was rewritten as '%s'", functions[i], got);
    free(got);
  }
  const char *kept[] = {
      "\n__device__ float x = sqrtf(2.f);\n",
      "#define DEV __device__\nDEV float x = sqrtf(2.f);\n",
      "\nstruct S { float a; __device__ S(float x) : a(x) {} } s(1.f);\n",
      "\nfloat x = sqrtf(2.f);\n", /* another error on its line: nothing to blank */
      /* two declarations on the error's line: whose error it is is not known */
      "\nconst int N = 4; const float2 G = make_float2(1, 2);\n",
  };
  for (size_t i = 0; i < TEST_COUNT(kept); i++) {
    got = kiln__dialect_host_functions(kept[i], i == 3 ? "kernel.cu(2): error: x\n" : refusal);
    if (got) FAIL("'%s' was rewritten as '%s'", kept[i], got);
  }
}

/* Such a constant in a module's source compiles, as under nvcc; a kernel that reads it is
 * refused, as nvcc refuses it. */
TEST(compile_leaves_out_a_host_constant_as_nvcc_does) {
  kiln_compile_opts opts = {.arch = "sm_90"};
  kiln_module *m = compile_ok("const float2 G = make_float2(1, 2);\n"
                              "extern \"C\" __global__ void k(float *d) { d[0] = 1; }\n",
                              &opts);
  kiln_function *f = NULL;
  ASSERT_OK(kiln_module_get_function(m, "k", &f));
  kiln_module_free(m);
  const char *reads = "const float2 G = make_float2(1, 2);\n"
                      "extern \"C\" __global__ void k(float *d) { d[0] = G.x; }\n";
  ASSERT_STATUS(kiln_module_from_source(reads, &opts, &m), KILN_ERROR_COMPILE);
  ASSERT_CONTAINS(kiln_last_error(), "kernel.cu(1)");
}

/* A whole CUDA program, main and its host helpers with it, compiles as under nvcc --cubin: its
 * kernels are there. A kernel that calls host code is refused with NVRTC's first message. */
TEST(compile_leaves_out_a_whole_programs_host_code_as_nvcc_does) {
  const char *src =
      "#include <stdio.h>\n#include <cuda_runtime.h>\n"
      "__global__ void vectorAdd(const float *A, const float *B, float *C, int n)\n"
      "{ int i = blockDim.x * blockIdx.x + threadIdx.x; if (i < n) C[i] = A[i] + B[i]; }\n"
      "void fill(float *a, int n) { for (int i = 0; i < n; i++) a[i] = i; }\n"
      "void check(const char *what) {\n  cudaError_t e = cudaGetLastError();\n"
      "  if (e != cudaSuccess) { fprintf(stderr, \"%s\\n\", what); exit(1); }\n}\n"
      "void run(float *a, float *b, float *c, int n) { check(\"run\"); }\n"
      "int\nmain(void)\n{\n  int n = 15;\n  float a[n], b[n], c[n];\n  float *d;\n"
      "  cudaMalloc((void **)&d, n * sizeof(float));\n"
      "  cudaMemcpy(d, a, n * sizeof(float), cudaMemcpyHostToDevice);\n"
      "  vectorAdd<<<1, 256>>>(d, d, d, n);\n  fill(a, n); run(a, b, c, n);\n"
      "  cudaFree(d);\n  return 0;\n}\n";
  kiln_compile_opts opts = {.arch = "sm_90"};
  kiln_module *m = compile_ok(src, &opts);
  kiln_function *f = NULL;
  ASSERT_OK(kiln_module_get_function(m, "vectorAdd", &f));
  kiln_module_free(m);
  /* with a compound literal in a kernel too: both rewrites */
  const char *both = "__global__ void k(float *x) { x[0] = ((float2){1, 2}).x; }\n"
                     "int main(void) {\n  float *d;\n  cudaMalloc((void **)&d, 4);\n"
                     "  k<<<1, 1>>>(d);\n  return 0;\n}\n";
  m = compile_ok(both, &opts);
  ASSERT_OK(kiln_module_get_function(m, "k", &f));
  kiln_module_free(m);
  const char *calls_host = "void h(float **p) {\n  cudaMalloc((void **)p, 4);\n}\n"
                           "__global__ void k(float **p) { h(p); }\n";
  ASSERT_STATUS(kiln_module_from_source(calls_host, &opts, &m), KILN_ERROR_COMPILE);
  ASSERT_CONTAINS(kiln_last_error(), "kernel.cu(2)");
  ASSERT_CONTAINS(kiln_last_error(), "cudaMalloc");
  /* Mistyped kernels are refused as nvcc refuses them, never compiled into a module without
   * them: a head that declares nothing, and a program whose only kernel's head the blanking
   * would take for host code (it calls what only the host has). */
  const char *typo = "_global_ void laplace(float *x, int n)\n{\n  x[0] = n;\n}\n";
  ASSERT_STATUS(kiln_module_from_source(typo, &opts, &m), KILN_ERROR_COMPILE);
  ASSERT_CONTAINS(kiln_last_error(), "no storage class or type specifier");
  const char *no_kernel = "void k(float *x)\n{\n  cudaMalloc((void **)&x, 4);\n}\n"
                          "int main() {\n  return undefined_name;\n}\n";
  ASSERT_STATUS(kiln_module_from_source(no_kernel, &opts, &m), KILN_ERROR_COMPILE);
  ASSERT_CONTAINS(kiln_last_error(), "cudaMalloc");
  ASSERT_CONTAINS(kiln_last_error(), "but then has no kernel");
  /* A template kernel only main launches: the note says to name its instances, and named,
   * the program compiles without its host code. The gpuAssert helper's default argument
   * does not keep it from being left out. */
  const char *launched =
      "#include <cstdio>\n"
      "inline void gpuAssert(cudaError_t code, const char *file, int line,\n"
      "                      bool abort = true) {\n"
      "  if (code != cudaSuccess) {\n"
      "    fprintf(stderr, \"%s %s %d\", cudaGetErrorString(code), file, line);\n"
      "    if (abort) exit(code);\n  }\n}\n"
      "template <typename T> __global__ void twice(T *x) { x[0] *= 2; }\n"
      "int main() {\n  float *d;\n  gpuAssert(cudaMalloc((void **)&d, 4), "
      "__FILE__, __LINE__);\n  twice<<<1, 1>>>(d);\n  return 0;\n}\n";
  ASSERT_STATUS(kiln_module_from_source(launched, &opts, &m), KILN_ERROR_COMPILE);
  ASSERT_CONTAINS(kiln_last_error(), "name_expressions");
  ASSERT_CONTAINS(kiln_module_log(m), "but then has no kernel");
  kiln_module_free(m);
  const char *names[] = {"twice<float>"};
  kiln_compile_opts named = {.arch = "sm_90", .name_expressions = names, .n_name_expressions = 1};
  m = compile_ok(launched, &named);
  ASSERT_OK(kiln_module_get_function(m, "twice<float>", &f));
  kiln_module_free(m);
}

/* A source that closes a block it did not open is wrapped in extern "C" { }, its lines kept
 * where they were; braces in strings, characters, comments and directives count for nothing. */
TEST(extern_c_wraps_a_source_that_closes_pycudas_block) {
  const char *src = "}\ntemplate <class T> __device__ T twice(T x) { return 2 * x; }\n"
                    "extern \"C\" {\n__global__ void k(float *p) { p[0] = twice(p[0]); }\n";
  char *got = kiln__dialect_extern_c(src);
  ASSERT(got != NULL);
  ASSERT(strncmp(got, "extern \"C\" {\n#line 1\n", 21) == 0);
  ASSERT(strncmp(got + 21, src, strlen(src)) == 0);
  ASSERT_STR_EQ(got + 21 + strlen(src), "\n}\n");
  free(got);
  ASSERT(kiln__dialect_extern_c("__global__ void k(int *p) { p[0] = '}'; }\n"
                                "// }\n/* } */ const char *s = \"}}\";\n"
                                "#define CLOSE }\n#define LONG { \\\n  }\n") == NULL);
  ASSERT(kiln__dialect_extern_c("") == NULL);
  /* A digit separator is no quote: the brace after it still closes the block. A character
   * literal with a prefix is one. */
  got = kiln__dialect_extern_c("__device__ const int n = 1'000; }\n");
  ASSERT(got != NULL);
  free(got);
  ASSERT(kiln__dialect_extern_c("__device__ const char c = u8'}', d = L'}';\n") == NULL);
}

/* Such a source compiles, its kernel found by its C name; one wrong besides is refused for what
 * is wrong, at the source's own line. */
TEST(compile_takes_a_source_that_closes_pycudas_block) {
  const char *src = "}\ntemplate <class T> __device__ T twice(T x) { return 2 * x; }\n"
                    "extern \"C\" {\n__global__ void k(float *p) { p[0] = twice(p[0]); }\n";
  kiln_compile_opts opts = {.arch = "sm_90"};
  kiln_module *m = compile_ok(src, &opts);
  kiln_function *f;
  ASSERT_OK(kiln_module_get_function(m, "k", &f));
  ASSERT_EQ(kiln_function_param_count(f), 1);
  kiln_module_free(m);
  const char *wrong = "}\ntemplate <class T> __device__ T twice(T x) { return 2 * y; }\n"
                      "extern \"C\" {\n__global__ void k(float *p) { p[0] = twice(p[0]); }\n";
  ASSERT_STATUS(kiln_module_from_source(wrong, &opts, &m), KILN_ERROR_COMPILE);
  ASSERT_CONTAINS(kiln_last_error(), "kernel.cu(2): error: identifier \"y\" is undefined");
  kiln_module_free(m);
  /* One brace too many at the end is the source's mistake: refused where it is. */
  const char *extra = "__global__ void k(float *p) { p[0] = 1; }\n}\n";
  ASSERT_STATUS(kiln_module_from_source(extra, &opts, &m), KILN_ERROR_COMPILE);
  ASSERT_CONTAINS(kiln_last_error(), "kernel.cu(2): error: expected a declaration");
  kiln_module_free(m);
}
