/* Encoding and decoding cache entries. The decoder trusts nothing: every count and length is
 * checked against the bytes left before anything is allocated, so a short, flipped or
 * foreign file is a reason string, never a crash. */
#include "entry.h"

#include <stdlib.h>
#include <string.h>

static const unsigned char kiln__magic[8] = {0x89, 'K', 'I', 'L', 'N', '\r', '\n', 0x1a};

/* Limits a well-formed entry never reaches; beyond them the entry is corrupt. */
#define KILN__HEADER_RECORD_MIN (8 + 4 + 4 * 8 + KILN__KEY_SIZE)

/* ---- Writing ------------------------------------------------------------------------------ */

typedef struct kiln__writer {
  unsigned char *p;
  size_t n, cap;
  int oom;
} kiln__writer;

static void kiln__put(kiln__writer *w, const void *data, size_t n) {
  if (w->oom || !n) return;
  if (w->n + n > w->cap) {
    size_t cap = w->cap ? w->cap : 4096;
    while (cap < w->n + n) cap *= 2;
    unsigned char *p = realloc(w->p, cap);
    if (!p) {
      w->oom = 1;
      return;
    }
    w->p = p;
    w->cap = cap;
  }
  memcpy(w->p + w->n, data, n);
  w->n += n;
}

static void kiln__put_u32(kiln__writer *w, uint32_t v) {
  unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                        (unsigned char)(v >> 24)};
  kiln__put(w, b, 4);
}

static void kiln__put_u64(kiln__writer *w, uint64_t v) {
  kiln__put_u32(w, (uint32_t)v);
  kiln__put_u32(w, (uint32_t)(v >> 32));
}

static void kiln__put_blob(kiln__writer *w, const void *data, size_t n) {
  kiln__put_u64(w, n);
  kiln__put(w, data, n);
}

static void kiln__put_str(kiln__writer *w, const char *s) {
  kiln__put_blob(w, s ? s : "", s ? strlen(s) : 0);
}

static void kiln__put_body(kiln__writer *w, const kiln__code *code, const kiln__kernel *kernels,
                           int n_kernels, const kiln__headers *headers) {
  kiln__put_str(w, code->arch);
  kiln__put_u32(w, (uint32_t)code->arch_num);
  kiln__put_blob(w, code->cubin, code->cubin ? code->cubin_size : 0);
  kiln__put_blob(w, code->ptx, code->ptx_size);
  kiln__put_str(w, code->log);
  kiln__put_u32(w, (uint32_t)code->n_names);
  for (int i = 0; i < code->n_names; i++) {
    kiln__put_str(w, code->names[i]);
    kiln__put_str(w, code->lowered[i]);
  }
  kiln__put_u32(w, (uint32_t)n_kernels);
  for (int i = 0; i < n_kernels; i++) {
    kiln__put_str(w, kernels[i].name);
    kiln__put_str(w, kernels[i].plain);
    kiln__put_u32(w, (uint32_t)kernels[i].n_params);
    for (int k = 0; k < kernels[i].n_params; k++) {
      kiln__put_u32(w, (uint32_t)kernels[i].params[k].cls);
      kiln__put_u32(w, kernels[i].params[k].size);
      kiln__put_u32(w, kernels[i].params[k].align);
    }
  }
  kiln__put_u32(w, (uint32_t)headers->n);
  for (int i = 0; i < headers->n; i++) {
    const kiln__header *h = &headers->items[i];
    kiln__put_str(w, h->path);
    kiln__put_u32(w, (uint32_t)(h->exists | h->stat_trusted << 1));
    kiln__put_u64(w, h->size);
    kiln__put_u64(w, h->inode);
    kiln__put_u64(w, (uint64_t)h->mtime_ns);
    kiln__put_u64(w, (uint64_t)h->ctime_ns);
    kiln__put(w, h->sha, sizeof h->sha);
  }
}

