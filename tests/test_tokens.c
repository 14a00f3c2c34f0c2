/* Tests of token data in llm.c's shard format: the parser and every
 * malformed case (one line naming the file), finding and opening a split's
 * shards (sorted, regular files only), the writer, the vocabulary check at
 * set-up and per batch, and the loader's three orders: llm.c's order and
 * llm.c's shuffle checked against an independent Python model of llm.c's
 * DataLoader (tests/llmc_loader_ref.py), random windows by their
 * properties (each window once per epoch across ranks, deterministic,
 * resumable, the same with and without prefetch). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_util.h"

#include "scaleout/data.h"
#include "scaleout/err.h"

static char tmpdir[] = "/tmp/so_test_tokens_XXXXXX";

static int setup_tmp(void **state)
{
    (void)state;
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_tmp(void **state)
{
    (void)state;
    return so_test_rmtree(tmpdir);
}

static void make_dir(char *out, size_t size, const char *name)
{
    snprintf(out, size, "%s/%s", tmpdir, name);
    assert_int_equal(mkdir(out, 0700), 0);
}

/* A shard of n tokens base, base+1, ...: every token says where it is. */
static void write_run(const char *dir, const char *name, uint32_t base, size_t n, int width)
{
    char path[1024];
    uint32_t *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = base + (uint32_t)i;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    assert_int_equal(so_tokens_write(path, v, n, width), 0);
    free(v);
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*len + 1);
    assert_int_equal(fread(b, 1, *len, f), *len);
    fclose(f);
    return b;
}

static void put_le32(uint8_t *p, int32_t v)
{
    uint32_t u = (uint32_t)v;
    p[0] = (uint8_t)u, p[1] = (uint8_t)(u >> 8), p[2] = (uint8_t)(u >> 16), p[3] = (uint8_t)(u >> 24);
}

/* ---- the format ----------------------------------------------------------- */

static void test_write_and_parse(void **state)
{
    (void)state;
    char dir[256], path[512];
    make_dir(dir, sizeof dir, "fmt");
    write_run(dir, "a_train.bin", 65530, 6, 2);
    snprintf(path, sizeof path, "%s/a_train.bin", dir);
    size_t len;
    uint8_t *b = slurp(path, &len);
    /* llm.c's layout, byte by byte: 256 int32 (magic, version, count, zeros), uint16 LE tokens. */
    assert_int_equal(len, 1024 + 12);
    uint8_t hdr[12];
    put_le32(hdr, 20240520), put_le32(hdr + 4, 1), put_le32(hdr + 8, 6);
    assert_memory_equal(b, hdr, 12);
    for (int i = 12; i < 1024; i++)
        assert_int_equal(b[i], 0);
    assert_int_equal(b[1024] | b[1025] << 8, 65530);
    assert_int_equal(b[1034] | b[1035] << 8, 65535);
    int w;
    int64_t n;
    assert_int_equal(so_tokens_parse(b, len, "x", &w, &n), 0);
    assert_int_equal(w, 2);
    assert_int_equal(n, 6);
    free(b);
    /* uint32 (llm.c's llama-3 shards): magic 20240801, version 7. */
    write_run(dir, "b_train.bin", 100000, 3, 4);
    snprintf(path, sizeof path, "%s/b_train.bin", dir);
    b = slurp(path, &len);
    assert_int_equal(len, 1024 + 12);
    assert_int_equal(so_tokens_parse(b, len, "x", &w, &n), 0);
    assert_int_equal(w, 4);
    assert_int_equal(n, 3);
    free(b);
    /* The writer refuses what the format cannot hold. */
    uint32_t big = 70000;
    expect_err(so_tokens_write(path, &big, 1, 2), SO_EINVAL, "uint16");
    expect_err(so_tokens_write(path, &big, 0, 4), SO_EINVAL, path);
    snprintf(path, sizeof path, "%s/no/such/dir/x.bin", tmpdir);
    expect_err(so_tokens_write(path, &big, 1, 4), SO_EIO, path);
}

