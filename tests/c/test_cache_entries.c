/* Cache entries kiln did not write as they are, and entries that change under a reader: a
 * forged entry with a valid checksum, files that vanish between the folder scan and open(),
 * and listing and pruning while other threads compile. NVRTC needs no GPU, so these run
 * everywhere. */
#include "runner.h"

#include "../../engine/src/cache.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- Helpers ------------------------------------------------------------------------------ */

static int warnings;
static char last_warning[4096];

static void count_warning(const char *message, void *ctx) {
  (void)ctx;
  warnings++;
  snprintf(last_warning, sizeof last_warning, "%s", message);
}

/* Runs fn in a new process (one that has compiled nothing yet); its exit code. */
static int in_child(void (*fn)(const void *), const void *arg) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    kiln_set_warning_handler(count_warning, NULL);
    fn(arg);
    fflush(NULL);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

#define IN_CHILD(fn, arg) ASSERT_EQ(in_child(fn, arg), 0)

/* Every entry file under dir (dir/xx/<62 hex digits>), up to cap of them. */
static int entry_paths(const char *dir, char paths[][1024], int cap) {
  int n = 0;
  DIR *top = opendir(dir);
  struct dirent *d;
  while (top && (d = readdir(top))) {
    if (strlen(d->d_name) != 2) continue;
    char shard[900];
    snprintf(shard, sizeof shard, "%s/%s", dir, d->d_name);
    DIR *sub = opendir(shard);
    struct dirent *e;
    while (sub && (e = readdir(sub)))
      if (strlen(e->d_name) == 62 && n < cap)
        snprintf(paths[n++], 1024, "%.900s/%.62s", shard, e->d_name);
    if (sub) closedir(sub);
  }
  if (top) closedir(top);
  return n;
}

/* The key an entry's file name spells. */
static void key_of(const char *path, unsigned char key[KILN__KEY_SIZE]) {
  size_t n = strlen(path);
  char hex[2 * KILN__KEY_SIZE + 1];
  ASSERT(n > 65);
  snprintf(hex, sizeof hex, "%.2s%s", path + n - 65, path + n - 62);
  for (int i = 0; i < KILN__KEY_SIZE; i++) ASSERT_EQ(sscanf(hex + 2 * i, "%2hhx", &key[i]), 1);
}

static unsigned char *read_whole(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) FAIL("cannot read %s: %s", path, strerror(errno));
  size_t cap = 1 << 20;
  unsigned char *buf = malloc(cap);
  ASSERT(buf);
  *size = fread(buf, 1, cap, f);
  fclose(f);
  return buf;
}

/* Replaces path's contents the way the cache does: a whole new file renamed over it. */
static void write_whole(const char *path, const unsigned char *data, size_t size) {
  char tmp[1100];
  snprintf(tmp, sizeof tmp, "%s.new", path);
  FILE *f = fopen(tmp, "wb");
  if (!f) FAIL("cannot write %s: %s", tmp, strerror(errno));
  ASSERT_EQ(fwrite(data, 1, size, f), size);
  ASSERT_EQ(fclose(f), 0);
  ASSERT_EQ(rename(tmp, path), 0);
}

/* Writes a good entry for a key made of one byte into the cache folder dir. */
static void plant_entry(const char *dir, unsigned char key_byte) {
  static char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n";
  static char log[] = "", kernel[] = "scale";
  kiln__code code = {
      .arch = "sm_90", .arch_num = 90, .ptx = ptx, .ptx_size = sizeof ptx - 1, .log = log};
  kiln_param params[2] = {{KILN_PARAM_PTR, 8, 8}, {KILN_PARAM_F32, 4, 4}};
  kiln__kernel k = {.name = kernel, .plain = kernel, .params = params, .n_params = 2};
  kiln__headers headers = {0};
  unsigned char key[KILN__KEY_SIZE];
  memset(key, key_byte, sizeof key);
  unsigned char *buf = NULL;
  size_t size = 0;
  ASSERT_OK(kiln__entry_encode(key, &code, &k, 1, &headers, &buf, &size));
  char shard[1024], path[1100], hex[2 * KILN__KEY_SIZE + 1];
  for (int i = 0; i < KILN__KEY_SIZE; i++) snprintf(hex + 2 * i, 3, "%02x", key[i]);
  snprintf(shard, sizeof shard, "%s/%.2s", dir, hex);
  mkdir(shard, 0700);
  snprintf(path, sizeof path, "%s/%s", shard, hex + 2);
  write_whole(path, buf, size);
  free(buf);
}

