/* The user headers a source can reach, and whether they are still what they were.
 *
 * The scan over-approximates: every #include line counts wherever it sits (under #if 0 too),
 * a quoted name is looked for beside the including file and in every include folder, an
 * angled one in every include folder, and every place looked at is recorded, found or not.
 * Recording more than the compiler reads only costs a recompile when an unrelated header
 * changes; recording less could load code built from an older header. Toolkit headers are
 * not scanned: the NVRTC version in the key stands for them. */
#include "headers.h"

#include "dup.h"
#include "file.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* Beyond these the set is called unknowable and the source is not cached on disk. */
#define KILN__MAX_HEADER_RECORDS 10000
#define KILN__MAX_INCLUDE_DEPTH 200
#define KILN__MAX_HEADER_BYTES ((size_t)256 << 20)

/* A file changed this recently may change again within the same timestamp tick, unseen by
 * its times; its record is checked by contents instead. */
#define KILN__FRESH_NS 2000000000LL

/* ---- The scanner -------------------------------------------------------------------------- */

static const char *kiln__skip_blanks(const char *p, const char *end) {
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\f' || *p == '\v' || *p == '\r')) p++;
  return p;
}

static int kiln__is_ident(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Reads "name" or <name> at p (on one line). Returns 1 and calls fn when it is one, 0 when
 * something else is there (a macro). */
static int kiln__header_name(const char *p, const char *end, kiln__include_fn *fn, void *ctx) {
  if (p >= end || (*p != '"' && *p != '<')) return 0;
  char close = *p == '"' ? '"' : '>';
  const char *name = ++p;
  while (p < end && *p != close && *p != '\n') p++;
  if (p >= end || *p != close || p == name) return 0;
  fn(ctx, name, (size_t)(p - name), close == '>');
  return 1;
}

static int kiln__word_at(const char *p, const char *end, const char *word) {
  size_t n = strlen(word);
  return (size_t)(end - p) >= n && memcmp(p, word, n) == 0 &&
         (p + n == end || !kiln__is_ident(p[n]));
}

int kiln__headers_find_includes(const char *text, size_t n, kiln__include_fn *fn, void *ctx) {
  const char *p = text, *end = text + n;
  int computed = 0;
  while (p < end) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol) eol = end;
    const char *q = kiln__skip_blanks(p, eol);
    if (q < eol && *q == '#') {
      q = kiln__skip_blanks(q + 1, eol);
      const char *words[] = {"include_next", "include", "import"};
      for (size_t w = 0; w < KILN__COUNT(words); w++) {
        if (!kiln__word_at(q, eol, words[w])) continue;
        q = kiln__skip_blanks(q + strlen(words[w]), eol);
        if (!kiln__header_name(q, eol, fn, ctx)) computed++;
        break;
      }
    }
    /* __has_include may sit anywhere in a line of #if. */
    for (const char *h = p; (h = memchr(h, '_', (size_t)(eol - h))) != NULL; h++) {
      size_t len;
      if (h > p && kiln__is_ident(h[-1])) continue;
      if (kiln__word_at(h, eol, "__has_include")) len = 13;
      else if (kiln__word_at(h, eol, "__has_include_next")) len = 18;
      else continue;
      const char *a = kiln__skip_blanks(h + len, eol);
      if (a < eol && *a == '(' && kiln__header_name(kiln__skip_blanks(a + 1, eol), eol, fn, ctx))
        h = a;
      else computed++;
    }
    p = eol + 1;
  }
  return computed;
}

/* ---- Records ------------------------------------------------------------------------------ */

kiln_status kiln__headers_add(kiln__headers *h, const kiln__header *rec) {
  if (h->n == h->cap) {
    int cap = h->cap ? 2 * h->cap : 16;
    kiln__header *items = realloc(h->items, (size_t)cap * sizeof *items);
    if (!items) return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory recording headers");
    h->items = items;
    h->cap = cap;
  }
  kiln__header *r = &h->items[h->n];
  *r = *rec;
  if (!(r->path = kiln__dup_str(rec->path)))
    return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory recording headers");
  h->n++;
  return KILN_OK;
}

void kiln__headers_free(kiln__headers *h) {
  for (int i = 0; i < h->n; i++) free(h->items[i].path);
  free(h->items);
  memset(h, 0, sizeof *h);
}

static int64_t kiln__ns(struct timespec t) { return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec; }

