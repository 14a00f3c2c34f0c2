/* Node-local shard files written in place and recycled. A slot is a file in
 * <node dir>/.slots, kept open and mapped; a checkpoint's shard is a second
 * (hard) name of it. The snapshot and the partner exchange write straight
 * into the mapping, so a checkpoint costs no write(2) copy and no fresh
 * tmpfs pages (whose zeroing and first touch can be most of the writer's CPU;
 * docs/CHECKPOINT.md has the measurement). A slot is reused only once its link count is back to 1, i.e.
 * pruning removed every checkpoint name of it: no kept checkpoint is ever
 * written over. */
#include "slot.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_internal.h"
#include "scaleout/err.h"
#include "scaleout/mem.h"

static void slot_path(const ck_slots *p, int i, char *out, size_t cap)
{
    ck_fmt(out, cap, "%s/%s.%d", p->dir, p->tag, i);
}

/* The rank k of a slot name "r<k>-own.<i>" or "r<k>-partner.<i>", or -1. */
static int name_rank(const char *name)
{
    char *end;
    if (name[0] != 'r' || name[1] < '0' || name[1] > '9')
        return -1;
    long k = strtol(name + 1, &end, 10);
    return *end == '-' && k <= INT_MAX ? (int)k : -1;
}

/* A slot name is only ever made by its own rank after this sweep, so the
 * names it removes belong to no live process of this job: removing a name
 * is always safe (a checkpoint that holds the file keeps it under its own
 * name), and it frees the memory of a node-local file system. */
void ck_slots_sweep(const char *local_dir, int rank, int world)
{
    char **nodes, **names, dir[4096], path[4096];
    int nn, n;
    if (ck_list(local_dir, "node", &nodes, &nn))
        return;
    for (int j = 0; j < nn; j++) {
        ck_fmt(dir, sizeof dir, "%s/%s/.slots", local_dir, nodes[j]);
        if (ck_list(dir, "r", &names, &n))
            continue;
        for (int i = 0; i < n; i++) {
            int k = name_rank(names[i]);
            if (k >= 0 && (k == rank || k >= world)) {
                ck_fmt(path, sizeof path, "%s/%s", dir, names[i]);
                unlink(path);
            }
        }
        ck_list_free(names, n);
        /* no rmdir: another rank may have just made its (still empty) pool there */
    }
    ck_list_free(nodes, nn);
}

int ck_slots_init(ck_slots *p, const char *node_dir, const char *tag, size_t len, int max)
{
    memset(p, 0, sizeof *p);
    p->cur = -1;
    p->len = len;
    p->max = max;
    ck_fmt(p->dir, sizeof p->dir, "%s/.slots", node_dir);
    ck_fmt(p->tag, sizeof p->tag, "%s", tag);
    if (!(p->s = calloc((size_t)max, sizeof *p->s)))
        return so_err(SO_ENOMEM, "out of memory");
    return ck_mkdirs(p->dir);
}

/* Held by no checkpoint, and not the slot the checkpoint in flight took.
 * Pruning (another rank's thread) only ever lowers the count: a race makes
 * a slot look held, never free. A file somebody truncated is never reused
 * (a store past its end would be SIGBUS). */
static int is_free(const ck_slots *p, int i)
{
    struct stat st;
    return i != p->cur && fstat(p->s[i].fd, &st) == 0 && st.st_nlink == 1 && (uint64_t)st.st_size == p->len;
}

static int find_free(const ck_slots *p)
{
    for (int i = 0; i < p->n; i++)
        if (is_free(p, i))
            return i;
    return -1;
}

int ck_slots_free_count(const ck_slots *p)
{
    int k = 0;
    for (int i = 0; i < p->n; i++)
        k += is_free(p, i);
    return k;
}

/* A new slot: the file gets its blocks first, so a full disk is an error
 * here rather than a SIGBUS on a page of the mapping; then its pages are
 * mapped in one call and touched (tmpfs zeroes a page, and a VM's host may
 * back it, at the first touch: a cost that must not fall into the snapshot,
 * which training waits for). */
static int add_slot(ck_slots *p, char *err, size_t cap)
{
    char path[4096];
    slot_path(p, p->n, path, sizeof path);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        ck_fmt(err, cap, "cannot create '%s': %s", path, strerror(errno));
        return SO_EIO;
    }
    int e = posix_fallocate(fd, 0, (off_t)p->len);
    void *map = e ? MAP_FAILED : mmap(NULL, p->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        ck_fmt(err, cap, "cannot allocate %zu bytes for '%s': %s", p->len, path, strerror(e ? e : errno));
        close(fd);
        unlink(path);
        return SO_EIO;
    }
    so_mem_populate(map, p->len);
    memset(map, 0, p->len);
    p->s[p->n].fd = fd;
    p->s[p->n].map = map;
    p->n++;
    return 0;
}

void ck_slots_reserve(ck_slots *p)
{
    char err[600];
    if (find_free(p) < 0 && p->n < p->max)
        add_slot(p, err, sizeof err);
}

uint8_t *ck_slots_take(ck_slots *p, char *err, size_t cap)
{
    int i = find_free(p);
    if (i < 0 && p->n == p->max) {
        ck_fmt(err, cap, "%s: all %d checkpoint files of %s are still held by checkpoints", p->dir, p->max, p->tag);
        return NULL;
    }
    if (i < 0 && add_slot(p, err, cap))
        return NULL;
    p->cur = i < 0 ? p->n - 1 : i;
    return p->s[p->cur].map;
}

int ck_slots_commit(ck_slots *p, const char *dir, const char *name, int delay_ms, uint32_t *crc, char *err,
                    size_t cap)
{
    int i = p->cur;
    p->cur = -1;
    if (i < 0) {
        ck_fmt(err, cap, "%s/%s: no checkpoint file was taken for it", dir, name);
        return SO_EIO;
    }
    char src[4096], tmp[4096];
    slot_path(p, i, src, sizeof src);
    ck_fmt(tmp, sizeof tmp, "%s/%s.tmp", dir, name);
    unlink(tmp); /* debris of a killed run */
    if (link(src, tmp) != 0) {
        ck_fmt(err, cap, "cannot create '%s': %s", tmp, strerror(errno));
        return SO_EIO;
    }
    if (delay_ms > 0)
        ck_sleep_ms(delay_ms);
    if (crc)
        *crc = so_crc32c(0, p->s[i].map, p->len);
    return ck_commit_tmp(p->s[i].fd, 0, tmp, dir, name, err, cap);
}

void ck_slots_destroy(ck_slots *p)
{
    for (int i = 0; i < p->n; i++) {
        char path[4096];
        slot_path(p, i, path, sizeof path);
        munmap(p->s[i].map, p->len);
        close(p->s[i].fd);
        unlink(path);
    }
    free(p->s);
    p->s = NULL;
    p->n = 0;
    p->cur = -1;
    rmdir(p->dir); /* fails while another rank of the node still has slots there: fine */
}
