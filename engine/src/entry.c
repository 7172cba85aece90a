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

void kiln__entry_put_code(kiln__wire_out *w, const kiln__code *code) {
  kiln__wire_put_str(w, code->arch);
  kiln__wire_put_u32(w, (uint32_t)code->arch_num);
  kiln__wire_put_blob(w, code->cubin, code->cubin ? code->cubin_size : 0);
  kiln__wire_put_blob(w, code->ptx, code->ptx_size);
  kiln__wire_put_str(w, code->log);
  kiln__wire_put_u32(w, (uint32_t)code->n_names);
  for (int i = 0; i < code->n_names; i++) {
    kiln__wire_put_str(w, code->names[i]);
    kiln__wire_put_str(w, code->lowered[i]);
  }
}

static void kiln__put_body(kiln__wire_out *w, const kiln__code *code, const kiln__kernel *kernels,
                           int n_kernels, const kiln__headers *headers) {
  kiln__entry_put_code(w, code);
  kiln__wire_put_u32(w, (uint32_t)n_kernels);
  for (int i = 0; i < n_kernels; i++) {
    kiln__wire_put_str(w, kernels[i].name);
    kiln__wire_put_str(w, kernels[i].plain);
    kiln__wire_put_u32(w, (uint32_t)kernels[i].n_params);
    for (int k = 0; k < kernels[i].n_params; k++) {
      kiln__wire_put_u32(w, (uint32_t)kernels[i].params[k].cls);
      kiln__wire_put_u32(w, kernels[i].params[k].size);
      kiln__wire_put_u32(w, kernels[i].params[k].align);
    }
  }
  kiln__wire_put_u32(w, (uint32_t)headers->n);
  for (int i = 0; i < headers->n; i++) {
    const kiln__header *h = &headers->items[i];
    kiln__wire_put_str(w, h->path);
    kiln__wire_put_u32(w, (uint32_t)(h->exists | h->stat_trusted << 1));
    kiln__wire_put_u64(w, h->size);
    kiln__wire_put_u64(w, h->inode);
    kiln__wire_put_u64(w, (uint64_t)h->mtime_ns);
    kiln__wire_put_u64(w, (uint64_t)h->ctime_ns);
    kiln__wire_put(w, h->sha, sizeof h->sha);
  }
}

