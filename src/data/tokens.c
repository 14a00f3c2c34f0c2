/* Token shards in llm.c's format (docs/FORMATS.md): a 1024-byte header of 256
 * little-endian int32 (magic, version, token count), then the tokens, uint16
 * (GPT-2) or uint32 (llama-3). A so_tokens is the sorted set of one split's
 * shards, each validated and mapped read-only: FineWeb shards hold 100M
 * tokens, so nothing is read whole; pages come in as batches touch them. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data_internal.h"
#include "scaleout/data.h"
#include "scaleout/err.h"
#include "scaleout/file.h"
#include "scaleout/rng.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "token shards are little-endian and read in place: port so_tokens_at and the loader's copies first"
#endif

#define MAX_SHARDS 100000
/* Sets above this many tokens are not scanned whole by so_tokens_check_vocab
 * (FineWeb-100B is 200 GB; every rank reading it at start-up is not an
 * option); their tokens are checked as batches read them instead. */
#define VOCAB_SCAN_MAX_TOKENS ((int64_t)1 << 31)
/* The scan drops its pages from this process's resident set every chunk:
 * they stay in the page cache, but do not inflate the peak RSS figure. */
#define SCAN_CHUNK_BYTES ((size_t)64 << 20)

typedef struct {
    char *path;
    const uint8_t *map;   /* the whole file, PROT_READ (or a heap copy: in_memory) */
    size_t map_len;
    int in_memory;        /* map is malloc'd (so_tokens_from_ids), not mapped */
    int64_t len;          /* tokens */
} shard;

struct so_tokens {
    shard *s;
    int n;                /* shards */
    int width;            /* bytes per token: 2 or 4 */
    int64_t total;        /* tokens over all shards */
    int vocab;            /* > 0: every token read must be below it (so_tokens_check_vocab) */
};

static int32_t le32(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

int so_tokens_parse(const uint8_t *buf, size_t len, const char *what, int *width, int64_t *count)
{
    if (len < SO_TOKENS_HEADER_BYTES)
        return so_err(SO_EFORMAT, "%s: %zu bytes is too short for a token shard header (%d bytes)", what, len,
                      SO_TOKENS_HEADER_BYTES);
    int32_t magic = le32(buf), version = le32(buf + 4), n = le32(buf + 8);
    int w;
    if (magic == SO_TOKENS_MAGIC_U16)
        w = 2;
    else if (magic == SO_TOKENS_MAGIC_U32)
        w = 4;
    else
        return so_err(SO_EFORMAT, "%s: bad magic %d, expected %d (llm.c token shard, uint16) or %d (uint32)", what,
                      magic, SO_TOKENS_MAGIC_U16, SO_TOKENS_MAGIC_U32);
    int want = w == 2 ? SO_TOKENS_VERSION_U16 : SO_TOKENS_VERSION_U32;
    if (version != want)
        return so_err(SO_EFORMAT, "%s: version %d of a magic-%d token shard, expected %d", what, version, magic, want);
    if (n <= 0)
        return so_err(SO_EFORMAT, "%s: header says %d tokens; a shard holds at least one", what, n);
    uint64_t body = len - SO_TOKENS_HEADER_BYTES, need = (uint64_t)n * (uint64_t)w;
    if (body < need)
        return so_err(SO_EFORMAT, "%s: truncated: header says %d tokens (%llu bytes) but %llu bytes follow", what, n,
                      (unsigned long long)need, (unsigned long long)body);
    if (body > need)
        return so_err(SO_EFORMAT, "%s: header says %d tokens (%llu bytes) but %llu bytes follow (%llu extra)", what,
                      n, (unsigned long long)need, (unsigned long long)body, (unsigned long long)(body - need));
    *width = w;
    *count = n;
    return 0;
}

/* ---- opening ------------------------------------------------------------------ */

/* Maps path read-only once so_file_open_read (O_NONBLOCK, fstat) has said
 * it is a regular file: a FIFO named like a shard must not block us. */
static int map_file(const char *path, const uint8_t **map, size_t *len)
{
    int fd;
    uint64_t size;
    int rc = so_file_open_read(path, &fd, &size);
    if (rc)
        return rc;
    if (size < SO_TOKENS_HEADER_BYTES || size > SIZE_MAX)
        rc = so_err(SO_EFORMAT, "%s: %llu bytes is too short for a token shard header (%d bytes)", path,
                    (unsigned long long)size, SO_TOKENS_HEADER_BYTES);
    if (!rc) {
        void *p = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED)
            rc = so_err(SO_EIO, "%s: cannot map %llu bytes: %s", path, (unsigned long long)size, strerror(errno));
        else
            *map = p, *len = (size_t)size;
    }
    close(fd);
    return rc;
}

