/* Kernel signatures from PTX: every .entry's parameters (size, alignment, class), sharpened
 * by what the kernel's mangled name says (demangle.c); the names of the parameter classes. */
#include "ptx.h"

#include "demangle.h"
#include "dup.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

typedef struct kiln__cursor {
  const char *p, *end;
} kiln__cursor;

typedef struct kiln__token {
  const char *s;
  size_t n;
} kiln__token;

static int kiln__tok_is(kiln__token t, const char *lit) {
  size_t n = strlen(lit);
  return t.n == n && memcmp(t.s, lit, n) == 0;
}

static void kiln__skip_space(kiln__cursor *c) {
  while (c->p < c->end) {
    if (isspace((unsigned char)*c->p)) {
      c->p++;
    } else if (c->end - c->p >= 2 && c->p[0] == '/' && c->p[1] == '/') {
      while (c->p < c->end && *c->p != '\n') c->p++;
    } else if (c->end - c->p >= 2 && c->p[0] == '/' && c->p[1] == '*') {
      c->p += 2;
      while (c->end - c->p >= 2 && !(c->p[0] == '*' && c->p[1] == '/')) c->p++;
      c->p = c->end - c->p >= 2 ? c->p + 2 : c->end;
    } else {
      return;
    }
  }
}

static int kiln__ident_char(char ch) {
  return isalnum((unsigned char)ch) || ch == '_' || ch == '$' || ch == '%';
}

static int kiln__name_start(char ch);

/* One token: a directive (.entry), an identifier, a number, a string or one punctuator.
 * An empty token means the end of the buffer. */
static kiln__token kiln__next(kiln__cursor *c) {
  kiln__skip_space(c);
  kiln__token t = {c->p, 0};
  if (c->p >= c->end) return t;
  const char *q = c->p;
  if (*q == '.' || kiln__ident_char(*q)) {
    q++;
    while (q < c->end && kiln__ident_char(*q)) q++;
  } else if (*q == '"') {
    q++;
    while (q < c->end && *q != '"' && *q != '\n') q++;
    if (q < c->end && *q == '"') q++;
  } else {
    q++;
  }
  t.n = (size_t)(q - c->p);
  c->p = q;
  return t;
}

static int kiln__tok_number(kiln__token t, unsigned long *out) {
  if (t.n == 0 || t.n > 9) return 0;
  unsigned long v = 0;
  for (size_t i = 0; i < t.n; i++) {
    if (!isdigit((unsigned char)t.s[i])) return 0;
    v = v * 10 + (unsigned long)(t.s[i] - '0');
  }
  *out = v;
  return 1;
}

typedef struct kiln__ptx_type {
  const char *name;
  unsigned size;
  kiln_param_class cls;
} kiln__ptx_type;

/* PTX spells int and unsigned alike (.u32), so only .sN says the sign. */
static const kiln__ptx_type kiln__ptx_types[] = {
    {".b8", 1, KILN_PARAM_B8},         {".u8", 1, KILN_PARAM_B8},
    {".s8", 1, KILN_PARAM_I8},         {".b16", 2, KILN_PARAM_B16},
    {".u16", 2, KILN_PARAM_B16},       {".s16", 2, KILN_PARAM_I16},
    {".f16", 2, KILN_PARAM_AGGREGATE}, {".bf16", 2, KILN_PARAM_AGGREGATE},
    {".b32", 4, KILN_PARAM_B32},       {".u32", 4, KILN_PARAM_B32},
    {".s32", 4, KILN_PARAM_I32},       {".f32", 4, KILN_PARAM_F32},
    {".b64", 8, KILN_PARAM_B64},       {".u64", 8, KILN_PARAM_B64},
    {".s64", 8, KILN_PARAM_I64},       {".f64", 8, KILN_PARAM_F64},
};

static const kiln__ptx_type *kiln__ptx_type_of(kiln__token t) {
  for (size_t i = 0; i < KILN__COUNT(kiln__ptx_types); i++)
    if (kiln__tok_is(t, kiln__ptx_types[i].name)) return &kiln__ptx_types[i];
  return NULL;
}

/* The largest parameter space any CUDA version allows is 32764 bytes. */
#define KILN__PARAM_SPACE_MAX 32764u
/* The largest .align the reader takes on a parameter. */
#define KILN__PARAM_ALIGN_MAX 4096u

