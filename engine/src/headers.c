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

/* Where the scan is unsure how NVRTC's preprocessor reads a text, it reads it every way and
 * takes the union: trigraphs replaced or not (NVRTC replaces them only under an older -std),
 * and string literals honoured or not (a literal misread could hide or invent a comment
 * around an #include). A directive is looked for after every # or %: outside comments, not
 * only at the start of a line: NVRTC takes one after a comment that spans lines, and one in a
 * #define body costs only a recompile. */

static const char *kiln__skip_blanks(const char *p, const char *end) {
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\f' || *p == '\v' || *p == '\r')) p++;
  return p;
}

static int kiln__is_ident(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Translation phases 1 and 2 into out (of at least n bytes): trigraphs replaced when asked,
 * and a backslash that ends a line (before \n or \r\n) joined to the next. A backslash before
 * blanks is no splice to NVRTC. Returns the length written. */
static size_t kiln__splice(const char *p, size_t n, int trigraphs, char *out) {
  static const char from[] = "=/'()!<>-", to[] = "#\\^[]|{}~";
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    char c = p[i];
    size_t len = 1;
    if (trigraphs && c == '?' && n - i > 2 && p[i + 1] == '?') {
      const char *t = memchr(from, p[i + 2], sizeof from - 1);
      if (t) c = to[t - from], len = 3;
    }
    if (c == '\\') {
      size_t j = i + len;
      if (j < n && p[j] == '\n') {
        i = j + 1;
        continue;
      }
      if (n - j > 1 && p[j] == '\r' && p[j + 1] == '\n') {
        i = j + 2;
        continue;
      }
    }
    out[o++] = c;
    i += len;
  }
  return o;
}

typedef struct kiln__lexer {
  const char *end;
  int literals; /* 1: string and character literals are honoured */
  int computed; /* includes whose header a macro names */
  kiln__include_fn *fn;
  void *ctx;
} kiln__lexer;

/* Past the comment at p, or p when none starts there. A line comment stops before its \n. */
static const char *kiln__skip_comment(const char *p, const char *end) {
  if (end - p < 2 || p[0] != '/') return p;
  if (p[1] == '/') {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    return nl ? nl : end;
  }
  if (p[1] != '*') return p;
  for (const char *q = p + 2; q + 1 < end; q++)
    if (q[0] == '*' && q[1] == '/') return q + 2;
  return end;
}

/* Blanks and comments; a comment over several lines is one blank, as in translation phase 3. */
static const char *kiln__skip_space(const char *p, const char *end) {
  for (;;) {
    p = kiln__skip_blanks(p, end);
    const char *q = kiln__skip_comment(p, end);
    if (q == p) return p;
    p = q;
  }
}

/* Reads "name" or <name> at p, as written (a header name has no comments or escapes), on one
 * line. Calls fn and returns the end of the name when there is one, NULL when something else
 * is there (a macro). Lexing goes on after the name, where a comment opener inside it starts
 * nothing. */
static const char *kiln__header_name(const char *p, const char *end, kiln__include_fn *fn,
                                     void *ctx) {
  if (p >= end || (*p != '"' && *p != '<')) return NULL;
  char close = *p == '"' ? '"' : '>';
  const char *name = ++p;
  while (p < end && *p != close && *p != '\n') p++;
  if (p >= end || *p != close || p == name) return NULL;
  fn(ctx, name, (size_t)(p - name), close == '>');
  return p + 1;
}

static const char *kiln__ident_end(const char *p, const char *end) {
  while (p < end && kiln__is_ident(*p)) p++;
  return p;
}

static int kiln__word_is(const char *p, const char *q, const char *word) {
  return (size_t)(q - p) == strlen(word) && memcmp(p, word, (size_t)(q - p)) == 0;
}

static void kiln__computed(kiln__lexer *lx) {
  if (lx->computed < INT_MAX) lx->computed++;
}

/* After a # or %:: the header of an #include, #include_next, #import or #embed. */
static const char *kiln__directive(kiln__lexer *lx, const char *p) {
  static const char *const words[] = {"include", "include_next", "import", "embed"};
  const char *end = lx->end, *w = kiln__skip_space(p, end), *q = kiln__ident_end(w, end);
  for (size_t i = 0; i < KILN__COUNT(words); i++)
    if (kiln__word_is(w, q, words[i])) {
      const char *after = kiln__header_name(kiln__skip_space(q, end), end, lx->fn, lx->ctx);
      if (!after) kiln__computed(lx);
      return after ? after : q;
    }
  return w;
}