static int open_shard(so_tokens *t, const char *path)
{
    shard *s = &t->s[t->n];
    int w, rc;
    int64_t count;
    if (!(s->path = strdup(path)))
        return so_err(SO_ENOMEM, "%s: out of memory", path);
    t->n++; /* owned from here: so_tokens_close frees it on failure */
    if ((rc = map_file(path, &s->map, &s->map_len)))
        return rc;
    if ((rc = so_tokens_parse(s->map, s->map_len, path, &w, &count)))
        return rc;
    if (t->n > 1 && w != t->width)
        return so_err(SO_EFORMAT, "%s: uint%d tokens, but %s holds uint%d: one split mixes token widths", path,
                      8 * w, t->s[0].path, 8 * t->width);
    t->width = w;
    s->len = count;
    t->total += count;
    return 0;
}

int so_tokens_open_paths(const char *const *paths, int n, so_tokens **out)
{
    *out = NULL;
    if (n < 1 || n > MAX_SHARDS)
        return so_err(SO_EINVAL, "token data: %d shards (1..%d)", n, MAX_SHARDS);
    so_tokens *t = calloc(1, sizeof *t);
    if (!t || !(t->s = calloc((size_t)n, sizeof *t->s))) {
        free(t);
        return so_err(SO_ENOMEM, "token data: out of memory for %d shards", n);
    }
    int rc = 0;
    for (int i = 0; i < n && !rc; i++)
        rc = open_shard(t, paths[i]);
    if (rc)
        so_tokens_close(t);
    else
        *out = t;
    return rc;
}

void so_tokens_close(so_tokens *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->n; i++) {
        if (t->s[i].in_memory)
            free((void *)t->s[i].map);
        else if (t->s[i].map)
            munmap((void *)t->s[i].map, t->s[i].map_len);
        free(t->s[i].path);
    }
    free(t->s);
    free(t);
}

/* One shard in memory: the file's bytes are built in a heap buffer, so
 * everything downstream (loader, vocabulary check) is the same code. */
int so_tokens_from_ids(const uint32_t *ids, int64_t n, int width, const char *name, so_tokens **out)
{
    *out = NULL;
    if ((width != 2 && width != 4) || n < 1 || n > INT32_MAX)
        return so_err(SO_EINVAL, "%s: %lld tokens of %d bytes is not a shard", name, (long long)n, width);
    size_t len = SO_TOKENS_HEADER_BYTES + (size_t)n * (size_t)width;
    so_tokens *t = calloc(1, sizeof *t);
    uint8_t *buf = malloc(len);
    if (!t || !buf || !(t->s = calloc(1, sizeof *t->s)) || !(t->s[0].path = strdup(name))) {
        if (t)
            free(t->s);
        free(t);
        free(buf);
        return so_err(SO_ENOMEM, "%s: out of memory for %lld tokens", name, (long long)n);
    }
    int32_t hdr[SO_TOKENS_HEADER_BYTES / 4] = {width == 2 ? SO_TOKENS_MAGIC_U16 : SO_TOKENS_MAGIC_U32,
                                               width == 2 ? SO_TOKENS_VERSION_U16 : SO_TOKENS_VERSION_U32,
                                               (int32_t)n};
    memcpy(buf, hdr, sizeof hdr);
    for (int64_t i = 0; i < n; i++) {
        if (width == 2) {
            uint16_t v = (uint16_t)ids[i];
            memcpy(buf + SO_TOKENS_HEADER_BYTES + 2 * i, &v, 2);
        } else {
            memcpy(buf + SO_TOKENS_HEADER_BYTES + 4 * i, &ids[i], 4);
        }
    }
    t->n = 1;
    t->width = width;
    t->total = n;
    t->s[0] = (shard){t->s[0].path, buf, len, 1, n};
    *out = t;
    return 0;
}

