/* The kernel cache: entries, the include scanner, keys, and the folder shared by processes.
 * NVRTC needs no GPU, so all of these run everywhere. Each test has a cache folder of its own
 * ($KILN_CACHE_DIR, set by the runner); "a new process" is a fork that has not compiled yet. */
#include "runner.h"

#include "../../engine/src/cache.h"
#include "../../engine/src/pch.h"
#include "../../engine/src/stdheaders.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *kernel_src =
    "extern \"C\" __global__ void scale(float *x, float s, int n)\n"
    "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= s; }\n";

static const kiln_compile_opts sm90 = {.arch = "sm_90"};

/* ---- Helpers ------------------------------------------------------------------------------ */

static int warnings;
static char last_warning[4096];

static void count_warning(const char *message, void *ctx) {
  (void)ctx;
  warnings++;
  snprintf(last_warning, sizeof last_warning, "%s", message);
}

/* Runs fn in a new process; its exit code (a failed ASSERT exits 1). */
static int in_child(void (*fn)(const void *), const void *arg) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    kiln_set_warning_handler(count_warning, NULL);
    fn(arg);
    exit(0); /* as a process ends: its pending hits go into the folder's counts */
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

#define IN_CHILD(fn, arg) ASSERT_EQ(in_child(fn, arg), 0)

static kiln_module *compile_ok(const char *src, const kiln_compile_opts *opts) {
  kiln_module *m = NULL;
  kiln_status s = kiln_module_from_source(src, opts, &m);
  if (s != KILN_OK) FAIL("compile failed: %s: %s", kiln_status_name(s), kiln_last_error());
  return m;
}

static kiln_cache_stats stats(void) {
  kiln_cache_stats s;
  kiln_cache_get_stats(&s);
  return s;
}

/* The path of the one entry in the folder, or "" when there is none. */
static void only_entry(const char *dir, char *out, size_t cap) {
  out[0] = '\0';
  DIR *top = opendir(dir);
  struct dirent *d;
  while (top && (d = readdir(top))) {
    if (strlen(d->d_name) != 2) continue;
    char shard[1024];
    snprintf(shard, sizeof shard, "%s/%s", dir, d->d_name);
    DIR *sub = opendir(shard);
    struct dirent *e;
    while (sub && (e = readdir(sub)))
      if (strlen(e->d_name) == 62) snprintf(out, cap, "%s/%s", shard, e->d_name);
    if (sub) closedir(sub);
  }
  if (top) closedir(top);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) FAIL("cannot write %s: %s", path, strerror(errno));
  fputs(text, f);
  fclose(f);
}

static void compile_expecting(const void *arg) {
  /* arg: "<compiles><disk_hits>" expected, e.g. "10" or "01" */
  const char *want = arg;
  kiln_module *m = compile_ok(kernel_src, &sm90);
  ASSERT_EQ(stats().compiles, want[0] - '0');
  ASSERT_EQ(stats().disk_hits, want[1] - '0');
  ASSERT_EQ(kiln_module_function_count(m), 1);
  ASSERT_STR_EQ(kiln_module_function_name(m, 0), "scale");
  kiln_module_free(m);
}

/* ---- Entries ------------------------------------------------------------------------------ */

static unsigned char *sample_entry(size_t *size, unsigned char key[KILN__KEY_SIZE]) {
  static char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n";
  static char cubin[] = "\x7f"
                        "ELF fake cubin";
  static char log[] = "a warning";
  static char name[] = "f<int>", low[] = "_Z1fIiEvv", kernel[] = "scale", path[] = "/tmp/h.h";
  static char *names[] = {name}, *lowered[] = {low};
  kiln__code code = {.arch = "sm_90",
                     .arch_num = 90,
                     .ptx = ptx,
                     .ptx_size = sizeof ptx - 1,
                     .cubin = cubin,
                     .cubin_size = sizeof cubin,
                     .log = log,
                     .n_names = 1,
                     .names = names,
                     .lowered = lowered};
  kiln_param params[2] = {{KILN_PARAM_PTR, 8, 8}, {KILN_PARAM_F32, 4, 4}};
  kiln__kernel k = {.name = kernel, .plain = kernel, .params = params, .n_params = 2};
  kiln__header rec = {.path = path, .exists = 1, .stat_trusted = 1, .size = 7};
  kiln__headers headers = {.items = &rec, .n = 1, .cap = 1};
  for (int i = 0; i < KILN__KEY_SIZE; i++) key[i] = (unsigned char)(i * 7);
  unsigned char *buf = NULL;
  ASSERT_EQ(kiln__entry_encode(key, &code, &k, 1, &headers, &buf, size), KILN_OK);
  return buf;
}

TEST(cache_entry_round_trip_and_every_damage) {
  unsigned char key[KILN__KEY_SIZE];
  size_t size;
  unsigned char *buf = sample_entry(&size, key);
  kiln__cached c;
  const char *why = kiln__entry_decode(buf, size, key, &c);
  if (why) FAIL("a fresh entry does not decode: %s", why);
  ASSERT_STR_EQ(c.code.arch, "sm_90");
  ASSERT_EQ(c.code.arch_num, 90);
  ASSERT_CONTAINS(c.code.ptx, ".target sm_90");
  ASSERT_EQ(c.code.cubin_size, 16);
  ASSERT_STR_EQ(c.code.log, "a warning");
  ASSERT_STR_EQ(c.code.lowered[0], "_Z1fIiEvv");
  ASSERT_EQ(c.n_kernels, 1);
  ASSERT_EQ(c.kernels[0].n_params, 2);
  ASSERT_EQ(c.kernels[0].params[1].cls, KILN_PARAM_F32);
  ASSERT_EQ(c.headers.n, 1);
  ASSERT_STR_EQ(c.headers.items[0].path, "/tmp/h.h");
  kiln__entry_free_cached(&c);
  /* Every truncation, and every single flipped byte, is caught. */
  for (size_t n = 0; n < size; n++)
    if (!kiln__entry_decode(buf, n, key, &c)) FAIL("a %zu-byte prefix decoded", n);
  for (size_t i = 0; i < size; i++) {
    buf[i] ^= 0x20;
    if (!kiln__entry_decode(buf, size, key, &c)) FAIL("flipping byte %zu went unnoticed", i);
    buf[i] ^= 0x20;
  }
  unsigned char other[KILN__KEY_SIZE] = {1};
  ASSERT_CONTAINS(kiln__entry_decode(buf, size, other, &c), "another key");
  free(buf);
}

/* ---- The include scanner and header records ----------------------------------------------- */

typedef struct found {
  char names[64][64];
  int angled[64];
  int n;
} found;

static void collect(void *ctx, const char *name, size_t len, int angled) {
  found *f = ctx;
  if (f->n < 64) {
    snprintf(f->names[f->n], sizeof f->names[0], "%.*s", (int)len, name);
    f->angled[f->n++] = angled;
  }
}