/* ---- A forged entry ----------------------------------------------------------------------- */

/* An entry whose one kernel has the parameters given, under a valid checksum. */
static const char *decode_forged(const char *name, const char *plain, const kiln_param *params,
                                 int n_params) {
  static char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n";
  static char log[] = "";
  kiln__code code = {
      .arch = "sm_90", .arch_num = 90, .ptx = ptx, .ptx_size = sizeof ptx - 1, .log = log};
  kiln__kernel k = {.name = (char *)name,
                    .plain = (char *)plain,
                    .params = (kiln_param *)params,
                    .n_params = n_params};
  kiln__headers headers = {0};
  unsigned char key[KILN__KEY_SIZE] = {7};
  unsigned char *buf = NULL;
  size_t size = 0;
  ASSERT_OK(kiln__entry_encode(key, &code, &k, 1, &headers, &buf, &size));
  kiln__cached c;
  memset(&c, 0x5a, sizeof c);
  const char *why = kiln__entry_decode(buf, size, key, &c);
  if (why) {
    static const kiln__cached zero;
    ASSERT(memcmp(&c, &zero, sizeof c) == 0); /* a refused entry leaves nothing behind */
  } else {
    kiln__entry_free_cached(&c);
  }
  free(buf);
  return why;
}

TEST(cache_entry_forged_signature_is_refused) {
  /* The report's case: an f64 parameter of size 1, which the packer would write 8 bytes to. */
  kiln_param f64_of_one[2] = {{KILN_PARAM_PTR, 8, 8}, {KILN_PARAM_F64, 1, 1}};
  ASSERT_CONTAINS(decode_forged("axpy", "axpy", f64_of_one, 2), "size does not fit its class");
  struct {
    kiln_param p;
    const char *why;
  } bad[] = {
      {{KILN_PARAM_F64, 4, 4}, "size does not fit its class"},
      {{KILN_PARAM_F32, 8, 8}, "size does not fit its class"},
      {{KILN_PARAM_PTR, 4, 4}, "size does not fit its class"},
      {{KILN_PARAM_I64, 1, 1}, "size does not fit its class"},
      {{KILN_PARAM_B16, 4, 2}, "size does not fit its class"},
      {{KILN_PARAM_U8, 8, 1}, "size does not fit its class"},
      {{(kiln_param_class)16, 4, 4}, "no known class"},
      {{(kiln_param_class)0x7fffffff, 4, 4}, "no known class"},
      {{KILN_PARAM_I32, 4, 6}, "power of two"},
      {{KILN_PARAM_AGGREGATE, 32, 8192}, "power of two"},
      {{KILN_PARAM_AGGREGATE, 32768, 8}, "larger than the parameter space"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const char *why = decode_forged("k", "k", &bad[i].p, 1);
    if (!why) FAIL("forged parameter %zu was accepted", i);
    ASSERT_CONTAINS(why, bad[i].why);
  }
  kiln_param ok = {KILN_PARAM_I32, 4, 4};
  ASSERT_CONTAINS(decode_forged("k(x)", "k", &ok, 1), "not a PTX name");
  ASSERT_CONTAINS(decode_forged("k", "", &ok, 1), "no plain name");
  /* What the parser can give is still taken: a struct of any size, .align up to 4096. */
  kiln_param fine[3] = {
      {KILN_PARAM_AGGREGATE, 3, 1}, {KILN_PARAM_AGGREGATE, 4096, 4096}, {KILN_PARAM_F64, 8, 8}};
  const char *why = decode_forged("_Z1k3abc", "k", fine, 3);
  if (why) FAIL("a signature the parser gives was refused: %s", why);
}

static const char *double_src = "extern \"C\" __global__ void axpy(double *x, double a)\n"
                                "{ x[threadIdx.x] += a; }\n";
static const kiln_compile_opts sm90 = {.arch = "sm_90"};

/* Compiles double_src; arg: "<compiles><warnings>" expected. The signature must be the PTX's. */
static void compile_double(const void *arg) {
  const char *want = arg;
  kiln_module *m = NULL;
  ASSERT_OK(kiln_module_from_source(double_src, &sm90, &m));
  kiln_cache_stats st;
  kiln_cache_get_stats(&st);
  ASSERT_EQ(st.compiles, want[0] - '0');
  ASSERT_EQ(warnings, want[1] - '0');
  if (warnings) {
    ASSERT_CONTAINS(last_warning, "damaged");
    ASSERT_CONTAINS(last_warning, "size does not fit its class");
  }
  kiln_function *f = NULL;
  ASSERT_OK(kiln_module_get_function(m, "axpy", &f));
  ASSERT_EQ(kiln_function_param_count(f), 2);
  ASSERT_EQ(kiln_function_params(f)[1].cls, KILN_PARAM_F64);
  ASSERT_EQ(kiln_function_params(f)[1].size, 8);
  kiln_module_free(m);
}

TEST(cache_forged_entry_with_a_valid_checksum_is_compiled_again) {
  const char *dir = getenv("KILN_CACHE_DIR");
  IN_CHILD(compile_double, "10");
  char paths[4][1024];
  ASSERT_EQ(entry_paths(dir, paths, 4), 1);
  unsigned char key[KILN__KEY_SIZE];
  key_of(paths[0], key);
  size_t size = 0;
  unsigned char *buf = read_whole(paths[0], &size);
  kiln__cached c;
  const char *why = kiln__entry_decode(buf, size, key, &c);
  if (why) FAIL("the entry kiln wrote does not decode: %s", why);
  free(buf);
  ASSERT_EQ(c.n_kernels, 1);
  ASSERT_EQ(c.kernels[0].params[1].cls, KILN_PARAM_F64);
  c.kernels[0].params[1].size = 1; /* the forgery, under a checksum that matches */
  c.kernels[0].params[1].align = 1;
  ASSERT_OK(kiln__entry_encode(key, &c.code, c.kernels, c.n_kernels, &c.headers, &buf, &size));
  kiln__entry_free_cached(&c);
  write_whole(paths[0], buf, size);
  free(buf);
  IN_CHILD(compile_double, "11"); /* refused with a warning, compiled and replaced */
  IN_CHILD(compile_double, "00"); /* the replacement is good */
}

/* ---- Entries that vanish under a listing -------------------------------------------------- */

typedef struct vanish {
  const char *dir;
  int visits, problems;
} vanish;

/* On the first entry, removes every entry file: the rest of the scan's list is gone. */
static int remove_the_rest(const kiln_cache_entry *e, void *ctx) {
  vanish *v = ctx;
  if (v->visits++ == 0 && v->dir) {
    char paths[16][1024];
    int n = entry_paths(v->dir, paths, 16);
    for (int i = 0; i < n; i++) unlink(paths[i]);
  }
  if (e->problem) v->problems++;
  return 0;
}

TEST(cache_list_skips_entries_that_vanish) {
  const char *dir = getenv("KILN_CACHE_DIR");
  kiln_cache_info info;
  ASSERT_OK(kiln_cache_get_info(&info)); /* makes the folder and its shards */
  for (int i = 1; i <= 8; i++) plant_entry(dir, (unsigned char)(i * 17));
  ASSERT_OK(kiln_cache_get_info(&info));
  ASSERT_EQ(info.entries, 8);
  vanish v = {dir, 0, 0};
  ASSERT_OK(kiln_cache_list(remove_the_rest, &v));
  ASSERT_EQ(v.visits, 1); /* the seven removed after the scan are not listed */
  ASSERT_EQ(v.problems, 0);
  ASSERT_OK(kiln_cache_get_info(&info));
  ASSERT_EQ(info.entries, 0);
  /* Replaced rather than removed: listed, with what is wrong. */
  for (int i = 1; i <= 3; i++) plant_entry(dir, (unsigned char)(i * 17));
  char paths[4][1024];
  ASSERT_EQ(entry_paths(dir, paths, 4), 3);
  write_whole(paths[1], (const unsigned char *)"not an entry", 12);
  v = (vanish){NULL, 0, 0};
  ASSERT_OK(kiln_cache_list(remove_the_rest, &v)); /* dir NULL: removes nothing */
  ASSERT_EQ(v.visits, 3);
  ASSERT_EQ(v.problems, 1);
}

/* ---- Listing and pruning while others compile --------------------------------------------- */

#define RACE_COMPILERS 2
#define RACE_SOURCES 8

typedef struct race {
  int compiler;          /* which compiling thread */
  volatile int *done;    /* compilers that have finished */
  pthread_mutex_t *lock; /* guards *done */
  int failures, rounds;
  char error[512];
} race;

static int count_entry(const kiln_cache_entry *e, void *ctx) {
  (void)e;
  (*(int *)ctx)++;
  return 0;
}

static void *compile_many(void *arg) {
  race *r = arg;
  for (int i = 0; i < RACE_SOURCES; i++) {
    char src[512];
    snprintf(src, sizeof src,
             "extern \"C\" __global__ void scale(float *x, float s)\n"
             "{ x[threadIdx.x] *= s + %d.0f; }\n",
             r->compiler * RACE_SOURCES + i);
    kiln_module *m = NULL;
    kiln_status s = kiln_module_from_source(src, &sm90, &m);
    kiln_function *f = NULL;
    if (!s) s = kiln_module_get_function(m, "scale", &f);
    if (s || kiln_function_param_count(f) != 2) {
      r->failures++;
      snprintf(r->error, sizeof r->error, "%s: %s", kiln_status_name(s), kiln_last_error());
    }
    kiln_module_free(m);
  }
  pthread_mutex_lock(r->lock);
  (*r->done)++;
  pthread_mutex_unlock(r->lock);
  return NULL;
}

static void *list_and_prune(void *arg) {
  race *r = arg;
  for (;;) {
    pthread_mutex_lock(r->lock);
    int finished = *r->done == RACE_COMPILERS;
    pthread_mutex_unlock(r->lock);
    int seen = 0;
    uint64_t removed = 0;
    if (kiln_cache_list(count_entry, &seen) != KILN_OK) r->failures++;
    if (r->compiler % 2 && kiln_cache_prune(1, &removed) != KILN_OK) r->failures++;
    r->rounds++;
    if (finished) break;
  }
  return NULL;
}

TEST(cache_list_and_prune_while_threads_compile) {
  /* Entries appear, are replaced and are evicted while the listing threads scan and open
   * them; every compile succeeds and nothing crashes. */
  kiln_set_warning_handler(count_warning, NULL);
  volatile int done = 0;
  pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  race r[RACE_COMPILERS + 2];
  pthread_t t[RACE_COMPILERS + 2];
  for (int i = 0; i < RACE_COMPILERS + 2; i++) {
    r[i] = (race){.compiler = i, .done = &done, .lock = &lock};
    ASSERT_EQ(
        pthread_create(&t[i], NULL, i < RACE_COMPILERS ? compile_many : list_and_prune, &r[i]), 0);
  }
  for (int i = 0; i < RACE_COMPILERS + 2; i++) ASSERT_EQ(pthread_join(t[i], NULL), 0);
  for (int i = 0; i < RACE_COMPILERS + 2; i++) {
    if (r[i].failures) FAIL("thread %d: %d failures; last: %s", i, r[i].failures, r[i].error);
    if (i >= RACE_COMPILERS) ASSERT(r[i].rounds > 0);
  }
  kiln_cache_stats st;
  kiln_cache_get_stats(&st);
  ASSERT_EQ(st.compiles, RACE_COMPILERS * RACE_SOURCES);
}
