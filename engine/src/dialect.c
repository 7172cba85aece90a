/* nvcc's GNU extensions that NVRTC refuses, rewritten (see dialect.h). */
#include "dialect.h"

#include <stdlib.h>
#include <string.h>

static int kiln__ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int kiln__ident_char(char c) { return kiln__ident_start(c) || (c >= '0' && c <= '9'); }

static int kiln__space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Past a string or character literal that starts at p (its quote): its closing quote, or the
 * end of its line, where a literal cannot go on (an apostrophe in #if 0 text, say); NULL at
 * the end of the text. */
static const char *kiln__past_quoted(const char *p) {
  char quote = *p++;
  while (*p && *p != quote) {
    if (*p == '\\' && p[1]) p++;
    else if (*p == '\n') return p;
    p++;
  }
  return *p ? p + 1 : NULL;
}

/* Whether the apostrophe at p is C++14's digit separator (1'000, 0xFF'FF, .5'0), not a
 * character literal's quote: the token it stands in began with a digit, or a point and a digit
 * (a prefix such as u8'a' or L'a' begins with a letter), and a digit or letter follows it. */
static int kiln__digit_separator(const char *src, const char *p) {
  const char *q = p;
  while (q > src && (kiln__ident_char(q[-1]) || q[-1] == '\'' || q[-1] == '.')) q--;
  if (*q == '.') q++;
  return q < p && *q >= '0' && *q <= '9' && kiln__ident_char(p[1]);
}

/* Past a comment that starts at p ("//" or "/ *"): where it ends, the newline of a line comment
 * included; the end of the text when it does not close. */
static const char *kiln__past_comment(const char *p) {
  const char *end = p[1] == '/' ? strchr(p, '\n') : strstr(p + 2, "*/");
  return end ? end + (p[1] == '/' ? 0 : 2) : p + strlen(p);
}

/* Whether the word that ends at src[at] (blanks before at aside) is word. */
static int kiln__word_before(const char *src, size_t at, const char *word) {
  while (at > 0 && kiln__space(src[at - 1])) at--;
  size_t start = at, n = strlen(word);
  while (start > 0 && kiln__ident_char(src[start - 1])) start--;
  return at - start == n && strncmp(src + start, word, n) == 0;
}

/* Whether an expression can begin after src[0..at): the last thing before it, blanks aside, is
 * an operator, an opening bracket or brace, a separator of an expression, or the word
 * "return"; not an operator's name (operator++(int) {, operator<(T) {) nor the end of a
 * template's arguments (f<int>(int) {). */
static int kiln__expression_may_begin(const char *src, size_t at) {
  while (at > 0 && kiln__space(src[at - 1])) at--;
  if (at == 0) return 0;
  char c = src[at - 1];
  if (strchr("=([{,?:+-*/%&|^!~<", c)) {
    size_t op = at; /* the run of operator characters, which "operator" may name */
    while (op > 0 && strchr("=+-*/%&|^!~<>", src[op - 1])) op--;
    return !kiln__word_before(src, op, "operator");
  }
  return kiln__ident_char(c) && kiln__word_before(src, at, "return");
}

/* When "(type) {" starts at p, the index of its ')' from p; 0 otherwise. */
static size_t kiln__literal_close(const char *p) {
  size_t i = 1;
  while (kiln__space(p[i])) i++;
  if (!kiln__ident_start(p[i])) return 0;
  for (;;) {
    while (kiln__ident_char(p[i])) i++;
    if (p[i] != ':' || p[i + 1] != ':' || !kiln__ident_start(p[i + 2])) break;
    i += 2;
  }
  while (kiln__space(p[i])) i++;
  if (p[i] != ')') return 0;
  size_t close = i++;
  while (kiln__space(p[i])) i++;
  return p[i] == '{' ? close : 0;
}

char *kiln__dialect_compound_literals(const char *src) {
  char *out = NULL;
  for (const char *p = src; p && *p;) {
    if (p[0] == '/' && (p[1] == '/' || p[1] == '*')) {
      p = kiln__past_comment(p);
    } else if (*p == '\'' && kiln__digit_separator(src, p)) {
      p++;
    } else if (*p == '"' || *p == '\'') {
      p = kiln__past_quoted(p);
    } else if (*p == '(') {
      size_t close = kiln__literal_close(p);
      if (close && kiln__expression_may_begin(src, (size_t)(p - src))) {
        if (!out && !(out = strdup(src))) return NULL;
        out[p - src] = ' ';
        out[p - src + close] = ' ';
        p += close + 1;
      } else {
        p++;
      }
    } else {
      p++;
    }
  }
  return out;
}

/* ---- Specializations in namespace std ------------------------------------------------------ */

/* Where "std" of "namespace std {" is in src, at namespace scope or not; NULL after the last. */
static const char *kiln__next_std_block(const char *p) {
  while (p && *p) {
    if (p[0] == '/' && (p[1] == '/' || p[1] == '*')) {
      p = kiln__past_comment(p);
    } else if (*p == '"' || *p == '\'') {
      p = kiln__past_quoted(p);
    } else if (kiln__ident_start(*p)) {
      const char *word = p;
      while (kiln__ident_char(*p)) p++;
      if (p - word != 9 || strncmp(word, "namespace", 9) != 0) continue;
      const char *q = p;
      while (kiln__space(*q)) q++;
      if (strncmp(q, "std", 3) != 0 || kiln__ident_char(q[3])) continue;
      const char *r = q + 3;
      while (kiln__space(*r)) r++;
      if (*r == '{') return q;
    } else {
      p++;
    }
  }
  return NULL;
}

char *kiln__dialect_std_namespace(const char *src) {
  size_t n = 0;
  for (const char *q = kiln__next_std_block(src); q; q = kiln__next_std_block(q + 3)) n++;
  if (n == 0) return NULL;
  static const char cuda[] = "cuda::";
  char *out = malloc(strlen(src) + n * (sizeof cuda - 1) + 1);
  if (!out) return NULL;
  char *w = out;
  const char *from = src;
  for (const char *q = kiln__next_std_block(src); q; q = kiln__next_std_block(q + 3)) {
    memcpy(w, from, (size_t)(q - from));
    w += q - from;
    memcpy(w, cuda, sizeof cuda - 1);
    w += sizeof cuda - 1;
    from = q;
  }
  strcpy(w, from);
  return out;
}

/* ---- Host functions --------------------------------------------------------------------- */

/* Whether line (1-based) of file (as NVRTC's log names it) is named by an error of log, one
 * that says what (its message begins so) when what is not NULL. */
static int kiln__error_on(const char *log, const char *file, int line, const char *what) {
  static const char error[] = "): error: ";
  size_t n = strlen(file);
  for (const char *p = log; (p = strstr(p, file)); p++) {
    if ((p != log && p[-1] != '\n') || p[n] != '(') continue; /* a line's start: its file */
    char *end;
    long at = strtol(p + n + 1, &end, 10);
    if (at == line && strncmp(end, error, sizeof error - 1) == 0 &&
        (!what || strncmp(end + sizeof error - 1, what, strlen(what)) == 0))
      return 1;
  }
  return 0;
}

/* The '}' that closes the '{' at p, strings, characters and comments skipped; NULL if none. */
static const char *kiln__closing_brace(const char *p) {
  int depth = 0;
  while (p && *p) {
    if (p[0] == '/' && (p[1] == '/' || p[1] == '*')) {
      p = kiln__past_comment(p);
    } else if (*p == '"' || (*p == '\'' && !kiln__ident_char(p[-1]))) {
      p = kiln__past_quoted(p);
    } else {
      if (*p == '{') depth++;
      else if (*p == '}' && --depth == 0) return p;
      p++;
    }
  }
  return NULL;
}

/* Whether text[0..n) holds word[0..w) as a whole word. */
static int kiln__has_word_n(const char *text, size_t n, const char *word, size_t w) {
  for (size_t i = 0; i + w <= n; i++)
    if (strncmp(text + i, word, w) == 0 && (i == 0 || !kiln__ident_char(text[i - 1])) &&
        (i + w == n || !kiln__ident_char(text[i + w])))
      return 1;
  return 0;
}

static int kiln__has_word(const char *text, size_t n, const char *word) {
  return kiln__has_word_n(text, n, word, strlen(word));
}

/* What the text before a '{' at namespace scope opens: a scope whose declarations are at
 * namespace scope too (a namespace, extern "C"), a function's body, or something else (a
 * class, an enum, an initializer). */
enum { KILN__OPENS_SCOPE, KILN__OPENS_FUNCTION, KILN__OPENS_OTHER };

/* The parenthesized lists at head[0..n)'s top level, counted, and in *assigns whether an '='
 * stands there: an initializer's (inside parentheses, it is a default argument's). */
static int kiln__top_lists(const char *head, size_t n, int *assigns) {
  int depth = 0, lists = 0;
  *assigns = 0;
  for (size_t i = 0; i < n; i++) {
    if (head[i] == '(' && depth++ == 0) lists++;
    else if (head[i] == ')' && depth > 0) depth--;
    else if (head[i] == '=' && depth == 0) *assigns = 1;
  }
  return lists;
}

static int kiln__opens(const char *head, size_t n) {
  while (n && kiln__space(head[n - 1])) n--;
  while (n && kiln__space(*head)) head++, n--;
  /* A member function's qualifiers after its parameters: float get() const { */
  static const char *const after[] = {"const", "volatile", "override", "final", "noexcept"};
  for (int more = 1; more;) {
    more = 0;
    for (size_t i = 0; i < sizeof after / sizeof *after && !more; i++) {
      size_t w = strlen(after[i]);
      if (n > w && strncmp(head + n - w, after[i], w) == 0 && !kiln__ident_char(head[n - w - 1]))
        for (more = 1, n -= w; n && kiln__space(head[n - 1]);) n--;
    }
  }
  if (kiln__has_word(head, n, "namespace") ||
      (n >= 6 && strncmp(head, "extern", 6) == 0 && head[n - 1] == '"'))
    return KILN__OPENS_SCOPE;
  int assigns;
  kiln__top_lists(head, n, &assigns);
  if (!n || head[n - 1] != ')' || assigns || kiln__has_word(head, n, "struct") ||
      kiln__has_word(head, n, "class") || kiln__has_word(head, n, "union") ||
      kiln__has_word(head, n, "enum") || kiln__has_word(head, n, "typedef"))
    return KILN__OPENS_OTHER;
  return KILN__OPENS_FUNCTION;
}

/* The macros a source defines, by name: a head that names one may hide __global__ or
 * __device__ in it (#define KERNEL extern "C" __global__), or be a macro's use that makes a
 * kernel (DEFINE_KERNEL(k1)), so it is never taken for host code. */
typedef struct kiln__macros {
  struct kiln__macro {
    const char *name; /* in the source, not terminated */
    size_t len;
    const char *body; /* what it stands for, to the end of its (continued) line */
    size_t body_len;
  } *at;
  size_t n, cap;
} kiln__macros;

/* Notes the name a directive at p defines, if it is a #define; 0, or -1 out of memory. */
static int kiln__macros_note(kiln__macros *m, const char *p) {
  p++;
  while (*p == ' ' || *p == '\t') p++;
  if (strncmp(p, "define", 6) != 0 || kiln__ident_char(p[6])) return 0;
  p += 6;
  while (*p == ' ' || *p == '\t') p++;
  size_t len = 0;
  while (kiln__ident_char(p[len])) len++;
  if (!len) return 0;
  if (m->n == m->cap) {
    size_t cap = m->cap ? 2 * m->cap : 16;
    struct kiln__macro *at = realloc(m->at, cap * sizeof *at);
    if (!at) return -1;
    m->at = at;
    m->cap = cap;
  }
  const char *body = p + len, *end = body;
  while (*end && (*end != '\n' || end[-1] == '\\')) end++;
  m->at[m->n++] = (struct kiln__macro){p, len, body, (size_t)(end - body)};
  return 0;
}

/* Whether a macro says only that what follows is host code (#define HOST __host__, or nothing,
 * as the other branch of an #ifdef __CUDACC__ defines it): it hides no kernel. */
static int kiln__macro_host_only(const struct kiln__macro *m) {
  if (kiln__has_word(m->body, m->body_len, "__device__") ||
      kiln__has_word(m->body, m->body_len, "__global__") || memchr(m->body, '(', m->body_len))
    return 0;
  for (size_t i = 0; i < m->body_len; i++)
    if (!kiln__space(m->body[i]) && m->body[i] != '\\')
      return kiln__has_word(m->body, m->body_len, "__host__") && !memchr(m->body, '{', m->body_len);
  return 1; /* empty */
}

/* Whether a macro of that name that says more than "host code" is among m. */
static int kiln__macro_hides(const kiln__macros *m, const char *name, size_t len) {
  for (size_t i = 0; i < m->n; i++)
    if (m->at[i].len == len && strncmp(m->at[i].name, name, len) == 0 &&
        !kiln__macro_host_only(&m->at[i]))
      return 1;
  return 0;
}

/* head[0..n) up to a constructor's initializer list (Buf(int n) : p(0)): the ':' after its
 * parameters, not a "::". */
static size_t kiln__before_initializers(const char *head, size_t n) {
  int depth = 0;
  for (size_t i = 0; i < n; i++) {
    if (head[i] == '(') depth++;
    else if (head[i] == ')' && depth > 0 && --depth == 0) {
      size_t j = i + 1;
      while (j < n && kiln__space(head[j])) j++;
      if (j < n && head[j] == ':' && (j + 1 >= n || head[j + 1] != ':')) return i + 1;
      return n;
    }
  }
  return n;
}

/* Whether head[0..n) is a function's head nvcc compiles for the host: no __global__ or
 * __device__, no macro of the source's but one that marks host code (#define HOST __host__),
 * and one parenthesized list at its top level (the parameters: more is a macro's use or a
 * declaration before it that had no ';'), a constructor's initializers aside. */
static int kiln__host_head(const char *head, size_t n, const kiln__macros *m) {
  if (kiln__has_word(head, n, "__global__") || kiln__has_word(head, n, "__device__")) return 0;
  for (size_t i = 0; i < n;) {
    if (!kiln__ident_start(head[i]) || (i && kiln__ident_char(head[i - 1]))) {
      i++;
      continue;
    }
    size_t len = 0;
    while (i + len < n && kiln__ident_char(head[i + len])) len++;
    if (kiln__macro_hides(m, head + i, len)) return 0;
    i += len;
  }
  int assigns;
  return kiln__top_lists(head, kiln__before_initializers(head, n), &assigns) == 1;
}

/* Whether head[0..n), which a '{' follows at namespace scope, is a variable's with those braces
 * its initializer ("float2 G = float2{...}", "float2 G{...}"): an '=' outside parentheses, or
 * no parentheses and no type it defines. A function's head is not, whatever follows its
 * parameters (a trailing return type, noexcept). */
static int kiln__initializer_head(const char *head, size_t n) {
  int assigns, lists = kiln__top_lists(head, n, &assigns);
  if (assigns) return 1;
  return !lists && !kiln__has_word(head, n, "struct") && !kiln__has_word(head, n, "class") &&
         !kiln__has_word(head, n, "union") && !kiln__has_word(head, n, "enum");
}

/* Whether decl[0..n) has its lines to itself: nothing before it on its first line, and nothing
 * but blanks or a comment after its ';' (decl[n]) on its last, so that an error on one of its
 * lines is its own. */
static int kiln__alone_on_lines(const char *src, const char *decl, size_t n) {
  for (const char *q = decl; q > src && q[-1] != '\n'; q--)
    if (!kiln__space(q[-1])) return 0;
  const char *q = decl + n + 1;
  while (*q == ' ' || *q == '\t' || *q == '\r') q++;
  return !*q || *q == '\n' || (q[0] == '/' && (q[1] == '/' || q[1] == '*'));
}

/* Whether decl[0..n), a declaration at namespace scope whose last line is last, is a variable
 * nvcc keeps on the host and NVRTC, which -default-device makes put it on the device, refused to
 * initialize there ("const float2 G = make_float2(1, 2);", a constant no kernel can read under
 * nvcc either): no __device__, __constant__, __shared__ or __managed__, no function or type
 * defined in it, no macro of the source's, lines of its own, and that error on one of them. */
static int kiln__host_variable(const char *src, const char *decl, size_t n, int last,
                               const char *log, const char *file, const kiln__macros *m) {
  static const char *const kept[] = {"__device__", "__constant__", "__shared__", "__managed__",
                                     "__global__", "__host__",     "struct",     "class",
                                     "union",      "enum",         "typedef",    "template",
                                     "using",      "namespace",    "constexpr"};
  for (size_t i = 0; i < sizeof kept / sizeof *kept; i++)
    if (kiln__has_word(decl, n, kept[i])) return 0;
  if (!kiln__alone_on_lines(src, decl, n)) return 0;
  for (size_t i = 0; i < m->n; i++)
    if (kiln__has_word_n(decl, n, m->at[i].name, m->at[i].len)) return 0;
  int first = last;
  for (size_t i = 0; i < n; i++) first -= decl[i] == '\n';
  for (int l = first; l <= last; l++)
    if (kiln__error_on(log, file, l,
                       "dynamic initialization is not supported for a __device__ variable"))
      return 1;
  return 0;
}

/* Past a comment at p in a scan of declarations: where it ends, its newlines counted into
 * *line; a comment before a declaration's head (only blanks between *head and it) moves *head
 * past it, since it is not part of the head. */
static const char *kiln__past_comment_in_scan(const char *p, int *line, const char **head) {
  const char *end = kiln__past_comment(p), *q = *head;
  while (q < p && kiln__space(*q)) q++;
  int before_head = q == p;
  for (; p < end; p++) *line += *p == '\n';
  if (before_head) *head = end;
  return end;
}

/* ---- Floating constants at namespace scope ----------------------------------------------- */

/* A declaration at namespace scope, as the constants' rewrite reads it. */
typedef struct kiln__constant {
  const char *decl, *end;  /* [decl, end): up to its ';' */
  const char *word;        /* its "const", which may become "constexpr" */
  const char *name, *init; /* its one declarator's name; the initializer after its '=' */
  size_t name_len;
  int first_line, last_line;
  int floating; /* of type float or double (an integral one is constant already) */
  int foldable; /* its initializer folds at compile time: literals, operators, casts
                   and names of foldable constants before it or of macros */
  int convert;
} kiln__constant;

static int kiln__word_is(const char *p, const char *end, const char *word) {
  size_t n = strlen(word);
  return (size_t)(end - p) >= n && strncmp(p, word, n) == 0 &&
         (p + n == end || !kiln__ident_char(p[n]));
}

/* Whether [w, end) is a word of an arithmetic type's name (unsigned long is two). */
static int kiln__arithmetic_word(const char *w, const char *end) {
  static const char *const words[] = {"float", "double", "int",    "unsigned", "long",
                                      "short", "char",   "signed", "bool"};
  for (size_t i = 0; i < sizeof words / sizeof *words; i++)
    if (kiln__word_is(w, end, words[i])) return 1;
  return 0;
}

/* decl[0..end) as "[static] const [static] T name = init" with T an arithmetic type of one or
 * two words; 0 when it is not (more declarators, an array, a pointer, a qualifier beyond). */
static int kiln__constant_read(const char *decl, const char *end, kiln__constant *c) {
  memset(c, 0, sizeof *c);
  c->decl = decl, c->end = end;
  const char *p = decl;
  int types_seen = 0;
  for (;;) {
    while (p < end && kiln__space(*p)) p++;
    if (p >= end || !kiln__ident_start(*p)) return 0;
    const char *w = p;
    while (p < end && kiln__ident_char(*p)) p++;
    if (kiln__word_is(w, p, "static")) continue;
    if (kiln__word_is(w, p, "const")) {
      if (c->word) return 0;
      c->word = w;
      continue;
    }
    if (kiln__arithmetic_word(w, p)) {
      types_seen++;
      c->floating |= kiln__word_is(w, p, "float") || kiln__word_is(w, p, "double");
      continue;
    }
    c->name = w, c->name_len = (size_t)(p - w);
    break;
  }
  while (p < end && kiln__space(*p)) p++;
  if (!c->word || !types_seen || p >= end || *p != '=') return 0;
  c->init = p + 1;
  int depth = 0;
  for (const char *q = c->init; q < end; q++) {
    if (*q == '(') depth++;
    else if (*q == ')') depth--;
    else if (*q == ',' && depth == 0) return 0; /* another declarator */
  }
  return 1;
}

/* Whether c's initializer folds, given the constants before it (and the source's macros). The
 * floating ones it names are noted in needs (an index each) when needs is given. */
static int kiln__constant_folds(const kiln__constant *c, const kiln__constant *before, size_t n,
                                const kiln__macros *m, unsigned char *needs) {
  for (const char *p = c->init; p < c->end;) {
    if (kiln__space(*p) || strchr("+-*/%()<>=!&|^~?:", *p)) {
      p++;
    } else if ((*p >= '0' && *p <= '9') || (*p == '.' && p[1] >= '0' && p[1] <= '9')) {
      while (p < c->end && (kiln__ident_char(*p) || *p == '.' ||
                            ((*p == '+' || *p == '-') && (p[-1] == 'e' || p[-1] == 'E'))))
        p++;
    } else if (kiln__ident_start(*p)) {
      const char *w = p;
      while (p < c->end && kiln__ident_char(*p)) p++;
      size_t len = (size_t)(p - w);
      int known = kiln__arithmetic_word(w, p) || kiln__word_is(w, p, "true") ||
                  kiln__word_is(w, p, "false"); /* a cast, float(d), or a literal */
      for (size_t i = 0; i < m->n && !known; i++)
        known = m->at[i].len == len && strncmp(m->at[i].name, w, len) == 0;
      for (size_t i = n; i-- > 0 && !known;) /* the latest of the name */
        if (before[i].name_len == len && strncmp(before[i].name, w, len) == 0) {
          if (!before[i].foldable) return 0;
          known = 1;
          if (needs && before[i].floating) needs[i] = 1;
        }
      /* A name in capitals is taken for a macro from elsewhere (-DFREQ=50.0, <math.h>'s M_PI);
       * if it is not one, the compile of the rewrite fails and the first refusal stands. */
      int capitals = 1;
      for (const char *q = w; q < p && capitals; q++) capitals = !(*q >= 'a' && *q <= 'z');
      while (p < c->end && kiln__space(*p)) p++;
      if (!known && (!capitals || (p < c->end && *p == '('))) return 0; /* a variable, a call */
    } else {
      return 0; /* a string, a brace, a member's access */
    }
  }
  return 1;
}

char *kiln__dialect_namespace_constants(const char *src, const char *log) {
  static const char what[] = "dynamic initialization is not supported for a __device__ variable";
  if (!strstr(log, what)) return NULL;
  kiln__constant *at = NULL;
  size_t n = 0, cap = 0;
  kiln__macros macros = {0};
  int line = 1, line_blank = 1, failed = 0;
  const char *head = src, *p = src;
  int head_line = 1;
  while (*p && !failed) {
    if (*p == '\n') {
      line++, line_blank = 1, p++;
    } else if (kiln__space(*p)) {
      p++;
    } else if (p[0] == '/' && (p[1] == '/' || p[1] == '*')) {
      const char *was = head;
      p = kiln__past_comment_in_scan(p, &line, &head);
      if (head != was) head_line = line;
    } else if (*p == '#' && line_blank) {
      failed = kiln__macros_note(&macros, p) < 0;
      while (*p && (*p != '\n' || p[-1] == '\\')) line += *p++ == '\n';
      head = p, head_line = line;
    } else if (*p == '"' || (*p == '\'' && (p == src || !kiln__ident_char(p[-1])))) {
      const char *end = kiln__past_quoted(p);
      if (!end) break;
      line_blank = 0;
      p = end;
    } else if (*p == ';' || *p == '}') {
      const char *start = head;
      int first = head_line;
      while (kiln__space(*start)) first += *start++ == '\n';
      kiln__constant c;
      if (*p == ';' && kiln__constant_read(start, p, &c)) {
        if (n == cap) {
          cap = cap ? 2 * cap : 16;
          kiln__constant *more = realloc(at, cap * sizeof *at);
          if (!more) {
            failed = 1;
            break;
          }
          at = more;
        }
        c.first_line = first, c.last_line = line;
        c.foldable = kiln__constant_folds(&c, at, n, &macros, NULL);
        at[n++] = c;
      }
      line_blank = 0;
      head = ++p, head_line = line;
    } else if (*p == '{') {
      line_blank = 0;
      if (kiln__opens(head, (size_t)(p - head)) == KILN__OPENS_SCOPE) {
        head = ++p, head_line = line;
        continue;
      }
      const char *close = kiln__closing_brace(p); /* a body: nothing at namespace scope */
      if (!close) break;
      for (; p < close; p++) line += *p == '\n';
      head = p; /* its '}', which the next step reads as a scope's end */
      head_line = line;
    } else {
      line_blank = 0;
      p++;
    }
  }
  /* The floating constants NVRTC refused to initialize on the device that fold, and the
   * floating constants their initializers name, which constexpr needs to be constexpr too. */
  size_t converted = 0;
  unsigned char *needs = failed || !n ? NULL : calloc(n, 1);
  if (needs) {
    for (size_t i = n; i-- > 0;) {
      int refused = 0;
      for (int l = at[i].first_line; l <= at[i].last_line && !refused; l++)
        refused = kiln__error_on(log, "kernel.cu", l, what);
      if (at[i].floating && at[i].foldable && (refused || needs[i])) {
        at[i].convert = 1;
        kiln__constant_folds(&at[i], at, i, &macros, needs); /* for the names: it folds */
      }
    }
    for (size_t i = 0; i < n; i++) converted += (size_t)at[i].convert;
  }
  free(needs);
  free(macros.at);
  char *out = converted ? malloc(strlen(src) + 4 * converted + 1) : NULL;
  if (out) {
    char *w = out;
    const char *from = src;
    for (size_t i = 0; i < n; i++) {
      if (!at[i].convert) continue;
      memcpy(w, from, (size_t)(at[i].word - from));
      w += at[i].word - from;
      memcpy(w, "constexpr", 9);
      w += 9;
      from = at[i].word + 5;
    }
    strcpy(w, from);
  }
  free(at);
  return out;
}

/* Whether head[0..n), which a '{' follows, defines a class: struct, class or union and a name,
 * bases perhaps, and no parameter list or '=' (a function returning a struct is not one). */
static int kiln__class_head(const char *head, size_t n) {
  if (!kiln__has_word(head, n, "struct") && !kiln__has_word(head, n, "class") &&
      !kiln__has_word(head, n, "union"))
    return 0;
  int assigns;
  return kiln__top_lists(head, n, &assigns) == 0 && !assigns;
}

/* Whether decl[0..n), a declaration whose last line is last, is an explicit instantiation of a
 * host template ("template void up<float>(float *&, int);") that NVRTC refused: after an
 * earlier round blanked the template, it names what is no longer there. Never a kernel's or a
 * device function's. */
static int kiln__host_instantiation(const char *src, const char *decl, size_t n, int last,
                                    const char *log, const char *file) {
  if (n < 9 || strncmp(decl, "template", 8) != 0 || kiln__ident_char(decl[8])) return 0;
  const char *q = decl + 8;
  while (q < decl + n && kiln__space(*q)) q++;
  if (q >= decl + n || *q == '<' || kiln__has_word(decl, n, "__global__") ||
      kiln__has_word(decl, n, "__device__") || !kiln__alone_on_lines(src, decl, n))
    return 0;
  int first = last;
  for (size_t i = 0; i < n; i++) first -= decl[i] == '\n';
  for (int l = first; l <= last; l++)
    if (kiln__error_on(log, file, l, NULL)) return 1;
  return 0;
}

char *kiln__dialect_host_functions(const char *src, const char *log) {
  return kiln__dialect_host_functions_in(src, log, "kernel.cu");
}

char *kiln__dialect_host_functions_in(const char *src, const char *log, const char *file) {
  char *out = NULL;
  kiln__macros macros = {0};
  int line = 1, line_blank = 1;
  const char *head = src;  /* where the declaration being read began */
  const char *decl = NULL; /* where it began before an initializer's braces, when it has them */
  const char *p = src;
  while (*p) {
    if (*p == '\n') {
      line++, line_blank = 1, p++;
    } else if (kiln__space(*p)) {
      p++;
    } else if (p[0] == '/' && (p[1] == '/' || p[1] == '*')) {
      p = kiln__past_comment_in_scan(p, &line, &head);
    } else if (*p == '#' && line_blank) {      /* a directive, its continued lines with it */
      if (kiln__macros_note(&macros, p) < 0) { /* out of memory: no rewrite */
        free(out);
        out = NULL;
        break;
      }
      while (*p && (*p != '\n' || p[-1] == '\\')) line += *p++ == '\n';
      head = p;
      decl = NULL;
    } else if (*p == '"' || (*p == '\'' && (p == src || !kiln__ident_char(p[-1])))) {
      const char *end = kiln__past_quoted(p);
      if (!end) break;
      line_blank = 0;
      p = end;
    } else if (*p == ';' || *p == '}') { /* a declaration ends, or a scope */
      const char *start = decl ? decl : head;
      while (kiln__space(*start)) start++;
      /* A variable nvcc keeps on the host whose initializer NVRTC refused, or an explicit
       * instantiation of a host template that an earlier round blanked: blanked, as a refused
       * host function is below. */
      if (*p == ';' &&
          (kiln__host_variable(src, start, (size_t)(p - start), line, log, file, &macros) ||
           kiln__host_instantiation(src, start, (size_t)(p - start), line, log, file))) {
        if (!out && !(out = strdup(src))) break;
        for (const char *q = start; q <= p; q++)
          if (*q != '\n') out[q - src] = ' ';
      }
      line_blank = 0;
      decl = NULL;
      head = ++p;
    } else if (*p == '{') {
      int opens = kiln__opens(head, (size_t)(p - head));
      line_blank = 0;
      /* A class's body is read as a scope too, for the member functions defined in it (a
       * constructor that calls cudaMalloc); its end is a declaration's end below. */
      if (opens == KILN__OPENS_SCOPE || kiln__class_head(head, (size_t)(p - head))) {
        decl = NULL;
        head = ++p;
        continue;
      }
      const char *close = kiln__closing_brace(p);
      if (!close) break;
      while (kiln__space(*head)) head++; /* the head's own first line */
      int first = line, last = line;
      for (const char *q = head; q < p; q++) first -= *q == '\n';
      for (const char *q = p; q < close; q++) last += *q == '\n';
      /* A function nvcc compiles for the host that NVRTC refused: blanked, every newline kept
       * so that the lines after it keep their numbers. */
      int refused = 0, typo = 0;
      if (opens == KILN__OPENS_FUNCTION && kiln__host_head(head, (size_t)(p - head), &macros))
        for (int l = first; l <= last && !refused; l++)
          refused = kiln__error_on(log, file, l, NULL);
      /* A head that declares nothing ("_global_ void k(...)", a kernel whose keyword lost its
       * underscores) is a mistake nvcc refuses too, never host code: the refusal stands. */
      for (int l = first; refused && l <= line && !typo; l++)
        typo =
            kiln__error_on(log, file, l, "this declaration has no storage class or type specifier");
      if (typo) {
        free(out);
        out = NULL;
        break;
      }
      if (refused) {
        if (!out && !(out = strdup(src))) break;
        for (const char *q = head; q <= close; q++)
          if (*q != '\n') out[q - src] = ' ';
      }
      line = last;
      /* An initializer's braces ("= float2{1.f, sqrtf(2.f)}") leave the declaration open. */
      if (opens == KILN__OPENS_OTHER && !refused &&
          kiln__initializer_head(head, (size_t)(p - head)))
        decl = decl ? decl : head;
      else decl = NULL;
      head = p = close + 1;
    } else {
      line_blank = 0;
      p++;
    }
  }
  free(macros.at);
  return out;
}

/* ---- Constants of a class initialized inside it ------------------------------------------ */

/* Whether the word at p, in the line [line, end), is "const" beside a "static" (before or
 * after it, blanks between). */
static int kiln__const_beside_static(const char *line, const char *p, const char *end) {
  if (end - p < 5 || strncmp(p, "const", 5) != 0 || (p + 5 < end && kiln__ident_char(p[5])) ||
      (p > line && kiln__ident_char(p[-1])))
    return 0;
  const char *after = p + 5;
  while (after < end && (*after == ' ' || *after == '\t')) after++;
  if (end - after >= 6 && strncmp(after, "static", 6) == 0 &&
      (after + 6 == end || !kiln__ident_char(after[6])))
    return 1;
  const char *before = p;
  while (before > line && (before[-1] == ' ' || before[-1] == '\t')) before--;
  return before - line >= 6 && strncmp(before - 6, "static", 6) == 0 &&
         (before - 6 == line || !kiln__ident_char(before[-7]));
}

char *kiln__dialect_inclass_constants(const char *src, const char *log) {
  static const char what[] = "a member of type \"const ";
  size_t n = 0, cap = 0;
  const char **at = NULL;
  int line = 1;
  for (const char *p = src; *p; line++) {
    const char *end = strchr(p, '\n');
    if (!end) end = p + strlen(p);
    if (kiln__error_on(log, "kernel.cu", line, what))
      for (const char *q = p; q < end; q++) {
        if (!kiln__const_beside_static(p, q, end)) continue;
        if (n == cap) {
          cap = cap ? 2 * cap : 8;
          const char **more = realloc(at, cap * sizeof *at);
          if (!more) {
            free(at);
            return NULL;
          }
          at = more;
        }
        at[n++] = q;
        q += 4;
      }
    p = *end ? end + 1 : end;
  }
  char *out = n ? malloc(strlen(src) + 4 * n + 1) : NULL;
  if (out) {
    char *w = out;
    const char *from = src;
    for (size_t i = 0; i < n; i++) {
      memcpy(w, from, (size_t)(at[i] - from));
      w += at[i] - from;
      memcpy(w, "constexpr", 9);
      w += 9;
      from = at[i] + 5;
    }
    strcpy(w, from);
  }
  free(at);
  return out;
}

/* ---- Arrays of no elements -------------------------------------------------------------- */

/* Whether the word that ends at line[at] is one after which a name begins an expression. */
static int kiln__expression_word(const char *line, size_t at) {
  static const char *const words[] = {"return", "else", "case", "throw",    "sizeof",
                                      "delete", "new",  "goto", "co_yield", "co_return"};
  for (size_t i = 0; i < sizeof words / sizeof *words; i++)
    if (kiln__word_before(line, at, words[i])) return 1;
  return 0;
}

/* Whether the '[' at line[at] opens a declarator's "[0]": its '0' when it does, else 0. */
static size_t kiln__zero_declarator(const char *line, size_t at, size_t end) {
  size_t q = at + 1;
  while (q < end && kiln__space(line[q])) q++;
  if (q >= end || line[q] != '0') return 0;
  size_t zero = q++;
  while (q < end && kiln__space(line[q])) q++;
  if (q >= end || line[q] != ']') return 0;
  q++;
  while (q < end && kiln__space(line[q])) q++;
  if (q >= end || !strchr(",);", line[q])) return 0;
  /* The name before the '[', then a type's last word, '*' or '&' before it. */
  size_t b = at;
  while (b > 0 && kiln__space(line[b - 1])) b--;
  size_t name = b;
  while (name > 0 && kiln__ident_char(line[name - 1])) name--;
  if (name == b || !kiln__ident_start(line[name])) return 0;
  while (name > 0 && kiln__space(line[name - 1])) name--;
  if (name == 0) return 0;
  char c = line[name - 1];
  if (c == '*' || c == '&') return zero;
  return kiln__ident_char(c) && !kiln__expression_word(line, name) ? zero : 0;
}

char *kiln__dialect_zero_arrays(const char *src, const char *log) {
  static const char what[] = "the size of an array must be greater than zero";
  char *out = NULL;
  int line = 1;
  for (const char *p = src; *p; line++) {
    const char *end = strchr(p, '\n');
    if (!end) end = p + strlen(p);
    if (kiln__error_on(log, "kernel.cu", line, what)) {
      size_t n = (size_t)(end - p);
      for (size_t i = 0; i < n; i++) {
        size_t zero = p[i] == '[' ? kiln__zero_declarator(p, i, n) : 0;
        if (!zero) continue;
        if (!out && !(out = strdup(src))) return NULL;
        out[(size_t)(p - src) + zero] = ' ';
      }
    }
    p = *end ? end + 1 : end;
  }
  return out;
}

char *kiln__dialect_extern_c(const char *src) {
  int depth = 0, closes_outer = 0, line_start = 1;
  for (const char *p = src; p && *p && !closes_outer;) {
    if (line_start && *p == '#') { /* a directive, to its end through continuations */
      while (*p && !(*p == '\n' && p[-1] != '\\')) p++;
      continue;
    }
    if (*p == '"' || (*p == '\'' && !kiln__digit_separator(src, p))) {
      p = kiln__past_quoted(p);
      line_start = 0;
      continue;
    }
    if (p[0] == '/' && (p[1] == '/' || p[1] == '*')) {
      p = kiln__past_comment(p);
      continue;
    }
    if (*p == '{') depth++;
    else if (*p == '}') closes_outer = --depth < 0;
    line_start = *p == '\n' || (line_start && kiln__space(*p));
    p++;
  }
  if (!closes_outer) return NULL;
  static const char open[] = "extern \"C\" {\n#line 1\n", close[] = "\n}\n";
  size_t n = strlen(src);
  char *out = malloc(sizeof open - 1 + n + sizeof close);
  if (!out) return NULL;
  memcpy(out, open, sizeof open - 1);
  memcpy(out + sizeof open - 1, src, n);
  memcpy(out + sizeof open - 1 + n, close, sizeof close);
  return out;
}