/* 1 when name was reported (with that angled flag), however often: the scan reads a text
 * several ways and may report a header once per reading. */
static int was_found(const found *f, const char *name, int angled) {
  for (int i = 0; i < f->n; i++)
    if (strcmp(f->names[i], name) == 0 && f->angled[i] == angled) return 1;
  return 0;
}

/* What decides whether a compile gets kiln's C headers and whether its key names the working
 * folder: a text that could name a header in any spelling must say so. */
TEST(headers_named_sees_every_way_to_name_a_header) {
  const char *naming[] = {"#include <stdio.h>",
                          "#include_next <x.h>",
                          "#import \"x.h\"",
                          "#embed \"data.bin\"",
                          "#if __has_include(<x.h>)\n#endif",
                          "%:include <x.h>",
                          "#inc\\\nlude <x.h>",
                          "#inc\\\r\nlude <x.h>",
                          "?\?=include <x.h>",
                          "#inc?\?/\nlude <x.h>",
                          "--pre-include=x.h"};
  for (size_t i = 0; i < TEST_COUNT(naming); i++)
    if (!kiln__headers_named(naming[i])) FAIL("'%s' was taken to name no header", naming[i]);
  const char *plain[] = {"", "__global__ void k(int *p) { p[0] = 1; }", "-DX=1", "-lineinfo",
                         "// a comment that names no header\n"};
  for (size_t i = 0; i < TEST_COUNT(plain); i++)
    if (kiln__headers_named(plain[i])) FAIL("'%s' was taken to name a header", plain[i]);
  ASSERT_EQ(kiln__headers_named(NULL), 0);
  /* The compile: any of its texts may. */
  const char *define[] = {"-DX=1"}, *pre[] = {"--pre-include=x.h"};
  const char *hn[] = {"h.h"}, *quiet[] = {"int a;"}, *chained[] = {"#include <cstdio>"};
  kiln_compile_opts by_option = {.options = pre, .n_options = 1};
  kiln_compile_opts none = {.options = define,
                            .n_options = 1,
                            .header_names = hn,
                            .header_sources = quiet,
                            .n_headers = 1};
  kiln_compile_opts by_header = {.header_names = hn, .header_sources = chained, .n_headers = 1};
  ASSERT_EQ(kiln__headers_reachable("__global__ void k() {}", NULL), 0);
  ASSERT_EQ(kiln__headers_reachable("__global__ void k() {}", &none), 0);
  ASSERT_EQ(kiln__headers_reachable("#include \"h.h\"", &none), 1);
  ASSERT_EQ(kiln__headers_reachable("__global__ void k() {}", &by_option), 1);
  ASSERT_EQ(kiln__headers_reachable("__global__ void k() {}", &by_header), 1);
}

TEST(include_scan_finds_every_form) {
  const char *text = "#include \"a.h\"\n"
                     "  #  include <b/c.h>\n"
                     "#include_next <d.h>\n"
                     "#import \"e.h\"\n"
                     "#if __has_include(<f.h>) && defined(X)\n#endif\n"
                     "#if 0\n#include \"under_if0.h\"\n#endif\n"
                     "int x; // #include \"comment.h\" is in a comment\n"
                     "#include CONFIG_HEADER\n"
                     "#define INC \"not.h\"\n";
  found f = {0};
  int computed = kiln__headers_find_includes(text, strlen(text), collect, &f);
  ASSERT_EQ(computed, 1);
  const char *want[] = {"a.h", "b/c.h", "d.h", "e.h", "f.h", "under_if0.h"};
  int angled[] = {0, 1, 1, 0, 1, 0};
  for (int i = 0; i < 6; i++) ASSERT_EQ(was_found(&f, want[i], angled[i]), 1);
  ASSERT_EQ(was_found(&f, "comment.h", 0), 0);
  ASSERT_EQ(was_found(&f, "not.h", 0), 0);
  /* A line cut short never reads past the end. */
  for (size_t n = 0; n < strlen(text); n++) kiln__headers_find_includes(text, n, collect, &f);
}

/* Every way NVRTC's preprocessor can be made to open a header: comments and splices inside
 * the directive, digraphs and trigraphs, a directive after a comment that spans lines, and
 * what literals and digit separators must not hide. */
TEST(include_scan_reads_as_the_preprocessor_does) {
  const char *text = "#/**/include \"comment.h\"\n"
                     "# \\\ninclude \"splice.h\"\n"
                     "#\\\r\ninclude \"crlf.h\"\n"
                     "inc\\\nlude_not_a_directive;\n"
                     "#inc\\\nlude \"word_splice.h\"\n"
                     "%:include \"digraph.h\"\n"
                     "?\?=include \"trigraph.h\"\n"
                     "?\?=inc?\?/\nlude \"trigraph_splice.h\"\n"
                     "int a; /*\n*/ #include \"after_comment.h\"\n"
                     "#include /* spans\n lines */ <between.h>\n"
                     "__device__ const char *s = \"/*\";\n"
                     "#include \"after_string.h\"\n"
                     "__device__ int n = 1'000; __device__ char c = '\"';\n"
                     "#include \"after_separator.h\"\n"
                     "__device__ const char *r = R\"x(/* )\" #include \"not_raw.h\" )x\";\n"
                     "#include \"after_raw.h\"\n"
                     "// a comment that ends in a splice \\\n#include \"spliced_away.h\"\n"
                     "// ?\?/\n#include \"trigraph_spliced_away_or_not.h\"\n"
                     "#if __has_include /**/ ( \"has.h\" )\n#endif\n"
                     "#include <a/**/b.h>\n"
                     "#include <star/*.h>\n"
                     "#include \"after_star.h\" // */\n";
  found f = {0};
  ASSERT_EQ(kiln__headers_find_includes(text, strlen(text), collect, &f), 0);
  const char *want[] = {"comment.h",
                        "splice.h",
                        "crlf.h",
                        "word_splice.h",
                        "digraph.h",
                        "trigraph.h",
                        "trigraph_splice.h",
                        "after_comment.h",
                        "after_string.h",
                        "after_separator.h",
                        "after_raw.h",
                        "has.h",
                        "trigraph_spliced_away_or_not.h"};
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    if (!was_found(&f, want[i], 0)) fprintf(stderr, "not found: %s\n", want[i]);
    ASSERT_EQ(was_found(&f, want[i], 0), 1);
  }
  ASSERT_EQ(was_found(&f, "between.h", 1), 1);
  ASSERT_EQ(was_found(&f, "a/**/b.h", 1), 1); /* a header name is read as written */
  ASSERT_EQ(was_found(&f, "star/*.h", 1), 1);
  ASSERT_EQ(was_found(&f, "after_star.h", 0), 1); /* no comment opened inside the name */
  ASSERT_EQ(was_found(&f, "spliced_away.h", 0), 0);
  for (size_t n = 0; n < strlen(text); n++) kiln__headers_find_includes(text, n, collect, &f);
}