/* After __has_include, __has_include_next or __has_embed: ( header ). */
static const char *kiln__has_include(kiln__lexer *lx, const char *p) {
  const char *end = lx->end, *a = kiln__skip_space(p, end), *after = NULL;
  if (a < end && *a == '(')
    after = kiln__header_name(kiln__skip_space(a + 1, end), end, lx->fn, lx->ctx);
  if (!after) kiln__computed(lx);
  return after ? after : p;
}

/* Past the literal whose quote is at p; prefix is the identifier just before it. */
static const char *kiln__skip_literal(const char *p, const char *end, const char *prefix,
                                      size_t prefix_len) {
  char quote = *p;
  if (quote == '"' && prefix_len && prefix[prefix_len - 1] == 'R') { /* R"delim( ... )delim" */
    const char *d = p + 1, *open = d;
    while (open < end && open - d < 16 && !strchr(" ()\\\t\v\f\n\"", *open)) open++;
    if (open < end && *open == '(') {
      size_t dlen = (size_t)(open - d);
      for (const char *q = open + 1; q < end; q++)
        if (*q == ')' && (size_t)(end - q) > dlen + 1 && memcmp(q + 1, d, dlen) == 0 &&
            q[1 + dlen] == '"')
          return q + dlen + 2;
      return end;
    }
  }
  for (p++; p < end && *p != quote && *p != '\n'; p++)
    if (*p == '\\' && p + 1 < end && p[1] != '\n') p++;
  return p < end && *p == quote ? p + 1 : p;
}

static int kiln__literal_prefix(const char *p, size_t n) {
  static const char *const prefixes[] = {"L", "u", "U", "u8", "R", "LR", "uR", "UR", "u8R"};
  for (size_t i = 0; i < KILN__COUNT(prefixes); i++)
    if (strlen(prefixes[i]) == n && memcmp(prefixes[i], p, n) == 0) return 1;
  return 0;
}

/* One reading of spliced text. */
static void kiln__lex(kiln__lexer *lx, const char *p) {
  const char *end = lx->end;
  while (p < end) {
    char c = *p;
    const char *q;
    if (c == '/' && (q = kiln__skip_comment(p, end)) != p) {
      p = q;
    } else if (c == '#' || (c == '%' && p + 1 < end && p[1] == ':')) {
      p = kiln__directive(lx, p + (c == '#' ? 1 : 2));
    } else if ((c >= '0' && c <= '9') || (c == '.' && p + 1 < end && p[1] >= '0' && p[1] <= '9')) {
      /* a pp-number, whose digit separators are no character literals */
      for (p++; p < end; p++) {
        if (*p == '\'' && p + 1 < end && kiln__is_ident(p[1])) p++;
        else if ((*p == '+' || *p == '-') && memchr("eEpP", p[-1], 4)) continue;
        else if (!kiln__is_ident(*p) && *p != '.') break;
      }
    } else if (kiln__is_ident(c)) {
      q = kiln__ident_end(p, end);
      if (lx->literals && q < end && (*q == '"' || *q == '\'') &&
          kiln__literal_prefix(p, (size_t)(q - p)))
        p = kiln__skip_literal(q, end, p, (size_t)(q - p));
      else if (kiln__word_is(p, q, "__has_include") || kiln__word_is(p, q, "__has_include_next") ||
               kiln__word_is(p, q, "__has_embed"))
        p = kiln__has_include(lx, q);
      else p = q;
    } else if (lx->literals && (c == '"' || c == '\'')) {
      p = kiln__skip_literal(p, end, NULL, 0);
    } else {
      p++;
    }
  }
}