/* The bytes a value of a scalar class takes; 0 for a struct, which may take any. */
static unsigned kiln__class_size(kiln_param_class c) {
  switch (c) {
  case KILN_PARAM_B8:
  case KILN_PARAM_I8:
  case KILN_PARAM_U8: return 1;
  case KILN_PARAM_B16:
  case KILN_PARAM_I16:
  case KILN_PARAM_U16: return 2;
  case KILN_PARAM_B32:
  case KILN_PARAM_I32:
  case KILN_PARAM_U32:
  case KILN_PARAM_F32: return 4;
  case KILN_PARAM_B64:
  case KILN_PARAM_I64:
  case KILN_PARAM_U64:
  case KILN_PARAM_PTR:
  case KILN_PARAM_F64: return 8;
  case KILN_PARAM_AGGREGATE: return 0;
  }
  return 0;
}

static int kiln__name_start(char ch) {
  return isalpha((unsigned char)ch) || ch == '_' || ch == '$' || ch == '%';
}

static kiln_status kiln__bad_ptx(kiln__token kernel, int param, const char *what, kiln__token t) {
  return kiln__fail(KILN_ERROR_PTX, "malformed PTX in .entry %.*s, parameter %d: %s, found '%.*s'",
                    (int)(kernel.n > 200 ? 200 : kernel.n), kernel.s, param, what,
                    (int)(t.n > 40 ? 40 : t.n), t.n ? t.s : "end of text");
}

/* One `.param [.align N] .type [.ptr [.space] [.align N]] name[[S]]`, up to ',' or ')'. */
static kiln_status kiln__parse_param(kiln__cursor *c, kiln__token kernel, int index,
                                     kiln_param *out, int *closed) {
  kiln__token t = kiln__next(c);
  if (!kiln__tok_is(t, ".param")) return kiln__bad_ptx(kernel, index, "expected .param", t);
  unsigned long align = 0, count = 0;
  const kiln__ptx_type *type = NULL;
  int is_ptr = 0, have_name = 0;
  for (;;) {
    t = kiln__next(c);
    if (t.n == 0) return kiln__bad_ptx(kernel, index, "unterminated parameter list", t);
    if (kiln__tok_is(t, ",") || kiln__tok_is(t, ")")) {
      *closed = kiln__tok_is(t, ")");
      break;
    }
    if (kiln__tok_is(t, ".align")) {
      kiln__token n = kiln__next(c);
      unsigned long a;
      if (!kiln__tok_number(n, &a) || a == 0 || (a & (a - 1)) || a > KILN__PARAM_ALIGN_MAX)
        return kiln__bad_ptx(kernel, index, "expected a power-of-two alignment", n);
      if (!is_ptr) align = a; /* after .ptr, .align is the pointee's, not the parameter's */
    } else if (kiln__tok_is(t, ".ptr")) {
      is_ptr = 1;
    } else if (kiln__tok_is(t, ".global") || kiln__tok_is(t, ".const") ||
               kiln__tok_is(t, ".shared") || kiln__tok_is(t, ".local")) {
      /* the pointee's state space */
    } else if (kiln__ptx_type_of(t) && !type) {
      type = kiln__ptx_type_of(t);
    } else if (!have_name && (isalpha((unsigned char)t.s[0]) || t.s[0] == '_' || t.s[0] == '$' ||
                              t.s[0] == '%')) {
      have_name = 1;
      kiln__cursor save = *c;
      kiln__token b = kiln__next(c);
      if (kiln__tok_is(b, "[")) {
        kiln__token n = kiln__next(c);
        if (!kiln__tok_number(n, &count) || count == 0)
          return kiln__bad_ptx(kernel, index, "expected an array length", n);
        if (!kiln__tok_is(kiln__next(c), "]"))
          return kiln__bad_ptx(kernel, index, "expected ']'", n);
      } else {
        *c = save;
      }
    } else {
      return kiln__bad_ptx(kernel, index, "unexpected token", t);
    }
  }
  if (!type) return kiln__bad_ptx(kernel, index, "no type", t);
  if (!have_name) return kiln__bad_ptx(kernel, index, "no name", t);
  unsigned long size = count ? count * type->size : type->size;
  if (size > KILN__PARAM_SPACE_MAX)
    return kiln__bad_ptx(kernel, index, "larger than the parameter space", t);
  out->size = (unsigned)size;
  out->align = (unsigned)(align ? align : type->size);
  out->cls = count ? KILN_PARAM_AGGREGATE : type->cls;
  if (is_ptr && out->size == 8 && !count) out->cls = KILN_PARAM_PTR;
  return KILN_OK;
}