/* ---- finding a split's shards ----------------------------------------------- */

typedef struct {
    char **v;
    int n, cap;
} name_list;

static void names_free(name_list *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
}

static int names_add(name_list *l, const char *dir, const char *name)
{
    if (l->n == MAX_SHARDS)
        return so_err(SO_EINVAL, "%s: more than %d token shards", dir, MAX_SHARDS);
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        char **v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v)
            return so_err(SO_ENOMEM, "%s: out of memory listing shards", dir);
        l->v = v, l->cap = cap;
    }
    size_t len = strlen(dir) + strlen(name) + 2;
    if (len > PATH_MAX || !(l->v[l->n] = malloc(len)))
        return so_err(len > PATH_MAX ? SO_EIO : SO_ENOMEM, "%s/%s: path too long or out of memory", dir, name);
    snprintf(l->v[l->n++], len, "%s/%s", dir, name);
    return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The names llm.c's scripts write: NAME_split.bin (tinyshakespeare,
 * tinystories) and NAME_split_NNNNNN.bin (fineweb). */
static int is_shard_name(const char *name, const char *split)
{
    char one[64], many[64];
    snprintf(one, sizeof one, "*_%s.bin", split);
    snprintf(many, sizeof many, "*_%s_*.bin", split);
    return fnmatch(one, name, 0) == 0 || fnmatch(many, name, 0) == 0;
}

int so_tokens_find(const char *dir, const char *split, char ***paths, int *n)
{
    *paths = NULL;
    *n = 0;
    if (!split || strlen(split) > 32)
        return so_err(SO_EINVAL, "token data: bad split name");
    DIR *d = opendir(dir);
    if (!d)
        return so_err(SO_EIO, "%s: %s", dir, strerror(errno));
    name_list l = {0};
    int rc = 0;
    for (struct dirent *e; !rc && (e = readdir(d));)
        if (e->d_name[0] != '.' && is_shard_name(e->d_name, split))
            rc = names_add(&l, dir, e->d_name);
    closedir(d);
    if (rc) {
        names_free(&l);
        return rc;
    }
    /* glob's order in the C locale, which llm.c's loader follows (qsort
     * must not see the NULL of an empty list). */
    if (l.n > 1)
        qsort(l.v, (size_t)l.n, sizeof *l.v, by_name);
    *paths = l.v;
    *n = l.n;
    return 0;
}

void so_tokens_free_paths(char **paths, int n)
{
    name_list l = {paths, n, n};
    names_free(&l);
}

int so_tokens_open(const char *dir, const char *split, so_tokens **out)
{
    char **paths;
    int n;
    *out = NULL;
    int rc = so_tokens_find(dir, split, &paths, &n);
    if (rc)
        return rc;
    if (n == 0)
        rc = so_err(SO_EIO, "%s: no token shards *_%s.bin or *_%s_*.bin", dir, split, split);
    else
        rc = so_tokens_open_paths((const char *const *)paths, n, out);
    so_tokens_free_paths(paths, n);
    return rc;
}

/* ---- access ----------------------------------------------------------------- */

int so_tokens_nshards(const so_tokens *t) { return t ? t->n : 0; }
const char *so_tokens_path(const so_tokens *t, int s) { return t->s[s].path; }
int64_t so_tokens_len(const so_tokens *t, int s) { return t->s[s].len; }
int64_t so_tokens_total(const so_tokens *t) { return t ? t->total : 0; }
int so_tokens_width(const so_tokens *t) { return t->width; }
int so_tokens_vocab(const so_tokens *t) { return t->vocab; }

const void *so_tokens_data(const so_tokens *t, int s) { return t->s[s].map + SO_TOKENS_HEADER_BYTES; }

