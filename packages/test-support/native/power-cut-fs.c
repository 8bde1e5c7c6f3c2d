// A passthrough FUSE file system that can cut the power.
//
//   power-cut-fs BACKING STATE CONTROL MOUNTPOINT
//
// Mounts BACKING at MOUNTPOINT and keeps, per file and per directory, what changed since its
// last fsync. A line on the unix socket CONTROL cuts the power: "cut all" undoes, in the
// backing directory, everything that was not made durable; "cut subset SEED" undoes a seeded
// random part of it. The answer lists what was lost and kept (a line per change or file, its
// fields separated by tabs), then "done". After a cut the
// file system answers EIO to everything (the machine is off) until it is unmounted; the test
// kills every process that used the mount first, then cuts, then unmounts and mounts BACKING
// again. STATE is a scratch directory on the same file system as BACKING (the graveyard of
// removed entries, kept until their removal is durable).
//
// The durability model, at least as strict as ext4 with data=ordered:
//
// - A file's data (write, truncate, O_TRUNC) is durable once fsync or fdatasync was called
//   on the file (any descriptor of it), or at once on a descriptor opened O_SYNC or O_DSYNC.
//   Nothing else makes data durable: no other file's fsync, no directory's fsync, no close.
//   ext4 flushes data at each journal commit (another file's fsync, the 5 s commit timer), so
//   it keeps at least what is kept here.
// - A directory entry created, removed or renamed is durable once the directory it is in has
//   been fsynced after the change. A file's own fsync does not make its name durable (ext4's
//   does, as its journal commit carries the create). A rename from one directory to another
//   is one operation that stays undoable until both directories have been fsynced after it:
//   then, and not before, it can no longer be lost, and a cut before that undoes it whole (the
//   file back under its old name, never in both directories or in neither, since a journaled
//   rename is atomic). ext4 makes it durable at the first of the two fsyncs (one journal
//   commit), so it keeps at least what is kept here.
// - An entry change is durable only after every earlier change it depends on is (the same
//   entry, the same name in the same directory, the same inode; a directory renamed depends on
//   every earlier change): a journal commits in order, and undoing in reverse stays consistent.
// - Data and entries are independent: a new file's name can survive while its data does not (a
//   zero-length file, as ext4's delayed allocation can leave), or the other way round.
// - Attributes (mode, owner, times) are passed through and never undone.
//
// "cut subset" keeps a random part of what a full cut would undo, a machine that flushed some
// of its page cache before it died: each entry change is lost with probability 1/2, and with
// it every later change that depends on it; each file keeps a random prefix of its unsynced
// data changes, in the order they were made.
//
// Every request is served under one lock, and the journal records operations in the order the
// backing directory saw them, so undoing in reverse restores the durable state exactly.

#define FUSE_USE_VERSION 31
#define _GNU_SOURCE

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <unistd.h>

static int backing;  // the backing root, every path is resolved under it
static char backingPath[PATH_MAX];
static int graveyard;  // removed entries, until their removal is durable
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int isOff;  // set by a cut: the machine is off
static long graves;

// ---- descriptors handed to the kernel ----

// A file's or a directory's: the kernel hands it back with every request on what it opened.
struct handle {
  int fd;
  int flags;
  DIR *dir;  // a directory's stream, or NULL for a file
};

#define H(fi) ((struct handle *)(uintptr_t)(fi)->fh)

static const char *rel(const char *path) {
  while (*path == '/') path++;
  return *path == '\0' ? "." : path;
}

// Splits "/a/b/c" into the directory "a/b" and the name "c" (into buffers of PATH_MAX).
static void split(const char *path, char *dir, char *name) {
  const char *r = rel(path);
  const char *slash = strrchr(r, '/');
  if (slash == NULL) {
    strcpy(dir, ".");
    snprintf(name, PATH_MAX, "%s", r);
  } else {
    snprintf(dir, PATH_MAX, "%.*s", (int)(slash - r), r);
    snprintf(name, PATH_MAX, "%s", slash + 1);
  }
}

static ino_t inodeAt(const char *relPath) {
  struct stat st;
  return fstatat(backing, relPath, &st, AT_SYMLINK_NOFOLLOW) == 0 ? st.st_ino : 0;
}

// ---- a set of 64-bit keys (the objects a change touches) ----

struct keys {
  uint64_t *slot;
  size_t cap, n;
};

