/* Reading kernel signatures from PTX .entry lines and from Itanium-mangled names. */
#include "signature.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* ---- PTX ---------------------------------------------------------------------------------- */

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
    {".b8", 1, KILN_PARAM_B8},   {".u8", 1, KILN_PARAM_B8},   {".s8", 1, KILN_PARAM_I8},
    {".b16", 2, KILN_PARAM_B16}, {".u16", 2, KILN_PARAM_B16}, {".s16", 2, KILN_PARAM_I16},
    {".f16", 2, KILN_PARAM_AGGREGATE}, {".bf16", 2, KILN_PARAM_AGGREGATE},
    {".b32", 4, KILN_PARAM_B32}, {".u32", 4, KILN_PARAM_B32}, {".s32", 4, KILN_PARAM_I32},
    {".f32", 4, KILN_PARAM_F32}, {".b64", 8, KILN_PARAM_B64}, {".u64", 8, KILN_PARAM_B64},
    {".s64", 8, KILN_PARAM_I64}, {".f64", 8, KILN_PARAM_F64},
};

static const kiln__ptx_type *kiln__ptx_type_of(kiln__token t) {
  for (size_t i = 0; i < KILN__COUNT(kiln__ptx_types); i++)
    if (kiln__tok_is(t, kiln__ptx_types[i].name)) return &kiln__ptx_types[i];
  return NULL;
}

/* The largest parameter space any CUDA version allows is 32764 bytes. */
#define KILN__PARAM_SPACE_MAX 32764u

static kiln_status kiln__bad_ptx(const char *entry, size_t entry_n, int param, const char *what,
                                 kiln__token t) {
  return kiln__fail(KILN_ERROR_PTX, "malformed PTX in .entry %.*s, parameter %d: %s, found '%.*s'",
                    (int)(entry_n > 200 ? 200 : entry_n), entry, param, what,
                    (int)(t.n > 40 ? 40 : t.n), t.n ? t.s : "end of text");
}

/* One `.param [.align N] .type [.ptr [.space] [.align N]] name[[S]]`, up to ',' or ')'. */
static kiln_status kiln__parse_param(kiln__cursor *c, kiln__token entry, int index,
                                     kiln_param *out, int *closed) {
  kiln__token t = kiln__next(c);
  if (!kiln__tok_is(t, ".param")) return kiln__bad_ptx(entry.s, entry.n, index, "expected .param", t);
  unsigned long align = 0, count = 0;
  const kiln__ptx_type *type = NULL;
  int is_ptr = 0, have_name = 0;
  for (;;) {
    t = kiln__next(c);
    if (t.n == 0) return kiln__bad_ptx(entry.s, entry.n, index, "unterminated parameter list", t);
    if (kiln__tok_is(t, ",") || kiln__tok_is(t, ")")) {
      *closed = kiln__tok_is(t, ")");
      break;
    }
    if (kiln__tok_is(t, ".align")) {
      kiln__token n = kiln__next(c);
      unsigned long a;
      if (!kiln__tok_number(n, &a) || a == 0 || (a & (a - 1)) || a > 4096)
        return kiln__bad_ptx(entry.s, entry.n, index, "expected a power-of-two alignment", n);
      if (!is_ptr) align = a; /* after .ptr, .align is the pointee's, not the parameter's */
    } else if (kiln__tok_is(t, ".ptr")) {
      is_ptr = 1;
    } else if (kiln__tok_is(t, ".global") || kiln__tok_is(t, ".const") ||
               kiln__tok_is(t, ".shared") || kiln__tok_is(t, ".local")) {
      /* the pointee's state space */
    } else if (kiln__ptx_type_of(t) && !type) {
      type = kiln__ptx_type_of(t);
    } else if (!have_name && (isalpha((unsigned char)t.s[0]) || t.s[0] == '_' ||
                              t.s[0] == '$' || t.s[0] == '%')) {
      have_name = 1;
      kiln__cursor save = *c;
      kiln__token b = kiln__next(c);
      if (kiln__tok_is(b, "[")) {
        kiln__token n = kiln__next(c);
        if (!kiln__tok_number(n, &count) || count == 0)
          return kiln__bad_ptx(entry.s, entry.n, index, "expected an array length", n);
        if (!kiln__tok_is(kiln__next(c), "]"))
          return kiln__bad_ptx(entry.s, entry.n, index, "expected ']'", n);
      } else {
        *c = save;
      }
    } else {
      return kiln__bad_ptx(entry.s, entry.n, index, "unexpected token", t);
    }
  }
  if (!type) return kiln__bad_ptx(entry.s, entry.n, index, "no type", t);
  if (!have_name) return kiln__bad_ptx(entry.s, entry.n, index, "no name", t);
  unsigned long size = count ? count * type->size : type->size;
  if (size > KILN__PARAM_SPACE_MAX)
    return kiln__bad_ptx(entry.s, entry.n, index, "larger than the parameter space", t);
  out->size = (unsigned)size;
  out->align = (unsigned)(align ? align : type->size);
  out->cls = count ? KILN_PARAM_AGGREGATE : type->cls;
  if (is_ptr && out->size == 8 && !count) out->cls = KILN_PARAM_PTR;
  return KILN_OK;
}

