// The renames alone: each message's two renames, and nothing else a consumer does. For each
// inbox/*.json, rename into processing/; each batch of 1000, once claimed, renamed on to done/.
// No read, no parse, no ledger, no fsync: what the kernel's renames between directories cost,
// the part of every consumer's work that two cores cannot split (a rename between directories
// takes the file system's rename lock). With THREADS = 2, one thread claims and hands each batch
// to the other, which moves it to done/ while the next is claimed: the floors' pipelining, on the
// renames alone. Every file ends in done/, bad ones too (nothing is read).
//
// Build: cc -O2 -pthread -o bench/out/renames bench/renames.c
// Usage: renames ROOT [THREADS] [BATCH]   prints one JSON object on stdout, as the floors do
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "queue-dirs.h"

#define MAX_BATCH 100000
// Batches in flight between the threads with THREADS = 2: one being claimed, the rest queued or moving.
#define SLOTS 3

struct batch {
  int n;
  char (*names)[256];
};

static int inbox_fd, processing_fd, done_fd;
static int batch_size, threads;
static long moved, batches;
static double *batch_ms;
static long batch_ms_cap;
static double last_batch_end;

// The hand-off with THREADS = 2: a ring of claimed batches, and a pool of empty ones.
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static struct batch *full[SLOTS], *empty[SLOTS];
static int full_n, empty_n, claiming_done;

static void die(const char *what) {
  fprintf(stderr, "renames: %s: %s\n", what, strerror(errno));
  exit(3);
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void move_batch(struct batch *b) {
  for (int i = 0; i < b->n; i++)
    if (renameat(processing_fd, b->names[i], done_fd, b->names[i]) != 0) die("rename out of processing/");
  moved += b->n;
  double t = now_ms();
  if (batches == batch_ms_cap) {
    batch_ms_cap = batch_ms_cap ? batch_ms_cap * 2 : 1024;
    batch_ms = realloc(batch_ms, batch_ms_cap * sizeof *batch_ms);
    if (!batch_ms) die("realloc");
  }
  batch_ms[batches++] = t - last_batch_end;
  last_batch_end = t;
  b->n = 0;
}

static struct batch *take_empty(void) {
  pthread_mutex_lock(&lock);
  while (empty_n == 0) pthread_cond_wait(&changed, &lock);
  struct batch *b = empty[--empty_n];
  pthread_mutex_unlock(&lock);
  b->n = 0;
  return b;
}

// A claimed batch: moved at once on one thread, handed to the mover on two.
static struct batch *claimed_batch(struct batch *b) {
  if (threads == 1) {
    move_batch(b);
    return b;
  }
  pthread_mutex_lock(&lock);
  while (full_n == SLOTS) pthread_cond_wait(&changed, &lock);
  full[full_n++] = b;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&lock);
  return take_empty();
}

// A claimed name joins the batch being claimed; a full batch is moved, or handed to the mover.
static void add_claimed(const char *name, void *ctx) {
  struct batch **b = ctx;
  memcpy((*b)->names[(*b)->n], name, strlen(name) + 1);
  if (++(*b)->n == batch_size) *b = claimed_batch(*b);
}

// A pass ends its batch, as the floors' do.
static void end_pass(void *ctx) {
  struct batch **b = ctx;
  if ((*b)->n > 0) *b = claimed_batch(*b);
}

// Claims every message, a pass over inbox/ at a time, until a pass claims none (as the floors do).
static void *claim_all(void *arg) {
  struct batch *b = arg;
  claim_passes(inbox_fd, processing_fd, 1, 0, add_claimed, end_pass, &b);
  if (threads == 2) {
    pthread_mutex_lock(&lock);
    empty[empty_n++] = b;
    claiming_done = 1;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
  }
  return NULL;
}

static struct batch *new_batch(void) {
  struct batch *b = calloc(1, sizeof *b);
  if (!b) die("calloc");
  b->names = malloc((size_t)batch_size * sizeof *b->names);
  if (!b->names) die("malloc");
  return b;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: renames ROOT [THREADS] [BATCH]\n");
    return 2;
  }
  const char *root = argv[1];
  threads = argc > 2 ? atoi(argv[2]) : 1;
  if (threads != 1 && threads != 2) threads = 1;
  batch_size = argc > 3 ? atoi(argv[3]) : 1000;
  if (batch_size < 1 || batch_size > MAX_BATCH) batch_size = 1000;
  double started = now_ms();
  inbox_fd = open_dir(root, "inbox");
  processing_fd = open_dir(root, "processing");
  done_fd = open_dir(root, "done");
  last_batch_end = now_ms();

  if (threads == 1) {
    claim_all(new_batch());
  } else {
    for (int i = 0; i < SLOTS; i++) empty[empty_n++] = new_batch();
    pthread_t claimer;
    if (pthread_create(&claimer, NULL, claim_all, take_empty()) != 0) die("pthread_create");
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
      move_batch(b);
      pthread_mutex_lock(&lock);
      empty[empty_n++] = b;
      pthread_cond_broadcast(&changed);
      pthread_mutex_unlock(&lock);
    }
    pthread_join(claimer, NULL);
  }

  printf("{\"done\":%ld,\"error\":0,\"seconds\":%.6f,\"batchMs\":[", moved, (now_ms() - started) / 1e3);
  for (long i = 0; i < batches; i++) printf("%s%.3f", i ? "," : "", batch_ms[i]);
  printf("]}\n");
  return 0;
}