static void test_parse_bad(void **state)
{
    (void)state;
    uint8_t b[1024 + 20] = {0};
    int w;
    int64_t n;
    put_le32(b, 20240520), put_le32(b + 4, 1), put_le32(b + 8, 10);
    assert_int_equal(so_tokens_parse(b, 1024 + 20, "f.bin", &w, &n), 0);
    expect_err(so_tokens_parse(b, 1023, "f.bin", &w, &n), SO_EFORMAT, "f.bin: 1023 bytes is too short");
    expect_err(so_tokens_parse(b, 1024 + 19, "f.bin", &w, &n), SO_EFORMAT, "f.bin: truncated");
    expect_err(so_tokens_parse(b, 1024, "f.bin", &w, &n), SO_EFORMAT, "truncated");
    put_le32(b + 8, 9);
    expect_err(so_tokens_parse(b, 1024 + 20, "f.bin", &w, &n), SO_EFORMAT, "2 extra");
    put_le32(b + 8, 0);
    expect_err(so_tokens_parse(b, 1024 + 20, "f.bin", &w, &n), SO_EFORMAT, "0 tokens");
    put_le32(b + 8, -5);
    expect_err(so_tokens_parse(b, 1024 + 20, "f.bin", &w, &n), SO_EFORMAT, "-5 tokens");
    put_le32(b + 8, 10);
    put_le32(b + 4, 2);
    expect_err(so_tokens_parse(b, 1024 + 20, "f.bin", &w, &n), SO_EFORMAT, "f.bin: version 2");
    put_le32(b + 4, 1);
    put_le32(b, 20240326); /* an llm.c model file is not a token file */
    expect_err(so_tokens_parse(b, 1024 + 20, "f.bin", &w, &n), SO_EFORMAT, "f.bin: bad magic 20240326");
    put_le32(b, 20240801);
    expect_err(so_tokens_parse(b, 1024 + 20, "f.bin", &w, &n), SO_EFORMAT, "version 1 of a magic-20240801");
    put_le32(b + 4, 7);
    put_le32(b + 8, 5);
    assert_int_equal(so_tokens_parse(b, 1024 + 20, "f.bin", &w, &n), 0);
    assert_int_equal(w, 4);
    /* A count whose byte size overflows 32 bits must not wrap around. */
    put_le32(b + 8, 0x7fffffff);
    expect_err(so_tokens_parse(b, 1024 + 20, "f.bin", &w, &n), SO_EFORMAT, "truncated");
}

/* ---- shards of a split ----------------------------------------------------- */

static void test_open_split(void **state)
{
    (void)state;
    char dir[256], path[512];
    make_dir(dir, sizeof dir, "split");
    write_run(dir, "fineweb_train_000002.bin", 300, 30, 2);
    write_run(dir, "fineweb_train_000001.bin", 200, 20, 2);
    write_run(dir, "fineweb_val_000000.bin", 100, 10, 2);
    write_run(dir, "tiny_train.bin", 400, 40, 2);
    write_run(dir, "train.bin", 500, 50, 2);           /* no NAME_ prefix: not a shard */
    write_run(dir, "x_trainset.bin", 600, 60, 2);      /* another split */
    write_run(dir, ".hidden_train.bin", 700, 70, 2);   /* hidden files are skipped */
    so_tokens *t = NULL;
    assert_int_equal(so_tokens_open(dir, "train", &t), 0);
    assert_int_equal(so_tokens_nshards(t), 3);
    assert_true(strstr(so_tokens_path(t, 0), "fineweb_train_000001.bin"));
    assert_true(strstr(so_tokens_path(t, 1), "fineweb_train_000002.bin"));
    assert_true(strstr(so_tokens_path(t, 2), "tiny_train.bin"));
    assert_int_equal(so_tokens_len(t, 1), 30);
    assert_int_equal(so_tokens_total(t), 90);
    assert_int_equal(so_tokens_width(t), 2);
    assert_int_equal(so_tokens_at(t, 0, 0), 200);
    assert_int_equal(so_tokens_at(t, 2, 39), 439);
    so_tokens_close(t);
    assert_int_equal(so_tokens_open(dir, "val", &t), 0);
    assert_int_equal(so_tokens_nshards(t), 1);
    so_tokens_close(t);
    expect_err(so_tokens_open(dir, "test", &t), SO_EIO, "no token shards");
    assert_null(t);
    snprintf(path, sizeof path, "%s/nope", tmpdir);
    expect_err(so_tokens_open(path, "train", &t), SO_EIO, "nope");

    /* The dataset: sequences of T+1 tokens at stride T; no val split is no error. */
    so_dataset *d = NULL;
    assert_int_equal(so_dataset_tokens(dir, 1, 4, &d), 0);
    assert_int_equal(d->n, 19 / 4 + 29 / 4 + 39 / 4);
    assert_int_equal(d->c * d->h, 1);
    assert_int_equal(d->w, 4);
    assert_int_equal(d->classes, 0);
    assert_null(d->labels);
    assert_string_equal(d->name, "tokens");
    so_dataset_destroy(d);
    make_dir(path, sizeof path, "trainonly");
    write_run(path, "a_train.bin", 0, 10, 2);
    assert_int_equal(so_dataset_tokens(path, 0, 4, &d), 0);
    assert_null(d);
    expect_err(so_dataset_tokens(path, 1, 0, &d), SO_EINVAL, "--seq-len");
}