static kiln_status kiln__parse_entry(kiln__cursor *c, kiln__entry *e) {
  kiln__token name = kiln__next(c);
  if (name.n == 0 || !(isalpha((unsigned char)name.s[0]) || name.s[0] == '_' ||
                       name.s[0] == '$' || name.s[0] == '%'))
    return kiln__fail(KILN_ERROR_PTX, "malformed PTX: .entry is not followed by a name");
  e->name = kiln__memdup(name.s, name.n + 1);
  if (!e->name) return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory reading PTX");
  e->name[name.n] = '\0';
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
    if (e->n_params == cap) {
      cap = cap ? cap * 2 : 8;
      kiln_param *grown = realloc(e->params, (size_t)cap * sizeof *grown);
      if (!grown) return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory reading PTX");
      e->params = grown;
    }
    kiln_status s = kiln__parse_param(c, name, e->n_params, &e->params[e->n_params], &closed);
    if (s) return s;
    const kiln_param *p = &e->params[e->n_params];
    total = (total + p->align - 1) / p->align * p->align + p->size;
    if (total > KILN__PARAM_SPACE_MAX)
      return kiln__fail(KILN_ERROR_PTX, "malformed PTX: the parameters of .entry %s take more "
                        "than %u bytes", e->name, KILN__PARAM_SPACE_MAX);
    e->n_params++;
  }
  return KILN_OK;
}

kiln_status kiln__entry_refine(kiln__entry *e, int sizes_only) {
  int types[256];
  int n_types = -1;
  char *plain = kiln__demangle(e->name, types, (int)KILN__COUNT(types), &n_types);
  e->plain = plain ? plain : kiln__strdup(e->name);
  if (!e->plain) return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory reading PTX");
  if (n_types != e->n_params) return KILN_OK; /* unreadable or unexpected: PTX alone */
  for (int i = 0; i < e->n_params; i++) {
    kiln_param *p = &e->params[i];
    int t = types[i];
    if (t < 0) continue;
    unsigned tsize = t == KILN_PARAM_I8 || t == KILN_PARAM_U8     ? 1
                     : t == KILN_PARAM_I16 || t == KILN_PARAM_U16 ? 2
                     : t == KILN_PARAM_I32 || t == KILN_PARAM_U32 || t == KILN_PARAM_F32 ? 4
                                                                                          : 8;
    /* Trust the name only where it agrees with the PTX on size and on int versus float. */
    int ptx_int = p->cls <= KILN_PARAM_PTR;
    int name_int = t <= KILN_PARAM_PTR;
    if (tsize == p->size && (sizes_only || ptx_int == name_int) &&
        p->cls != KILN_PARAM_AGGREGATE)
      p->cls = (kiln_param_class)t;
  }
  return KILN_OK;
}

void kiln__entries_free(kiln__entry *entries, int n) {
  if (!entries) return;
  for (int i = 0; i < n; i++) {
    free(entries[i].name);
    free(entries[i].plain);
    free(entries[i].params);
  }
  free(entries);
}

kiln_status kiln__ptx_parse(const char *ptx, size_t len, kiln__entry **out, int *n_out) {
  kiln__cursor c = {ptx, ptx + len};
  kiln__entry *entries = NULL;
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
      kiln__entry *grown = realloc(entries, (size_t)cap * sizeof *grown);
      if (!grown) {
        s = kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory reading PTX");
        break;
      }
      entries = grown;
    }
    memset(&entries[n], 0, sizeof entries[n]);
    n++;
    s = kiln__parse_entry(&c, &entries[n - 1]);
    if (!s) s = kiln__entry_refine(&entries[n - 1], 0);
    if (s) break;
  }
  if (s) {
    kiln__entries_free(entries, n);
    return s;
  }
  *out = entries;
  *n_out = n;
  return KILN_OK;
}

/* ---- Itanium-mangled names ------------------------------------------------------------------ */

/* What a substitution (S_, S0_, ...) stands for, as far as a parameter's class goes. */
enum { KILN__SUB_OTHER = -1 };

