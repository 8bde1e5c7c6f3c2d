// What every C contender shares about the queue: which entries are messages, and the
// directories opened once as descriptors (each contender renames between them with renameat).
#ifndef SPOOL_BENCH_QUEUE_DIRS_H
#define SPOOL_BENCH_QUEUE_DIRS_H
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

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

#endif