static int has_record(const kiln__headers *h, const char *suffix, int exists) {
  for (int i = 0; i < h->n; i++) {
    size_t n = strlen(h->items[i].path), k = strlen(suffix);
    if (n >= k && strcmp(h->items[i].path + n - k, suffix) == 0 && h->items[i].exists == exists)
      return 1;
  }
  return 0;
}

TEST(headers_scan_records_and_notices_changes) {
  char root[] = "/tmp/kiln-headers-XXXXXX";
  ASSERT(mkdtemp(root));
  char inc[1100], sub[1100], path[1200];
  snprintf(inc, sizeof inc, "%s/inc", root);
  snprintf(sub, sizeof sub, "%s/inc/sub", root);
  mkdir(inc, 0700);
  mkdir(sub, 0700);
  snprintf(path, sizeof path, "%s/a.h", inc);
  write_file(path, "#pragma once\n#include \"b.h\"\n#include <sub/c.h>\n#include <cuda_fp16.h>\n");
  snprintf(path, sizeof path, "%s/b.h", inc);
  write_file(path, "#define B 1\n");
  snprintf(path, sizeof path, "%s/c.h", sub);
  write_file(path, "#include \"a.h\" /* a cycle: scanned once */\n");
  const char *dirs[] = {inc};
  kiln_compile_opts opts = {.include_dirs = dirs, .n_include_dirs = 1};
  kiln__headers h;
  ASSERT_EQ(kiln__headers_scan("#include \"a.h\"\n", &opts, root, &h), KILN_OK);
  ASSERT(!h.uncacheable);
  ASSERT(has_record(&h, "/inc/a.h", 1));
  ASSERT(has_record(&h, "/inc/b.h", 1));
  ASSERT(has_record(&h, "/inc/sub/c.h", 1));
  ASSERT(has_record(&h, "/inc/cuda_fp16.h", 0)); /* looked for, not there: the toolkit's */
  ASSERT(has_record(&h, "/a.h", 0));             /* beside the source, not there */
  ASSERT(kiln__headers_fresh(&h));

  /* Same size, other contents: caught by contents (the file is too fresh for its times). */
  snprintf(path, sizeof path, "%s/b.h", inc);
  write_file(path, "#define B 2\n");
  ASSERT(!kiln__headers_fresh(&h));
  write_file(path, "#define B 1\n"); /* back as it was: fresh again, whatever the times */
  ASSERT(kiln__headers_fresh(&h));
  /* A header appearing where the search looked first shadows the old one. */
  snprintf(path, sizeof path, "%s/a.h", root);
  write_file(path, "// new\n");
  ASSERT(!kiln__headers_fresh(&h));
  unlink(path);
  ASSERT(kiln__headers_fresh(&h));
  kiln__headers_free(&h);

  ASSERT_EQ(kiln__headers_scan("#include HEADER\n", &opts, root, &h), KILN_OK);
  ASSERT(h.uncacheable);
  kiln__headers_free(&h);
  kiln_test_remove_tree(root);
}

/* ---- Keys --------------------------------------------------------------------------------- */

TEST(cache_key_covers_every_input) {
  kiln__nvrtc_id id = {.major = 13, .minor = 0, .lib_bytes = 1000, .n_archs = 1, .archs = {90}};
  char cwd[PATH_MAX];
  unsigned char keys[10][KILN__KEY_SIZE];
  const char *o1[] = {"-DA=1"}, *o2[] = {"-DA=2"}, *names[] = {"f<int>"};
  const char *hn[] = {"h.h"}, *hs1[] = {"int a;"}, *hs2[] = {"int b;"};
  kiln_compile_opts a = {.options = o1, .n_options = 1};
  kiln_compile_opts b = {.options = o2, .n_options = 1};
  kiln_compile_opts c = {
      .options = o1, .n_options = 1, .name_expressions = names, .n_name_expressions = 1};
  kiln_compile_opts d = {.header_names = hn, .header_sources = hs1, .n_headers = 1};
  kiln_compile_opts e = {.header_names = hn, .header_sources = hs2, .n_headers = 1};
  kiln__nvrtc_id newer = id, rebuilt = id;
  newer.minor = 1;
  rebuilt.lib_bytes = 1001;
  ASSERT_EQ(kiln__cache_key("src", &a, &id, "sm_90", keys[0], cwd), KILN_OK);
  kiln__cache_key("src", &b, &id, "sm_90", keys[1], cwd);
  kiln__cache_key("src", &a, &id, "sm_80", keys[2], cwd);
  kiln__cache_key("src", &c, &id, "sm_90", keys[3], cwd);
  kiln__cache_key("src", &d, &id, "sm_90", keys[4], cwd);
  kiln__cache_key("src", &e, &id, "sm_90", keys[5], cwd);
  kiln__cache_key("src", &a, &newer, "sm_90", keys[6], cwd);
  kiln__cache_key("src", &a, &rebuilt, "sm_90", keys[7], cwd);
  kiln__cache_key("src2", &a, &id, "sm_90", keys[8], cwd);
  kiln__cache_key("src", &a, &id, "sm_90", keys[9], cwd);
  for (int i = 0; i < 9; i++)
    for (int j = i + 1; j < 9; j++)
      if (memcmp(keys[i], keys[j], KILN__KEY_SIZE) == 0) FAIL("keys %d and %d are equal", i, j);
  ASSERT(memcmp(keys[0], keys[9], KILN__KEY_SIZE) == 0);
  ASSERT_STR_EQ(cwd, ""); /* nothing included: the key does not depend on the folder */
  kiln__cache_key("#include \"x.h\"", &a, &id, "sm_90", keys[0], cwd);
  ASSERT(cwd[0] == '/');
  /* #import reads a file as #include does: its key names the folder too. */
  cwd[0] = '\0';
  kiln__cache_key("#import \"x.h\"", &a, &id, "sm_90", keys[0], cwd);
  ASSERT(cwd[0] == '/');
}

/* ---- The folder, across processes --------------------------------------------------------- */

/* The standard headers' digest goes into every key; it is written out in stdheaders.c so that
 * no process hashes the texts. An edited text must come with its new digest: this prints it. */
TEST(stdheaders_digest_matches_the_texts) {
  unsigned char now[KILN__KEY_SIZE];
  ASSERT_OK(kiln__stdheaders_digest(now));
  char computed[2 * KILN__KEY_SIZE + 1], kept[2 * KILN__KEY_SIZE + 1];
  kiln__hash_hex(now, computed);
  kiln__hash_hex(kiln__stdheaders_digest_kept(), kept);
  ASSERT_STR_EQ(kept, computed);
}

/* A lasting PCH holds kiln's own headers parsed (kiln_nvcc_host.h first): its key follows their
 * digest, or a file made by a kiln whose texts differ would be taken for this one's. */