typedef struct kiln__demangler {
  const char *p, *end;
  int subs[64]; /* per substitution candidate: a kiln_param_class or KILN__SUB_OTHER */
  int n_subs;
  int ok;
} kiln__demangler;

static void kiln__sub_add(kiln__demangler *d, int cls) {
  if (d->n_subs < (int)KILN__COUNT(d->subs)) d->subs[d->n_subs++] = cls;
  else d->ok = 0;
}

static int kiln__dm_peek(kiln__demangler *d) { return d->p < d->end ? *d->p : '\0'; }

/* <source-name> ::= <length> <identifier>; copies it into buf when buf is given. */
static int kiln__dm_source_name(kiln__demangler *d, char *buf, size_t cap, size_t *used) {
  unsigned long n = 0;
  if (!isdigit((unsigned char)kiln__dm_peek(d))) return d->ok = 0;
  while (isdigit((unsigned char)kiln__dm_peek(d))) {
    n = n * 10 + (unsigned long)(*d->p++ - '0');
    if (n > 4096) return d->ok = 0;
  }
  if ((unsigned long)(d->end - d->p) < n) return d->ok = 0;
  if (buf) {
    if (*used + n + 3 > cap) return d->ok = 0;
    if (*used) {
      memcpy(buf + *used, "::", 2);
      *used += 2;
    }
    memcpy(buf + *used, d->p, n);
    *used += n;
    buf[*used] = '\0';
  }
  d->p += n;
  return 1;
}

/* Skips <template-args> ::= I <arg>+ E, nesting included. */
static int kiln__dm_skip_template_args(kiln__demangler *d) {
  int depth = 0;
  do {
    int ch = kiln__dm_peek(d);
    if (!ch || ch == 'X') return d->ok = 0; /* the end, or an expression: not read */
    if (isdigit((unsigned char)ch)) {
      if (!kiln__dm_source_name(d, NULL, 0, NULL)) return 0;
      continue;
    }
    d->p++;
    if (ch == 'I' || ch == 'J') {
      depth++;
    } else if (ch == 'E') {
      depth--;
    } else if (ch == 'L') { /* a literal, L <type> <value> E: its digits are no length */
      while (kiln__dm_peek(d) && kiln__dm_peek(d) != 'E') d->p++;
      if (!kiln__dm_peek(d)) return d->ok = 0;
      d->p++;
    }
  } while (depth > 0);
  return 1;
}

static int kiln__dm_substitution(kiln__demangler *d) {
  /* S_ is the first candidate, S0_ the second, S1_ the third; digits are base 36. */
  d->p++; /* S */
  unsigned long index = 0;
  if (kiln__dm_peek(d) == '_') {
    d->p++;
    return index < (unsigned long)d->n_subs ? d->subs[index] : (d->ok = 0, KILN__SUB_OTHER);
  }
  int ch = kiln__dm_peek(d);
  if (!isdigit((unsigned char)ch) && !isupper((unsigned char)ch)) {
    d->ok = 0; /* St, Sa, ...: std:: abbreviations are not read */
    return KILN__SUB_OTHER;
  }
  while (isdigit((unsigned char)kiln__dm_peek(d)) || isupper((unsigned char)kiln__dm_peek(d))) {
    ch = *d->p++;
    index = index * 36 + (unsigned long)(isdigit(ch) ? ch - '0' : ch - 'A' + 10);
    if (index > 1000) return d->ok = 0, KILN__SUB_OTHER;
  }
  if (kiln__dm_peek(d) != '_') return d->ok = 0, KILN__SUB_OTHER;
  d->p++;
  index += 1;
  return index < (unsigned long)d->n_subs ? d->subs[index] : (d->ok = 0, KILN__SUB_OTHER);
}

static int kiln__dm_builtin(int ch) {
  switch (ch) {
  case 'b': return KILN_PARAM_U8;
  case 'c': return KILN_PARAM_I8; /* char is signed for CUDA on every host it supports */
  case 'a': return KILN_PARAM_I8;
  case 'h': return KILN_PARAM_U8;
  case 's': return KILN_PARAM_I16;
  case 't': return KILN_PARAM_U16;
  case 'i': return KILN_PARAM_I32;
  case 'j': return KILN_PARAM_U32;
  case 'l': case 'x': return KILN_PARAM_I64;
  case 'm': case 'y': return KILN_PARAM_U64;
  case 'f': return KILN_PARAM_F32;
  case 'd': return KILN_PARAM_F64;
  default: return -2;
  }
}