kiln_status kiln__entry_encode(const unsigned char key[KILN__KEY_SIZE], const kiln__code *code,
                               const kiln__kernel *kernels, int n_kernels,
                               const kiln__headers *headers, unsigned char **out, size_t *size) {
  kiln__writer w = {0};
  unsigned char zeros[KILN__ENTRY_HEADER_SIZE] = {0};
  kiln__put(&w, zeros, sizeof zeros); /* the header, filled in below */
  kiln__put_body(&w, code, kernels, n_kernels, headers);
  if (w.oom) {
    free(w.p);
    return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory encoding a cache entry");
  }
  uint64_t body = w.n - KILN__ENTRY_HEADER_SIZE;
  unsigned char sha[KILN__KEY_SIZE];
  kiln_status s = kiln__hash_sha256(w.p + KILN__ENTRY_HEADER_SIZE, body, sha);
  if (s) {
    free(w.p);
    return s;
  }
  kiln__writer h = {0};
  kiln__put(&h, kiln__magic, sizeof kiln__magic);
  kiln__put_u32(&h, KILN__ENTRY_VERSION);
  kiln__put_u32(&h, KILN__ENTRY_HEADER_SIZE);
  kiln__put_u64(&h, body);
  kiln__put(&h, key, KILN__KEY_SIZE);
  kiln__put(&h, sha, sizeof sha);
  if (h.oom) {
    free(w.p);
    return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory encoding a cache entry");
  }
  memcpy(w.p, h.p, KILN__ENTRY_HEADER_SIZE);
  free(h.p);
  *out = w.p;
  *size = w.n;
  return KILN_OK;
}

/* ---- Reading ------------------------------------------------------------------------------ */

typedef struct kiln__reader {
  const unsigned char *p;
  size_t left;
  const char *why; /* the first thing found wrong */
} kiln__reader;

static int kiln__bad(kiln__reader *r, const char *why) {
  if (!r->why) r->why = why;
  return 0;
}

static int kiln__get(kiln__reader *r, void *out, size_t n) {
  if (r->why) return 0;
  if (n > r->left) return kiln__bad(r, "it ends in the middle of a field (truncated)");
  memcpy(out, r->p, n);
  r->p += n;
  r->left -= n;
  return 1;
}