TEST(pch_key_follows_kilns_headers) {
  const char *src = "#include <cuda_fp16.h>\n__global__ void k() {}\n";
  const char *args[] = {"-arch=sm_90", "-DN=1"};
  size_t n = strlen("#include <cuda_fp16.h>\n");
  unsigned char other[KILN__KEY_SIZE], a[KILN__KEY_SIZE], b[KILN__KEY_SIZE], c[KILN__KEY_SIZE];
  memcpy(other, kiln__stdheaders_digest_kept(), sizeof other);
  other[0] ^= 1;
  ASSERT_OK(
      kiln__pch_key(src, n, NULL, args, 2, "/tmp/c", "/tmp", kiln__stdheaders_digest_kept(), a));
  ASSERT_OK(
      kiln__pch_key(src, n, NULL, args, 2, "/tmp/c", "/tmp", kiln__stdheaders_digest_kept(), b));
  ASSERT_OK(kiln__pch_key(src, n, NULL, args, 2, "/tmp/c", "/tmp", other, c));
  ASSERT(memcmp(a, b, sizeof a) == 0);
  ASSERT(memcmp(a, c, sizeof a) != 0);
}

TEST(cache_second_process_hits) {
  IN_CHILD(compile_expecting, "10");
  IN_CHILD(compile_expecting, "01");
  kiln_cache_info info;
  ASSERT_EQ(kiln_cache_get_info(&info), KILN_OK);
  ASSERT_EQ(info.entries, 1);
  ASSERT_EQ(info.hits, 1);
  ASSERT_EQ(info.misses, 1);
  struct stat st;
  ASSERT_EQ(stat(info.dir, &st), 0);
  ASSERT_EQ(st.st_mode & 0777, 0700);
}

static char header_dir[256];

static void compile_with_header(const void *arg) {
  const char *want = arg; /* "<compiles><value>" */
  const char *dirs[] = {header_dir};
  kiln_compile_opts opts = {.arch = "sm_90", .include_dirs = dirs, .n_include_dirs = 1};
  kiln_module *m = compile_ok("#include \"value.h\"\n"
                              "extern \"C\" __global__ void k(int *p) { *p = VALUE; }\n",
                              &opts);
  ASSERT_EQ(stats().compiles, want[0] - '0');
  char imm[32];
  snprintf(imm, sizeof imm, ", %c;", want[1]);
  ASSERT_CONTAINS(kiln_module_ptx(m, NULL), imm); /* st.global.u32 [..], VALUE; */
  kiln_module_free(m);
}

/* The hits the folder's stats file records, read from the file itself. */
static unsigned long long hits_in_file(void) {
  char path[4096], text[256] = "";
  snprintf(path, sizeof path, "%s/stats", getenv("KILN_CACHE_DIR"));
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  unsigned long long hits = 0;
  return sscanf(text, "hits %llu", &hits) == 1 ? hits : 0;
}

/* A disk hit, with the table emptied first so that it reads the disk. */
static void disk_hit(void) {
  kiln_module_table_set_limit(0);
  kiln_cache_stats before = stats();
  kiln_module *m = compile_ok(kernel_src, &sm90);
  kiln_module_free(m);
  ASSERT_EQ(stats().disk_hits, before.disk_hits + 1);
}

static void hit_without_exit(const void *arg) {
  (void)arg;
  disk_hit();
  _exit(0); /* as a signal would end it: its pending hit is not written */
}

static void one_disk_hit(const void *arg) {
  (void)arg;
  disk_hit();
}

static void hits_then_looks(const void *arg) {
  (void)arg;
  disk_hit();
  ASSERT_EQ(hits_in_file(), 0); /* a hit writes nothing */
  kiln_cache_info info;
  ASSERT_EQ(kiln_cache_get_info(&info), KILN_OK);
  ASSERT_EQ(info.hits, 1); /* this process's own, written when it looks */
  ASSERT_EQ(hits_in_file(), 1);
  disk_hit();
  disk_hit();
  /* A child of fork inherits none of the two pending: it writes only its own. */
  IN_CHILD(one_disk_hit, NULL);
  ASSERT_EQ(hits_in_file(), 2);
  /* exit writes the two (in_child exits with exit(3)) */
}

TEST(cache_hits_are_counted_without_a_write_per_hit) {
  IN_CHILD(compile_expecting, "10");
  ASSERT_EQ(hits_in_file(), 0);
  IN_CHILD(hits_then_looks, NULL);
  ASSERT_EQ(hits_in_file(), 4);
  IN_CHILD(hit_without_exit, NULL);
  ASSERT_EQ(hits_in_file(), 4);
  kiln_cache_info info;
  ASSERT_EQ(kiln_cache_get_info(&info), KILN_OK);
  ASSERT_EQ(info.hits, 4);
  ASSERT_EQ(info.misses, 1);
}

TEST(cache_header_edit_is_a_miss) {
  snprintf(header_dir, sizeof header_dir, "/tmp/kiln-hdr-XXXXXX");
  ASSERT(mkdtemp(header_dir));
  char path[512];
  snprintf(path, sizeof path, "%s/value.h", header_dir);
  write_file(path, "#define VALUE 3\n");
  IN_CHILD(compile_with_header, "13");
  IN_CHILD(compile_with_header, "03");
  write_file(path, "#define VALUE 4\n"); /* edited in place, same size */
  IN_CHILD(compile_with_header, "14");
  IN_CHILD(compile_with_header, "04");
  kiln_test_remove_tree(header_dir);
}

static void compile_expecting_one_warning(const void *arg) {
  (void)arg;
  kiln_module *m = compile_ok(kernel_src, &sm90);
  ASSERT_EQ(stats().compiles, 1);
  ASSERT_EQ(stats().corrupt, 1);
  ASSERT_EQ(warnings, 1);
  ASSERT_CONTAINS(last_warning, "is damaged");
  kiln_module_free(m);
}

TEST(cache_damaged_entry_is_recompiled_with_one_warning) {
  const char *dir = getenv("KILN_CACHE_DIR");
  char entry[2048];
  for (int damage = 0; damage < 4; damage++) {
    IN_CHILD(compile_expecting, damage == 0 ? "10" : "01");
    only_entry(dir, entry, sizeof entry);
    ASSERT(entry[0]);
    struct stat st;
    ASSERT_EQ(stat(entry, &st), 0);
    int fd = open(entry, O_RDWR);
    ASSERT(fd >= 0);
    if (damage == 0) { /* a flipped byte in the middle */
      unsigned char b;
      ASSERT_EQ(pread(fd, &b, 1, st.st_size / 2), 1);
      b ^= 0xff;
      ASSERT_EQ(pwrite(fd, &b, 1, st.st_size / 2), 1);
    } else if (damage == 1) {
      ASSERT_EQ(ftruncate(fd, st.st_size / 2), 0);
    } else if (damage == 2) {
      ASSERT_EQ(ftruncate(fd, 0), 0);
    } else { /* something else under that name */
      ASSERT_EQ(ftruncate(fd, 0), 0);
      ASSERT_EQ(pwrite(fd, "#!/bin/sh\necho hello\n", 21, 0), 21);
    }
    close(fd);
    IN_CHILD(compile_expecting_one_warning, NULL);
    IN_CHILD(compile_expecting, "01"); /* replaced by a good one */
  }
}