/* <type>; returns the class a parameter of this type has (KILN__SUB_OTHER for classes). */
static int kiln__dm_type(kiln__demangler *d) {
  int ch = kiln__dm_peek(d);
  if (!ch) return d->ok = 0, KILN__SUB_OTHER;
  int b = kiln__dm_builtin(ch);
  if (b != -2) {
    d->p++;
    return b;
  }
  switch (ch) {
  case 'P': case 'R': case 'O': {
    d->p++;
    kiln__dm_type(d);
    kiln__sub_add(d, KILN_PARAM_PTR);
    return KILN_PARAM_PTR;
  }
  case 'K': case 'V': case 'r': {
    while (kiln__dm_peek(d) == 'K' || kiln__dm_peek(d) == 'V' || kiln__dm_peek(d) == 'r') d->p++;
    int inner = kiln__dm_type(d);
    kiln__sub_add(d, inner);
    return inner;
  }
  case 'S': {
    int cls = kiln__dm_substitution(d);
    if (kiln__dm_peek(d) == 'I') { /* a template specialised from a substitution */
      if (!kiln__dm_skip_template_args(d)) return KILN__SUB_OTHER;
      kiln__sub_add(d, KILN__SUB_OTHER);
      return KILN__SUB_OTHER;
    }
    return cls;
  }
  case 'N': { /* a nested class name: every prefix is a candidate */
    d->p++;
    while (d->ok && kiln__dm_peek(d) != 'E') {
      if (isdigit((unsigned char)kiln__dm_peek(d))) kiln__dm_source_name(d, NULL, 0, NULL);
      else if (kiln__dm_peek(d) == 'I') kiln__dm_skip_template_args(d);
      else if (kiln__dm_peek(d) == 'S') kiln__dm_substitution(d);
      else return d->ok = 0, KILN__SUB_OTHER;
      kiln__sub_add(d, KILN__SUB_OTHER);
    }
    if (kiln__dm_peek(d) == 'E') d->p++;
    return KILN__SUB_OTHER;
  }
  default:
    if (isdigit((unsigned char)ch)) {
      kiln__dm_source_name(d, NULL, 0, NULL);
      kiln__sub_add(d, KILN__SUB_OTHER);
      if (kiln__dm_peek(d) == 'I') {
        kiln__dm_skip_template_args(d);
        kiln__sub_add(d, KILN__SUB_OTHER);
      }
      return KILN__SUB_OTHER;
    }
    return d->ok = 0, KILN__SUB_OTHER; /* D*, u, templates' T_, ...: not read */
  }
}

char *kiln__demangle(const char *mangled, int *types, int max_types, int *n_types) {
  *n_types = -1;
  size_t len = strlen(mangled);
  if (len < 3 || mangled[0] != '_' || mangled[1] != 'Z') return NULL;
  kiln__demangler d = {mangled + 2, mangled + len, {0}, 0, 1};
  char plain[512];
  size_t used = 0;
  plain[0] = '\0';
  int is_template = 0;
  if (kiln__dm_peek(&d) == 'N') {
    d.p++;
    while (d.ok && kiln__dm_peek(&d) != 'E') {
      int ch = kiln__dm_peek(&d);
      int last_was_name = 0;
      if (isdigit((unsigned char)ch)) {
        kiln__dm_source_name(&d, plain, sizeof plain, &used);
        last_was_name = 1;
      } else if (ch == 'I') {
        kiln__dm_skip_template_args(&d);
        is_template = 1;
      } else if (ch == 'K' || ch == 'V') {
        d.p++;
        continue;
      } else {
        d.ok = 0;
      }
      /* Every prefix is a candidate; the function's own name is not. */
      if (d.ok && kiln__dm_peek(&d) != 'E' && (last_was_name || ch == 'I'))
        kiln__sub_add(&d, KILN__SUB_OTHER);
    }
    if (kiln__dm_peek(&d) == 'E') d.p++;
  } else if (isdigit((unsigned char)kiln__dm_peek(&d))) {
    kiln__dm_source_name(&d, plain, sizeof plain, &used);
    if (kiln__dm_peek(&d) == 'I') {
      kiln__sub_add(&d, KILN__SUB_OTHER);
      kiln__dm_skip_template_args(&d);
      is_template = 1;
    }
  } else {
    return NULL;
  }
  if (!d.ok || used == 0) return NULL;
  char *out = kiln__strdup(plain);
  /* A template's parameter types refer to its arguments (T_), which are not read here. */
  if (is_template || !out) return out;
  int n = 0;
  if (d.end - d.p == 1 && *d.p == 'v') { /* f(void) */
    *n_types = 0;
    return out;
  }
  while (d.ok && d.p < d.end && n < max_types) types[n++] = kiln__dm_type(&d);
  if (d.ok && d.p == d.end) {
    for (int i = 0; i < n; i++)
      if (types[i] == KILN__SUB_OTHER) types[i] = -1;
    *n_types = n;
  }
  return out;
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
