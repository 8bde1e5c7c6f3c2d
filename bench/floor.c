// The raw floor of a durable directory-queue consumer: only the work every such consumer
// must do per message, with nothing else. For each inbox/*.json: rename into processing/,
// read it, pull msg_id/order_no/seq/amount out with strstr (no JSON parser, no validation
// beyond "the four fields are there"), INSERT OR IGNORE into a WAL SQLite table with
// synchronous=FULL, 1000 messages per transaction; after COMMIT rename each file to done/
// (or error/ when a field is missing) and fsync the destination directory once per batch.
//
// Build: cc -O2 -o bench/out/floor bench/floor.c -lsqlite3
// Usage: floor ROOT DB [BATCH]   prints one JSON object on stdout
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "floor.h"

#define MAX_BATCH 100000

static int inbox_fd, processing_fd, done_fd, error_fd;
static sqlite3 *db;
static sqlite3_stmt *insert_stmt;
static char (*names)[256];
static char *is_error;
static int in_batch, batch_size;
static long done_count, error_count, batches;
static double *batch_ms;
static long batch_ms_cap;
static double last_batch_end;

static void die(const char *what) {
  fprintf(stderr, "floor: %s: %s (sqlite: %s)\n", what, strerror(errno), db ? sqlite3_errmsg(db) : "-");
  exit(3);
}

static void exec_sql(const char *sql) {
  if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) die(sql);
}

static void flush_batch(void) {
  if (in_batch == 0) return;
  exec_sql("COMMIT");
  int any_error = 0;
  for (int i = 0; i < in_batch; i++) {
    int dest = is_error[i] ? error_fd : done_fd;
    any_error |= is_error[i];
    if (renameat(processing_fd, names[i], dest, names[i]) != 0) die("rename out of processing/");
  }
  if (fsync(done_fd) != 0) die("fsync done/");
  if (any_error && fsync(error_fd) != 0) die("fsync error/");
  double t = now_ms();
  if (batches == batch_ms_cap) {
    batch_ms_cap = batch_ms_cap ? batch_ms_cap * 2 : 1024;
    batch_ms = realloc(batch_ms, batch_ms_cap * sizeof *batch_ms);
  }
  batch_ms[batches++] = t - last_batch_end;
  last_batch_end = t;
  in_batch = 0;
  exec_sql("BEGIN IMMEDIATE");
}

// A claimed file: read, its fields inserted; a full batch is committed and moved out.
static void process_claimed(const char *name, void *ctx) {
  (void)ctx;
  static char buf[1 << 20];
  int fd = openat(processing_fd, name, O_RDONLY | O_NOFOLLOW);
  if (fd < 0) die("open");
  ssize_t len = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (len < 0) die("read");
  buf[len] = 0;

  int ok = insert_fields(insert_stmt, buf);
  if (ok)
    done_count++;
  else
    error_count++;
  memcpy(names[in_batch], name, strlen(name) + 1);
  is_error[in_batch] = !ok;
  if (++in_batch == batch_size) flush_batch();
}

// A pass ends its batch.
static void end_pass(void *ctx) {
  (void)ctx;
  flush_batch();
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: floor ROOT DB [BATCH]\n");
    return 2;
  }
  const char *root = argv[1];
  batch_size = argc > 3 ? atoi(argv[3]) : 1000;
  if (batch_size < 1 || batch_size > MAX_BATCH) batch_size = 1000;
  names = malloc((size_t)batch_size * sizeof *names);
  is_error = malloc((size_t)batch_size);
  double started = now_ms();

  inbox_fd = open_dir(root, "inbox");
  processing_fd = open_dir(root, "processing");
  done_fd = open_dir(root, "done");
  error_fd = open_dir(root, "error");

  db = open_ledger(argv[2], &insert_stmt);
  exec_sql("BEGIN IMMEDIATE");
  last_batch_end = now_ms();

  claim_passes(inbox_fd, processing_fd, batch_size, 1, process_claimed, end_pass, NULL);
  exec_sql("COMMIT");
  sqlite3_finalize(insert_stmt);
  sqlite3_close(db);

  printf("{\"done\":%ld,\"error\":%ld,\"seconds\":%.6f,\"batchMs\":[", done_count, error_count,
         (now_ms() - started) / 1e3);
  for (long i = 0; i < batches; i++) printf("%s%.3f", i ? "," : "", batch_ms[i]);
  printf("]}\n");
  return 0;
}
