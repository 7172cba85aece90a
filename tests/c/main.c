/* Runs every test of list.h in its own process. `test_engine NAME` runs one in-process. */
#include "runner.h"

#include <ftw.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KILN_TEST_DECLARE(name) void kiln_test_##name(void);
#include "list.h"
#undef KILN_TEST_DECLARE

typedef struct kiln_test {
  const char *name;
  void (*fn)(void);
} kiln_test;

static const kiln_test kiln_tests[] = {
#define KILN_TEST_DECLARE(name) {#name, kiln_test_##name},
#include "list.h"
#undef KILN_TEST_DECLARE
};

void kiln_test_require_gpu(void) {
  int n = 0;
  kiln_status s = kiln_device_count(&n);
  const char *require = getenv("KILN_REQUIRE_GPU");
  int must = require && strcmp(require, "1") == 0;
  if (s != KILN_OK || n == 0) {
    if (must) FAIL("KILN_REQUIRE_GPU=1 but no GPU: %s", s ? kiln_last_error() : "no device");
    SKIP("needs a CUDA device: %s", s ? kiln_last_error() : "the driver found none");
  }
}

static int kiln_remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  chmod(path, 0700); /* tests leave read-only folders behind */
  return remove(path);
}

void kiln_test_remove_tree(const char *dir) {
  nftw(dir, kiln_remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

unsigned kiln_test_nonce(void) {
  static unsigned n;
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return ((unsigned)t.tv_nsec ^ (unsigned)t.tv_sec * 2654435761u ^ (unsigned)getpid() << 16) +
         ++n * 40503u;
}

kiln_copy_side kiln_test_copy_side(unsigned kind, const void *host, size_t size,
                                   kiln_deviceptr device, size_t pitch, size_t height) {
  kiln_copy_side side = {0};
  side.kind = kind;
  side.host = host;
  side.host_size = size;
  side.device = device;
  side.pitch = pitch;
  side.height = height;
  return side;
}

/* Each test gets a kernel cache folder of its own, removed after it. */
static int kiln_run_one(const kiln_test *t) {
  char dir[] = "/tmp/kiln-test-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    setenv("KILN_CACHE_DIR", dir, 1);
    unsetenv("KILN_CACHE_PATH");
    unsetenv("KILN_CACHE");
    t->fn();
    fflush(NULL);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  kiln_test_remove_tree(dir);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  fprintf(stderr, "  crashed with signal %d\n", WTERMSIG(status));
  return 1;
}

int main(int argc, char **argv) {
  size_t n = sizeof kiln_tests / sizeof kiln_tests[0];
  setvbuf(stdout, NULL, _IOLBF, 0); /* each result line before the next test's output */
  if (argc == 2) {
    for (size_t i = 0; i < n; i++)
      if (strcmp(kiln_tests[i].name, argv[1]) == 0) {
        kiln_tests[i].fn();
        return 0;
      }
    fprintf(stderr, "no test %s\n", argv[1]);
    return 2;
  }
  int passed = 0, failed = 0, skipped = 0;
  for (size_t i = 0; i < n; i++) {
    int rc = kiln_run_one(&kiln_tests[i]);
    const char *word = rc == 0 ? "ok" : rc == KILN_TEST_SKIP_CODE ? "skip" : "FAIL";
    printf("%-4s %s\n", word, kiln_tests[i].name);
    if (rc == 0) passed++;
    else if (rc == KILN_TEST_SKIP_CODE) skipped++;
    else failed++;
  }
  printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed ? 1 : 0;
}