/* One .entry: its name, then its parameter list. */
static kiln_status kiln__parse_kernel(kiln__cursor *c, kiln__kernel *k) {
  kiln__token name = kiln__next(c);
  if (name.n == 0 || !kiln__name_start(name.s[0]))
    return kiln__fail(KILN_ERROR_PTX, "malformed PTX: .entry is not followed by a name");
  k->name = kiln__dup_range(name.s, name.n);
  if (!k->name) return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory reading PTX");
  kiln__cursor save = *c;
  if (!kiln__tok_is(kiln__next(c), "(")) {
    *c = save; /* a kernel without parameters may omit the list */
    return KILN_OK;
  }
  save = *c;
  if (kiln__tok_is(kiln__next(c), ")")) return KILN_OK;
  *c = save;
  int cap = 0, closed = 0;
  unsigned total = 0;
  while (!closed) {
    if (k->n_params == cap) {
      cap = cap ? cap * 2 : 8;
      kiln_param *grown = realloc(k->params, (size_t)cap * sizeof *grown);
      if (!grown) return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory reading PTX");
      k->params = grown;
    }
    kiln_status s = kiln__parse_param(c, name, k->n_params, &k->params[k->n_params], &closed);
    if (s) return s;
    const kiln_param *p = &k->params[k->n_params];
    total = (total + p->align - 1) / p->align * p->align + p->size;
    if (total > KILN__PARAM_SPACE_MAX)
      return kiln__fail(KILN_ERROR_PTX,
                        "malformed PTX: the parameters of .entry %s take more "
                        "than %u bytes",
                        k->name, KILN__PARAM_SPACE_MAX);
    k->n_params++;
  }
  return KILN_OK;
}

kiln_status kiln__ptx_refine(kiln__kernel *k, int sizes_only) {
  int types[256];
  int n_types = -1;
  char *plain = kiln__demangle(k->name, strlen(k->name), types, (int)KILN__COUNT(types), &n_types);
  k->plain = plain ? plain : kiln__dup_str(k->name);
  if (!k->plain) return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory reading PTX");
  if (n_types != k->n_params) return KILN_OK; /* unreadable or unexpected: PTX alone */
  for (int i = 0; i < k->n_params; i++) {
    kiln_param *p = &k->params[i];
    int t = types[i];
    if (t < 0) continue;
    unsigned tsize = t == KILN_PARAM_I8 || t == KILN_PARAM_U8                            ? 1
                     : t == KILN_PARAM_I16 || t == KILN_PARAM_U16                        ? 2
                     : t == KILN_PARAM_I32 || t == KILN_PARAM_U32 || t == KILN_PARAM_F32 ? 4
                                                                                         : 8;
    /* Trust the name only where it agrees with the PTX on size and on int versus float. */
    int ptx_int = p->cls <= KILN_PARAM_PTR;
    int name_int = t <= KILN_PARAM_PTR;
    if (tsize == p->size && (sizes_only || ptx_int == name_int) && p->cls != KILN_PARAM_AGGREGATE)
      p->cls = (kiln_param_class)t;
  }
  return KILN_OK;
}

const char *kiln__ptx_check_kernel(const kiln__kernel *k) {
  if (!k->name || !kiln__name_start(k->name[0])) return "a kernel's name is not a PTX name";
  for (const char *p = k->name; *p; p++)
    if (!kiln__ident_char(*p)) return "a kernel's name is not a PTX name";
  if (!k->plain || !k->plain[0]) return "a kernel has no plain name";
  if (k->n_params < 0 || (k->n_params && !k->params))
    return "a kernel's parameter count is impossible";
  unsigned long total = 0;
  for (int i = 0; i < k->n_params; i++) {
    const kiln_param *p = &k->params[i];
    if ((unsigned)p->cls > (unsigned)KILN_PARAM_AGGREGATE)
      return "a kernel parameter has no known class";
    unsigned want = kiln__class_size(p->cls);
    /* The packer writes as many bytes as the class says: a size that disagrees would have
     * it write past the parameter, or leave part of it unset. */
    if (want ? p->size != want : p->size == 0)
      return "a kernel parameter's size does not fit its class";
    if (p->size > KILN__PARAM_SPACE_MAX)
      return "a kernel parameter is larger than the parameter space";
    if (!p->align || (p->align & (p->align - 1)) || p->align > KILN__PARAM_ALIGN_MAX)
      return "a kernel parameter's alignment is not a power of two up to 4096";
    total = (total + p->align - 1) / p->align * p->align + p->size;
    if (total > KILN__PARAM_SPACE_MAX) return "a kernel's parameters take more than 32764 bytes";
  }
  return NULL;
}

void kiln__ptx_free_kernels(kiln__kernel *kernels, int n) {
  if (!kernels) return;
  for (int i = 0; i < n; i++) {
    free(kernels[i].name);
    free(kernels[i].plain);
    free(kernels[i].params);
  }
  free(kernels);
}