kiln_status kiln__entry_encode(const unsigned char key[KILN__KEY_SIZE], const kiln__code *code,
                               const kiln__kernel *kernels, int n_kernels,
                               const kiln__headers *headers, unsigned char **out, size_t *size) {
  kiln__wire_out w = {0};
  unsigned char zeros[KILN__ENTRY_HEADER_SIZE] = {0};
  kiln__wire_put(&w, zeros, sizeof zeros); /* the header, filled in below */
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
  kiln__wire_out h = {0};
  kiln__wire_put(&h, kiln__magic, sizeof kiln__magic);
  kiln__wire_put_u32(&h, KILN__ENTRY_VERSION);
  kiln__wire_put_u32(&h, KILN__ENTRY_HEADER_SIZE);
  kiln__wire_put_u64(&h, body);
  kiln__wire_put(&h, key, KILN__KEY_SIZE);
  kiln__wire_put(&h, sha, sizeof sha);
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

void kiln__entry_get_code(kiln__wire_in *r, kiln__code *code) {
  char *arch = kiln__wire_get_str(r);
  if (arch && (strlen(arch) >= sizeof code->arch || strncmp(arch, "sm_", 3) != 0))
    kiln__wire_bad(r, "its arch is not one kiln writes");
  if (arch && !r->why) memcpy(code->arch, arch, strlen(arch) + 1);
  free(arch);
  code->arch_num = (int)kiln__wire_get_u32(r);
  if (!r->why && (code->arch_num < 10 || code->arch_num > 9999))
    kiln__wire_bad(r, "its arch number is out of range");
  size_t n = 0;
  code->cubin = kiln__wire_get_blob(r, &n);
  code->cubin_size = n;
  if (code->cubin && !n) {
    free(code->cubin);
    code->cubin = NULL;
  }
  code->ptx = kiln__wire_get_blob(r, &code->ptx_size);
  if (code->ptx && (!code->ptx_size || memchr(code->ptx, '\0', code->ptx_size)))
    kiln__wire_bad(r, "its PTX is empty or holds a NUL byte");
  code->log = kiln__wire_get_str(r);
  int n_names = kiln__wire_get_count(r, 16);
  if (n_names) {
    code->names = calloc((size_t)n_names, sizeof(char *));
    code->lowered = calloc((size_t)n_names, sizeof(char *));
    if (!code->names || !code->lowered) {
      kiln__wire_bad(r, "out of memory reading it");
      return;
    }
    code->n_names = n_names;
    for (int i = 0; i < n_names && !r->why; i++) {
      code->names[i] = kiln__wire_get_str(r);
      code->lowered[i] = kiln__wire_get_str(r);
    }
  }
}

static void kiln__read_kernels(kiln__wire_in *r, kiln__cached *c) {
  int n = kiln__wire_get_count(r, 20);
  if (r->why) return;
  if (!(c->kernels = calloc((size_t)(n ? n : 1), sizeof *c->kernels))) {
    kiln__wire_bad(r, "out of memory reading it");
    return;
  }
  for (int i = 0; i < n && !r->why; i++) {
    kiln__kernel *kernel = &c->kernels[i];
    c->n_kernels = i + 1;
    kernel->name = kiln__wire_get_str(r);
    kernel->plain = kiln__wire_get_str(r);
    int n_params = kiln__wire_get_count(r, 12);
    if (r->why) return;
    if (!(kernel->params = calloc((size_t)(n_params ? n_params : 1), sizeof *kernel->params))) {
      kiln__wire_bad(r, "out of memory reading it");
      return;
    }
    kernel->n_params = n_params;
    for (int k = 0; k < n_params && !r->why; k++) {
      kiln_param *p = &kernel->params[k];
      uint32_t cls = kiln__wire_get_u32(r);
      p->size = kiln__wire_get_u32(r);
      p->align = kiln__wire_get_u32(r);
      if (r->why) return;
      if (cls > KILN_PARAM_AGGREGATE)
        kiln__wire_bad(r, "a kernel parameter in it has no known class");
      p->cls = (kiln_param_class)cls;
    }
    /* The checksum proves the bytes are the ones written, not that a writer wrote sense: the
     * signature is held to the rules a parsed one keeps, since launches trust it. */
    const char *why = r->why ? NULL : kiln__ptx_check_kernel(kernel);
    if (why) kiln__wire_bad(r, why);
  }
}

static void kiln__read_headers(kiln__wire_in *r, kiln__headers *h) {
  int n = kiln__wire_get_count(r, KILN__HEADER_RECORD_MIN);
  for (int i = 0; i < n && !r->why; i++) {
    kiln__header rec = {0};
    rec.path = kiln__wire_get_str(r);
    uint32_t flags = kiln__wire_get_u32(r);
    rec.exists = flags & 1;
    rec.stat_trusted = (flags >> 1) & 1;
    rec.size = kiln__wire_get_u64(r);
    rec.inode = kiln__wire_get_u64(r);
    rec.mtime_ns = (int64_t)kiln__wire_get_u64(r);
    rec.ctime_ns = (int64_t)kiln__wire_get_u64(r);
    kiln__wire_get(r, rec.sha, sizeof rec.sha);
    if (!r->why && (flags > 3 || rec.path[0] != '/'))
      kiln__wire_bad(r, "a header record in it is malformed");
    if (!r->why && kiln__headers_add(h, &rec)) kiln__wire_bad(r, "out of memory reading it");
    free(rec.path);
  }
}

const char *kiln__entry_decode_body(const void *body, size_t size, kiln__cached *out) {
  memset(out, 0, sizeof *out);
  kiln__wire_in r = {body, size, NULL};
  kiln__entry_get_code(&r, &out->code);
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
  kiln__wire_in r = {p + sizeof kiln__magic, KILN__ENTRY_HEADER_SIZE - sizeof kiln__magic, NULL};
  uint32_t version = kiln__wire_get_u32(&r), header_size = kiln__wire_get_u32(&r);
  uint64_t body = kiln__wire_get_u64(&r);
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
  kiln__wire_in r = {head + sizeof kiln__magic, KILN__ENTRY_HEADER_SIZE - sizeof kiln__magic, NULL};
  uint32_t version = kiln__wire_get_u32(&r), header_size = kiln__wire_get_u32(&r);
  uint64_t body = kiln__wire_get_u64(&r);
  if (version != KILN__ENTRY_VERSION) return "it has another format version";
  if (header_size != KILN__ENTRY_HEADER_SIZE) return "its header size is wrong";
  if (file_size < KILN__ENTRY_HEADER_SIZE || body > file_size - KILN__ENTRY_HEADER_SIZE)
    return "it is shorter than its header says (truncated)";
  if (body < file_size - KILN__ENTRY_HEADER_SIZE) return "it is longer than its header says";
  if (key && memcmp(head + 24, key, KILN__KEY_SIZE) != 0) return "it holds another key's code";
  return NULL;
}