static void compile_variant(const void *arg) {
  char src[512];
  snprintf(src, sizeof src, "%s// variant %d\n", kernel_src, *(const int *)arg);
  kiln_module *m = compile_ok(src, &sm90);
  kiln_module_free(m);
}

/* Every entry in dir decodes whole under its own key. */
static void assert_entries_whole(const char *dir) {
  DIR *top = opendir(dir);
  struct dirent *d;
  while (top && (d = readdir(top))) {
    if (strlen(d->d_name) != 2) continue;
    char shard[1024];
    snprintf(shard, sizeof shard, "%s/%s", dir, d->d_name);
    DIR *sub = opendir(shard);
    struct dirent *e;
    while (sub && (e = readdir(sub))) {
      if (strlen(e->d_name) != 62) continue;
      unsigned char key[KILN__KEY_SIZE];
      char hex[65];
      snprintf(hex, sizeof hex, "%.2s%.62s", d->d_name, e->d_name); /* lengths checked above */
      for (int i = 0; i < KILN__KEY_SIZE; i++) sscanf(hex + 2 * i, "%2hhx", &key[i]);
      char path[2048];
      snprintf(path, sizeof path, "%s/%s", shard, e->d_name);
      FILE *f = fopen(path, "rb");
      ASSERT(f);
      static unsigned char buf[1 << 20];
      size_t n = fread(buf, 1, sizeof buf, f);
      fclose(f);
      kiln__cached c;
      const char *why = kiln__entry_decode(buf, n, key, &c);
      if (why) FAIL("%s is damaged after a killed writer: %s", path, why);
      kiln__entry_free_cached(&c);
    }
    if (sub) closedir(sub);
  }
  if (top) closedir(top);
}

TEST(cache_killed_writer_never_leaves_a_damaged_entry) {
  const char *dir = getenv("KILN_CACHE_DIR");
  /* How long one compile takes here, so the kills land all over it, its write included. */
  struct timespec t0, t1;
  int warm = -1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  IN_CHILD(compile_variant, &warm);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  long span_us = (t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000;
  srand(12345);
  int finished = 0;
  for (int i = 0; i < 100; i++) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
      compile_variant(&i);
      _exit(0);
    }
    usleep((useconds_t)(rand() % (span_us + span_us / 4 + 1)));
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    finished += WIFEXITED(status);
    assert_entries_whole(dir);
  }
  printf("  %d of 100 writers finished before the kill\n", finished);
  /* A dead holder's lock is free: every source still compiles (or hits) at once. */
  for (int i = 0; i < 100; i += 9) IN_CHILD(compile_variant, &i);
  assert_entries_whole(dir);
}

static void compile_two_on_a_full_disk(const void *arg) {
  (void)arg;
  signal(SIGXFSZ, SIG_IGN); /* as Python does: a write past the limit is EFBIG */
  struct rlimit lim = {100, 100};
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
  kiln_module *a = compile_ok(kernel_src, &sm90);
  int variant = 7;
  compile_variant(&variant);
  ASSERT_EQ(stats().compiles, 2);
  ASSERT_EQ(stats().stores, 0);
  ASSERT_EQ(warnings, 1);
  ASSERT_CONTAINS(last_warning, "cannot be written");
  ASSERT_EQ(kiln_module_function_count(a), 1);
  kiln_module_free(a);
}

TEST(cache_full_disk_warns_once_and_compiles) { IN_CHILD(compile_two_on_a_full_disk, NULL); }

static void compile_storing_without_a_warning(const void *arg) {
  (void)arg;
  compile_expecting("10");
  ASSERT_EQ(stats().stores, 1);
  ASSERT_EQ(warnings, 0);
}

/* A store no longer makes its shard folder every time: one removed since the cache folder was
 * set up is made again, and the entry is stored and then found by another process. */
TEST(cache_store_remakes_a_removed_shard_folder) {
  kiln_cache_info info;
  ASSERT_EQ(kiln_cache_get_info(&info), KILN_OK);
  /* A folder whose shards a first store made, all of them then removed but the last one, by
   * which a store judges that the shards are there: the entry's own is made again. */
  int removed = 0;
  for (int i = 0; i < 256; i++) {
    char shard[PATH_MAX + 8];
    snprintf(shard, sizeof shard, "%s/%02x", info.dir, i);
    mkdir(shard, 0700);
    removed += i < 255 && rmdir(shard) == 0;
  }
  ASSERT_EQ(removed, 255);
  IN_CHILD(compile_storing_without_a_warning, NULL);
  char entry[PATH_MAX];
  only_entry(info.dir, entry, sizeof entry);
  ASSERT(entry[0] != '\0');
  IN_CHILD(compile_expecting, "01");
}

static void read_text(const char *path, char *out, size_t cap) {
  FILE *f = fopen(path, "r");
  ASSERT(f != NULL);
  size_t n = fread(out, 1, cap - 1, f);
  out[n] = '\0';
  fclose(f);
}

/* The folder's counts after each store are exact, whether the file was longer before (edited
 * by hand: its tail goes) or not. */
TEST(cache_stats_file_counts_stay_exact) {
  kiln_cache_info info;
  ASSERT_EQ(kiln_cache_get_info(&info), KILN_OK);
  char path[PATH_MAX + 8], text[512];
  snprintf(path, sizeof path, "%s/stats", info.dir);
  int variant = 1;
  compile_variant(&variant);
  read_text(path, text, sizeof text);
  ASSERT_STR_EQ(text, "hits 0\nmisses 1\nevictions 0\n");
  variant = 2;
  compile_variant(&variant);
  read_text(path, text, sizeof text);
  ASSERT_STR_EQ(text, "hits 0\nmisses 2\nevictions 0\n");
  FILE *f = fopen(path, "w");
  ASSERT(f != NULL);
  fputs("hits 5\nmisses 7\nevictions 2\n# a note left here by hand, longer than the counts\n", f);
  fclose(f);
  variant = 3;
  compile_variant(&variant);
  read_text(path, text, sizeof text);
  ASSERT_STR_EQ(text, "hits 5\nmisses 8\nevictions 2\n");
  ASSERT_EQ(kiln_cache_get_info(&info), KILN_OK);
  ASSERT_EQ(info.hits, 5);
  ASSERT_EQ(info.misses, 8);
  ASSERT_EQ(info.evictions, 2);
}

