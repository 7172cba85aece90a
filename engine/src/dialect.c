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
    if (p[0] == '/' && p[1] == '/') {
      p = strchr(p, '\n');
    } else if (p[0] == '/' && p[1] == '*') {
      p = strstr(p + 2, "*/");
      if (p) p += 2;
    } else if (*p == '\'' && p > src && p[-1] >= '0' && p[-1] <= '9' && kiln__ident_char(p[1])) {
      p++; /* C++14's digit separator, 1'000: no literal starts here */
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