static void keysClear(struct keys *k) {
  if (k->slot != NULL) memset(k->slot, 0, k->cap * sizeof *k->slot);
  k->n = 0;
}

static int keysHas(const struct keys *k, uint64_t v) {
  if (k->cap == 0) return 0;
  for (size_t i = v % k->cap;; i = (i + 1) % k->cap) {
    if (k->slot[i] == 0) return 0;
    if (k->slot[i] == v) return 1;
  }
}

static void keysAdd(struct keys *k, uint64_t v) {
  if (keysHas(k, v)) return;
  if (2 * (k->n + 1) > k->cap) {
    struct keys bigger = {calloc(k->cap ? 2 * k->cap : 64, sizeof(uint64_t)), k->cap ? 2 * k->cap : 64, 0};
    for (size_t i = 0; i < k->cap; i++)
      if (k->slot[i] != 0) keysAdd(&bigger, k->slot[i]);
    free(k->slot);
    *k = bigger;
  }
  size_t i = v % k->cap;
  while (k->slot[i] != 0) i = (i + 1) % k->cap;
  k->slot[i] = v;
  k->n++;
}

static uint64_t mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h | 1;  // never 0, the empty slot
}

static uint64_t inodeKey(ino_t ino) { return mix((uint64_t)ino * 2); }

