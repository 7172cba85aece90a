/* Reading Itanium-mangled names (the C++ ABI's, which NVRTC follows): the plain name a user
 * writes, and each parameter's class where the name says more than PTX does. A subset: what
 * kernel signatures use (builtins, pointers, qualifiers, classes, arrays behind a pointer,
 * substitutions); anything else makes the parameter types unreadable, never wrong. */
#include "demangle.h"

#include "dup.h"

#include <ctype.h>
#include <stdio.h>
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

/* <array-type> ::= A <dimension> _ <element type> (A _ <type> without one): a parameter is
 * never an array, but a pointer to one is (float a[][6] is float (*)[6], PA6_f). The element
 * nests as a pointer's target does, so it is counted the same way. */
static int kiln__dm_array(kiln__demangler *d) {
  if (d->depth >= KILN__DM_MAX_DEPTH) return d->ok = 0, KILN__SUB_OTHER;
  d->p++; /* A */
  while (isdigit((unsigned char)kiln__dm_peek(d))) d->p++;
  if (kiln__dm_peek(d) != '_') return d->ok = 0, KILN__SUB_OTHER;
  d->p++;
  d->depth++;
  kiln__dm_type(d);
  d->depth--;
  kiln__sub_add(d, KILN__SUB_OTHER);
  return KILN__SUB_OTHER;
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
  case 'v': /* void, behind a pointer (const void *); the builtins below have no class of */
  case 'e': /* kiln's: long double, wchar_t, __int128 and unsigned __int128 take PTX's */
  case 'w':
  case 'n':
  case 'o': d->p++; return KILN__SUB_OTHER;
  case 'P':
  case 'R':
  case 'O':
  case 'K':
  case 'V':
  case 'r': return kiln__dm_qualified(d);
  case 'A': return kiln__dm_array(d);
  case 'S': {
    int cls = kiln__dm_substitution(d);
    if (kiln__dm_peek(d) == 'I') { /* a template specialised from a substitution */
      if (!kiln__dm_skip_template_args(d)) return KILN__SUB_OTHER;
      kiln__sub_add(d, KILN__SUB_OTHER);
      return KILN__SUB_OTHER;
    }
    return cls;
  }
  case 'N': { /* a nested class name: every prefix is a candidate, but one that is a
                 substitution already (NS0_IdE: S0_ is one) */
    d->p++;
    while (d->ok && kiln__dm_peek(d) != 'E') {
      int c = kiln__dm_peek(d);
      if (isdigit((unsigned char)c)) kiln__dm_source_name(d, NULL, 0, NULL);
      else if (c == 'I') kiln__dm_skip_template_args(d);
      else if (c == 'S') kiln__dm_substitution(d);
      else return d->ok = 0, KILN__SUB_OTHER;
      if (c != 'S') kiln__sub_add(d, KILN__SUB_OTHER);
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

/* ---- Signatures as the source writes them ------------------------------------------------- *
 *
 * A second, printing reader: each <type> becomes C++ text ("const float *"), substitutions and
 * template parameters stand for the text they name. What it cannot read makes the whole
 * signature unreadable (NULL), never a wrong one. */

#define KILN__SIG_MAX 1024
typedef struct kiln__printer {
  const char *p, *end;
  int ok;
  char subs[48][160]; /* substitution candidates, as text */
  int n_subs;
  char targs[16][160]; /* the function's template arguments, for T_ */
  int n_targs;
  int depth; /* of kiln__pr_type's recursion, bounded as the first reader's is */
} kiln__printer;

static int kiln__pr_peek(kiln__printer *d) { return d->p < d->end ? *d->p : '\0'; }

static void kiln__pr_sub(kiln__printer *d, const char *text) {
  if (d->n_subs < (int)KILN__COUNT(d->subs))
    snprintf(d->subs[d->n_subs++], sizeof d->subs[0], "%s", text);
  else d->ok = 0;
}

static const char *kiln__pr_builtin(int ch) {
  switch (ch) {
  case 'v': return "void";
  case 'b': return "bool";
  case 'c': return "char";
  case 'a': return "signed char";
  case 'h': return "unsigned char";
  case 's': return "short";
  case 't': return "unsigned short";
  case 'i': return "int";
  case 'j': return "unsigned int";
  case 'l': return "long";
  case 'm': return "unsigned long";
  case 'x': return "long long";
  case 'y': return "unsigned long long";
  case 'n': return "__int128";
  case 'o': return "unsigned __int128";
  case 'f': return "float";
  case 'd': return "double";
  case 'e': return "long double";
  case 'w': return "wchar_t";
  default: return NULL;
  }
}

static void kiln__pr_type(kiln__printer *d, char *out, size_t cap);

/* <source-name>: appended to out. */
static void kiln__pr_name(kiln__printer *d, char *out, size_t cap) {
  unsigned long n = 0;
  if (!isdigit((unsigned char)kiln__pr_peek(d))) {
    d->ok = 0;
    return;
  }
  while (isdigit((unsigned char)kiln__pr_peek(d))) {
    n = n * 10 + (unsigned long)(*d->p++ - '0');
    if (n > 4096) {
      d->ok = 0;
      return;
    }
  }
  if (n == 0 || (unsigned long)(d->end - d->p) < n) { /* a name has at least one character */
    d->ok = 0;
    return;
  }
  for (unsigned long i = 0; i < n; i++) /* an identifier's, as the first reader takes them */
    if (!isalnum((unsigned char)d->p[i]) && d->p[i] != '_' && d->p[i] != '$' && d->p[i] != '.') {
      d->ok = 0;
      return;
    }
  size_t used = strlen(out);
  snprintf(out + used, cap - used, "%.*s", (int)n, d->p);
  d->p += n;
}

/* <template-args> ::= I <arg>+ E, appended to out as "<a, b>"; kept in d->targs when keep. */
static void kiln__pr_template_args(kiln__printer *d, char *out, size_t cap, int keep) {
  d->p++; /* I */
  size_t used = strlen(out);
  snprintf(out + used, cap - used, "<");
  int first = 1;
  if (keep) d->n_targs = 0;
  while (d->ok && kiln__pr_peek(d) != 'E') {
    char arg[160] = "";
    if (kiln__pr_peek(d) == 'L') { /* L <type> <value> E: a literal such as 128 */
      d->p++;
      char type[160] = "";
      kiln__pr_type(d, type, sizeof type);
      int neg = kiln__pr_peek(d) == 'n';
      if (neg) d->p++;
      size_t k = 0;
      if (neg) arg[k++] = '-';
      /* a number's digits (a float's are hex digits): nothing else belongs in the text */
      while (isalnum((unsigned char)kiln__pr_peek(d)) && kiln__pr_peek(d) != 'E' &&
             k + 1 < sizeof arg)
        arg[k++] = *d->p++;
      arg[k] = '\0';
      if (kiln__pr_peek(d) != 'E') d->ok = 0;
      else d->p++;
      if (!strcmp(type, "bool")) snprintf(arg, sizeof arg, "%s", arg[0] == '1' ? "true" : "false");
    } else {
      kiln__pr_type(d, arg, sizeof arg);
    }
    if (keep && d->n_targs < (int)KILN__COUNT(d->targs))
      snprintf(d->targs[d->n_targs++], sizeof d->targs[0], "%s", arg);
    used = strlen(out);
    snprintf(out + used, cap - used, "%s%s", first ? "" : ", ", arg);
    first = 0;
  }
  if (kiln__pr_peek(d) != 'E') {
    d->ok = 0;
    return;
  }
  d->p++;
  used = strlen(out);
  snprintf(out + used, cap - used, ">");
}

static void kiln__pr_substitution(kiln__printer *d, char *out, size_t cap) {
  d->p++;                        /* S */
  if (kiln__pr_peek(d) == 't') { /* St: std:: */
    d->p++;
    size_t used = strlen(out);
    snprintf(out + used, cap - used, "std::");
    kiln__pr_name(d, out, cap);
    return;
  }
  unsigned long index = 0;
  if (kiln__pr_peek(d) != '_') {
    while (isdigit((unsigned char)kiln__pr_peek(d)) || isupper((unsigned char)kiln__pr_peek(d))) {
      int ch = *d->p++;
      index = index * 36 + (unsigned long)(isdigit(ch) ? ch - '0' : ch - 'A' + 10);
      if (index > 1000) break;
    }
    index++;
  }
  if (kiln__pr_peek(d) != '_' || index >= (unsigned long)d->n_subs) {
    d->ok = 0;
    return;
  }
  d->p++;
  size_t used = strlen(out);
  snprintf(out + used, cap - used, "%s", d->subs[index]);
}

static void kiln__pr_type_at(kiln__printer *d, char *out, size_t cap);

/* Every type nests through here: past KILN__DM_MAX_DEPTH levels the signature is unreadable
 * (each level holds a buffer on the stack). */
static void kiln__pr_type(kiln__printer *d, char *out, size_t cap) {
  if (!d->ok || d->depth >= KILN__DM_MAX_DEPTH) {
    d->ok = 0;
    return;
  }
  d->depth++;
  kiln__pr_type_at(d, out, cap);
  d->depth--;
}

static void kiln__pr_type_at(kiln__printer *d, char *out, size_t cap) {
  int ch = kiln__pr_peek(d);
  const char *b = kiln__pr_builtin(ch);
  char inner[KILN__SIG_MAX / 4] = "";
  size_t used = strlen(out);
  if (b) {
    d->p++;
    snprintf(out + used, cap - used, "%s", b);
    return;
  }
  switch (ch) {
  case 'P':
  case 'R':
  case 'O': {
    d->p++;
    kiln__pr_type(d, inner, sizeof inner);
    const char *mark = ch == 'P' ? "*" : ch == 'R' ? "&" : "&&";
    size_t n = strlen(inner);
    const char *group = strstr(inner, ")["), *dims = strchr(inner, '[');
    if (group) /* to a pointer to an array: the mark joins its group, float (*&)[6] */
      snprintf(out + used, cap - used, "%.*s%s%s", (int)(group - inner), inner, mark, group);
    else if (dims) /* to an array: the declarator is grouped, float (*)[6] */
      snprintf(out + used, cap - used, "%.*s(%s)%s", (int)(dims - inner), inner, mark, dims);
    else
      snprintf(out + used, cap - used, "%s%s%s", inner,
               n && (inner[n - 1] == '*' || inner[n - 1] == '&') ? "" : " ", mark);
    kiln__pr_sub(d, out + used);
    return;
  }
  case 'A': { /* A 6 _ f: float [6]; an array of arrays adds its dimension first, float [2][6] */
    d->p++;
    const char *dim = d->p;
    while (isdigit((unsigned char)kiln__pr_peek(d))) d->p++;
    int dim_len = (int)(d->p - dim);
    if (kiln__pr_peek(d) != '_' || dim_len > 18) {
      d->ok = 0;
      return;
    }
    d->p++;
    kiln__pr_type(d, inner, sizeof inner);
    if (strchr(inner, '(')) { /* an array of pointers to arrays: not written out here */
      d->ok = 0;
      return;
    }
    const char *dims = strchr(inner, '[');
    if (dims)
      snprintf(out + used, cap - used, "%.*s[%.*s]%s", (int)(dims - inner), inner, dim_len, dim,
               dims);
    else {
      size_t n = strlen(inner);
      snprintf(out + used, cap - used, "%s%s[%.*s]", inner,
               n && (inner[n - 1] == '*' || inner[n - 1] == '&') ? "" : " ", dim_len, dim);
    }
    kiln__pr_sub(d, out + used);
    return;
  }
  case 'K':
  case 'V':
  case 'r': {
    int is_const = 0, is_volatile = 0, is_restrict = 0;
    while (kiln__pr_peek(d) == 'K' || kiln__pr_peek(d) == 'V' || kiln__pr_peek(d) == 'r') {
      int q = *d->p++;
      is_const |= q == 'K', is_volatile |= q == 'V', is_restrict |= q == 'r';
    }
    kiln__pr_type(d, inner, sizeof inner);
    size_t n = strlen(inner);
    if (strchr(inner, '(')) { /* a qualified pointer to an array, float (*const)[6]: rare */
      d->ok = 0;
      return;
    }
    if (n && inner[n - 1] == '*') /* a qualified pointer: the qualifier follows the star */
      snprintf(out + used, cap - used, "%s%s%s%s", inner, is_const ? "const" : "",
               is_volatile ? (is_const ? " volatile" : "volatile") : "",
               is_restrict ? (is_const || is_volatile ? " __restrict__" : "__restrict__") : "");
    else
      snprintf(out + used, cap - used, "%s%s%s", is_const ? "const " : "",
               is_volatile ? "volatile " : "", inner);
    kiln__pr_sub(d, out + used);
    return;
  }
  case 'S': {
    kiln__pr_substitution(d, inner, sizeof inner);
    if (kiln__pr_peek(d) == 'I') {
      kiln__pr_template_args(d, inner, sizeof inner, 0);
      kiln__pr_sub(d, inner);
    }
    snprintf(out + used, cap - used, "%s", inner);
    return;
  }
  case 'T': { /* T_, T0_, ...: the function's template arguments */
    d->p++;
    unsigned long index = 0;
    if (kiln__pr_peek(d) != '_') {
      while (isdigit((unsigned char)kiln__pr_peek(d)))
        index = index * 10 + (unsigned long)(*d->p++ - '0');
      index++;
    }
    if (kiln__pr_peek(d) != '_' || index >= (unsigned long)d->n_targs) {
      d->ok = 0;
      return;
    }
    d->p++;
    snprintf(out + used, cap - used, "%s", d->targs[index]);
    kiln__pr_sub(d, out + used);
    return;
  }
  case 'N': {
    d->p++;
    while (d->ok && kiln__pr_peek(d) != 'E') {
      size_t n = strlen(inner);
      if (isdigit((unsigned char)kiln__pr_peek(d))) {
        if (n) snprintf(inner + n, sizeof inner - n, "::");
        kiln__pr_name(d, inner, sizeof inner);
      } else if (kiln__pr_peek(d) == 'I') {
        kiln__pr_template_args(d, inner, sizeof inner, 0);
      } else if (kiln__pr_peek(d) == 'S') {
        kiln__pr_substitution(d, inner, sizeof inner);
        continue; /* a substitution is a candidate already */
      } else {
        d->ok = 0;
        return;
      }
      kiln__pr_sub(d, inner); /* every other prefix of a nested type is a candidate */
    }
    if (kiln__pr_peek(d) == 'E') d->p++;
    snprintf(out + used, cap - used, "%s", inner);
    return;
  }
  default:
    if (isdigit((unsigned char)ch)) {
      kiln__pr_name(d, inner, sizeof inner);
      kiln__pr_sub(d, inner);
      if (kiln__pr_peek(d) == 'I') {
        kiln__pr_template_args(d, inner, sizeof inner, 0);
        kiln__pr_sub(d, inner);
      }
      snprintf(out + used, cap - used, "%s", inner);
      return;
    }
    d->ok = 0;
  }
}

char *kiln__demangle_signature(const char *mangled) {
  size_t len = strlen(mangled);
  if (len < 3 || mangled[0] != '_' || mangled[1] != 'Z') return NULL;
  kiln__printer *d = calloc(1, sizeof *d);
  if (!d) return NULL;
  d->p = mangled + 2;
  d->end = mangled + len;
  d->ok = 1;
  char sig[KILN__SIG_MAX] = "", name[KILN__SIG_MAX / 2] = "";
  int is_template = 0;
  if (kiln__pr_peek(d) == 'N') {
    d->p++;
    while (d->ok && kiln__pr_peek(d) != 'E') {
      size_t n = strlen(name);
      int ch = kiln__pr_peek(d);
      if (isdigit((unsigned char)ch)) {
        if (n) snprintf(name + n, sizeof name - n, "::");
        kiln__pr_name(d, name, sizeof name);
      } else if (ch == 'I') {
        kiln__pr_template_args(d, name, sizeof name, 1);
        is_template = 1;
      } else {
        d->ok = 0;
        break;
      }
      if (kiln__pr_peek(d) != 'E' && (isdigit((unsigned char)ch) || ch == 'I'))
        kiln__pr_sub(d, name);
    }
    if (kiln__pr_peek(d) == 'E') d->p++;
  } else if (isdigit((unsigned char)kiln__pr_peek(d))) {
    kiln__pr_name(d, name, sizeof name);
    if (kiln__pr_peek(d) == 'I') {
      kiln__pr_sub(d, name);
      kiln__pr_template_args(d, name, sizeof name, 1);
      is_template = 1;
    }
  } else {
    d->ok = 0;
  }
  if (d->ok && is_template) { /* a template's mangled name gives its return type first */
    char ret[64] = "";
    kiln__pr_type(d, ret, sizeof ret);
  }
  snprintf(sig, sizeof sig, "%s(", name);
  if (d->p >= d->end) d->ok = 0; /* a function's encoding has its parameter types ("v": none) */
  if (d->ok && !(d->end - d->p == 1 && *d->p == 'v')) {
    int first = 1;
    while (d->ok && d->p < d->end) {
      char type[KILN__SIG_MAX / 4] = "";
      kiln__pr_type(d, type, sizeof type);
      size_t used = strlen(sig);
      snprintf(sig + used, sizeof sig - used, "%s%s", first ? "" : ", ", type);
      first = 0;
    }
  } else if (d->ok) {
    d->p++;
  }
  size_t used = strlen(sig);
  snprintf(sig + used, sizeof sig - used, ")");
  char *out =
      d->ok && name[0] && d->p == d->end && used + 2 < sizeof sig ? kiln__dup_str(sig) : NULL;
  free(d);
  return out;
}
