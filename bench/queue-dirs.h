// What every C contender shares about the queue: which entries are messages, and the
// directories opened once as descriptors (each contender renames between them with renameat).
#ifndef SPOOL_BENCH_QUEUE_DIRS_H
#define SPOOL_BENCH_QUEUE_DIRS_H
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

// Each contender says what failed and exits 3.
static void die(const char *what);

// Whether a directory entry is a message: not hidden, and named *.json.
static int is_message_name(const char *name) {
  size_t n = strlen(name);
  return name[0] != '.' && n >= 5 && strcmp(name + n - 5, ".json") == 0;
}

// Opens ROOT/NAME as a directory descriptor.
static int open_dir(const char *root, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", root, name);
  int fd = open(path, O_RDONLY | O_DIRECTORY);
  if (fd < 0) die(path);
  return fd;
}

// Whether the file's first page is not in memory: a one-byte read that may not wait for the disk.
static int is_cold(int fd) {
  char byte;
  struct iovec v = {&byte, 1};
  return preadv2(fd, &v, 1, 0, RWF_NOWAIT) < 0 && errno == EAGAIN;
}

// consume's read-ahead (packages/core/src/queue/read-ahead.ts), the same probes and hints: four
// of the files probed, spread over them, and if one is cold every file's read started at once.
static void read_ahead_if_cold(int dir_fd, char (*names)[256], long n) {
  long step = n / 4 > 0 ? n / 4 : 1;
  int cold = 0;
  for (long i = 0; i < n && !cold; i += step) {
    int fd = openat(dir_fd, names[i], O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) continue;
    cold = is_cold(fd);
    close(fd);
  }
  for (long i = 0; cold && i < n; i++) {
    int fd = openat(dir_fd, names[i], O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) continue;
    posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
    close(fd);
  }
}

// Claims every message in inbox/, a pass over it at a time until a pass claims none: each entry
// named like a message is renamed inbox/ -> processing/ without replacing anything (one gone or
// taken is skipped), `chunk` renames at a time; with `read_ahead` a cold chunk's reads are
// started together (as consume's I/O thread does); then each file of the chunk is handed to
// `claimed`, and `pass_end` runs after each pass. The loop every contender shares; what each
// does with a claimed file is its own.
static void claim_passes(int inbox_fd, int processing_fd, long chunk, int read_ahead,
                         void (*claimed)(const char *name, void *ctx), void (*pass_end)(void *ctx), void *ctx) {
  char(*names)[256] = malloc((size_t)chunk * sizeof *names);
  if (!names) die("malloc");
  for (;;) {
    long n = 0, held = 0;
    DIR *dir = fdopendir(dup(inbox_fd));
    if (!dir) die("opendir inbox/");
    rewinddir(dir);
    for (struct dirent *e = readdir(dir);; e = readdir(dir)) {
      if (e != NULL) {
        if (!is_message_name(e->d_name) || strlen(e->d_name) >= sizeof *names) continue;
        if (renameat2(inbox_fd, e->d_name, processing_fd, e->d_name, RENAME_NOREPLACE) != 0) {
          if (errno == ENOENT || errno == EEXIST) continue;
          die("rename into processing/");
        }
        n++;
        memcpy(names[held++], e->d_name, strlen(e->d_name) + 1);
        if (held < chunk) continue;
      }
      if (read_ahead) read_ahead_if_cold(processing_fd, names, held);
      for (long i = 0; i < held; i++) claimed(names[i], ctx);
      held = 0;
      if (e == NULL) break;
    }
    closedir(dir);
    pass_end(ctx);
    if (n == 0) break;
  }
  free(names);
}

#endif