int kiln__headers_fresh(const kiln__headers *h) {
  for (int i = 0; i < h->n; i++) {
    const kiln__header *r = &h->items[i];
    struct stat st;
    int is_file = stat(r->path, &st) == 0 && S_ISREG(st.st_mode);
    if (!r->exists) {
      if (is_file) return 0;
      continue;
    }
    if (!is_file) return 0;
    if (r->stat_trusted && (uint64_t)st.st_size == r->size && (uint64_t)st.st_ino == r->inode &&
        kiln__ns(st.st_mtim) == r->mtime_ns && kiln__ns(st.st_ctim) == r->ctime_ns)
      continue;
    size_t size = 0;
    char *data = kiln__file_read(r->path, KILN__MAX_HEADER_BYTES, &st, &size);
    unsigned char sha[KILN__KEY_SIZE];
    int same = data && size == r->size && kiln__hash_sha256(data, size, sha) == KILN_OK &&
               memcmp(sha, r->sha, sizeof sha) == 0;
    free(data);
    if (!same) return 0;
  }
  return 1;
}

/* ---- The scan ----------------------------------------------------------------------------- */

typedef struct kiln__scan {
  const kiln_compile_opts *opts;
  const char *cwd;
  char **dirs; /* absolute include folders: include_dirs, then -I options */
  int n_dirs;
  char *memory_seen; /* one flag per in-memory header */
  char **visited;    /* real paths of files already scanned */
  int n_visited, cap_visited;
  kiln__headers *out;
  int depth;
  kiln_status status;
} kiln__scan;

typedef struct kiln__frame {
  kiln__scan *scan;
  const char *dir; /* the folder of the file being scanned */
} kiln__frame;

static void kiln__scan_text(kiln__scan *sc, const char *text, size_t n, const char *dir);

static int kiln__recorded(const kiln__headers *h, const char *path) {
  for (int i = 0; i < h->n; i++)
    if (strcmp(h->items[i].path, path) == 0) return 1;
  return 0;
}

static int kiln__visit_once(kiln__scan *sc, const char *real) {
  for (int i = 0; i < sc->n_visited; i++)
    if (strcmp(sc->visited[i], real) == 0) return 0;
  if (sc->n_visited == sc->cap_visited) {
    int cap = sc->cap_visited ? 2 * sc->cap_visited : 16;
    char **v = realloc(sc->visited, (size_t)cap * sizeof *v);
    if (!v) return -1;
    sc->visited = v;
    sc->cap_visited = cap;
  }
  if (!(sc->visited[sc->n_visited] = kiln__dup_str(real))) return -1;
  sc->n_visited++;
  return 1;
}

static void kiln__scan_fail(kiln__scan *sc, kiln_status s) {
  if (!sc->status) sc->status = s;
}