static uint32_t kiln__get_u32(kiln__reader *r) {
  unsigned char b[4] = {0};
  kiln__get(r, b, 4);
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint64_t kiln__get_u64(kiln__reader *r) {
  uint64_t lo = kiln__get_u32(r);
  return lo | (uint64_t)kiln__get_u32(r) << 32;
}

/* A count of items of at least min_bytes each, which the bytes left must be able to hold. */
static int kiln__get_count(kiln__reader *r, size_t min_bytes) {
  uint32_t n = kiln__get_u32(r);
  if (r->why) return 0;
  if (n > r->left / min_bytes || n > 1000000)
    return kiln__bad(r, "a count in it is larger than its bytes allow");
  return (int)n;
}

/* A length-prefixed blob, copied with a NUL after it; *n gets its length. */
static void *kiln__get_blob(kiln__reader *r, size_t *n) {
  uint64_t len = kiln__get_u64(r);
  if (r->why) return NULL;
  if (len > r->left) {
    kiln__bad(r, "a length in it runs past its end");
    return NULL;
  }
  char *p = malloc((size_t)len + 1);
  if (!p) {
    kiln__bad(r, "out of memory reading it");
    return NULL;
  }
  memcpy(p, r->p, (size_t)len);
  p[len] = '\0';
  r->p += len;
  r->left -= (size_t)len;
  *n = (size_t)len;
  return p;
}

/* A string: a blob without NUL bytes in it. */
static char *kiln__get_str(kiln__reader *r) {
  size_t n = 0;
  char *s = kiln__get_blob(r, &n);
  if (s && memchr(s, '\0', n)) {
    free(s);
    kiln__bad(r, "a string in it holds a NUL byte");
    return NULL;
  }
  return s;
}

static void kiln__read_code(kiln__reader *r, kiln__code *code) {
  char *arch = kiln__get_str(r);
  if (arch && (strlen(arch) >= sizeof code->arch || strncmp(arch, "sm_", 3) != 0))
    kiln__bad(r, "its arch is not one kiln writes");
  if (arch && !r->why) memcpy(code->arch, arch, strlen(arch) + 1);
  free(arch);
  code->arch_num = (int)kiln__get_u32(r);
  if (!r->why && (code->arch_num < 10 || code->arch_num > 9999))
    kiln__bad(r, "its arch number is out of range");
  size_t n = 0;
  code->cubin = kiln__get_blob(r, &n);
  code->cubin_size = n;
  if (code->cubin && !n) {
    free(code->cubin);
    code->cubin = NULL;
  }
  code->ptx = kiln__get_blob(r, &code->ptx_size);
  if (code->ptx && (!code->ptx_size || memchr(code->ptx, '\0', code->ptx_size)))
    kiln__bad(r, "its PTX is empty or holds a NUL byte");
  code->log = kiln__get_str(r);
  int n_names = kiln__get_count(r, 16);
  if (n_names) {
    code->names = calloc((size_t)n_names, sizeof(char *));
    code->lowered = calloc((size_t)n_names, sizeof(char *));
    if (!code->names || !code->lowered) {
      kiln__bad(r, "out of memory reading it");
      return;
    }
    code->n_names = n_names;
    for (int i = 0; i < n_names && !r->why; i++) {
      code->names[i] = kiln__get_str(r);
      code->lowered[i] = kiln__get_str(r);
    }
  }
}

static void kiln__read_kernels(kiln__reader *r, kiln__cached *c) {
  int n = kiln__get_count(r, 20);
  if (r->why) return;
  if (!(c->kernels = calloc((size_t)(n ? n : 1), sizeof *c->kernels))) {
    kiln__bad(r, "out of memory reading it");
    return;
  }
  for (int i = 0; i < n && !r->why; i++) {
    kiln__kernel *kernel = &c->kernels[i];
    c->n_kernels = i + 1;
    kernel->name = kiln__get_str(r);
    kernel->plain = kiln__get_str(r);
    int n_params = kiln__get_count(r, 12);
    if (r->why) return;
    if (!(kernel->params = calloc((size_t)(n_params ? n_params : 1), sizeof *kernel->params))) {
      kiln__bad(r, "out of memory reading it");
      return;
    }
    kernel->n_params = n_params;
    for (int k = 0; k < n_params && !r->why; k++) {
      kiln_param *p = &kernel->params[k];
      uint32_t cls = kiln__get_u32(r);
      p->size = kiln__get_u32(r);
      p->align = kiln__get_u32(r);
      if (r->why) return;
      if (cls > KILN_PARAM_AGGREGATE) kiln__bad(r, "a kernel parameter in it has no known class");
      p->cls = (kiln_param_class)cls;
    }
    /* The checksum proves the bytes are the ones written, not that a writer wrote sense: the
     * signature is held to the rules a parsed one keeps, since launches trust it. */
    const char *why = r->why ? NULL : kiln__ptx_check_kernel(kernel);
    if (why) kiln__bad(r, why);
  }
}

static void kiln__read_headers(kiln__reader *r, kiln__headers *h) {
  int n = kiln__get_count(r, KILN__HEADER_RECORD_MIN);
  for (int i = 0; i < n && !r->why; i++) {
    kiln__header rec = {0};
    rec.path = kiln__get_str(r);
    uint32_t flags = kiln__get_u32(r);
    rec.exists = flags & 1;
    rec.stat_trusted = (flags >> 1) & 1;
    rec.size = kiln__get_u64(r);
    rec.inode = kiln__get_u64(r);
    rec.mtime_ns = (int64_t)kiln__get_u64(r);
    rec.ctime_ns = (int64_t)kiln__get_u64(r);
    kiln__get(r, rec.sha, sizeof rec.sha);
    if (!r->why && (flags > 3 || rec.path[0] != '/'))
      kiln__bad(r, "a header record in it is malformed");
    if (!r->why && kiln__headers_add(h, &rec)) kiln__bad(r, "out of memory reading it");
    free(rec.path);
  }
}

const char *kiln__entry_decode_body(const void *body, size_t size, kiln__cached *out) {
  memset(out, 0, sizeof *out);
  kiln__reader r = {body, size, NULL};
  kiln__read_code(&r, &out->code);
  kiln__read_kernels(&r, out);
  kiln__read_headers(&r, &out->headers);
  if (!r.why && r.left) r.why = "it has bytes after its last field";
  if (r.why) kiln__entry_free_cached(out);
  return r.why;
}

const char *kiln__entry_decode(const void *data, size_t size,
                               const unsigned char key[KILN__KEY_SIZE], kiln__cached *out) {
  memset(out, 0, sizeof *out);
  const unsigned char *p = data;
  if (size == 0) return "it is empty";
  if (size < KILN__ENTRY_HEADER_SIZE) return "it is shorter than an entry's header (truncated)";
  if (memcmp(p, kiln__magic, sizeof kiln__magic) != 0) return "it is not a kiln cache entry";
  kiln__reader r = {p + sizeof kiln__magic, KILN__ENTRY_HEADER_SIZE - sizeof kiln__magic, NULL};
  uint32_t version = kiln__get_u32(&r), header_size = kiln__get_u32(&r);
  uint64_t body = kiln__get_u64(&r);
  if (version != KILN__ENTRY_VERSION) return "it has another format version";
  if (header_size != KILN__ENTRY_HEADER_SIZE) return "its header size is wrong";
  if (body > size - KILN__ENTRY_HEADER_SIZE)
    return "it is shorter than its header says (truncated)";
  if (body < size - KILN__ENTRY_HEADER_SIZE) return "it is longer than its header says";
  if (key && memcmp(p + 24, key, KILN__KEY_SIZE) != 0) return "it holds another key's code";
  unsigned char sha[KILN__KEY_SIZE];
  if (kiln__hash_sha256(p + KILN__ENTRY_HEADER_SIZE, (size_t)body, sha) != KILN_OK)
    return "its checksum could not be computed";
  if (memcmp(p + 56, sha, sizeof sha) != 0) return "its checksum does not match its contents";
  return kiln__entry_decode_body(p + KILN__ENTRY_HEADER_SIZE, (size_t)body, out);
}

void kiln__entry_free_cached(kiln__cached *c) {
  kiln__compile_free_code(&c->code);
  kiln__ptx_free_kernels(c->kernels, c->n_kernels);
  kiln__headers_free(&c->headers);
  memset(c, 0, sizeof *c);
}

const char *kiln__entry_check_header(const unsigned char head[KILN__ENTRY_HEADER_SIZE],
                                     uint64_t file_size, const unsigned char key[KILN__KEY_SIZE]) {
  if (memcmp(head, kiln__magic, sizeof kiln__magic) != 0) return "it is not a kiln cache entry";
  kiln__reader r = {head + sizeof kiln__magic, KILN__ENTRY_HEADER_SIZE - sizeof kiln__magic, NULL};
  uint32_t version = kiln__get_u32(&r), header_size = kiln__get_u32(&r);
  uint64_t body = kiln__get_u64(&r);
  if (version != KILN__ENTRY_VERSION) return "it has another format version";
  if (header_size != KILN__ENTRY_HEADER_SIZE) return "its header size is wrong";
  if (file_size < KILN__ENTRY_HEADER_SIZE || body > file_size - KILN__ENTRY_HEADER_SIZE)
    return "it is shorter than its header says (truncated)";
  if (body < file_size - KILN__ENTRY_HEADER_SIZE) return "it is longer than its header says";
  if (key && memcmp(head + 24, key, KILN__KEY_SIZE) != 0) return "it holds another key's code";
  return NULL;
}