static uint64_t slotKey(ino_t dir, const char *name) {
  uint64_t h = 1469598103934665603ULL ^ ((uint64_t)dir * 2 + 1);
  for (const char *p = name; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
  return mix(h);
}

// ---- the seeded random choice of "cut subset" (splitmix64) ----

static uint64_t seed;

static uint64_t nextRandom(void) {
  uint64_t z = (seed += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// ---- unsynced data, per inode: an undo record per change ----

struct undo {
  off_t offset;
  off_t oldSize;
  size_t length;
  char *oldBytes;  // the bytes the change overwrote, from offset
};

struct dirty {
  ino_t ino;
  int fd;  // our own descriptor of the inode, valid even once it has no name
  char path[PATH_MAX];
  struct undo *undo;
  size_t n, cap;
  struct dirty *next;
};

static struct dirty *dirtyFiles;

static struct dirty *dirtyOf(int fd, const char *path) {
  struct stat st;
  if (fstat(fd, &st) != 0) return NULL;
  for (struct dirty *d = dirtyFiles; d != NULL; d = d->next)
    if (d->ino == st.st_ino) return d;
  char self[64];
  snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
  int own = open(self, O_RDWR | O_CLOEXEC);
  if (own < 0) return NULL;
  struct dirty *d = calloc(1, sizeof *d);
  d->ino = st.st_ino;
  d->fd = own;
  // The kernel may name no path (an open file's handle is enough): ask /proc for it.
  char where[PATH_MAX];
  ssize_t n = readlink(self, where, sizeof where - 1);
  where[n > 0 ? n : 0] = '\0';
  size_t root = strlen(backingPath);
  if (path != NULL) snprintf(d->path, sizeof d->path, "%s", rel(path));
  else if (strncmp(where, backingPath, root) == 0 && where[root] == '/') snprintf(d->path, sizeof d->path, "%s", where + root + 1);
  else snprintf(d->path, sizeof d->path, "(removed)");
  d->next = dirtyFiles;
  dirtyFiles = d;
  return d;
}

// Records what a change of [offset, offset + length) and of the size to newSize will destroy.
static int recordData(int fd, const char *path, off_t offset, size_t length) {
  struct dirty *d = dirtyOf(fd, path);
  if (d == NULL) return -EIO;
  struct stat st;
  if (fstat(d->fd, &st) != 0) return -errno;
  struct undo u = {offset, st.st_size, 0, NULL};
  if (offset < st.st_size) {
    u.length = (size_t)(st.st_size - offset) < length ? (size_t)(st.st_size - offset) : length;
    u.oldBytes = malloc(u.length ? u.length : 1);
    ssize_t got = pread(d->fd, u.oldBytes, u.length, offset);
    if (got < 0 || (size_t)got != u.length) {
      free(u.oldBytes);
      return -EIO;
    }
  }
  if (d->n == d->cap) {
    d->cap = d->cap ? 2 * d->cap : 16;
    d->undo = realloc(d->undo, d->cap * sizeof *d->undo);
  }
  d->undo[d->n++] = u;
  return 0;
}

static void forgetDirty(struct dirty *d) {
  for (size_t i = 0; i < d->n; i++) free(d->undo[i].oldBytes);
  free(d->undo);
  close(d->fd);
  free(d);
}

// fsync: the inode's data is durable.
static void dataDurable(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return;
  for (struct dirty **p = &dirtyFiles; *p != NULL; p = &(*p)->next)
    if ((*p)->ino == st.st_ino) {
      struct dirty *d = *p;
      *p = d->next;
      forgetDirty(d);
      return;
    }
}

// ---- unsynced directory entries: one record per change, in order ----

enum kind { CREATE, REMOVE, RENAME };
static const char *kindNames[] = {"create", "remove", "rename"};

struct change {
  enum kind kind;
  int isDir;
  char from[PATH_MAX];  // create, remove: the entry; rename: its old path
  char to[PATH_MAX];    // rename: its new path
  ino_t fromDir, toDir;
  int fromNeedsSync, toNeedsSync;
  long grave;  // the removed entry (or the one a rename replaced) in the graveyard, or -1
  int graveIsDir;
  uint64_t keys[4];
  int nKeys;
  int isBarrier;  // a directory renamed: every path under it changed
  int isLost;
};

static struct change *changes;
static size_t nChanges, capChanges;

static struct change *addChange(enum kind kind, const char *from, const char *to) {
  if (nChanges == capChanges) {
    capChanges = capChanges ? 2 * capChanges : 256;
    changes = realloc(changes, capChanges * sizeof *changes);
  }
  struct change *c = &changes[nChanges++];
  memset(c, 0, sizeof *c);
  c->kind = kind;
  c->grave = -1;
  snprintf(c->from, sizeof c->from, "%s", rel(from));
  if (to != NULL) snprintf(c->to, sizeof c->to, "%s", rel(to));
  return c;
}

static void graveName(long id, char *out) { snprintf(out, 32, "g%ld", id); }

static int removeTree(int dirfd, const char *name, int isDir) {
  if (!isDir) return unlinkat(dirfd, name, 0);
  int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return -1;
  DIR *dp = fdopendir(fd);
  if (dp == NULL) {
    close(fd);
    return -1;
  }
  for (struct dirent *e; (e = readdir(dp)) != NULL;) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    removeTree(fd, e->d_name, e->d_type == DT_DIR);
  }
  closedir(dp);
  return unlinkat(dirfd, name, AT_REMOVEDIR);
}

// A change that can no longer be lost: what it removed is gone for good.
static void changeDurable(struct change *c) {
  if (c->grave < 0) return;
  char g[32];
  graveName(c->grave, g);
  removeTree(graveyard, g, c->graveIsDir);
}

static int undoErrors;

static void undoFailed(const char *what, const char *path) {
  undoErrors++;
  fprintf(stderr, "power-cut-fs: cannot undo %s of %s: %s\n", what, path, strerror(errno));
}

static void undoChange(struct change *c) {
  char g[32];
  graveName(c->grave, g);
  switch (c->kind) {
    case CREATE:
      if (removeTree(backing, c->from, c->isDir) != 0) undoFailed("create", c->from);
      break;
    case REMOVE:
      if (renameat(graveyard, g, backing, c->from) != 0) undoFailed("removal", c->from);
      break;
    case RENAME:
      if (renameat(backing, c->to, backing, c->from) != 0) undoFailed("rename", c->to);
      if (c->grave >= 0 && renameat(graveyard, g, backing, c->to) != 0) undoFailed("replacement", c->to);
      break;
  }
}

// Drops the changes that have become durable: every directory they need fsynced has been, and
// no earlier change they depend on is still undoable.
static void settleChanges(void) {
  static struct keys blocked;
  keysClear(&blocked);
  int isAfterPending = 0, isAfterBarrier = 0;
  size_t kept = 0;
  for (size_t i = 0; i < nChanges; i++) {
    struct change *c = &changes[i];
    int isReady = !c->fromNeedsSync && !c->toNeedsSync && !isAfterBarrier && !(c->isBarrier && isAfterPending);
    for (int k = 0; isReady && k < c->nKeys; k++)
      if (keysHas(&blocked, c->keys[k])) isReady = 0;
    if (isReady) {
      changeDurable(c);
      continue;
    }
    for (int k = 0; k < c->nKeys; k++) keysAdd(&blocked, c->keys[k]);
    isAfterPending = 1;
    if (c->isBarrier) isAfterBarrier = 1;
    changes[kept++] = *c;
  }
  nChanges = kept;
}

static void dirSynced(ino_t dir) {
  for (size_t i = 0; i < nChanges; i++) {
    if (changes[i].fromDir == dir) changes[i].fromNeedsSync = 0;
    if (changes[i].toDir == dir) changes[i].toNeedsSync = 0;
  }
  settleChanges();
}

static void recordCreate(const char *path, int isDir) {
  char dir[PATH_MAX], name[PATH_MAX];
  split(path, dir, name);
  struct change *c = addChange(CREATE, path, NULL);
  c->isDir = isDir;
  c->fromDir = inodeAt(dir);
  c->fromNeedsSync = 1;
  c->keys[c->nKeys++] = inodeKey(inodeAt(c->from));
  c->keys[c->nKeys++] = slotKey(c->fromDir, name);
}

// Moves the entry at relPath into the graveyard; returns its grave, or -errno.
static long bury(const char *relPath) {
  long id = graves++;
  char g[32];
  graveName(id, g);
  return renameat(backing, relPath, graveyard, g) == 0 ? id : -errno;
}

// ---- the file system's operations ----

#define LOCKED(body)                      \
  do {                                    \
    pthread_mutex_lock(&lock);            \
    int result_ = isOff ? -EIO : (body);  \
    pthread_mutex_unlock(&lock);          \
    return result_;                       \
  } while (0)

static int doGetattr(const char *path, struct stat *st, struct fuse_file_info *fi) {
  int r = fi != NULL ? fstat(H(fi)->fd, st) : fstatat(backing, rel(path), st, AT_SYMLINK_NOFOLLOW);
  return r == 0 ? 0 : -errno;
}
static int fsGetattr(const char *path, struct stat *st, struct fuse_file_info *fi) { LOCKED(doGetattr(path, st, fi)); }

static int doAccess(const char *path, int mask) {
  return faccessat(backing, rel(path), mask, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : -errno;
}
static int fsAccess(const char *path, int mask) { LOCKED(doAccess(path, mask)); }

static int doReadlink(const char *path, char *buf, size_t size) {
  ssize_t n = readlinkat(backing, rel(path), buf, size - 1);
  if (n < 0) return -errno;
  buf[n] = '\0';
  return 0;
}
static int fsReadlink(const char *path, char *buf, size_t size) { LOCKED(doReadlink(path, buf, size)); }

static int doOpendir(const char *path, struct fuse_file_info *fi) {
  int fd = openat(backing, rel(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -errno;
  DIR *dp = fdopendir(fd);
  if (dp == NULL) {
    close(fd);
    return -errno;
  }
  struct handle *h = calloc(1, sizeof *h);
  h->fd = fd;
  h->dir = dp;
  fi->fh = (uintptr_t)h;
  return 0;
}
static int fsOpendir(const char *path, struct fuse_file_info *fi) { LOCKED(doOpendir(path, fi)); }

static int doReaddir(void *buf, fuse_fill_dir_t fill, struct fuse_file_info *fi) {
  DIR *dp = H(fi)->dir;
  rewinddir(dp);
  for (struct dirent *e; (e = readdir(dp)) != NULL;) {
    struct stat st = {0};
    st.st_ino = e->d_ino;
    st.st_mode = (mode_t)DTTOIF(e->d_type);
    if (fill(buf, e->d_name, &st, 0, 0)) break;
  }
  return 0;
}
static int fsReaddir(const char *path, void *buf, fuse_fill_dir_t fill, off_t offset, struct fuse_file_info *fi,
                     enum fuse_readdir_flags flags) {
  (void)path, (void)offset, (void)flags;
  LOCKED(doReaddir(buf, fill, fi));
}

static int fsReleasedir(const char *path, struct fuse_file_info *fi) {
  (void)path;
  pthread_mutex_lock(&lock);
  closedir(H(fi)->dir);
  free(H(fi));
  pthread_mutex_unlock(&lock);
  return 0;
}

static int doFsyncdir(struct fuse_file_info *fi) {
  struct stat st;
  if (fstat(H(fi)->fd, &st) != 0) return -errno;
  dirSynced(st.st_ino);
  return 0;
}
static int fsFsyncdir(const char *path, int datasync, struct fuse_file_info *fi) {
  (void)path, (void)datasync;
  LOCKED(doFsyncdir(fi));
}

static int doMknod(const char *path, mode_t mode, dev_t dev) {
  int r = S_ISFIFO(mode) ? mkfifoat(backing, rel(path), mode) : mknodat(backing, rel(path), mode, dev);
  if (r != 0) return -errno;
  recordCreate(path, 0);
  return 0;
}
static int fsMknod(const char *path, mode_t mode, dev_t dev) { LOCKED(doMknod(path, mode, dev)); }

static int doMkdir(const char *path, mode_t mode) {
  if (mkdirat(backing, rel(path), mode) != 0) return -errno;
  recordCreate(path, 1);
  return 0;
}
static int fsMkdir(const char *path, mode_t mode) { LOCKED(doMkdir(path, mode)); }

static int doSymlink(const char *target, const char *path) {
  if (symlinkat(target, backing, rel(path)) != 0) return -errno;
  recordCreate(path, 0);
  return 0;
}
static int fsSymlink(const char *target, const char *path) { LOCKED(doSymlink(target, path)); }

static int doLink(const char *from, const char *to) {
  if (linkat(backing, rel(from), backing, rel(to), 0) != 0) return -errno;
  recordCreate(to, 0);
  return 0;
}
static int fsLink(const char *from, const char *to) { LOCKED(doLink(from, to)); }

static int isEmptyDir(const char *relPath) {
  int fd = openat(backing, relPath, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return 0;
  DIR *dp = fdopendir(fd);
  int entries = 0;
  for (struct dirent *e; dp != NULL && (e = readdir(dp)) != NULL;)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) entries++;
  if (dp != NULL) closedir(dp);
  else close(fd);
  return entries == 0;
}

static int doRemove(const char *path, int isDir) {
  struct stat st;
  if (fstatat(backing, rel(path), &st, AT_SYMLINK_NOFOLLOW) != 0) return -errno;
  if (isDir && !S_ISDIR(st.st_mode)) return -ENOTDIR;
  if (!isDir && S_ISDIR(st.st_mode)) return -EISDIR;
  if (isDir && !isEmptyDir(rel(path))) return -ENOTEMPTY;
  char dir[PATH_MAX], name[PATH_MAX];
  split(path, dir, name);
  ino_t dirIno = inodeAt(dir);
  long grave = bury(rel(path));
  if (grave < 0) return (int)grave;
  struct change *c = addChange(REMOVE, path, NULL);
  c->isDir = isDir;
  c->grave = grave;
  c->graveIsDir = isDir;
  c->fromDir = dirIno;
  c->fromNeedsSync = 1;
  c->keys[c->nKeys++] = inodeKey(st.st_ino);
  c->keys[c->nKeys++] = slotKey(dirIno, name);
  return 0;
}
static int fsUnlink(const char *path) { LOCKED(doRemove(path, 0)); }
static int fsRmdir(const char *path) { LOCKED(doRemove(path, 1)); }

static int doRename(const char *from, const char *to, unsigned int flags) {
  if (flags & ~RENAME_NOREPLACE) return -EINVAL;  // RENAME_EXCHANGE and RENAME_WHITEOUT: not needed here
  struct stat src, dst;
  if (fstatat(backing, rel(from), &src, AT_SYMLINK_NOFOLLOW) != 0) return -errno;
  long grave = -1;
  int isReplacing = fstatat(backing, rel(to), &dst, AT_SYMLINK_NOFOLLOW) == 0;
  if (isReplacing) {
    if (flags & RENAME_NOREPLACE) return -EEXIST;
    if (dst.st_ino == src.st_ino) return 0;  // two names of one inode: rename(2) does nothing
    if (S_ISDIR(dst.st_mode) && !S_ISDIR(src.st_mode)) return -EISDIR;
    if (!S_ISDIR(dst.st_mode) && S_ISDIR(src.st_mode)) return -ENOTDIR;
    if (S_ISDIR(dst.st_mode) && !isEmptyDir(rel(to))) return -ENOTEMPTY;
    grave = bury(rel(to));
    if (grave < 0) return (int)grave;
  }
  if (renameat2(backing, rel(from), backing, rel(to), flags) != 0) {
    int e = errno;
    char g[32];
    graveName(grave, g);
    if (grave >= 0) renameat(graveyard, g, backing, rel(to));
    return -e;
  }
  char fromDir[PATH_MAX], fromName[PATH_MAX], toDir[PATH_MAX], toName[PATH_MAX];
  split(from, fromDir, fromName);
  split(to, toDir, toName);
  struct change *c = addChange(RENAME, from, to);
  c->isDir = S_ISDIR(src.st_mode);
  c->isBarrier = c->isDir;
  c->grave = grave;
  c->graveIsDir = isReplacing && S_ISDIR(dst.st_mode);
  c->fromDir = inodeAt(fromDir);
  c->toDir = inodeAt(toDir);
  c->fromNeedsSync = 1;
  c->toNeedsSync = c->toDir != c->fromDir;
  c->keys[c->nKeys++] = inodeKey(src.st_ino);
  c->keys[c->nKeys++] = slotKey(c->fromDir, fromName);
  c->keys[c->nKeys++] = slotKey(c->toDir, toName);
  if (isReplacing) c->keys[c->nKeys++] = inodeKey(dst.st_ino);
  return 0;
}
static int fsRename(const char *from, const char *to, unsigned int flags) { LOCKED(doRename(from, to, flags)); }

static int doChmod(const char *path, mode_t mode, struct fuse_file_info *fi) {
  int r = fi != NULL ? fchmod(H(fi)->fd, mode) : fchmodat(backing, rel(path), mode, 0);
  return r == 0 ? 0 : -errno;
}
static int fsChmod(const char *path, mode_t mode, struct fuse_file_info *fi) { LOCKED(doChmod(path, mode, fi)); }

static int doChown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi) {
  int r = fi != NULL ? fchown(H(fi)->fd, uid, gid) : fchownat(backing, rel(path), uid, gid, AT_SYMLINK_NOFOLLOW);
  return r == 0 ? 0 : -errno;
}
static int fsChown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi) {
  LOCKED(doChown(path, uid, gid, fi));
}

static int doUtimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi) {
  int r = fi != NULL ? futimens(H(fi)->fd, tv) : utimensat(backing, rel(path), tv, AT_SYMLINK_NOFOLLOW);
  return r == 0 ? 0 : -errno;
}
static int fsUtimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi) {
  LOCKED(doUtimens(path, tv, fi));
}

static int truncateFd(int fd, const char *path, off_t size) {
  struct stat st;
  if (fstat(fd, &st) != 0) return -errno;
  if (st.st_size == size) return 0;
  int r = recordData(fd, path, size, st.st_size > size ? (size_t)(st.st_size - size) : 0);
  if (r != 0) return r;
  return ftruncate(fd, size) == 0 ? 0 : -errno;
}

static int doTruncate(const char *path, off_t size, struct fuse_file_info *fi) {
  if (fi != NULL) return truncateFd(H(fi)->fd, path, size);
  int fd = openat(backing, rel(path), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  int r = truncateFd(fd, path, size);
  close(fd);
  return r;
}
static int fsTruncate(const char *path, off_t size, struct fuse_file_info *fi) { LOCKED(doTruncate(path, size, fi)); }

static int openFile(const char *path, int flags, mode_t mode, struct fuse_file_info *fi) {
  struct stat st;
  int existed = fstatat(backing, rel(path), &st, AT_SYMLINK_NOFOLLOW) == 0;
  // O_TRUNC is done here, through the journal; O_SYNC and O_DSYNC are kept in the handle.
  int fd = openat(backing, rel(path), (flags & ~O_TRUNC) | O_CLOEXEC, mode);
  if (fd < 0) return -errno;
  if (!existed) recordCreate(path, 0);
  if ((flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY) {
    int r = truncateFd(fd, path, 0);
    if (r != 0) {
      close(fd);
      return r;
    }
  }
  struct handle *h = calloc(1, sizeof *h);
  h->fd = fd;
  h->flags = flags;
  fi->fh = (uintptr_t)h;
  // Only this mount changes the backing directory while it is mounted: the page cache stays
  // valid across opens (SQLite's -shm is shared through it).
  fi->keep_cache = 1;
  return 0;
}
static int fsOpen(const char *path, struct fuse_file_info *fi) { LOCKED(openFile(path, fi->flags, 0, fi)); }
static int fsCreate(const char *path, mode_t mode, struct fuse_file_info *fi) {
  LOCKED(openFile(path, fi->flags | O_CREAT, mode, fi));
}

static int doRead(char *buf, size_t size, off_t offset, struct fuse_file_info *fi) {
  ssize_t n = pread(H(fi)->fd, buf, size, offset);
  return n < 0 ? -errno : (int)n;
}
static int fsRead(const char *path, char *buf, size_t size, off_t offset, struct fuse_file_info *fi) {
  (void)path;
  LOCKED(doRead(buf, size, offset, fi));
}

static int doWrite(const char *path, const char *buf, size_t size, off_t offset, struct fuse_file_info *fi) {
  struct handle *h = H(fi);
  if (h->flags & O_APPEND) {
    struct stat st;
    if (fstat(h->fd, &st) != 0) return -errno;
    offset = st.st_size;
  }
  int r = recordData(h->fd, path, offset, size);
  if (r != 0) return r;
  ssize_t n = pwrite(h->fd, buf, size, offset);
  if (n < 0) return -errno;
  if (h->flags & (O_SYNC | O_DSYNC)) dataDurable(h->fd);
  return (int)n;
}
static int fsWrite(const char *path, const char *buf, size_t size, off_t offset, struct fuse_file_info *fi) {
  LOCKED(doWrite(path, buf, size, offset, fi));
}

static int doFsync(struct fuse_file_info *fi) {
  dataDurable(H(fi)->fd);
  return 0;
}
static int fsFsync(const char *path, int datasync, struct fuse_file_info *fi) {
  (void)path, (void)datasync;
  LOCKED(doFsync(fi));
}

static int fsRelease(const char *path, struct fuse_file_info *fi) {
  (void)path;
  pthread_mutex_lock(&lock);
  close(H(fi)->fd);
  free(H(fi));
  pthread_mutex_unlock(&lock);
  return 0;
}

static int doStatfs(struct statvfs *st) { return fstatvfs(backing, st) == 0 ? 0 : -errno; }
static int fsStatfs(const char *path, struct statvfs *st) {
  (void)path;
  LOCKED(doStatfs(st));
}

// Preallocation would change a size behind the journal's back; callers (SQLite) fall back.
static int fsFallocate(const char *path, int mode, off_t offset, off_t length, struct fuse_file_info *fi) {
  (void)path, (void)mode, (void)offset, (void)length, (void)fi;
  return -EOPNOTSUPP;
}

static void *fsInit(struct fuse_conn_info *conn, struct fuse_config *cfg) {
  (void)conn;
  cfg->use_ino = 1;
  cfg->hard_remove = 1;  // no .fuse_hidden files: a removed open file lives on in its handle
  cfg->nullpath_ok = 1;
  cfg->kernel_cache = 1;
  printf("mounted\n");
  fflush(stdout);
  return NULL;
}

static const struct fuse_operations operations = {
    .init = fsInit,
    .getattr = fsGetattr,
    .access = fsAccess,
    .readlink = fsReadlink,
    .opendir = fsOpendir,
    .readdir = fsReaddir,
    .releasedir = fsReleasedir,
    .fsyncdir = fsFsyncdir,
    .mknod = fsMknod,
    .mkdir = fsMkdir,
    .symlink = fsSymlink,
    .link = fsLink,
    .unlink = fsUnlink,
    .rmdir = fsRmdir,
    .rename = fsRename,
    .chmod = fsChmod,
    .chown = fsChown,
    .utimens = fsUtimens,
    .truncate = fsTruncate,
    .open = fsOpen,
    .create = fsCreate,
    .read = fsRead,
    .write = fsWrite,
    .fsync = fsFsync,
    .release = fsRelease,
    .statfs = fsStatfs,
    .fallocate = fsFallocate,
};

// ---- the power cut ----

static void cut(FILE *out, int isSubset) {
  // Entry changes: lost ones undone in reverse order; a change that depends on a lost one is lost.
  static struct keys lost;
  keysClear(&lost);
  int isAfterLost = 0;
  for (size_t i = 0; i < nChanges; i++) {
    struct change *c = &changes[i];
    c->isLost = !isSubset || (nextRandom() & 1) || (c->isBarrier && isAfterLost);
    for (int k = 0; !c->isLost && k < c->nKeys; k++)
      if (keysHas(&lost, c->keys[k])) c->isLost = 1;
    if (c->isLost) {
      for (int k = 0; k < c->nKeys; k++) keysAdd(&lost, c->keys[k]);
      isAfterLost = 1;
    }
  }
  for (size_t i = nChanges; i-- > 0;) {
    struct change *c = &changes[i];
    if (c->isLost) undoChange(c);
    else changeDurable(c);
  }
  for (size_t i = 0; i < nChanges; i++) {
    struct change *c = &changes[i];
    fprintf(out, "%s\t%s\t%s%s%s\n", c->isLost ? "lost" : "kept", kindNames[c->kind], c->from,
            c->kind == RENAME ? "\t" : "", c->to);
  }
  nChanges = 0;
  // Data: each file keeps a prefix of its unsynced changes (none in a full cut).
  while (dirtyFiles != NULL) {
    struct dirty *d = dirtyFiles;
    dirtyFiles = d->next;
    size_t keep = isSubset ? (size_t)(nextRandom() % (d->n + 1)) : 0;
    for (size_t i = d->n; i-- > keep;) {
      struct undo *u = &d->undo[i];
      if (ftruncate(d->fd, u->oldSize) != 0 ||
          (u->length > 0 && pwrite(d->fd, u->oldBytes, u->length, u->offset) != (ssize_t)u->length))
        undoFailed("write", d->path);
    }
    fprintf(out, "data\t%s\t%zu/%zu\n", d->path, d->n - keep, d->n);
    forgetDirty(d);
  }
  fprintf(out, "errors\t%d\n", undoErrors);
}

static void *control(void *arg) {
  int server = *(int *)arg;
  for (;;) {
    int client = accept(server, NULL, NULL);
    if (client < 0) continue;
    FILE *io = fdopen(client, "r+");
    char line[256];
    if (io == NULL || fgets(line, sizeof line, io) == NULL) {
      if (io != NULL) fclose(io);
      else close(client);
      continue;
    }
    pthread_mutex_lock(&lock);
    unsigned long long s = 0;
    if (isOff) {
      fprintf(io, "error already cut\n");
    } else if (strcmp(line, "cut all\n") == 0) {
      cut(io, 0);
      isOff = 1;
    } else if (sscanf(line, "cut subset %llu", &s) == 1) {
      seed = s;
      cut(io, 1);
      isOff = 1;
    } else if (strcmp(line, "pending\n") == 0) {
      size_t data = 0;
      for (struct dirty *d = dirtyFiles; d != NULL; d = d->next) data += d->n;
      fprintf(io, "changes %zu data %zu\n", nChanges, data);
    } else {
      fprintf(io, "error unknown command\n");
    }
    fprintf(io, "done\n");
    pthread_mutex_unlock(&lock);
    fclose(io);
  }
  return NULL;
}

int main(int argc, char *argv[]) {
  if (argc != 5) {
    fprintf(stderr, "usage: power-cut-fs BACKING STATE CONTROL MOUNTPOINT\n");
    return 2;
  }
  backing = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (backing < 0 || realpath(argv[1], backingPath) == NULL) {
    fprintf(stderr, "power-cut-fs: cannot open %s: %s\n", argv[1], strerror(errno));
    return 2;
  }
  char grave[PATH_MAX];
  snprintf(grave, sizeof grave, "%s/graveyard", argv[2]);
  mkdir(grave, 0700);
  graveyard = open(grave, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (graveyard < 0) {
    fprintf(stderr, "power-cut-fs: cannot open %s: %s\n", grave, strerror(errno));
    return 2;
  }
  int server = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  snprintf(addr.sun_path, sizeof addr.sun_path, "%s", argv[3]);
  unlink(argv[3]);
  if (server < 0 || bind(server, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(server, 4) != 0) {
    fprintf(stderr, "power-cut-fs: cannot listen on %s: %s\n", argv[3], strerror(errno));
    return 2;
  }
  // A test that dies leaves no mount behind: SIGTERM ends the loop, and fuse_main unmounts.
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  pthread_t thread;
  pthread_create(&thread, NULL, control, &server);
  // One thread serves the kernel's requests (-s): the journal's order is the order of service.
  char *fuseArgv[] = {argv[0], "-f", "-s", "-o", "fsname=spool-power-cut,subtype=power-cut", argv[4], NULL};
  return fuse_main(6, fuseArgv, &operations, NULL);
}
