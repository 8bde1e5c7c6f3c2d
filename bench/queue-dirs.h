// What every C contender shares about the queue: which entries are messages, and the
// directories opened once as descriptors (each contender renames between them with renameat).
#ifndef SPOOL_BENCH_QUEUE_DIRS_H
#define SPOOL_BENCH_QUEUE_DIRS_H
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
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

// Claims every message in inbox/, a pass over it at a time until a pass claims none: each entry
// named like a message is renamed inbox/ -> processing/ without replacing anything (one gone or
// taken is skipped) and handed to `claimed`, and `pass_end` runs after each pass. The loop every
// contender shares; what each does with a claimed file is its own.
static void claim_passes(int inbox_fd, int processing_fd, void (*claimed)(const char *name, void *ctx),
                         void (*pass_end)(void *ctx), void *ctx) {
  for (;;) {
    long n = 0;
    DIR *dir = fdopendir(dup(inbox_fd));
    if (!dir) die("opendir inbox/");
    rewinddir(dir);
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
      if (!is_message_name(e->d_name)) continue;
      if (renameat2(inbox_fd, e->d_name, processing_fd, e->d_name, RENAME_NOREPLACE) != 0) {
        if (errno == ENOENT || errno == EEXIST) continue;
        die("rename into processing/");
      }
      n++;
      claimed(e->d_name, ctx);
    }
    closedir(dir);
    pass_end(ctx);
    if (n == 0) return;
  }
}

#endif