uint32_t so_tokens_at(const so_tokens *t, int s, int64_t i)
{
    const uint8_t *p = (const uint8_t *)so_tokens_data(t, s) + (size_t)i * (size_t)t->width;
    if (t->width == 2) {
        uint16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Index of the first token in [0, n) that is >= vocab, or -1. */
static int64_t first_over(const void *data, int width, int64_t n, uint32_t vocab)
{
    uint32_t max = 0;
    if (width == 2) {
        const uint16_t *v = data;
        for (int64_t i = 0; i < n; i++)
            max = v[i] > max ? v[i] : max;
    } else {
        const uint32_t *v = data;
        for (int64_t i = 0; i < n; i++)
            max = v[i] > max ? v[i] : max;
    }
    if (max < vocab)
        return -1;
    for (int64_t i = 0;; i++) /* rare: find where, for the message */
        if ((width == 2 ? ((const uint16_t *)data)[i] : ((const uint32_t *)data)[i]) >= vocab)
            return i;
}

int so_tokens_bad_token(const so_tokens *t, int s, int64_t start, int64_t n)
{
    if (t->vocab <= 0)
        return 0;
    const uint8_t *p = (const uint8_t *)so_tokens_data(t, s) + (size_t)start * (size_t)t->width;
    int64_t i = first_over(p, t->width, n, (uint32_t)t->vocab);
    if (i < 0)
        return 0;
    return so_err(SO_EFORMAT, "%s: token %u at index %lld is not below the model's vocabulary of %d", t->s[s].path,
                  so_tokens_at(t, s, start + i), (long long)(start + i), t->vocab);
}

/* Scans shard s in chunks, dropping each chunk's pages from the resident set. */
static int scan_shard(const so_tokens *t, int s)
{
    int64_t per = (int64_t)(SCAN_CHUNK_BYTES / (size_t)t->width);
    int rc = 0;
    for (int64_t i = 0; i < t->s[s].len && !rc; i += per) {
        int64_t n = t->s[s].len - i < per ? t->s[s].len - i : per;
        rc = so_tokens_bad_token(t, s, i, n);
        /* Whole pages inside the chunk only: never those of a neighbour chunk still to scan. */
        uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
        uintptr_t a = (uintptr_t)so_tokens_data(t, s) + (uintptr_t)i * (uintptr_t)t->width;
        uintptr_t lo = (a + pg - 1) & ~(pg - 1), hi = (a + (uintptr_t)n * (uintptr_t)t->width) & ~(pg - 1);
        if (hi > lo)
            madvise((void *)lo, hi - lo, MADV_DONTNEED);
    }
    return rc;
}

int so_tokens_check_vocab(so_tokens *t, int vocab)
{
    if (!t || vocab < 1)
        return so_err(SO_EINVAL, "token data: vocabulary %d is not positive", vocab);
    t->vocab = vocab;
    if ((t->width == 2 && vocab > 65535) || t->total > VOCAB_SCAN_MAX_TOKENS)
        return 0; /* nothing can be out of range, or too much to read now: batches check as they read */
    int rc = 0;
    for (int s = 0; s < t->n && !rc; s++)
        rc = scan_shard(t, s);
    return rc;
}

/* ---- writing ---------------------------------------------------------------- */

static int write_all(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* The tokens as `width`-byte little-endian values, in chunks so a large
 * shard needs no second copy in memory. */
static int write_body(int fd, const uint32_t *ids, size_t n, int width)
{
    uint8_t buf[1 << 16];
    size_t per = sizeof buf / (size_t)width;
    for (size_t i = 0; i < n; i += per) {
        size_t k = n - i < per ? n - i : per;
        for (size_t j = 0; j < k; j++) {
            if (width == 2) {
                uint16_t v = (uint16_t)ids[i + j];
                memcpy(buf + 2 * j, &v, 2);
            } else {
                memcpy(buf + 4 * j, &ids[i + j], 4);
            }
        }
        if (write_all(fd, buf, k * (size_t)width))
            return -1;
    }
    return 0;
}

int so_tokens_write(const char *path, const uint32_t *ids, size_t n, int width)
{
    if (width != 2 && width != 4)
        return so_err(SO_EINVAL, "%s: token width %d is not 2 or 4 bytes", path, width);
    if (n < 1 || n > INT32_MAX)
        return so_err(SO_EINVAL, "%s: %zu tokens; a shard holds 1..%d (its header count is an int32)", path, n,
                      INT32_MAX);
    for (size_t i = 0; width == 2 && i < n; i++)
        if (ids[i] > 65535)
            return so_err(SO_EINVAL, "%s: token %u at index %zu does not fit uint16", path, ids[i], i);
    int32_t hdr[SO_TOKENS_HEADER_BYTES / 4] = {width == 2 ? SO_TOKENS_MAGIC_U16 : SO_TOKENS_MAGIC_U32,
                                               width == 2 ? SO_TOKENS_VERSION_U16 : SO_TOKENS_VERSION_U32,
                                               (int32_t)n};
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return so_err(SO_EIO, "%s: %s", path, strerror(errno));
    int bad = write_all(fd, hdr, sizeof hdr) || write_body(fd, ids, n, width);
    int err = errno;
    if (close(fd) != 0 && !bad)
        bad = 1, err = errno;
    if (bad) {
        unlink(path);
        return so_err(SO_EIO, "%s: write failed: %s", path, strerror(err));
    }
    return 0;
}

/* ---- the dataset ------------------------------------------------------------ */

/* A token dataset's fields (data.h): one sequence is 1x1xT. */
static void token_dataset_shape(so_dataset *d, so_tokens *t, int seq_len)
{
    int64_t windows = tok_plan_windows(t, seq_len);
    d->n = windows > INT_MAX ? INT_MAX : (int)windows;
    d->c = d->h = 1;
    d->w = seq_len;
    d->std[0] = d->std[1] = d->std[2] = 1.0f;
    d->tokens = t;
}

int so_dataset_tokens(const char *dir, int train, int seq_len, so_dataset **out)
{
    const char *split = train ? "train" : "val";
    *out = NULL;
    if (!dir)
        return so_err(SO_EINVAL, "--data-dir: token data needs a directory");
    if (seq_len < 1 || seq_len > (1 << 24))
        return so_err(SO_EINVAL, "--seq-len: %d is not in 1..%d", seq_len, 1 << 24);
    char **paths;
    int n, rc = so_tokens_find(dir, split, &paths, &n);
    if (rc)
        return rc;
    so_tokens *t = NULL;
    if (n == 0) {
        so_tokens_free_paths(paths, n);
        return train ? so_err(SO_EIO, "%s: no token shards *_train.bin or *_train_*.bin", dir) : 0;
    }
    rc = so_tokens_open_paths((const char *const *)paths, n, &t);
    so_tokens_free_paths(paths, n);
    if (rc)
        return rc;
    so_dataset *d = calloc(1, sizeof *d);
    if (!d) {
        so_tokens_close(t);
        return so_err(SO_ENOMEM, "token data: out of memory");
    }
    snprintf(d->name, sizeof d->name, "tokens");
    token_dataset_shape(d, t, seq_len);
    *out = d;
    return 0;
}

int so_dataset_synthetic_tokens(int64_t ntokens, int vocab, int seq_len, uint64_t seed, so_dataset **out)
{
    *out = NULL;
    if (vocab < 1 || seq_len < 1 || seq_len > (1 << 24) || ntokens < (int64_t)seq_len + 1 || ntokens > INT32_MAX)
        return so_err(SO_EINVAL, "synthetic tokens: %lld tokens, vocabulary %d, sequences of %d: not a data set",
                      (long long)ntokens, vocab, seq_len);
    uint32_t *ids = malloc((size_t)ntokens * sizeof *ids);
    if (!ids)
        return so_err(SO_ENOMEM, "synthetic tokens: out of memory for %lld tokens", (long long)ntokens);
    so_rng r;
    so_rng_seed(&r, seed);
    for (int64_t i = 0; i < ntokens; i++)
        ids[i] = (uint32_t)so_rng_below(&r, (uint64_t)vocab);
    so_tokens *t = NULL;
    int rc = so_tokens_from_ids(ids, ntokens, vocab <= 65536 ? 2 : 4, "synthetic tokens", &t);
    free(ids);
    so_dataset *d = NULL;
    if (!rc && !(d = calloc(1, sizeof *d)))
        rc = so_err(SO_ENOMEM, "synthetic tokens: out of memory");
    if (rc) {
        so_tokens_close(t);
        return rc;
    }
    snprintf(d->name, sizeof d->name, "synthetic-tokens");
    token_dataset_shape(d, t, seq_len);
    *out = d;
    return 0;
}