kiln_status kiln__ptx_parse(const char *ptx, size_t len, kiln__kernel **out, int *n_out) {
  kiln__cursor c = {ptx, ptx + len};
  kiln__kernel *kernels = NULL;
  int n = 0, cap = 0;
  kiln_status s = KILN_OK;
  *out = NULL;
  *n_out = 0;
  for (;;) {
    kiln__token t = kiln__next(&c);
    if (t.n == 0) break;
    if (!kiln__tok_is(t, ".entry")) continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 4;
      kiln__kernel *grown = realloc(kernels, (size_t)cap * sizeof *grown);
      if (!grown) {
        s = kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory reading PTX");
        break;
      }
      kernels = grown;
    }
    memset(&kernels[n], 0, sizeof kernels[n]);
    n++;
    s = kiln__parse_kernel(&c, &kernels[n - 1]);
    if (!s) s = kiln__ptx_refine(&kernels[n - 1], 0);
    /* What a cache entry or the driver says of a kernel is held to the same rules. */
    const char *why = s ? NULL : kiln__ptx_check_kernel(&kernels[n - 1]);
    if (why)
      s = kiln__fail(KILN_ERROR_PTX, "malformed PTX: .entry %s: %s", kernels[n - 1].name, why);
    if (s) break;
  }
  if (s) {
    kiln__ptx_free_kernels(kernels, n);
    return s;
  }
  *out = kernels;
  *n_out = n;
  return KILN_OK;
}

/* A name a variable can have: not a directive, not a number, not punctuation. */
static int kiln__tok_is_name(kiln__token t) {
  return t.n > 0 && (isalpha((unsigned char)t.s[0]) || t.s[0] == '_' || t.s[0] == '$');
}

void kiln__ptx_free_names(char **names, int n) {
  for (int i = 0; names && i < n; i++) free(names[i]);
  free(names);
}

kiln_status kiln__ptx_globals(const char *ptx, size_t len, char ***out, int *n_out) {
  kiln__cursor c = {ptx, ptx + len};
  char **names = NULL;
  int n = 0, cap = 0, depth = 0, external = 0;
  *out = NULL;
  *n_out = 0;
  for (;;) {
    kiln__token t = kiln__next(&c);
    if (t.n == 0) break;
    if (kiln__tok_is(t, "{")) depth++;
    else if (kiln__tok_is(t, "}") && depth > 0) depth--;
    if (depth > 0) continue;
    if (kiln__tok_is(t, ".extern")) {
      external = 1; /* declared here, defined in another module */
      continue;
    }
    if (kiln__tok_is(t, ".visible") || kiln__tok_is(t, ".weak") || kiln__tok_is(t, ".common"))
      continue;
    if (!kiln__tok_is(t, ".global") && !kiln__tok_is(t, ".const")) {
      external = 0;
      continue;
    }
    /* .global .align 4 .b8 name[40]; the name is the first token that is neither a directive
     * nor a number. Texture and surface references went with CUDA 12. */
    kiln__token name = kiln__next(&c);
    int reference = 0;
    while (name.n && !kiln__tok_is_name(name) && !kiln__tok_is(name, ";")) {
      reference |= kiln__tok_is(name, ".texref") || kiln__tok_is(name, ".surfref") ||
                   kiln__tok_is(name, ".samplerref");
      name = kiln__next(&c);
    }
    int keep = kiln__tok_is_name(name) && name.s[0] != '$' && !external && !reference;
    external = 0;
    if (!keep) continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 8;
      char **grown = realloc(names, (size_t)cap * sizeof *grown);
      if (!grown) {
        kiln__ptx_free_names(names, n);
        return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory reading PTX");
      }
      names = grown;
    }
    if (!(names[n] = kiln__dup_range(name.s, name.n))) {
      kiln__ptx_free_names(names, n);
      return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory reading PTX");
    }
    n++;
  }
  *out = names;
  *n_out = n;
  return KILN_OK;
}

const char *kiln_param_class_name(kiln_param_class c) {
  switch (c) {
  case KILN_PARAM_B8: return "b8";
  case KILN_PARAM_I8: return "i8";
  case KILN_PARAM_U8: return "u8";
  case KILN_PARAM_B16: return "b16";
  case KILN_PARAM_I16: return "i16";
  case KILN_PARAM_U16: return "u16";
  case KILN_PARAM_B32: return "b32";
  case KILN_PARAM_I32: return "i32";
  case KILN_PARAM_U32: return "u32";
  case KILN_PARAM_B64: return "b64";
  case KILN_PARAM_I64: return "i64";
  case KILN_PARAM_U64: return "u64";
  case KILN_PARAM_PTR: return "ptr";
  case KILN_PARAM_F32: return "f32";
  case KILN_PARAM_F64: return "f64";
  case KILN_PARAM_AGGREGATE: return "struct";
  }
  return "unknown";
}
