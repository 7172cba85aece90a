/* Files on disk: whole-file reads and writes, and path joins. */
#ifndef KILN_FILE_H
#define KILN_FILE_H

#include <stddef.h>

struct stat;

/* A whole regular file of at most max bytes, NUL-terminated, in a malloc'd buffer; its stat in
 * *st, its size in *size. NULL with errno set when it cannot be read (EISDIR: a folder;
 * EINVAL: something else that is not a regular file, such as a FIFO or a device, which is
 * never waited on; EFBIG: larger than max). */
char *kiln__file_read(const char *path, size_t max, struct stat *st, size_t *size);

/* What a file of mode st_mode is, for a message: "a FIFO", "a character device", ... */
const char *kiln__file_kind(unsigned mode);

/* Writes n bytes to path, replacing what was there: 0, or -1 with errno set. A symlink at
 * path is refused (ELOOP), and so is anything but a regular file (EINVAL), without blocking. */
int kiln__file_write(const char *path, const void *data, size_t n);

/* dir/name into out (name alone when absolute, or when dir is NULL or empty); 0 when it does
 * not fit. */
int kiln__file_join(char *out, size_t cap, const char *dir, const char *name);

#endif
