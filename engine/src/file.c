/* Files on disk: whole-file reads (user headers, prebuilt images), whole-file writes (the
 * files nvcc's -keep leaves) and path joins. Apart from
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
  /* Non-blocking, so that a FIFO or a device planted at the path fails the check below
   * instead of blocking the open until a writer comes. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return NULL;
  char *buf = NULL;
  if (fstat(fd, st) != 0) {
    errno = EIO;
  } else if (!S_ISREG(st->st_mode)) {
    errno = S_ISDIR(st->st_mode) ? EISDIR : EINVAL;
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

const char *kiln__file_kind(unsigned mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a file";
}

int kiln__file_write(const char *path, const void *data, size_t n) {
  /* Non-blocking: opening a FIFO for writing would wait for a reader. */
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW, 0644);
  if (fd < 0 && errno == ENXIO) errno = EINVAL; /* a FIFO with no reader */
  if (fd < 0) return -1;
  struct stat st;
  int rc = -1;
  if (fstat(fd, &st) != 0) {
    errno = EIO;
  } else if (!S_ISREG(st.st_mode)) {
    errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
  } else if (ftruncate(fd, 0) == 0) {
    const char *p = data;
    size_t done = 0;
    while (done < n) {
      ssize_t w = write(fd, p + done, n - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) break;
      done += (size_t)w;
    }
    rc = done == n ? 0 : -1;
    if (rc && errno == 0) errno = EIO;
  }
  int err = errno;
  if (close(fd) != 0 && rc == 0) return -1;
  errno = err;
  return rc;
}

int kiln__file_join(char *out, size_t cap, const char *dir, const char *name) {
  int n = name[0] == '/' || !dir || !*dir ? snprintf(out, cap, "%s", name)
                                          : snprintf(out, cap, "%s/%s", dir, name);
  return n >= 0 && (size_t)n < cap;
}
