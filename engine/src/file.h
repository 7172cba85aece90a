/* Files on disk: whole-file reads and path joins. */
#ifndef KILN_FILE_H
#define KILN_FILE_H

#include <stddef.h>

struct stat;

/* A whole regular file of at most max bytes, NUL-terminated, in a malloc'd buffer; its stat in
 * *st, its size in *size. NULL with errno set when it cannot be read (EISDIR: not a regular
 * file; EFBIG: larger than max). */
char *kiln__file_read(const char *path, size_t max, struct stat *st, size_t *size);

/* dir/name into out (name alone when absolute, or when dir is NULL or empty); 0 when it does
 * not fit. */
int kiln__file_join(char *out, size_t cap, const char *dir, const char *name);

#endif
