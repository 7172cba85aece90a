/* Files on disk: whole-file reads (user headers, prebuilt images) and path joins. Apart from
 * the string copies in dup.c because they are another concern: these touch the file system
 * and set errno. */
#include "file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

char *kiln__file_read(const char *path, size_t max, struct stat *st, size_t *size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  char *buf = NULL;
  if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
    errno = EISDIR;
  } else if ((size_t)st->st_size > max) {
    errno = EFBIG;
  } else {
    size_t want = (size_t)st->st_size, got = 0;
    buf = malloc(want + 1);
    while (buf && got < want) {
      ssize_t r = read(fd, buf + got, want - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += (size_t)r;
    }
    if (buf && got != want) {
      free(buf);
      buf = NULL;
      errno = EIO;
    }
    if (buf) {
      buf[want] = '\0';
      *size = want;
    }
  }
  close(fd);
  return buf;
}

int kiln__file_join(char *out, size_t cap, const char *dir, const char *name) {
  int n = name[0] == '/' || !dir || !*dir ? snprintf(out, cap, "%s", name)
                                          : snprintf(out, cap, "%s/%s", dir, name);
  return n >= 0 && (size_t)n < cap;
}