static void compile_in_a_read_only_folder(const void *arg) {
  (void)arg;
  if (geteuid() == 0 && setuid(65534) != 0) FAIL("cannot become nobody: %s", strerror(errno));
  kiln_module *a = compile_ok(kernel_src, &sm90); /* read: a hit */
  ASSERT_EQ(stats().disk_hits, 1);
  int variants[2] = {3, 4};
  compile_variant(&variants[0]); /* not written: one warning for both */
  compile_variant(&variants[1]);
  ASSERT_EQ(stats().compiles, 2);
  ASSERT_EQ(stats().stores, 0);
  ASSERT_EQ(warnings, 1);
  ASSERT_CONTAINS(last_warning, "cannot be written");
  kiln_module_free(a);
}

static void chown_tree(const char *dir, uid_t uid, mode_t dir_mode) {
  DIR *top = opendir(dir);
  struct dirent *d;
  while (top && (d = readdir(top))) {
    if (d->d_name[0] == '.') continue;
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, d->d_name);
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) chown_tree(path, uid, dir_mode);
    else if (chown(path, uid, (gid_t)-1) != 0) FAIL("chown %s", path);
  }
  if (top) closedir(top);
  if (chown(dir, uid, (gid_t)-1) != 0 || chmod(dir, dir_mode) != 0) FAIL("chown %s", dir);
}

TEST(cache_read_only_folder_is_read_not_written) {
  const char *dir = getenv("KILN_CACHE_DIR");
  IN_CHILD(compile_expecting, "10");
  /* Root writes anywhere, so as root the reader runs as nobody, owning a folder it cannot
   * write. */
  chown_tree(dir, geteuid() == 0 ? 65534 : geteuid(), 0500);
  IN_CHILD(compile_in_a_read_only_folder, NULL);
  chmod(dir, 0700);
}

static void compile_in_an_open_folder(const void *arg) {
  (void)arg;
  kiln_module *m = compile_ok(kernel_src, &sm90);
  ASSERT_EQ(stats().compiles, 1); /* the entry there was not loaded */
  ASSERT_EQ(stats().disk_hits, 0);
  ASSERT_EQ(stats().stores, 0);
  ASSERT_EQ(warnings, 1);
  ASSERT_CONTAINS(last_warning, "others can write to it");
  kiln_module_free(m);
}

TEST(cache_folder_others_can_write_is_refused) {
  const char *dir = getenv("KILN_CACHE_DIR");
  IN_CHILD(compile_expecting, "10");
  ASSERT_EQ(chmod(dir, 0777), 0);
  IN_CHILD(compile_in_an_open_folder, NULL);
  kiln_cache_info info;
  kiln_cache_get_info(&info);
  ASSERT(!info.enabled);
  ASSERT_CONTAINS(info.reason, "others can write");
}

static void compile_from_layer(const void *arg) {
  (void)arg;
  kiln_module *m = compile_ok(kernel_src, &sm90);
  ASSERT_EQ(stats().disk_hits, 1);
  ASSERT_EQ(stats().compiles, 0);
  int variant = 5;
  compile_variant(&variant); /* a miss goes to the main folder, never to the layer */
  ASSERT_EQ(warnings, 0);
  kiln_module_free(m);
}

TEST(cache_read_only_layer_is_searched_never_written) {
  char layer[1024], main_dir[1100];
  snprintf(layer, sizeof layer, "%s", getenv("KILN_CACHE_DIR"));
  IN_CHILD(compile_expecting, "10");
  snprintf(main_dir, sizeof main_dir, "%s/main", layer);
  setenv("KILN_CACHE_PATH", layer, 1);
  setenv("KILN_CACHE_DIR", main_dir, 1);
  IN_CHILD(compile_from_layer, NULL);
  kiln_cache_info info;
  kiln_cache_get_info(&info);
  ASSERT_STR_EQ(info.layers, layer);
  ASSERT_EQ(info.entries, 1); /* the variant, in main */
  setenv("KILN_CACHE_DIR", layer, 1);
  unsetenv("KILN_CACHE_PATH");
  kiln_cache_get_info(&info);
  ASSERT_EQ(info.entries, 1); /* its own: main/ is not a shard */
}

static void compile_numbered(const void *arg) { compile_variant(arg); }

TEST(cache_bound_evicts_least_recently_used) {
  const char *dir = getenv("KILN_CACHE_DIR");
  int v[6] = {0, 1, 2, 3, 4, 5};
  IN_CHILD(compile_numbered, &v[0]);
  char entry[2048];
  only_entry(dir, entry, sizeof entry);
  struct stat st;
  ASSERT_EQ(stat(entry, &st), 0);
  /* Room for three entries and a half. */
  char max[32];
  snprintf(max, sizeof max, "%lld", (long long)st.st_size * 7 / 2);
  setenv("KILN_CACHE_MAX_BYTES", max, 1);
  for (int i = 1; i < 3; i++) {
    usleep(20000);
    IN_CHILD(compile_numbered, &v[i]);
  }
  usleep(20000);
  IN_CHILD(compile_numbered, &v[0]); /* a hit: 0 becomes the most recent */
  usleep(20000);
  IN_CHILD(compile_numbered, &v[3]); /* over the bound: 1, the least recent, goes */
  kiln_cache_info info;
  kiln_cache_get_info(&info);
  ASSERT(info.bytes <= info.max_bytes);
  ASSERT(info.evictions >= 1);
  kiln_cache_stats before = stats();
  compile_variant(&v[0]);
  compile_variant(&v[3]);
  ASSERT_EQ(stats().disk_hits - before.disk_hits, 2);
  compile_variant(&v[1]);
  ASSERT_EQ(stats().compiles - before.compiles, 1);
}

static void compile_uncached(const void *arg) {
  (void)arg;
  compile_ok(kernel_src, &sm90);
  ASSERT_EQ(stats().compiles, 1);
  ASSERT_EQ(stats().stores, 0);
}

TEST(cache_off_writes_nothing) {
  setenv("KILN_CACHE", "0", 1);
  IN_CHILD(compile_uncached, NULL);
  IN_CHILD(compile_uncached, NULL);
  char entry[2048];
  only_entry(getenv("KILN_CACHE_DIR"), entry, sizeof entry);
  ASSERT_STR_EQ(entry, "");
}

TEST(cache_prune_and_clear) {
  int v[3] = {0, 1, 2};
  for (int i = 0; i < 3; i++) IN_CHILD(compile_numbered, &v[i]);
  kiln_cache_info info;
  kiln_cache_get_info(&info);
  ASSERT_EQ(info.entries, 3);
  uint64_t removed = 0;
  ASSERT_EQ(kiln_cache_prune(info.bytes - 1, &removed), KILN_OK);
  ASSERT_EQ(removed, 1);
  ASSERT_EQ(kiln_cache_clear(&removed), KILN_OK);
  ASSERT_EQ(removed, 2);
  kiln_cache_get_info(&info);
  ASSERT_EQ(info.entries, 0);
}

