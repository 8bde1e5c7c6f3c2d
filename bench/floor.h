// What both C floors (floor.c and floor-2t.c) share: the clock, the directories, the ledger, and
// the four fields found with strstr (no JSON parser, no validation beyond "the four fields are there").
#ifndef SPOOL_BENCH_FLOOR_H
#define SPOOL_BENCH_FLOOR_H
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "queue-dirs.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
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

// Finds the four fields in a NUL-terminated message and inserts them with `insert`; 0 when one is missing.
static int insert_fields(sqlite3_stmt *insert, const char *json) {
  const char *id, *order, *seq, *amount;
  int id_len, order_len, seq_len, amount_len;
  if (!(string_field(json, "\"msg_id\"", &id, &id_len) && string_field(json, "\"order_no\"", &order, &order_len) &&
        number_field(json, "\"seq\"", &seq, &seq_len) && number_field(json, "\"amount\"", &amount, &amount_len)))
    return 0;
  sqlite3_bind_text(insert, 1, id, id_len, SQLITE_STATIC);
  sqlite3_bind_text(insert, 2, order, order_len, SQLITE_STATIC);
  sqlite3_bind_int64(insert, 3, strtoll(seq, NULL, 10));
  sqlite3_bind_text(insert, 4, amount, amount_len, SQLITE_STATIC);
  if (sqlite3_step(insert) != SQLITE_DONE) die("insert");
  sqlite3_reset(insert);
  return 1;
}

// Opens the ledger in WAL mode with synchronous=FULL, its one table, and the insert.
static sqlite3 *open_ledger(const char *path, sqlite3_stmt **insert) {
  sqlite3 *db;
  if (sqlite3_open(path, &db) != SQLITE_OK) die("open db");
  const char *setup =
      "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; "
      "CREATE TABLE IF NOT EXISTS processed (msg_id TEXT PRIMARY KEY, order_no TEXT NOT NULL, seq INTEGER NOT NULL, "
      "amount TEXT NOT NULL)";
  if (sqlite3_exec(db, setup, NULL, NULL, NULL) != SQLITE_OK) die("set up the ledger");
  if (sqlite3_prepare_v2(db, "INSERT OR IGNORE INTO processed (msg_id, order_no, seq, amount) VALUES (?, ?, ?, ?)", -1,
                         insert, NULL) != SQLITE_OK)
    die("prepare");
  return db;
}

#endif