static void test_open_bad(void **state)
{
    (void)state;
    char dir[256], path[512];
    so_tokens *t = NULL;
    /* A FIFO named like a shard: refused at once, never waited on. */
    make_dir(dir, sizeof dir, "fifo");
    write_run(dir, "a_train.bin", 0, 10, 2);
    snprintf(path, sizeof path, "%s/b_train.bin", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    expect_err(so_tokens_open(dir, "train", &t), SO_EIO, "b_train.bin' is not a regular file (a FIFO)");
    assert_null(t);
    /* A directory named like one. */
    make_dir(dir, sizeof dir, "subdir");
    snprintf(path, sizeof path, "%s/c_train.bin", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    expect_err(so_tokens_open(dir, "train", &t), SO_EIO, "c_train.bin' is not a regular file (a directory)");
    /* Truncated bodies and headers, named by file. */
    make_dir(dir, sizeof dir, "trunc");
    write_run(dir, "a_train.bin", 0, 100, 2);
    write_run(dir, "b_train.bin", 0, 100, 2);
    snprintf(path, sizeof path, "%s/b_train.bin", dir);
    assert_int_equal(truncate(path, 1024 + 150), 0);
    expect_err(so_tokens_open(dir, "train", &t), SO_EFORMAT, "b_train.bin: truncated: header says 100 tokens");
    assert_int_equal(truncate(path, 100), 0);
    expect_err(so_tokens_open(dir, "train", &t), SO_EFORMAT, "b_train.bin: 100 bytes is too short");
    /* Mixed widths in one split. */
    write_run(dir, "b_train.bin", 0, 100, 4);
    expect_err(so_tokens_open(dir, "train", &t), SO_EFORMAT, "mixes token widths");
}

static void test_vocab(void **state)
{
    (void)state;
    char dir[256];
    make_dir(dir, sizeof dir, "vocab");
    write_run(dir, "a_train.bin", 0, 100, 2);
    write_run(dir, "b_train.bin", 1000, 100, 2); /* 1000..1099 */
    so_dataset *d = NULL;
    assert_int_equal(so_dataset_tokens(dir, 1, 8, &d), 0);
    assert_int_equal(so_tokens_check_vocab(d->tokens, 1100), 0);
    assert_int_equal(so_tokens_check_vocab(d->tokens, 65536), 0);
    expect_err(so_tokens_check_vocab(d->tokens, 1050), SO_EFORMAT,
               "b_train.bin: token 1050 at index 50 is not below the model's vocabulary of 1050");
    expect_err(so_tokens_check_vocab(d->tokens, 0), SO_EINVAL, "vocabulary");
    /* Batches check too (what sets too large to scan at start-up rely on):
     * the batch that reads the bad token fails, with and without prefetch. */
    expect_err(so_tokens_check_vocab(d->tokens, 1050), SO_EFORMAT, "b_train.bin");
    for (int prefetch = 0; prefetch <= 2; prefetch += 2) {
        so_loader_config c = {.batch = 1, .shuffle = SO_SHUFFLE_OFF, .prefetch = prefetch, .world = 1};
        so_loader *l = NULL;
        assert_int_equal(so_loader_create(d, &c, &l), 0);
        assert_int_equal(so_loader_steps(l), 99 / 8 + 99 / 8);
        assert_int_equal(so_loader_start_epoch(l, 0), 0);
        const float *x;
        const int32_t *y;
        int n, got, bad = 0, good = 0;
        while ((got = so_loader_next(l, &x, &y, &n)) != 0) {
            if (got < 0) {
                /* The first such batch reads index 50 first; later ones start past it. */
                expect_err(got, SO_EFORMAT, bad ? "b_train.bin: token 10" : "b_train.bin: token 1050 at index 50");
                bad++;
            } else {
                good++;
            }
        }
        /* b's batches 6..12 (tokens 48..56 up) read token 50 or later: the first one that includes it fails,
         * and every later one too (each holds a token >= 1050). */
        assert_int_equal(good, 12 + 6);
        assert_int_equal(bad, 6);
        so_loader_destroy(l);
    }
    so_dataset_destroy(d);
}

/* ---- llm.c's orders against the Python model --------------------------------- */

/* Shards of 500, 1000 and 300 tokens whose values are their global index. */
static void write_llmc_set(char *dir, size_t size)
{
    make_dir(dir, size, "llmc");
    write_run(dir, "set_train_000000.bin", 0, 500, 2);
    write_run(dir, "set_train_000001.bin", 500, 1000, 2);
    write_run(dir, "set_train_000002.bin", 1500, 300, 2);
}

static const char *shard_of(uint32_t v, long *start)
{
    static const char *names[] = {"set_train_000000.bin", "set_train_000001.bin", "set_train_000002.bin"};
    static const uint32_t base[] = {0, 500, 1500};
    int s = v >= 1500 ? 2 : v >= 500 ? 1 : 0;
    *start = (long)(v - base[s]);
    return names[s];
}

/* Runs the Python model for `n` batches into lines[]; returns 0 if python3 is missing. */
static int llmc_reference(const char *dir, int B, int T, int rank, int world, int shuffle, int seed, int n,
                          char (*lines)[64])
{
    const char *src = getenv("SCALEOUT_SOURCE_DIR");
    if (!src || access("/usr/bin/python3", X_OK) != 0)
        return 0;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/llmc_loader_ref.py '%s/*_train_*.bin' %d %d %d %d %d %d %d",
             src, dir, B, T, rank, world, shuffle, seed, n);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    int k = 0;
    for (; k < n && fgets(lines[k], 64, p); k++)
        lines[k][strcspn(lines[k], "\n")] = 0;
    assert_int_equal(pclose(p), 0);
    assert_int_equal(k, n);
    return 1;
}

/* Every batch of the loader: rows are consecutive tokens of one shard, targets
 * the next tokens, and (shard, first token) matches the reference's line. */
static void check_llmc_order(const char *dir, int B, int T, int world, int shuffle, int seed, int prefetch)
{
    so_dataset *d = NULL;
    assert_int_equal(so_dataset_tokens(dir, 1, T, &d), 0);
    int per = world * B * T;
    int steps = 499 / per + 999 / per + 299 / per, epochs = 3, n = steps * epochs;
    char(*want)[64] = calloc((size_t)n, 64);
    for (int rank = 0; rank < world; rank++) {
        if (!llmc_reference(dir, B, T, rank, world, shuffle, seed, n, want)) {
            print_message("python3 missing: llm.c order checked by its invariants only\n");
        }
        so_loader_config c = {.batch = B, .shuffle = shuffle ? SO_SHUFFLE_LLMC : SO_SHUFFLE_OFF,
                              .prefetch = prefetch, .seed = (uint64_t)seed, .rank = rank, .world = world};
        so_loader *l = NULL;
        assert_int_equal(so_loader_create(d, &c, &l), 0);
        assert_int_equal(so_loader_steps(l), steps);
        assert_int_equal(so_loader_sample_labels(l), T);
        for (int e = 0, k = 0; e < epochs; e++) {
            assert_int_equal(so_loader_start_epoch(l, e), 0);
            const float *x;
            const int32_t *y;
            int nb;
            while (so_loader_next(l, &x, &y, &nb) == 1) {
                assert_int_equal(nb, B);
                long start;
                const char *name = shard_of((uint32_t)x[0], &start);
                for (int i = 0; i < B * T; i++) { /* B*T+1 consecutive tokens of one shard */
                    assert_int_equal((long)x[i], (long)x[0] + i);
                    assert_int_equal(y[i], (int32_t)x[0] + i + 1);
                }
                assert_int_equal(start % per, rank * B * T);
                char line[64];
                snprintf(line, sizeof line, "%s %ld", name, start);
                if (want[0][0])
                    assert_string_equal(line, want[k]);
                k++;
            }
            assert_int_equal(k, (e + 1) * steps);
        }
        so_loader_destroy(l);
    }
    free(want);
    so_dataset_destroy(d);
}

static void test_llmc_order(void **state)
{
    (void)state;
    char dir[256];
    write_llmc_set(dir, sizeof dir);
    check_llmc_order(dir, 2, 8, 1, 0, 42, 0);
    check_llmc_order(dir, 2, 8, 3, 0, 42, 2);  /* 3 ranks: 499/48, 999/48, 299/48 batches */
    check_llmc_order(dir, 4, 16, 2, 0, 42, 0); /* shard 3 too short for one batch of 128: skipped */
}

static void test_llmc_shuffle(void **state)
{
    (void)state;
    char dir[256];
    snprintf(dir, sizeof dir, "%s/llmc", tmpdir);
    struct stat st;
    if (stat(dir, &st) != 0)
        write_llmc_set(dir, sizeof dir);
    check_llmc_order(dir, 2, 8, 1, 1, 42, 0);
    check_llmc_order(dir, 2, 8, 3, 1, 42, 3);
    check_llmc_order(dir, 1, 4, 2, 1, 7, 0);
}

/* Resuming llm.c's shuffle mid-run: epochs out of order give the same batches. */
static void test_llmc_shuffle_epochs(void **state)
{
    (void)state;
    char dir[256];
    snprintf(dir, sizeof dir, "%s/llmc", tmpdir);
    struct stat st;
    if (stat(dir, &st) != 0)
        write_llmc_set(dir, sizeof dir);
    so_dataset *d = NULL;
    assert_int_equal(so_dataset_tokens(dir, 1, 8, &d), 0);
    so_loader_config c = {.batch = 2, .shuffle = SO_SHUFFLE_LLMC, .seed = 42, .world = 1};
    so_loader *a = NULL, *b = NULL;
    assert_int_equal(so_loader_create(d, &c, &a), 0);
    assert_int_equal(so_loader_create(d, &c, &b), 0);
    int steps = so_loader_steps(a);
    float *first = malloc((size_t)steps * 3 * sizeof *first);
    for (int e = 0; e < 3; e++) { /* a: epochs 0, 1, 2 in order */
        assert_int_equal(so_loader_start_epoch(a, e), 0);
        const float *x;
        const int32_t *y;
        int n;
        for (int s = 0; so_loader_next(a, &x, &y, &n) == 1; s++)
            first[e * steps + s] = x[0];
    }
    int order[] = {2, 0, 1, 2};
    for (int k = 0; k < 4; k++) { /* b: 2, 0, 1, 2 */
        int e = order[k];
        assert_int_equal(so_loader_start_epoch(b, e), 0);
        const float *x;
        const int32_t *y;
        int n;
        for (int s = 0; so_loader_next(b, &x, &y, &n) == 1; s++)
            assert_true(first[e * steps + s] == x[0]);
    }
    free(first);
    so_loader_destroy(a);
    so_loader_destroy(b);
    so_dataset_destroy(d);
}

/* ---- random windows ------------------------------------------------------------ */

/* Collects the first token of every window of an epoch over all ranks. */
static void collect_epoch(const so_dataset *d, int B, int world, int epoch, uint64_t seed, int prefetch,
                          uint32_t *firsts, int *count)
{
    int T = d->w;
    *count = 0;
    for (int r = 0; r < world; r++) {
        so_loader_config c = {.batch = B, .shuffle = SO_SHUFFLE_ON, .prefetch = prefetch, .seed = seed, .rank = r,
                              .world = world};
        so_loader *l = NULL;
        assert_int_equal(so_loader_create(d, &c, &l), 0);
        assert_int_equal(so_loader_start_epoch(l, epoch), 0);
        const float *x;
        const int32_t *y;
        int n;
        while (so_loader_next(l, &x, &y, &n) == 1) {
            assert_int_equal(n, B);
            for (int b = 0; b < B; b++) {
                for (int t = 0; t < T; t++) { /* a window of T+1 consecutive tokens */
                    assert_int_equal((long)x[b * T + t], (long)x[b * T] + t);
                    assert_int_equal(y[b * T + t], (int32_t)x[b * T] + t + 1);
                }
                firsts[(*count)++] = (uint32_t)x[b * T];
            }
        }
        so_loader_destroy(l);
    }
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static void test_random_windows(void **state)
{
    (void)state;
    char dir[256];
    make_dir(dir, sizeof dir, "windows");
    write_run(dir, "w_train_0.bin", 0, 1003, 2);     /* 125 windows of 8+1, 2 spare tokens */
    write_run(dir, "w_train_1.bin", 2000, 41, 2);    /* 5 windows, no spare */
    write_run(dir, "w_train_2.bin", 3000, 5, 2);     /* shorter than one window: none */
    write_run(dir, "w_train_3.bin", 4000, 2000, 2);  /* 249 windows, 7 spare */
    so_dataset *d = NULL;
    assert_int_equal(so_dataset_tokens(dir, 1, 8, &d), 0);
    assert_int_equal(d->n, 125 + 5 + 249);
    int B = 4, world = 3, per_epoch = (379 / world / B) * world * B;
    uint32_t *a = malloc(400 * sizeof *a), *b = malloc(400 * sizeof *b), *c = malloc(400 * sizeof *c);
    int na, nb, nc;
    collect_epoch(d, B, world, 0, 1, 0, a, &na);
    assert_int_equal(na, per_epoch);
    /* Same (seed, epoch): the same windows in the same order, with or without prefetch. */
    collect_epoch(d, B, world, 0, 1, 3, b, &nb);
    assert_memory_equal(a, b, (size_t)na * sizeof *a);
    /* Another epoch or seed: another order. */
    collect_epoch(d, B, world, 1, 1, 0, c, &nc);
    assert_true(memcmp(a, c, (size_t)na * sizeof *a) != 0);
    collect_epoch(d, B, world, 0, 2, 0, b, &nb);
    assert_true(memcmp(a, b, (size_t)na * sizeof *a) != 0);
    /* No window twice in an epoch (across ranks), each on its shard's grid: offset + j*T. */
    for (int e = 0; e < 4; e++) {
        collect_epoch(d, B, world, e, 1, 0, a, &na);
        qsort(a, (size_t)na, sizeof *a, cmp_u32);
        int64_t off[5] = {-1, -1, -1, -1, -1};
        for (int k = 0; k < na; k++) {
            if (k)
                assert_true(a[k] > a[k - 1]);
            int s = a[k] >= 4000 ? 3 : a[k] >= 2000 ? 1 : 0;
            uint32_t base = s == 3 ? 4000 : s == 1 ? 2000 : 0;
            int64_t o = (a[k] - base) % 8;
            if (off[s] < 0)
                off[s] = o;
            assert_int_equal(o, off[s]);
            uint32_t len = s == 3 ? 2000 : s == 1 ? 41 : 1003;
            assert_true(a[k] - base + 9 <= len);
        }
        assert_int_equal(off[1], 0);   /* no spare tokens: no shift */
        assert_true(off[0] <= 2);
    }
    free(a);
    free(b);
    free(c);
    so_dataset_destroy(d);
}

/* A resumed run that skips s batches of an epoch sees what an uninterrupted one does. */
static void test_random_resume(void **state)
{
    (void)state;
    char dir[256];
    make_dir(dir, sizeof dir, "resume");
    write_run(dir, "r_train.bin", 0, 5000, 2);
    so_dataset *d = NULL;
    assert_int_equal(so_dataset_tokens(dir, 1, 16, &d), 0);
    so_loader_config c = {.batch = 3, .shuffle = SO_SHUFFLE_ON, .prefetch = 2, .seed = 9, .rank = 1, .world = 2};
    so_loader *a = NULL, *b = NULL;
    assert_int_equal(so_loader_create(d, &c, &a), 0);
    c.prefetch = 0;
    assert_int_equal(so_loader_create(d, &c, &b), 0);
    const float *x, *xb;
    const int32_t *y, *yb;
    int n;
    assert_int_equal(so_loader_start_epoch(a, 0), 0);  /* a: epoch 0 to step 5, then epoch 1 */
    for (int s = 0; s < 5; s++)
        assert_int_equal(so_loader_next(a, &x, &y, &n), 1);
    assert_int_equal(so_loader_start_epoch(a, 1), 0);
    assert_int_equal(so_loader_start_epoch(b, 1), 0);
    for (int s = 0; s < so_loader_steps(a); s++) {
        assert_int_equal(so_loader_next(a, &x, &y, &n), 1);
        assert_int_equal(so_loader_next(b, &xb, &yb, &n), 1);
        assert_memory_equal(x, xb, 3 * 16 * sizeof *x);
        assert_memory_equal(y, yb, 3 * 16 * sizeof *y);
    }
    assert_int_equal(so_loader_next(a, &x, &y, &n), 0);
    so_loader_destroy(a);
    so_loader_destroy(b);
    so_dataset_destroy(d);
}

static void test_loader_limits(void **state)
{
    (void)state;
    char dir[256];
    make_dir(dir, sizeof dir, "limits");
    write_run(dir, "l_train.bin", 0, 200, 2);
    so_dataset *d = NULL;
    assert_int_equal(so_dataset_tokens(dir, 1, 10, &d), 0);
    so_loader *l = NULL;
    /* max_steps: evaluation on the start of a split (llm.c's val_num_batches). */
    so_loader_config c = {.batch = 2, .shuffle = SO_SHUFFLE_OFF, .world = 1, .max_steps = 3};
    assert_int_equal(so_loader_create(d, &c, &l), 0);
    assert_int_equal(so_loader_steps(l), 3);
    so_loader_destroy(l);
    /* Not one batch for each of 20 ranks: a clear error naming the file. */
    c = (so_loader_config){.batch = 2, .shuffle = SO_SHUFFLE_OFF, .world = 20, .rank = 3};
    expect_err(so_loader_create(d, &c, &l), SO_EINVAL, "l_train.bin: 200 tokens");
    c.shuffle = SO_SHUFFLE_ON;
    expect_err(so_loader_create(d, &c, &l), SO_EINVAL, "no batch of 2 sequences");
    c = (so_loader_config){.batch = 2, .shuffle = 7, .world = 1};
    expect_err(so_loader_create(d, &c, &l), SO_EINVAL, "order");
    assert_null(l);
    so_dataset_destroy(d);
}

/* Synthetic tokens: in memory, below the vocabulary, deterministic in the seed. */
static void test_synthetic(void **state)
{
    (void)state;
    so_dataset *a = NULL, *b = NULL;
    assert_int_equal(so_dataset_synthetic_tokens(10000, 50257, 32, 5, &a), 0);
    assert_int_equal(so_dataset_synthetic_tokens(10000, 50257, 32, 5, &b), 0);
    assert_int_equal(a->w, 32);
    assert_int_equal(a->n, 9999 / 32);
    assert_int_equal(so_tokens_total(a->tokens), 10000);
    uint32_t max = 0;
    for (int64_t i = 0; i < 10000; i++) {
        uint32_t v = so_tokens_at(a->tokens, 0, i);
        assert_int_equal(v, so_tokens_at(b->tokens, 0, i));
        max = v > max ? v : max;
    }
    assert_true(max < 50257 && max > 50000);
    assert_int_equal(so_tokens_check_vocab(a->tokens, 50257), 0);
    so_loader_config c = {.batch = 4, .shuffle = SO_SHUFFLE_ON, .world = 1};
    so_loader *l = NULL;
    assert_int_equal(so_loader_create(a, &c, &l), 0);
    assert_int_equal(so_loader_start_epoch(l, 0), 0);
    const float *x;
    const int32_t *y;
    int n;
    assert_int_equal(so_loader_next(l, &x, &y, &n), 1);
    so_loader_destroy(l);
    so_dataset_destroy(a);
    so_dataset_destroy(b);
    /* A vocabulary over 65536 needs uint32 tokens. */
    assert_int_equal(so_dataset_synthetic_tokens(1000, 100000, 8, 1, &a), 0);
    assert_int_equal(so_tokens_width(a->tokens), 4);
    so_dataset_destroy(a);
    expect_err(so_dataset_synthetic_tokens(8, 10, 8, 1, &a), SO_EINVAL, "synthetic tokens");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_and_parse), cmocka_unit_test(test_parse_bad),
        cmocka_unit_test(test_open_split),      cmocka_unit_test(test_open_bad),
        cmocka_unit_test(test_vocab),           cmocka_unit_test(test_llmc_order),
        cmocka_unit_test(test_llmc_shuffle),    cmocka_unit_test(test_llmc_shuffle_epochs),
        cmocka_unit_test(test_random_windows),  cmocka_unit_test(test_random_resume),
        cmocka_unit_test(test_loader_limits),   cmocka_unit_test(test_synthetic),
    };
    return cmocka_run_group_tests(tests, setup_tmp, teardown_tmp);
}