int kiln__headers_find_includes(const char *text, size_t n, kiln__include_fn *fn, void *ctx) {
  char *buf = malloc(n ? n : 1);
  if (!buf) return 1; /* unsure, so uncacheable */
  int computed = 0;
  int has_trigraph = n > 2 && memmem(text, n, "??", 2) != NULL;
  for (int trigraphs = 0; trigraphs <= has_trigraph; trigraphs++) {
    size_t m = kiln__splice(text, n, trigraphs, buf);
    for (int literals = 1; literals >= 0; literals--) {
      kiln__lexer lx = {buf + m, literals, 0, fn, ctx};
      kiln__lex(&lx, buf);
      /* Only the readings that honour literals count a macro include: the other sees
       * "#include" inside string literals. */
      if (literals && lx.computed > computed) computed = lx.computed;
    }
  }
  free(buf);
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
  int opts_pass; /* which options kiln__option_scan uses: the folders, then the headers */
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
    else if (errno == EINVAL) /* NVRTC refuses what is not a regular file, but only once it
                               * has opened it: the open of a FIFO waits for a writer. */
      kiln__scan_fail(sc, kiln__fail(KILN_ERROR_INVALID,
                                     "the header %s is %s, not a regular file: NVRTC refuses "
                                     "it, and would first wait on it for a writer",
                                     path, kiln__file_kind(st.st_mode)));
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
                             "preprocessor knows, or one the scan could not read";
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

/* Which options name a folder to search or a header to include first. */
typedef enum kiln__opt_kind { KILN__OPT_DIR, KILN__OPT_HEADER } kiln__opt_kind;

static void kiln__option_use(kiln__scan *sc, kiln__opt_kind kind, const char *v, size_t len) {
  char val[PATH_MAX];
  if (len >= sizeof val) return; /* NVRTC cannot open it either */
  memcpy(val, v, len);
  val[len] = '\0';
  if (kind == KILN__OPT_DIR) {
    kiln_status s = kiln__add_dir(sc, val);
    if (s) kiln__scan_fail(sc, s);
  } else if (len) {
    kiln__frame fr = {sc, sc->cwd};
    kiln__on_include(&fr, val, len, 0); /* as if the source included it */
  }
}

/* A value as NVRTC might read it: as written, without the blanks around it, without an '='
 * it starts with ("-I=inc" is "-Iinc" to NVRTC), or both. Each is used; a reading NVRTC does
 * not make adds a place looked at, never a wrong answer. */
static void kiln__option_values(kiln__scan *sc, kiln__opt_kind kind, const char *v) {
  if ((int)kind != sc->opts_pass) return;
  const char *l = v + strspn(v, " \t");
  const char *bases[4] = {v, l, NULL, NULL};
  if (*l == '=') bases[2] = l + 1, bases[3] = l + 1 + strspn(l + 1, " \t");
  for (int b = 0; b < 4 && !sc->status; b++) {
    if (!bases[b] || (b > 0 && bases[b] == bases[b - 1])) continue;
    size_t len = strlen(bases[b]), trimmed = len;
    while (trimmed && (bases[b][trimmed - 1] == ' ' || bases[b][trimmed - 1] == '\t')) trimmed--;
    kiln__option_use(sc, kind, bases[b], len);
    if (trimmed != len) kiln__option_use(sc, kind, bases[b], trimmed);
  }
}

/* Option i when it adds a folder (-I, --include-path) or a header (-include, --pre-include),
 * in any spelling NVRTC takes: the value as the next option, attached, after '=', or after
 * blanks in the same string. */
static void kiln__option_scan(kiln__scan *sc, const kiln_compile_opts *o, int *i) {
  static const struct {
    const char *name;
    kiln__opt_kind kind;
  } names[] = {{"--include-path", KILN__OPT_DIR},
               {"-I", KILN__OPT_DIR},
               {"--pre-include", KILN__OPT_HEADER},
               {"-include", KILN__OPT_HEADER}};
  const char *a = o->options[*i];
  if (!a) return;
  a += strspn(a, " \t");
  for (size_t k = 0; k < KILN__COUNT(names); k++) {
    size_t len = strlen(names[k].name);
    if (strncmp(a, names[k].name, len) != 0) continue;
    const char *rest = a + len;
    if (rest[strspn(rest, " \t")] == '\0') { /* the value is the next option */
      if (*i + 1 < o->n_options && o->options[*i + 1])
        kiln__option_values(sc, names[k].kind, o->options[++*i]);
    } else {
      kiln__option_values(sc, names[k].kind, rest);
    }
    return;
  }
}

int kiln__headers_named(const char *text) {
  return text && (strstr(text, "include") || strstr(text, "import") || strstr(text, "embed") ||
                  strstr(text, "\\\n") || strstr(text, "\\\r\n") || strstr(text, "?\?/"));
}

int kiln__headers_reachable(const char *src, const kiln_compile_opts *opts) {
  if (kiln__headers_named(src)) return 1;
  for (int i = 0; opts && i < opts->n_options; i++)
    if (kiln__headers_named(opts->options[i])) return 1;
  for (int i = 0; opts && i < opts->n_headers; i++)
    if (kiln__headers_named(opts->header_sources[i])) return 1;
  return 0;
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
  /* Folders first, since a header given by an option is looked for in them too. */
  sc.opts_pass = KILN__OPT_DIR;
  for (int i = 0; !s && opts && i < opts->n_options; i++) {
    kiln__option_scan(&sc, opts, &i);
    s = sc.status;
  }
  if (!s) {
    kiln__scan_text(&sc, src, strlen(src), cwd);
    /* Headers forced in with -include / --pre-include count as included by the source. */
    sc.opts_pass = KILN__OPT_HEADER;
    for (int i = 0; opts && i < opts->n_options && !sc.status; i++)
      kiln__option_scan(&sc, opts, &i);
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