/* ---- Prebuilt code ------------------------------------------------------------------------ */

TEST(module_from_image_reads_ptx_and_refuses_garbage) {
  kiln_module *m = compile_ok(kernel_src, &sm90);
  size_t n;
  const char *ptx = kiln_module_ptx(m, &n);
  kiln_module *p = NULL;
  ASSERT_EQ(kiln_module_from_image(ptx, n, &p), KILN_OK);
  ASSERT_STR_EQ(kiln_module_arch(p), "sm_90");
  kiln_function *f;
  ASSERT_EQ(kiln_module_get_function(p, "scale", &f), KILN_OK);
  ASSERT_EQ(kiln_function_param_count(f), 3);
  ASSERT_EQ(kiln_function_params(f)[1].cls, KILN_PARAM_F32);
  kiln_module_free(p);
  ASSERT_EQ(kiln_module_from_image("hello", 5, &p), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "neither a CUBIN");
  ASSERT(p == NULL);
  ASSERT_EQ(kiln_module_from_file("/nonexistent/k.cubin", &p), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "No such file");
  /* Bytes that begin as an ELF file but are no CUBIN are refused before the driver, which may
   * take them and fail only when a kernel is asked for; a CUBIN cut short likewise. */
  ASSERT_EQ(kiln_module_from_image("\x7f"
                                   "ELF not a cubin",
                                   16, &p),
            KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "no CUBIN: it is shorter than an ELF file's header");
  size_t cubin_size;
  const unsigned char *cubin = kiln_module_cubin(m, &cubin_size);
  ASSERT(cubin && cubin_size > 64);
  ASSERT_EQ(kiln_module_from_image(cubin, 64, &p), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "section headers lie past its end");
  unsigned char other[64];
  memcpy(other, cubin, sizeof other);
  other[18] = 62; /* EM_X86_64 */
  ASSERT_EQ(kiln_module_from_image(other, sizeof other, &p), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "another machine than EM_CUDA");
  ASSERT(p == NULL);
  /* The whole CUBIN passes the check: what follows needs the driver. */
  ASSERT(kiln_module_from_image(cubin, cubin_size, &p) != KILN_ERROR_INVALID);
  kiln_module_free(p);
  kiln_module_free(m);
}

TEST(gpu_module_from_cubin_launches) {
  kiln_test_require_gpu();
  kiln_module *m = compile_ok(kernel_src, NULL);
  size_t n;
  const void *cubin = kiln_module_cubin(m, &n);
  ASSERT(cubin);
  kiln_module *b = NULL;
  kiln_status s = kiln_module_from_image(cubin, n, &b);
  if (s) FAIL("%s", kiln_last_error());
  kiln_function *f;
  ASSERT_EQ(kiln_module_get_function(b, "scale", &f), KILN_OK);
  ASSERT_EQ(kiln_function_param_count(f), 3);
  ASSERT_EQ(kiln_function_params(f)[0].cls, KILN_PARAM_B64);
  float host[256];
  for (int i = 0; i < 256; i++) host[i] = (float)i;
  int count = 256;
  uint32_t two = 0x40000000; /* 2.0f: extern "C", so the driver knows only "4 bytes" */
  kiln_deviceptr x = 0;
  void *params[] = {&x, &two, &count};
  kiln_transfer t = {0, KILN_INOUT, host, sizeof host};
  kiln_launch_config cfg = {{1, 1, 1}, {256, 1, 1}, 0, NULL};
  s = kiln_function_call(f, &cfg, params, &t, 1, NULL);
  if (s) FAIL("%s", kiln_last_error());
  for (int i = 0; i < 256; i++) ASSERT_EQ((int)host[i], 2 * i);
  kiln_module_free(b);
  kiln_module_free(m);
}

TEST(jit_options_are_checked_before_the_device) {
  char info[64] = "x", error[64] = "x";
  kiln_module *p = (kiln_module *)&p;
  kiln_jit_option log_buffer = {3, 0}; /* CU_JIT_INFO_LOG_BUFFER: kiln's own */
  ASSERT_EQ(kiln_module_from_image_jit("garbage", 7, &log_buffer, 1, info, sizeof info, error,
                                       sizeof error, &p),
            KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "log buffers are kiln's own");
  ASSERT(p == NULL && info[0] == '\0' && error[0] == '\0');
  kiln_jit_option pointer = {17, 0}; /* CU_JIT_GLOBAL_SYMBOL_NAMES: a pointer */
  ASSERT_EQ(kiln_module_from_image_jit("garbage", 7, &pointer, 1, NULL, 0, NULL, 0, &p),
            KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "integer values");
  kiln_jit_option negative = {0, -1}; /* CU_JIT_MAX_REGISTERS */
  ASSERT_EQ(kiln_module_from_image_jit("garbage", 7, &negative, 1, NULL, 0, NULL, 0, &p),
            KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "unsigned 32-bit");
  ASSERT_EQ(kiln_module_from_image_jit("garbage", 7, NULL, 1, NULL, 0, NULL, 0, &p),
            KILN_ERROR_INVALID);
  ASSERT_EQ(kiln_module_from_image_jit("garbage", 7, NULL, 0, NULL, 0, NULL, 0, &p),
            KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "neither a CUBIN");
}

/* Many live values, so that a cap on registers shows; NONCE, a never-taken branch on a number
 * of this run's, makes the PTX new to the driver's compute cache (kiln_test_nonce). */
static const char *registers_src =
    "__global__ void heavy(float *out, const float *in) {\n"
    "  if (in[0] < -(NONCE + 0.5f)) return;  // inputs are in [0, 1)\n"
    "  float v[24];\n"
    "  #pragma unroll\n"
    "  for (int i = 0; i < 24; i++) v[i] = sinf(in[threadIdx.x * 24 + i] * (i + 1));\n"
    "  float s = 0;\n"
    "  #pragma unroll\n"
    "  for (int i = 0; i < 24; i++) s += v[i] * v[23 - i] + v[(i * 7) % 24];\n"
    "  out[threadIdx.x] = s;\n"
    "}\n";

