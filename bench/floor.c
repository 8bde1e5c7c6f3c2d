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
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_BATCH 100000

static int inbox_fd, processing_fd, done_fd, error_fd;
static sqlite3 *db;
static sqlite3_stmt *insert_stmt;
static char (*names)[256];
static char *is_error;
static int in_batch;
static long done_count, error_count, batches;
static double *batch_ms;
static long batch_ms_cap;
static double last_batch_end;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void die(const char *what) {
  fprintf(stderr, "floor: %s: %s (sqlite: %s)\n", what, strerror(errno), db ? sqlite3_errmsg(db) : "-");
  exit(3);
}

static void exec_sql(const char *sql) {
  if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) die(sql);
}

// Finds "key" and returns a pointer just past the ':' and any blanks after it.
static const char *field(const char *json, const char *quoted_key) {
  const char *p = strstr(json, quoted_key);
  if (!p) return NULL;
  p += strlen(quoted_key);
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
  if (*p != ':') return NULL;
  p++;
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
  return p;
}

static int string_field(const char *json, const char *key, const char **start, int *len) {
  const char *p = field(json, key);
  if (!p || *p != '"') return 0;
  const char *end = strchr(p + 1, '"');
  if (!end || end == p + 1) return 0;
  *start = p + 1;
  *len = (int)(end - p - 1);
  return 1;
}

static int number_field(const char *json, const char *key, const char **start, int *len) {
  const char *p = field(json, key);
  if (!p || !(*p == '-' || (*p >= '0' && *p <= '9'))) return 0;
  const char *end = p;
  while (*end && strchr("0123456789+-.eE", *end)) end++;
  *start = p;
  *len = (int)(end - p);
  return 1;
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

static int open_dir(const char *root, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", root, name);
  int fd = open(path, O_RDONLY | O_DIRECTORY);
  if (fd < 0) die(path);
  return fd;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: floor ROOT DB [BATCH]\n");
    return 2;
  }
  const char *root = argv[1];
  int batch_size = argc > 3 ? atoi(argv[3]) : 1000;
  if (batch_size < 1 || batch_size > MAX_BATCH) batch_size = 1000;
  names = malloc((size_t)batch_size * sizeof *names);
  is_error = malloc((size_t)batch_size);
  static char buf[1 << 20];
  double started = now_ms();

  inbox_fd = open_dir(root, "inbox");
  processing_fd = open_dir(root, "processing");
  done_fd = open_dir(root, "done");
  error_fd = open_dir(root, "error");

  if (sqlite3_open(argv[2], &db) != SQLITE_OK) die("open db");
  exec_sql("PRAGMA journal_mode = WAL");
  exec_sql("PRAGMA synchronous = FULL");
  exec_sql(
      "CREATE TABLE IF NOT EXISTS processed (msg_id TEXT PRIMARY KEY, order_no TEXT NOT NULL, seq INTEGER NOT NULL, "
      "amount TEXT NOT NULL)");
  if (sqlite3_prepare_v2(db, "INSERT OR IGNORE INTO processed (msg_id, order_no, seq, amount) VALUES (?, ?, ?, ?)", -1,
                         &insert_stmt, NULL) != SQLITE_OK)
    die("prepare");
  exec_sql("BEGIN IMMEDIATE");
  last_batch_end = now_ms();

  for (;;) {
    long claimed = 0;
    DIR *dir = fdopendir(dup(inbox_fd));
    if (!dir) die("opendir inbox/");
    rewinddir(dir);
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
      size_t n = strlen(e->d_name);
      if (e->d_name[0] == '.' || n < 5 || strcmp(e->d_name + n - 5, ".json") != 0) continue;
      if (renameat2(inbox_fd, e->d_name, processing_fd, e->d_name, RENAME_NOREPLACE) != 0) {
        if (errno == ENOENT || errno == EEXIST) continue;
        die("rename into processing/");
      }
      claimed++;
      int fd = openat(processing_fd, e->d_name, O_RDONLY | O_NOFOLLOW);
      if (fd < 0) die("open");
      ssize_t len = read(fd, buf, sizeof buf - 1);
      close(fd);
      if (len < 0) die("read");
      buf[len] = 0;

      const char *id, *order, *seq, *amount;
      int id_len, order_len, seq_len, amount_len;
      int ok = string_field(buf, "\"msg_id\"", &id, &id_len) && string_field(buf, "\"order_no\"", &order, &order_len) &&
               number_field(buf, "\"seq\"", &seq, &seq_len) && number_field(buf, "\"amount\"", &amount, &amount_len);
      if (ok) {
        sqlite3_bind_text(insert_stmt, 1, id, id_len, SQLITE_STATIC);
        sqlite3_bind_text(insert_stmt, 2, order, order_len, SQLITE_STATIC);
        sqlite3_bind_int64(insert_stmt, 3, strtoll(seq, NULL, 10));
        sqlite3_bind_text(insert_stmt, 4, amount, amount_len, SQLITE_STATIC);
        if (sqlite3_step(insert_stmt) != SQLITE_DONE) die("insert");
        sqlite3_reset(insert_stmt);
        done_count++;
      } else {
        error_count++;
      }
      memcpy(names[in_batch], e->d_name, n + 1);
      is_error[in_batch] = !ok;
      if (++in_batch == batch_size) flush_batch();
    }
    closedir(dir);
    flush_batch();
    if (claimed == 0) break;
  }
  exec_sql("COMMIT");
  sqlite3_finalize(insert_stmt);
  sqlite3_close(db);

  printf("{\"done\":%ld,\"error\":%ld,\"seconds\":%.6f,\"batchMs\":[", done_count, error_count,
         (now_ms() - started) / 1e3);
  for (long i = 0; i < batches; i++) printf("%s%.3f", i ? "," : "", batch_ms[i]);
  printf("]}\n");
  return 0;
}
