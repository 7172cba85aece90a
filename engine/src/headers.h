/* The user headers a source can reach, found by scanning #include lines and recorded with
 * what was read of them, so a later hit is checked by stat and a changed header is a miss. */
#ifndef KILN_HEADERS_H
#define KILN_HEADERS_H

#include "hash.h"

#include <stdint.h>

/* One place the scan looked: a file it read, or a path where it found nothing (a header
 * appearing there later could change what the compiler sees). */
typedef struct kiln__header {
  char *path; /* owned */
  int exists;
  int stat_trusted; /* 0 when the file was too fresh for its times to prove it unchanged */
  uint64_t size, inode;
  int64_t mtime_ns, ctime_ns;
  unsigned char sha[KILN__KEY_SIZE]; /* of the contents */
} kiln__header;

typedef struct kiln__headers {
  kiln__header *items; /* owned */
  int n, cap;
  const char *uncacheable; /* why the set cannot be known (static text); NULL when it can */
} kiln__headers;

/* Calls fn for each header that text names in #include, #include_next, #import or
 * __has_include, angled 1 for <name>. Returns how many name a macro instead, whose target
 * only the preprocessor knows. Reads only text[0..n); what is under #if 0 counts too. */
typedef void kiln__include_fn(void *ctx, const char *name, size_t len, int angled);
int kiln__headers_find_includes(const char *text, size_t n, kiln__include_fn *fn, void *ctx);

/* 0 when text can name no header: it spells none of include, import and embed, and splices no
 * line (a splice, or the trigraph ??/ that stands for a backslash, can cut the word in two:
 * "#inc\\" ending one line, "lude" starting the next). NULL names none. */
int kiln__headers_named(const char *text);

/* 0 when no text of the compile (the source, the options, opts' in-memory headers) can name a
 * header, so the compile opens none beyond what NVRTC builds in. */
int kiln__headers_reachable(const char *src, const kiln_compile_opts *opts);

/* Everything src can reach through opts' include folders, -I options and in-memory headers,
 * with cwd as the folder of src: each file found is read and hashed, each miss recorded. */
kiln_status kiln__headers_scan(const char *src, const kiln_compile_opts *opts, const char *cwd,
                               kiln__headers *out);

/* 1 when every recorded place is as it was: a file with the same size and times, or failing
 * that the same contents; a place that had nothing still has nothing. */
int kiln__headers_fresh(const kiln__headers *h);

/* Appends a copy of rec (its path copied too). */
kiln_status kiln__headers_add(kiln__headers *h, const kiln__header *rec);
void kiln__headers_free(kiln__headers *h);

#endif