TEST(gpu_module_from_ptx_with_loader_options) {
  kiln_test_require_gpu();
  char nonce[32];
  snprintf(nonce, sizeof nonce, "NONCE=%u", kiln_test_nonce() % 1000000);
  const char *defines[] = {"-D", nonce};
  kiln_compile_opts fresh = {.options = defines, .n_options = 2};
  kiln_module *m = compile_ok(registers_src, &fresh);
  size_t n;
  const char *ptx = kiln_module_ptx(m, &n);
  char info[8192], error[8192];
  /* MAX_REGISTERS 32 (ptxas takes no fewer than 24 for sm_90), LOG_VERBOSE */
  kiln_jit_option options[] = {{0, 32}, {12, 1}};
  kiln_module *p = NULL;
  kiln_status s =
      kiln_module_from_image_jit(ptx, n, options, 2, info, sizeof info, error, sizeof error, &p);
  if (s) FAIL("%s", kiln_last_error());
  ASSERT_CONTAINS(info, "registers");
  kiln_function *f;
  ASSERT_EQ(kiln_module_get_function(p, "heavy", &f), KILN_OK);
  int regs = 0;
  ASSERT_EQ(kiln_function_get_attribute(f, 4 /* NUM_REGS */, &regs), KILN_OK);
  ASSERT(regs > 0 && regs <= 32);
  kiln_module_free(p);
  /* The same PTX without the cap takes more. */
  ASSERT_EQ(kiln_module_from_image_jit(ptx, n, NULL, 0, NULL, 0, NULL, 0, &p), KILN_OK);
  ASSERT_EQ(kiln_module_get_function(p, "heavy", &f), KILN_OK);
  ASSERT_EQ(kiln_function_get_attribute(f, 4, &regs), KILN_OK);
  ASSERT(regs > 32); /* 38 for sm_90 */
  kiln_module_free(p);
  /* PTX the loader refuses: the error log is returned and in the message. */
  static const char broken[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                               ".visible .entry k()\n{\n  bogus.instruction;\n  ret;\n}\n";
  s = kiln_module_from_image_jit(broken, sizeof broken, NULL, 0, info, sizeof info, error,
                                 sizeof error, &p);
  ASSERT(s != KILN_OK && p == NULL);
  /* Refused at the load, or at the compile a lazy loader put off until the kernel is asked for. */
  ASSERT(strstr(kiln_last_error(), "the loader said") || strstr(kiln_last_error(), "kernel k"));
  kiln_module_free(m);
}

/* Through kiln-nvrtc, the compile helper: the first compile of a beginning makes a lasting PCH,
 * which an edit compiled in a new process (a fork that never compiled) uses. */
static void helper_edit_in_child(const void *src) {
  kiln_module *m = compile_ok(src, &sm90);
  kiln_compile_report r;
  kiln_compile_last_report(&r);
  ASSERT_EQ(r.origin, KILN_ORIGIN_NVRTC);
  ASSERT_EQ(r.pch, 2);
  ASSERT_EQ(stats().pch_used, 1);
  ASSERT_CONTAINS(kiln_module_ptx(m, NULL), "0f40400000"); /* 3.0f */
  kiln_module_free(m);
}

TEST(cache_precompiled_header_through_the_helper_serves_a_new_process) {
  ASSERT_OK(kiln_nvrtc_set_helper(KILN_SOURCE_DIR "/build/kiln-nvrtc"));
  char first[256], edited[256];
  long stamp = (long)getpid() ^ (long)time(NULL) ^ 0x5a5a;
  /* The stamp in the beginning: a lasting PCH of an earlier run would serve it otherwise. */
#define KILN_TEST_HALF_SOURCE(value) \
  "#include <cuda_fp16.h>\n"         \
  "#define RUN %ld\n"                \
  "__global__ void g(__half *x, long s) { x[0] = __float2half(" value "); }\n"
  snprintf(first, sizeof first, KILN_TEST_HALF_SOURCE("1.0f"), stamp);
  snprintf(edited, sizeof edited, KILN_TEST_HALF_SOURCE("3.0f"), stamp);
#undef KILN_TEST_HALF_SOURCE
  uint64_t created = stats().pch_created;
  kiln_module *a = compile_ok(first, &sm90);
  kiln_compile_report r;
  kiln_compile_last_report(&r);
  ASSERT_EQ(r.origin, KILN_ORIGIN_NVRTC);
  ASSERT_EQ(r.pch, 1); /* the helper makes it at once: it outlives this process */
  ASSERT(r.nvrtc_seconds > 0);
  ASSERT_EQ(stats().pch_created, created + 1);
  IN_CHILD(helper_edit_in_child, edited);
  kiln_module_free(a);
  ASSERT_OK(kiln_nvrtc_set_helper(NULL));
}

/* A source beginning with #include lines: the first compile makes a precompiled header, an
 * edit below them reuses it, the report says which, and cache info counts the file. */
TEST(cache_precompiled_header_made_then_reused) {
  /* Sources no earlier run stored: the cache folder outlives one run of the tests. */
  char first[256], second[256], edited[256];
  long stamp = (long)getpid() ^ (long)time(NULL);
#define KILN_TEST_HALF_SOURCE(value) \
  "#include <cuda_fp16.h>\n"         \
  "__global__ void h(__half *x, long s) { x[0] = __float2half(" value "); } // %ld\n"
  snprintf(first, sizeof first, KILN_TEST_HALF_SOURCE("1.0f"), stamp);
  snprintf(second, sizeof second, KILN_TEST_HALF_SOURCE("3.0f"), stamp);
  snprintf(edited, sizeof edited, KILN_TEST_HALF_SOURCE("2.0f"), stamp);
#undef KILN_TEST_HALF_SOURCE
  /* The first compile of a beginning makes no PCH: most are compiled only once. */
  kiln_module *a = compile_ok(first, &sm90);
  kiln_compile_report r;
  kiln_compile_last_report(&r);
  ASSERT_EQ(r.origin, KILN_ORIGIN_NVRTC);
  ASSERT_EQ(r.pch, 0);
  ASSERT(r.nvrtc_seconds > 0 && r.seconds >= r.nvrtc_seconds);
  ASSERT_EQ(stats().pch_created, 0);
  kiln_cache_info info;
  ASSERT_OK(kiln_cache_get_info(&info));
  uint64_t files = info.pch_files; /* the helper's lasting files of earlier runs stay */
  /* The second makes it, and later ones use it. */
  kiln_module_free(compile_ok(second, &sm90));
  kiln_compile_last_report(&r);
  ASSERT_EQ(r.pch, 1);
  kiln_module *b = compile_ok(edited, &sm90);
  kiln_compile_last_report(&r);
  ASSERT_EQ(r.pch, 2);
  ASSERT_EQ(stats().pch_created, 1);
  ASSERT_EQ(stats().pch_used, 1);
  ASSERT_CONTAINS(kiln_module_ptx(b, NULL), "0f40000000"); /* 2.0f, not the first's 1.0f */
  ASSERT_OK(kiln_cache_get_info(&info));
  ASSERT_EQ(info.pch_files, files + 1);
  ASSERT(info.pch_bytes > 0);
  char folder[sizeof info.dir + 8];
  snprintf(folder, sizeof folder, "%s/pch", info.dir);
  ASSERT_EQ(access(folder, F_OK), 0);
  kiln_module *c = compile_ok(edited, &sm90); /* the table answers: no NVRTC, no PCH */
  kiln_compile_last_report(&r);
  ASSERT_EQ(r.origin, KILN_ORIGIN_MEMORY);
  ASSERT_EQ(r.pch, 0);
  kiln_module_free(a);
  kiln_module_free(b);
  kiln_module_free(c);
}