static void kiln__probe(kiln__scan *sc, const char *path) {
  if (sc->status || sc->out->uncacheable || kiln__recorded(sc->out, path)) return;
  if (sc->out->n >= KILN__MAX_HEADER_RECORDS) {
    sc->out->uncacheable = "it reaches more than 10000 header paths";
    return;
  }
  kiln__header rec = {0};
  rec.path = (char *)path;
  struct stat st;
  size_t size = 0;
  char *data = kiln__file_read(path, KILN__MAX_HEADER_BYTES, &st, &size);
  if (!data) {
    if (errno == ENOMEM)
      kiln__scan_fail(sc, kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory reading %s", path));
    else kiln__scan_fail(sc, kiln__headers_add(sc->out, &rec)); /* nothing there */
    return;
  }
  rec.exists = 1;
  rec.size = size;
  rec.inode = (uint64_t)st.st_ino;
  rec.mtime_ns = kiln__ns(st.st_mtim);
  rec.ctime_ns = kiln__ns(st.st_ctim);
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  int64_t newest = rec.mtime_ns > rec.ctime_ns ? rec.mtime_ns : rec.ctime_ns;
  rec.stat_trusted = kiln__ns(now) - newest >= KILN__FRESH_NS;
  kiln_status s = kiln__hash_sha256(data, size, rec.sha);
  if (!s) s = kiln__headers_add(sc->out, &rec);
  char real[PATH_MAX];
  int first = 0;
  if (!s && realpath(path, real)) {
    first = kiln__visit_once(sc, real);
    if (first < 0) s = kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory scanning headers");
  }
  if (s) {
    kiln__scan_fail(sc, s);
  } else if (first > 0) {
    char *slash = strrchr(real, '/');
    if (slash) *slash = '\0';
    kiln__scan_text(sc, data, size, slash == real ? "/" : real);
  }
  free(data);
}

static void kiln__on_include(void *ctx, const char *name, size_t len, int angled) {
  kiln__frame *fr = ctx;
  kiln__scan *sc = fr->scan;
  if (sc->status || sc->out->uncacheable || memchr(name, '\0', len)) return;
  char want[PATH_MAX], path[PATH_MAX];
  if (len >= sizeof want) {
    sc->out->uncacheable = "it includes a header name longer than PATH_MAX";
    return;
  }
  memcpy(want, name, len);
  want[len] = '\0';
  /* In-memory headers are matched by name and scanned once; the files are still probed,
   * since which of the two NVRTC picks is its own business. */
  const kiln_compile_opts *o = sc->opts;
  for (int i = 0; o && i < o->n_headers; i++)
    if (!sc->memory_seen[i] && o->header_names[i] && strcmp(o->header_names[i], want) == 0) {
      sc->memory_seen[i] = 1;
      if (o->header_sources[i])
        kiln__scan_text(sc, o->header_sources[i], strlen(o->header_sources[i]), sc->cwd);
    }
  if (want[0] == '/') {
    kiln__probe(sc, want);
    return;
  }
  if (!angled && kiln__file_join(path, sizeof path, fr->dir, want)) kiln__probe(sc, path);
  for (int i = 0; i < sc->n_dirs; i++)
    if (kiln__file_join(path, sizeof path, sc->dirs[i], want)) kiln__probe(sc, path);
}

static void kiln__scan_text(kiln__scan *sc, const char *text, size_t n, const char *dir) {
  if (++sc->depth > KILN__MAX_INCLUDE_DEPTH) {
    sc->out->uncacheable = "its headers nest more than 200 deep";
  } else {
    kiln__frame fr = {sc, dir};
    if (kiln__headers_find_includes(text, n, kiln__on_include, &fr))
      sc->out->uncacheable = "it has an #include of a macro, whose header only the "
                             "preprocessor knows";
  }
  sc->depth--;
}

static kiln_status kiln__add_dir(kiln__scan *sc, const char *dir) {
  char abs[PATH_MAX];
  if (!kiln__file_join(abs, sizeof abs, sc->cwd, dir)) return KILN_OK; /* NVRTC cannot either */
  char **dirs = realloc(sc->dirs, (size_t)(sc->n_dirs + 1) * sizeof *dirs);
  if (!dirs) return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory scanning headers");
  sc->dirs = dirs;
  if (!(sc->dirs[sc->n_dirs] = kiln__dup_str(abs)))
    return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory scanning headers");
  sc->n_dirs++;
  return KILN_OK;
}

/* The value of option i when it is spelled "<shrt> x", "<lng> x", "<lng>=x" or, with
 * attached, "<shrt>x" ("-Ix"); NULL when option i is another one. */
static const char *kiln__option_value(const kiln_compile_opts *o, int *i, const char *shrt,
                                      const char *lng, int attached) {
  const char *a = o->options[*i];
  size_t ns = strlen(shrt), nl = strlen(lng);
  if (!a) return NULL;
  if (strcmp(a, shrt) == 0 || strcmp(a, lng) == 0)
    return *i + 1 < o->n_options ? o->options[++*i] : NULL;
  if (strncmp(a, lng, nl) == 0 && a[nl] == '=') return a + nl + 1;
  if (attached && strncmp(a, shrt, ns) == 0) return a + ns;
  return NULL;
}

kiln_status kiln__headers_scan(const char *src, const kiln_compile_opts *opts, const char *cwd,
                               kiln__headers *out) {
  memset(out, 0, sizeof *out);
  kiln__scan sc = {0};
  sc.opts = opts;
  sc.cwd = cwd;
  sc.out = out;
  int n_headers = opts ? opts->n_headers : 0;
  kiln_status s = KILN_OK;
  if (!(sc.memory_seen = calloc((size_t)n_headers + 1, 1)))
    s = kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory scanning headers");
  for (int i = 0; !s && opts && i < opts->n_include_dirs; i++)
    if (opts->include_dirs[i]) s = kiln__add_dir(&sc, opts->include_dirs[i]);
  for (int i = 0; !s && opts && i < opts->n_options; i++) {
    const char *d = kiln__option_value(opts, &i, "-I", "--include-path", 1);
    if (d) s = kiln__add_dir(&sc, d);
  }
  if (!s) {
    kiln__scan_text(&sc, src, strlen(src), cwd);
    /* Headers forced in with -include / --pre-include count as included by the source. */
    kiln__frame fr = {&sc, cwd};
    for (int i = 0; opts && i < opts->n_options && !sc.status; i++) {
      const char *h = kiln__option_value(opts, &i, "-include", "--pre-include", 0);
      if (h) kiln__on_include(&fr, h, strlen(h), 0);
    }
    s = sc.status;
  }
  for (int i = 0; i < sc.n_dirs; i++) free(sc.dirs[i]);
  for (int i = 0; i < sc.n_visited; i++) free(sc.visited[i]);
  free(sc.dirs);
  free(sc.visited);
  free(sc.memory_seen);
  if (s) kiln__headers_free(out);
  return s;
}
