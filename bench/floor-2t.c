// The raw floor of a durable directory-queue consumer on two threads: floor.c's work and
// fsyncs, pipelined. The claim thread renames each inbox/*.json into processing/ and reads
// it into a batch; the commit thread pulls msg_id/order_no/seq/amount out with strstr,
// INSERT OR IGNOREs them into a WAL SQLite table with synchronous=FULL, commits, renames each
// file to done/ (or error/ when a field is missing) and fsyncs the destination directory once
// per batch. While one batch commits and moves, the next is claimed and read: the most two
// cores can overlap without changing what each message costs.
//
// Build: cc -O2 -pthread -o bench/out/floor-2t bench/floor-2t.c -lsqlite3
// Usage: floor-2t ROOT DB [BATCH]   prints one JSON object on stdout, as floor does
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "floor.h"

#define MAX_BATCH 100000
// Batches in flight between the threads: one being claimed, one queued, one committing.
#define SLOTS 2

struct batch {
  int n;
  char (*names)[256];
  size_t *offset, *length;  // each file's bytes in data
  char *data;
  size_t used, cap;
};

static int inbox_fd, processing_fd, done_fd, error_fd;
static int batch_size;
static sqlite3 *db;
static sqlite3_stmt *insert_stmt;
static long done_count, error_count, batches;
static double *batch_ms;
static long batch_ms_cap;

// The hand-off: a ring of full batches, and a pool of empty ones.
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static struct batch *full[SLOTS], *empty[SLOTS + 1];
static int full_n, empty_n, claiming_done;

static void die(const char *what) {
  fprintf(stderr, "floor-2t: %s: %s (sqlite: %s)\n", what, strerror(errno), db ? sqlite3_errmsg(db) : "-");
  exit(3);
}

static void exec_sql(const char *sql) {
  if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) die(sql);
}

static struct batch *new_batch(void) {
  struct batch *b = calloc(1, sizeof *b);
  b->names = malloc((size_t)batch_size * sizeof *b->names);
  b->offset = malloc((size_t)batch_size * sizeof *b->offset);
  b->length = malloc((size_t)batch_size * sizeof *b->length);
  b->cap = (size_t)batch_size * 512;
  b->data = malloc(b->cap);
  return b;
}

// ---- the claim thread ----

static struct batch *take_empty(void) {
  pthread_mutex_lock(&lock);
  while (empty_n == 0) pthread_cond_wait(&changed, &lock);
  struct batch *b = empty[--empty_n];
  pthread_mutex_unlock(&lock);
  b->n = 0;
  b->used = 0;
  return b;
}

static void hand_over(struct batch *b) {
  pthread_mutex_lock(&lock);
  while (full_n == SLOTS) pthread_cond_wait(&changed, &lock);
  full[full_n++] = b;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&lock);
}

// Reads a whole file into the batch's data, NUL-terminated.
static void read_into(struct batch *b, int fd) {
  size_t start = b->used;
  for (;;) {
    if (b->cap - b->used < 4096 + 1) {
      b->cap *= 2;
      b->data = realloc(b->data, b->cap);
      if (!b->data) die("realloc");
    }
    ssize_t got = read(fd, b->data + b->used, b->cap - b->used - 1);
    if (got < 0) die("read");
    if (got == 0) break;
    b->used += (size_t)got;
  }
  b->offset[b->n] = start;
  b->length[b->n] = b->used - start;
  b->data[b->used++] = 0;
}

// A claimed file, read into the batch being claimed; a full batch goes to the commit thread.
static void read_claimed(const char *name, void *ctx) {
  struct batch **b = ctx;
  int fd = openat(processing_fd, name, O_RDONLY | O_NOFOLLOW);
  if (fd < 0) die("open");
  read_into(*b, fd);
  close(fd);
  memcpy((*b)->names[(*b)->n], name, strlen(name) + 1);
  if (++(*b)->n == batch_size) {
    hand_over(*b);
    *b = take_empty();
  }
}

// A pass ends its batch, as floor's does.
static void end_pass(void *ctx) {
  struct batch **b = ctx;
  if ((*b)->n > 0) {
    hand_over(*b);
    *b = take_empty();
  }
}

static void *claim_thread(void *arg) {
  (void)arg;
  struct batch *b = take_empty();
  claim_passes(inbox_fd, processing_fd, batch_size, 1, read_claimed, end_pass, &b);
  pthread_mutex_lock(&lock);
  empty[empty_n++] = b;
  claiming_done = 1;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&lock);
  return NULL;
}

// ---- the commit thread (main) ----

static void commit_batch(struct batch *b, double *last_batch_end) {
  static char *is_error;
  if (!is_error) is_error = malloc((size_t)batch_size);
  exec_sql("BEGIN IMMEDIATE");
  for (int i = 0; i < b->n; i++) {
    const char *buf = b->data + b->offset[i];
    int ok = insert_fields(insert_stmt, buf);
    if (ok)
      done_count++;
    else
      error_count++;
    is_error[i] = !ok;
  }
  exec_sql("COMMIT");
  int any_error = 0;
  for (int i = 0; i < b->n; i++) {
    any_error |= is_error[i];
    if (renameat(processing_fd, b->names[i], is_error[i] ? error_fd : done_fd, b->names[i]) != 0)
      die("rename out of processing/");
  }
  if (fsync(done_fd) != 0) die("fsync done/");
  if (any_error && fsync(error_fd) != 0) die("fsync error/");
  double t = now_ms();
  if (batches == batch_ms_cap) {
    batch_ms_cap = batch_ms_cap ? batch_ms_cap * 2 : 1024;
    batch_ms = realloc(batch_ms, batch_ms_cap * sizeof *batch_ms);
  }
  batch_ms[batches++] = t - *last_batch_end;
  *last_batch_end = t;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: floor-2t ROOT DB [BATCH]\n");
    return 2;
  }
  const char *root = argv[1];
  batch_size = argc > 3 ? atoi(argv[3]) : 1000;
  if (batch_size < 1 || batch_size > MAX_BATCH) batch_size = 1000;
  double started = now_ms();

  inbox_fd = open_dir(root, "inbox");
  processing_fd = open_dir(root, "processing");
  done_fd = open_dir(root, "done");
  error_fd = open_dir(root, "error");

  db = open_ledger(argv[2], &insert_stmt);

  for (int i = 0; i < SLOTS + 1; i++) empty[empty_n++] = new_batch();
  pthread_t claimer;
  if (pthread_create(&claimer, NULL, claim_thread, NULL) != 0) die("pthread_create");
  double last_batch_end = now_ms();
  for (;;) {
    pthread_mutex_lock(&lock);
    while (full_n == 0 && !claiming_done) pthread_cond_wait(&changed, &lock);
    if (full_n == 0) {
      pthread_mutex_unlock(&lock);
      break;
    }
    struct batch *b = full[0];
    memmove(full, full + 1, (size_t)(--full_n) * sizeof *full);
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
    commit_batch(b, &last_batch_end);
    pthread_mutex_lock(&lock);
    empty[empty_n++] = b;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
  }
  pthread_join(claimer, NULL);
  sqlite3_finalize(insert_stmt);
  sqlite3_close(db);

  printf("{\"done\":%ld,\"error\":%ld,\"seconds\":%.6f,\"batchMs\":[", done_count, error_count,
         (now_ms() - started) / 1e3);
  for (long i = 0; i < batches; i++) printf("%s%.3f", i ? "," : "", batch_ms[i]);
  printf("]}\n");
  return 0;
}
