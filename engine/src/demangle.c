/* Reading Itanium-mangled names (the C++ ABI's, which NVRTC follows): the plain name a user
 * writes, and each parameter's class where the name says more than PTX does. A subset: what
 * kernel signatures use (builtins, pointers, qualifiers, classes, substitutions); anything
 * else makes the parameter types unreadable, never wrong. */
#include "demangle.h"

#include "dup.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* What a substitution (S_, S0_, ...) stands for, as far as a parameter's class goes. */
enum { KILN__SUB_OTHER = -1 };

/* How deeply one type may nest (P, R, O, K, V, r each add a level). The reader recurses once
 * per level, so a name of 300,000 P's would otherwise take the stack with it; real kernel
 * parameters nest a handful of levels. */
#define KILN__DM_MAX_DEPTH 64

typedef struct kiln__demangler {
  const char *p, *end;
  int subs[64]; /* per substitution candidate: a kiln_param_class or KILN__SUB_OTHER */
  int n_subs;
  int ok;
  int depth; /* of kiln__dm_type's recursion */
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
  /* An identifier's characters only: a NUL or a space would make a plain name that is not the
   * kernel's (or an empty one). */
  for (unsigned long i = 0; i < n; i++)
    if (!isalnum((unsigned char)d->p[i]) && d->p[i] != '_' && d->p[i] != '$' && d->p[i] != '.')
      return d->ok = 0;
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
  case 'l':
  case 'x': return KILN_PARAM_I64;
  case 'm':
  case 'y': return KILN_PARAM_U64;
  case 'f': return KILN_PARAM_F32;
  case 'd': return KILN_PARAM_F64;
  default: return -2;
  }
}

static int kiln__dm_type(kiln__demangler *d);

/* A pointer, reference or cv-qualified type: the one place the reader recurses, so the one
 * place the depth is counted. Past the limit the types are unreadable, never wrong. */
static int kiln__dm_qualified(kiln__demangler *d) {
  if (d->depth >= KILN__DM_MAX_DEPTH) return d->ok = 0, KILN__SUB_OTHER;
  d->depth++;
  int cls;
  int ch = *d->p;
  if (ch == 'P' || ch == 'R' || ch == 'O') {
    d->p++;
    kiln__dm_type(d);
    cls = KILN_PARAM_PTR;
  } else {
    while (kiln__dm_peek(d) == 'K' || kiln__dm_peek(d) == 'V' || kiln__dm_peek(d) == 'r') d->p++;
    cls = kiln__dm_type(d);
  }
  d->depth--;
  kiln__sub_add(d, cls);
  return cls;
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
  case 'P':
  case 'R':
  case 'O':
  case 'K':
  case 'V':
  case 'r': return kiln__dm_qualified(d);
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

char *kiln__demangle(const char *mangled, size_t len, int *types, int max_types, int *n_types) {
  *n_types = -1;
  if (len < 3 || mangled[0] != '_' || mangled[1] != 'Z') return NULL;
  kiln__demangler d = {mangled + 2, mangled + len, {0}, 0, 1, 0};
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
  char *out = kiln__dup_str(plain);
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
