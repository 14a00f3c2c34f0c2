/* Tests of the data module: IDX and CIFAR parsing (plain and gzip, every
 * malformed case returns the right code and names the file), the real
 * Fashion-MNIST when installed, and the loader's shuffling, sharding,
 * normalisation, augmentation and prefetching. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "test_util.h"

#include "scaleout/data.h"
#include "scaleout/err.h"
#include "scaleout/timer.h"

static char tmpdir[] = "/tmp/so_test_data_XXXXXX";
static const char *FMNIST_DIR = "/usr/share/datasets/fashion-mnist";

/* ---- helpers: files ----------------------------------------------------- */

/* Checks rc == code and that the error message mentions `needle` (a file name). */
static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

static void write_bytes(const char *path, const uint8_t *buf, size_t len, int gz)
{
    if (gz) {
        gzFile f = gzopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(gzwrite(f, buf, (unsigned)len), (int)len);
        assert_int_equal(gzclose(f), Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(buf, 1, len, f), len);
        assert_int_equal(fclose(f), 0);
    }
}

static uint8_t *slurp_raw(const char *path, size_t *len)
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

/* Pixel value of image i at p, and its label: known patterns to check decoding. */
static uint8_t pix_of(int i, int p) { return (uint8_t)(i * 31 + p * 7); }
static uint8_t label_of(int i) { return (uint8_t)(i % 10); }

/* One IDX split and the ways to break it. */
typedef struct {
    int n_img, n_lab, h, w;
    uint32_t img_magic, lab_magic; /* 0 = correct */
    int img_cut, lab_cut;          /* bytes removed from the end */
    int img_extra;                 /* trailing bytes appended */
    int bad_label;                 /* set label 1 to 10 */
    int gz, corrupt_gz, cut_gz;    /* cut_gz: bytes cut from the compressed file */
} idx_spec;

static void write_idx_split(const char *dir, const char *split, const idx_spec *s)
{
    char path[512];
    size_t ilen = 16 + (size_t)s->n_img * s->h * s->w, llen = 8 + (size_t)s->n_lab;
    uint8_t *img = calloc(ilen + (size_t)s->img_extra + 1, 1), *lab = calloc(llen + 1, 1);
    put_be32(img, s->img_magic ? s->img_magic : 0x803);
    put_be32(img + 4, (uint32_t)s->n_img), put_be32(img + 8, (uint32_t)s->h), put_be32(img + 12, (uint32_t)s->w);
    for (int i = 0; i < s->n_img; i++)
        for (int p = 0; p < s->h * s->w; p++)
            img[16 + (size_t)i * s->h * s->w + p] = pix_of(i, p);
    put_be32(lab, s->lab_magic ? s->lab_magic : 0x801);
    put_be32(lab + 4, (uint32_t)s->n_lab);
    for (int i = 0; i < s->n_lab; i++)
        lab[8 + i] = label_of(i);
    if (s->bad_label)
        lab[9] = 10;
    const char *ext = s->gz ? ".gz" : "";
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte%s", dir, split, ext);
    write_bytes(path, img, ilen - (size_t)s->img_cut + (size_t)s->img_extra, s->gz);
    if (s->corrupt_gz || s->cut_gz) {
        size_t len;
        uint8_t *raw = slurp_raw(path, &len);
        if (s->corrupt_gz)
            raw[len / 2] ^= 0x55;
        write_bytes(path, raw, len - (size_t)s->cut_gz, 0);
        free(raw);
    }
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte%s", dir, split, ext);
    write_bytes(path, lab, llen - (size_t)s->lab_cut, s->gz);
    free(img);
    free(lab);
}

static void make_subdir(char *out, size_t size, const char *name)
{
    snprintf(out, size, "%s/%s", tmpdir, name);
    assert_int_equal(mkdir(out, 0700), 0);
}

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

/* ---- IDX ------------------------------------------------------------------ */

static void check_idx_dataset(const so_dataset *d, int n, int h, int w)
{
    assert_int_equal(d->n, n);
    assert_int_equal(d->c, 1);
    assert_int_equal(d->h, h);
    assert_int_equal(d->w, w);
    assert_int_equal(d->classes, 10);
    assert_null(d->values);
    for (int i = 0; i < n; i++) {
        assert_int_equal(d->labels[i], label_of(i));
        for (int p = 0; p < h * w; p++)
            assert_int_equal(d->pixels[(size_t)i * h * w + p], pix_of(i, p));
    }
}

static void test_idx_plain(void **state)
{
    (void)state;
    char dir[256];
    make_subdir(dir, sizeof dir, "idx_plain");
    idx_spec s = {.n_img = 7, .n_lab = 7, .h = 4, .w = 5};
    write_idx_split(dir, "train", &s);
    so_dataset *d = NULL;
    assert_int_equal(so_dataset_load("fashion-mnist", dir, 1, &d), 0);
    check_idx_dataset(d, 7, 4, 5);
    assert_string_equal(d->name, "fashion-mnist");
    assert_true(d->mean[0] == 0.2860f && d->std[0] == 0.3530f);
    so_dataset_destroy(d);
}

static void test_idx_gzip(void **state)
{
    (void)state;
    char dir[256];
    make_subdir(dir, sizeof dir, "idx_gz");
    idx_spec s = {.n_img = 11, .n_lab = 11, .h = 3, .w = 2, .gz = 1};
    write_idx_split(dir, "t10k", &s);
    so_dataset *d = NULL;
    assert_int_equal(so_dataset_load("mnist", dir, 0, &d), 0);
    check_idx_dataset(d, 11, 3, 2);
    assert_true(d->mean[0] == 0.1307f && d->std[0] == 0.3081f);
    so_dataset_destroy(d);
    /* The train split is not there: the error names the missing file. */
    expect_err(so_dataset_load("mnist", dir, 1, &d), SO_EIO, "train-images-idx3-ubyte");
    assert_null(d);
}

static void test_missing(void **state)
{
    (void)state;
    so_dataset *d = NULL;
    char dir[256];
    snprintf(dir, sizeof dir, "%s/does-not-exist", tmpdir);
    expect_err(so_dataset_load("fashion-mnist", dir, 1, &d), SO_EIO, "does-not-exist");
    expect_err(so_dataset_load("cifar10", dir, 1, &d), SO_EIO, "does-not-exist");
    expect_err(so_dataset_load("imagenet", tmpdir, 1, &d), SO_EINVAL, "imagenet");
    /* Images present, labels missing. */
    make_subdir(dir, sizeof dir, "idx_nolabels");
    idx_spec s = {.n_img = 2, .n_lab = 2, .h = 2, .w = 2};
    write_idx_split(dir, "train", &s);
    char path[512];
    snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte", dir);
    assert_int_equal(unlink(path), 0);
    expect_err(so_dataset_load("fashion-mnist", dir, 1, &d), SO_EIO, "train-labels-idx1-ubyte");
    assert_null(d);
}

/* Every malformed split fails with the code and the file it names. */
static void test_idx_bad(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        idx_spec s;
        int code;
        const char *file, *problem;
    } cases[] = {
        {"magic", {.n_img = 3, .n_lab = 3, .h = 2, .w = 2, .img_magic = 0x801}, SO_EFORMAT, "images-idx3", "magic"},
        {"labmagic", {.n_img = 3, .n_lab = 3, .h = 2, .w = 2, .lab_magic = 0x803}, SO_EFORMAT, "labels-idx1", "magic"},
        {"truncimg", {.n_img = 3, .n_lab = 3, .h = 2, .w = 2, .img_cut = 1}, SO_EFORMAT, "images-idx3", "truncated"},
        {"trunclab", {.n_img = 3, .n_lab = 3, .h = 2, .w = 2, .lab_cut = 2}, SO_EFORMAT, "labels-idx1", "truncated"},
        {"trunchdr", {.n_img = 3, .n_lab = 3, .h = 2, .w = 2, .img_cut = 12 + 5}, SO_EFORMAT, "images-idx3", "header"},
        {"trailing", {.n_img = 3, .n_lab = 3, .h = 2, .w = 2, .img_extra = 3}, SO_EFORMAT, "images-idx3", "trailing"},
        {"label10", {.n_img = 3, .n_lab = 3, .h = 2, .w = 2, .bad_label = 1}, SO_EFORMAT, "labels-idx1", "label 10"},
        {"mismatch", {.n_img = 3, .n_lab = 4, .h = 2, .w = 2}, SO_EFORMAT, "labels-idx1", "4 labels"},
        {"zerorows", {.n_img = 3, .n_lab = 3, .h = 0, .w = 2}, SO_EFORMAT, "images-idx3", "rows 0"},
        {"zerocount", {.n_img = 0, .n_lab = 0, .h = 2, .w = 2}, SO_EFORMAT, "images-idx3", "count 0"},
        {"badgz", {.n_img = 50, .n_lab = 50, .h = 8, .w = 8, .gz = 1, .corrupt_gz = 1}, SO_EFORMAT,
         "images-idx3-ubyte.gz", "gzip"},
        {"cutgz", {.n_img = 50, .n_lab = 50, .h = 8, .w = 8, .gz = 1, .cut_gz = 20}, SO_EFORMAT,
         "images-idx3-ubyte.gz", "gzip stream is truncated"},
        {"truncgz", {.n_img = 3, .n_lab = 3, .h = 2, .w = 2, .gz = 1, .img_cut = 1}, SO_EFORMAT, "images-idx3",
         "truncated"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char dir[256];
        make_subdir(dir, sizeof dir, cases[k].name);
        write_idx_split(dir, "train", &cases[k].s);
        so_dataset *d = (so_dataset *)1;
        int rc = so_dataset_load("fashion-mnist", dir, 1, &d);
        print_message("  %-10s -> %d %s\n", cases[k].name, rc, so_errmsg());
        expect_err(rc, cases[k].code, cases[k].file);
        expect_err(rc, cases[k].code, cases[k].problem);
        assert_null(d);
    }
}

/* The in-memory parsers on headers that would overflow or lie. */
static void test_idx_parse_memory(void **state)
{
    (void)state;
    uint8_t b[32] = {0};
    const uint8_t *px;
    int n, h, w;
    expect_err(so_idx_parse_images(b, 0, "empty.idx", &n, &h, &w, &px), SO_EFORMAT, "empty.idx");
    put_be32(b, 0x803);
    put_be32(b + 4, 0xffffffffu), put_be32(b + 8, 28), put_be32(b + 12, 28);
    expect_err(so_idx_parse_images(b, 32, "huge.idx", &n, &h, &w, &px), SO_EFORMAT, "huge.idx");
    put_be32(b + 4, 0x7fffffffu), put_be32(b + 8, 65535), put_be32(b + 12, 65535);
    expect_err(so_idx_parse_images(b, 32, "over.idx", &n, &h, &w, &px), SO_EFORMAT, "truncated");
    put_be32(b + 4, 1), put_be32(b + 8, 70000), put_be32(b + 12, 1);
    expect_err(so_idx_parse_images(b, 32, "side.idx", &n, &h, &w, &px), SO_EFORMAT, "rows 70000");
    put_be32(b + 4, 1), put_be32(b + 8, 4), put_be32(b + 12, 4);
    assert_int_equal(so_idx_parse_images(b, 32, "ok.idx", &n, &h, &w, &px), 0);
    assert_true(n == 1 && h == 4 && w == 4 && px == b + 16);
    const uint8_t *lb;
    put_be32(b, 0x801), put_be32(b + 4, 24);
    assert_int_equal(so_idx_parse_labels(b, 32, "ok.lab", &n, &lb), 0);
    assert_true(n == 24 && lb == b + 8);
    expect_err(so_idx_parse_labels(b, 7, "short.lab", &n, &lb), SO_EFORMAT, "short.lab");
}

/* so_read_file: gzip detected by magic, whatever the name; plain files pass through. */
static void test_read_file(void **state)
{
    (void)state;
    char path[512];
    uint8_t data[1000], *buf = NULL;
    size_t len = 0;
    for (int i = 0; i < 1000; i++)
        data[i] = (uint8_t)(i * i);
    snprintf(path, sizeof path, "%s/plain.bin", tmpdir);
    write_bytes(path, data, sizeof data, 0);
    assert_int_equal(so_read_file(path, &buf, &len), 0);
    assert_true(len == sizeof data && memcmp(buf, data, len) == 0);
    free(buf);
    snprintf(path, sizeof path, "%s/compressed.bin", tmpdir); /* no .gz suffix on purpose */
    write_bytes(path, data, sizeof data, 1);
    assert_int_equal(so_read_file(path, &buf, &len), 0);
    assert_true(len == sizeof data && memcmp(buf, data, len) == 0);
    free(buf);
    /* Trailing garbage after the gzip stream. */
    size_t rlen;
    uint8_t *raw = slurp_raw(path, &rlen);
    raw = realloc(raw, rlen + 3);
    memcpy(raw + rlen, "xyz", 3);
    snprintf(path, sizeof path, "%s/trailing.gz", tmpdir);
    write_bytes(path, raw, rlen + 3, 0);
    free(raw);
    expect_err(so_read_file(path, &buf, &len), SO_EFORMAT, "trailing.gz");
    snprintf(path, sizeof path, "%s/nope.bin", tmpdir);
    expect_err(so_read_file(path, &buf, &len), SO_EIO, "nope.bin");
    expect_err(so_read_file(tmpdir, &buf, &len), SO_EIO, "not a regular file");
}

/* ---- CIFAR -------------------------------------------------------------- */

static uint8_t cifar_pix(int global, int p) { return (uint8_t)(global * 13 + p); }

/* Writes `records` records numbered from first; label of record g is g % 10. */
static void write_cifar(const char *path, int first, int records, size_t cut)
{
    size_t len = (size_t)records * 3073;
    uint8_t *b = malloc(len);
    for (int r = 0; r < records; r++) {
        b[(size_t)r * 3073] = (uint8_t)((first + r) % 10);
        for (int p = 0; p < 3072; p++)
            b[(size_t)r * 3073 + 1 + p] = cifar_pix(first + r, p);
    }
    write_bytes(path, b, len - cut, 0);
    free(b);
}

static void write_cifar_dir(const char *dir)
{
    char path[512];
    for (int i = 1; i <= 5; i++) {
        snprintf(path, sizeof path, "%s/data_batch_%d.bin", dir, i);
        write_cifar(path, (i - 1) * 3, 3, 0);
    }
    snprintf(path, sizeof path, "%s/test_batch.bin", dir);
    write_cifar(path, 100, 2, 0);
}

static void test_cifar(void **state)
{
    (void)state;
    char dir[256], path[512];
    make_subdir(dir, sizeof dir, "cifar");
    write_cifar_dir(dir);
    so_dataset *d = NULL;
    assert_int_equal(so_dataset_load("cifar10", dir, 1, &d), 0);
    assert_true(d->n == 15 && d->c == 3 && d->h == 32 && d->w == 32 && d->classes == 10);
    for (int g = 0; g < 15; g++) {
        assert_int_equal(d->labels[g], g % 10);
        for (int p = 0; p < 3072; p += 97)
            assert_int_equal(d->pixels[(size_t)g * 3072 + p], cifar_pix(g, p));
    }
    assert_true(d->mean[2] == 0.4465f && d->std[1] == 0.2435f);
    so_dataset_destroy(d);
    assert_int_equal(so_dataset_load("cifar10", dir, 0, &d), 0);
    assert_int_equal(d->n, 2);
    assert_int_equal(d->labels[1], 101 % 10);
    so_dataset_destroy(d);
    /* Bad size, bad label, missing batch. */
    snprintf(path, sizeof path, "%s/data_batch_2.bin", dir);
    write_cifar(path, 0, 2, 100);
    expect_err(so_dataset_load("cifar10", dir, 1, &d), SO_EFORMAT, "data_batch_2.bin");
    uint8_t rec[3073] = {10};
    write_bytes(path, rec, sizeof rec, 0);
    expect_err(so_dataset_load("cifar10", dir, 1, &d), SO_EFORMAT, "label 10");
    assert_int_equal(unlink(path), 0);
    expect_err(so_dataset_load("cifar10", dir, 1, &d), SO_EIO, "data_batch_2.bin");
    snprintf(path, sizeof path, "%s/test_batch.bin", dir);
    write_bytes(path, rec, 0, 0);
    expect_err(so_dataset_load("cifar10", dir, 0, &d), SO_EFORMAT, "empty");
    int n;
    expect_err(so_cifar_parse(rec, 3072, "mem", &n), SO_EFORMAT, "mem");
    rec[0] = 9;
    assert_int_equal(so_cifar_parse(rec, 3073, "mem", &n), 0);
    assert_int_equal(n, 1);
}

/* ---- real data ------------------------------------------------------------ */

static void test_fashion_mnist_real(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", FMNIST_DIR);
    if (access(path, R_OK) != 0) {
        print_message("  skipped: %s not readable (Debian package dataset-fashion-mnist not installed)\n", path);
        skip();
    }
    for (int train = 1; train >= 0; train--) {
        so_dataset *d = NULL;
        double t0 = so_now();
        assert_int_equal(so_dataset_load("fashion-mnist", FMNIST_DIR, train, &d), 0);
        print_message("  fashion-mnist %s: %d images in %.2f s\n", train ? "train" : "test", d->n, so_now() - t0);
        assert_int_equal(d->n, train ? 60000 : 10000);
        assert_true(d->c == 1 && d->h == 28 && d->w == 28);
        int per_class[10] = {0};
        for (int i = 0; i < d->n; i++) {
            assert_in_range(d->labels[i], 0, 9);
            per_class[d->labels[i]]++;
        }
        for (int k = 0; k < 10; k++) /* Fashion-MNIST is exactly balanced */
            assert_int_equal(per_class[k], d->n / 10);
        so_dataset_destroy(d);
    }
}

/* ---- loader --------------------------------------------------------------- */

/* A pixel dataset built by hand (n samples of c x h x w), freed with free_pixels. */
static so_dataset *make_pixels(int n, int c, int h, int w)
{
    so_dataset *d = calloc(1, sizeof *d);
    d->n = n, d->c = c, d->h = h, d->w = w, d->classes = 10;
    d->pixels = malloc((size_t)n * c * h * w);
    d->labels = malloc((size_t)n * sizeof(int32_t));
    for (size_t i = 0; i < (size_t)n * c * h * w; i++)
        d->pixels[i] = (uint8_t)(i * 2654435761u >> 13);
    for (int i = 0; i < n; i++)
        d->labels[i] = i % 10;
    float mean[3] = {0.4914f, 0.4822f, 0.4465f}, std[3] = {0.2470f, 0.2435f, 0.2616f};
    memcpy(d->mean, mean, sizeof mean);
    memcpy(d->std, std, sizeof std);
    return d;
}

static void free_pixels(so_dataset *d)
{
    free(d->pixels);
    free(d->labels);
    free(d);
}

static so_loader *loader_or_fail(const so_dataset *d, so_loader_config c)
{
    so_loader *l = NULL;
    int rc = so_loader_create(d, &c, &l);
    if (rc)
        fail_msg("so_loader_create: %s", so_errmsg());
    return l;
}

static int32_t *epoch_indices(so_loader *l, int epoch, int *count)
{
    assert_int_equal(so_loader_start_epoch(l, epoch), 0);
    const int32_t *idx = so_loader_indices(l, count);
    int32_t *copy = malloc((size_t)*count * sizeof *copy + 1);
    memcpy(copy, idx, (size_t)*count * sizeof *copy);
    return copy;
}

static void assert_permutation(const int32_t *idx, int n)
{
    char *seen = calloc((size_t)n, 1);
    for (int i = 0; i < n; i++) {
        assert_in_range(idx[i], 0, n - 1);
        assert_int_equal(seen[idx[i]], 0);
        seen[idx[i]] = 1;
    }
    free(seen);
}

static void test_loader_shuffle(void **state)
{
    (void)state;
    so_dataset *d = NULL;
    assert_int_equal(so_dataset_synthetic(103, 1, 2, 2, 10, 1, &d), 0);
    so_loader_config c = {.batch = 8, .shuffle = 1, .seed = 42, .world = 1};
    so_loader *a = loader_or_fail(d, c), *b = loader_or_fail(d, c);
    int na, nb;
    int32_t *e0 = epoch_indices(a, 0, &na), *e1 = epoch_indices(a, 1, &nb);
    assert_true(na == 103 && nb == 103);
    assert_permutation(e0, 103);
    assert_permutation(e1, 103);
    assert_true(memcmp(e0, e1, 103 * sizeof *e0) != 0);
    int32_t *f0 = epoch_indices(b, 0, &nb); /* same seed, same order, whatever came before */
    assert_memory_equal(e0, f0, 103 * sizeof *e0);
    free(f0);
    c.seed = 43;
    so_loader *other = loader_or_fail(d, c);
    f0 = epoch_indices(other, 0, &nb);
    assert_true(memcmp(e0, f0, 103 * sizeof *e0) != 0);
    c.shuffle = 0; /* evaluation order */
    so_loader *plain = loader_or_fail(d, c);
    free(f0);
    f0 = epoch_indices(plain, 3, &nb);
    for (int i = 0; i < 103; i++)
        assert_int_equal(f0[i], i);
    free(e0), free(e1), free(f0);
    so_loader_destroy(a), so_loader_destroy(b), so_loader_destroy(other), so_loader_destroy(plain);
    so_dataset_destroy(d);
}

/* DistributedSampler: rank r holds positions r, r+world, ... of the epoch's permutation. */
static void test_loader_shards(void **state)
{
    (void)state;
    const int n = 103;
    so_dataset *d = NULL;
    assert_int_equal(so_dataset_synthetic(n, 1, 1, 1, 10, 2, &d), 0);
    so_loader_config c = {.batch = 4, .shuffle = 1, .drop_last = 1, .seed = 7, .world = 1};
    so_loader *full = loader_or_fail(d, c);
    for (int world = 1; world <= 5; world++) {
        for (int drop = 1; drop >= 0; drop--) {
            int total = drop ? n / world * world : n, covered = 0, steps0 = -1, nf;
            char *seen = calloc((size_t)n, 1);
            int32_t *perm = epoch_indices(full, world, &nf);
            for (int r = 0; r < world; r++) {
                c.world = world, c.rank = r, c.drop_last = drop;
                so_loader *l = loader_or_fail(d, c);
                int cnt;
                int32_t *idx = epoch_indices(l, world, &cnt);
                for (int k = 0; k < cnt; k++) {
                    assert_int_equal(idx[k], perm[r + k * world]);
                    assert_int_equal(seen[idx[k]], 0);
                    seen[idx[k]] = 1;
                }
                covered += cnt;
                if (drop) { /* every rank runs the same number of full steps */
                    assert_int_equal(cnt, n / world);
                    assert_int_equal(so_loader_steps(l), n / world / 4);
                    if (steps0 >= 0)
                        assert_int_equal(so_loader_steps(l), steps0);
                    steps0 = so_loader_steps(l);
                }
                int got = 0, bn, steps = 0;
                const float *x;
                const int32_t *y;
                while (so_loader_next(l, &x, &y, &bn) == 1)
                    got += bn, steps++;
                assert_int_equal(steps, so_loader_steps(l));
                assert_int_equal(got, drop ? so_loader_steps(l) * 4 : cnt);
                free(idx);
                so_loader_destroy(l);
            }
            assert_int_equal(covered, total);
            free(seen), free(perm);
        }
    }
    so_loader_destroy(full);
    so_dataset_destroy(d);
}

/* Batch contents: synthetic values copied as is, pixels through (p/255 - mean)/std. */
static void test_loader_values(void **state)
{
    (void)state;
    so_dataset *d = NULL;
    assert_int_equal(so_dataset_synthetic(10, 2, 3, 3, 5, 3, &d), 0);
    so_loader_config c = {.batch = 4, .shuffle = 1, .seed = 9, .world = 1};
    so_loader *l = loader_or_fail(d, c);
    assert_int_equal(so_loader_steps(l), 3);
    int cnt, n, k = 0;
    assert_int_equal(so_loader_start_epoch(l, 0), 0);
    const int32_t *idx = so_loader_indices(l, &cnt);
    const float *x;
    const int32_t *y;
    while (so_loader_next(l, &x, &y, &n) == 1) {
        for (int j = 0; j < n; j++, k++) {
            assert_int_equal(y[j], d->labels[idx[k]]);
            assert_memory_equal(x + j * 18, d->values + idx[k] * 18, 18 * sizeof(float));
        }
        if (n < 4) /* partial last batch: tail zeroed */
            for (int j = n * 18; j < 4 * 18; j++)
                assert_true(x[j] == 0.0f);
    }
    assert_int_equal(k, 10);
    assert_int_equal(so_loader_next(l, &x, &y, &n), 0); /* stays at the end */
    so_loader_destroy(l);
    so_dataset_destroy(d);

    so_dataset *p = make_pixels(3, 3, 2, 2);
    p->pixels[12 + 4 + 1] = 200; /* sample 1, channel 1 (G), pixel 1 */
    c = (so_loader_config){.batch = 3, .world = 1};
    l = loader_or_fail(p, c);
    assert_int_equal(so_loader_start_epoch(l, 0), 0);
    assert_int_equal(so_loader_next(l, &x, &y, &n), 1);
    assert_float_equal(x[12 + 4 + 1], (200.0f / 255.0f - 0.4822f) / 0.2435f, 1e-6);
    assert_float_equal(x[12 + 4 + 1], 1.240713f, 1e-5); /* the value by hand */
    for (int i = 0; i < 36; i++) {
        int ch = i / 4 % 3;
        assert_float_equal(x[i], (p->pixels[i] / 255.0f - p->mean[ch]) / p->std[ch], 1e-6);
    }
    so_loader_destroy(l);
    free_pixels(p);
}

/* Reference crop+flip of one normalised sample (c x h x w), black padding. */
static void ref_augment(const float *plain, const float *padv, int c, int h, int w, int pad, int dy, int dx, int flip,
                        float *out)
{
    for (int ch = 0; ch < c; ch++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                int sy = y + dy - pad, sx = (flip ? w - 1 - x : x) + dx - pad;
                int in = sy >= 0 && sy < h && sx >= 0 && sx < w;
                out[(ch * h + y) * w + x] = in ? plain[(ch * h + sy) * w + sx] : padv[ch];
            }
}

static int matches_some_augmentation(const float *got, const float *plain, const float *padv, int c, int h, int w,
                                     int pad)
{
    float *ref = malloc((size_t)c * h * w * sizeof *ref);
    int found = 0;
    for (int dy = 0; dy <= 2 * pad && !found; dy++)
        for (int dx = 0; dx <= 2 * pad && !found; dx++)
            for (int f = 0; f < 2 && !found; f++) {
                ref_augment(plain, padv, c, h, w, pad, dy, dx, f, ref);
                found = memcmp(ref, got, (size_t)c * h * w * sizeof *ref) == 0;
            }
    free(ref);
    return found;
}

static void test_loader_augment(void **state)
{
    (void)state;
    enum { N = 20, C = 3, H = 8, W = 8, S = C * H * W, B = 5 };
    so_dataset *p = make_pixels(N, C, H, W);
    so_loader_config c = {.batch = B, .shuffle = 1, .drop_last = 1, .seed = 5, .world = 1};
    so_loader *plain = loader_or_fail(p, c);
    c.augment = 1;
    so_loader *aug = loader_or_fail(p, c), *aug2 = loader_or_fail(p, c);
    c.pad = -1;
    so_loader *fliponly = loader_or_fail(p, c);
    c.no_flip = 1;
    so_loader *ident = loader_or_fail(p, c);
    float padv[C];
    for (int ch = 0; ch < C; ch++)
        padv[ch] = (0.0f - p->mean[ch]) / p->std[ch];
    int flips = 0, shifts = 0;
    for (int epoch = 0; epoch < 2; epoch++) {
        so_loader *all[5] = {plain, aug, aug2, ident, fliponly};
        for (int i = 0; i < 5; i++)
            assert_int_equal(so_loader_start_epoch(all[i], epoch), 0);
        const float *xp, *xa, *xb, *xi, *xf;
        const int32_t *yp, *ya, *yb, *yi, *yf;
        int np, na, nb, ni, nf;
        while (so_loader_next(plain, &xp, &yp, &np) == 1) {
            assert_int_equal(so_loader_next(aug, &xa, &ya, &na), 1);
            assert_int_equal(so_loader_next(aug2, &xb, &yb, &nb), 1);
            assert_int_equal(so_loader_next(ident, &xi, &yi, &ni), 1);
            assert_int_equal(so_loader_next(fliponly, &xf, &yf, &nf), 1);
            assert_true(na == np && nb == np && ni == np);
            assert_memory_equal(yp, ya, np * sizeof *yp);
            assert_memory_equal(xi, xp, (size_t)np * S * sizeof *xp); /* no crop, no flip: unchanged */
            assert_memory_equal(xa, xb, (size_t)np * S * sizeof *xa); /* reproducible */
            for (int j = 0; j < np; j++) {
                assert_true(matches_some_augmentation(xa + j * S, xp + j * S, padv, C, H, W, 4));
                shifts += memcmp(xa + j * S, xp + j * S, S * sizeof *xa) != 0;
                /* Without the crop every sample is itself or its mirror. */
                float mirror[S];
                ref_augment(xp + j * S, padv, C, H, W, 0, 0, 0, 1, mirror);
                int same = memcmp(xf + j * S, xp + j * S, sizeof mirror) == 0;
                int flipped = memcmp(xf + j * S, mirror, sizeof mirror) == 0;
                assert_true(same != flipped);
                flips += flipped;
            }
        }
    }
    assert_true(shifts > N);                 /* 40 samples, nearly all moved */
    assert_true(flips > 5 && flips < 35);    /* p = 0.5: 20 expected */
    print_message("  cropped/flipped %d of %d samples; flip only: %d mirrored\n", shifts, 2 * N, flips);
    so_loader_destroy(plain), so_loader_destroy(aug), so_loader_destroy(aug2), so_loader_destroy(ident);
    so_loader_destroy(fliponly);
    free_pixels(p);
}

/* Prefetch depth changes only timing: same batches, same order, epoch after epoch. */
static void test_loader_prefetch(void **state)
{
    (void)state;
    enum { S = 3 * 6 * 6 };
    so_dataset *p = make_pixels(53, 3, 6, 6);
    for (int aug = 0; aug < 2; aug++)
        for (int depth = 1; depth <= 3; depth++) {
            so_loader_config c = {.batch = 7, .shuffle = 1, .augment = aug, .pad = 2, .seed = 11, .world = 2,
                                  .rank = 1};
            so_loader *sync = loader_or_fail(p, c);
            c.prefetch = depth;
            so_loader *pre = loader_or_fail(p, c);
            int batches = 0;
            for (int epoch = 0; epoch < 3; epoch++) {
                assert_int_equal(so_loader_start_epoch(sync, epoch), 0);
                assert_int_equal(so_loader_start_epoch(pre, epoch), 0);
                const float *xs, *xp;
                const int32_t *ys, *yp;
                int ns, np, rs, rp;
                do {
                    rs = so_loader_next(sync, &xs, &ys, &ns);
                    rp = so_loader_next(pre, &xp, &yp, &np);
                    assert_int_equal(rs, rp);
                    if (rs == 1) {
                        assert_int_equal(ns, np);
                        assert_memory_equal(ys, yp, 7 * sizeof *ys);
                        assert_memory_equal(xs, xp, 7 * S * sizeof *xs);
                        batches++;
                    }
                } while (rs == 1);
            }
            assert_int_equal(batches, 3 * 4); /* 26 samples on rank 1, batches of 7 */
            assert_true(so_loader_wait_seconds(pre) >= 0.0 && so_loader_wait_seconds(sync) > 0.0);
            so_loader_destroy(sync), so_loader_destroy(pre);
        }
    free_pixels(p);
}

/* Abandoning an epoch, destroying mid-epoch or before any epoch: no hang, no leak (ASan). */
static void test_loader_abandon(void **state)
{
    (void)state;
    so_dataset *d = NULL;
    assert_int_equal(so_dataset_synthetic(200, 1, 4, 4, 10, 4, &d), 0);
    so_loader_config c = {.batch = 3, .shuffle = 1, .seed = 1, .world = 1, .prefetch = 2};
    so_loader *ref = NULL, *l = loader_or_fail(d, c);
    const float *x, *xr;
    const int32_t *y, *yr;
    int n, nr;
    so_loader_destroy(loader_or_fail(d, c)); /* never started */
    for (int i = 0; i < 20; i++) {
        assert_int_equal(so_loader_start_epoch(l, 0), 0);
        for (int k = 0; k < i % 4; k++)
            assert_int_equal(so_loader_next(l, &x, &y, &n), 1);
    }
    /* After all that, epoch 1 starts clean and matches a synchronous loader. */
    assert_int_equal(so_loader_start_epoch(l, 1), 0);
    c.prefetch = 0;
    ref = loader_or_fail(d, c);
    assert_int_equal(so_loader_start_epoch(ref, 1), 0);
    for (int k = 0; k < so_loader_steps(ref); k++) {
        assert_int_equal(so_loader_next(l, &x, &y, &n), 1);
        assert_int_equal(so_loader_next(ref, &xr, &yr, &nr), 1);
        assert_memory_equal(x, xr, (size_t)nr * 16 * sizeof *x);
    }
    assert_int_equal(so_loader_next(l, &x, &y, &n), 0);
    assert_int_equal(so_loader_start_epoch(l, 2), 0);
    assert_int_equal(so_loader_next(l, &x, &y, &n), 1);
    so_loader_destroy(l); /* mid-epoch, producer running */
    c.prefetch = 1;
    l = loader_or_fail(d, c);
    assert_int_equal(so_loader_start_epoch(l, 0), 0);
    so_loader_destroy(l); /* right after start */
    so_loader_destroy(ref);
    so_loader_destroy(NULL);
    so_dataset_destroy(d);
    so_dataset_destroy(NULL);
}

static void test_loader_errors(void **state)
{
    (void)state;
    so_dataset *d = NULL;
    so_loader *l = NULL;
    assert_int_equal(so_dataset_synthetic(10, 1, 2, 2, 10, 4, &d), 0);
    so_loader_config c = {.batch = 0, .world = 1};
    expect_err(so_loader_create(d, &c, &l), SO_EINVAL, "batch size 0");
    c.batch = 2, c.world = 3, c.rank = 3;
    expect_err(so_loader_create(d, &c, &l), SO_EINVAL, "rank 3");
    c.world = 0, c.rank = 0;
    expect_err(so_loader_create(d, &c, &l), SO_EINVAL, "world 0");
    c.world = 11, c.rank = 10;
    expect_err(so_loader_create(d, &c, &l), SO_EINVAL, "dataset has 10 samples, fewer than the 11 ranks");
    c.world = 3, c.rank = 2, c.batch = 4, c.drop_last = 1; /* 3 samples per rank */
    expect_err(so_loader_create(d, &c, &l), SO_EINVAL, "batch 4");
    c.drop_last = 0; /* evaluation: one partial batch is fine */
    assert_int_equal(so_loader_create(d, &c, &l), 0);
    assert_int_equal(so_loader_steps(l), 1);
    const float *x;
    const int32_t *y;
    int n;
    expect_err(so_loader_next(l, &x, &y, &n), SO_EINVAL, "start_epoch");
    int cnt;
    assert_null(so_loader_indices(l, &cnt));
    assert_int_equal(cnt, 0);
    so_loader_destroy(l);
    c.prefetch = 1000;
    expect_err(so_loader_create(d, &c, &l), SO_EINVAL, "prefetch");
    so_dataset_destroy(d);
    expect_err(so_dataset_synthetic(0, 1, 1, 1, 10, 0, &d), SO_EINVAL, "n=0");
}

/* A whole epoch of full-size data sets (60,000 Fashion-MNIST-shaped images,
 * 5,000 CIFAR-shaped ones with crop and flip), synchronous and prefetched: every
 * sample of the epoch's permutation is delivered exactly once, in order, with
 * its label, and the pixels of an unaugmented batch are the normalised source
 * pixels. The rate is printed for the record, never asserted: ctest runs tests
 * side by side on loaded machines; speed is measured in bench/. */
static void check_full_epoch(const so_dataset *p, so_loader_config c, const char *what)
{
    const size_t S = (size_t)p->c * p->h * p->w;
    so_loader *l = loader_or_fail(p, c);
    assert_int_equal(so_loader_start_epoch(l, 0), 0);
    int cnt;
    const int32_t *idx0 = so_loader_indices(l, &cnt);
    int32_t *idx = malloc((size_t)cnt * sizeof *idx + 1);
    memcpy(idx, idx0, (size_t)cnt * sizeof *idx);
    int want = c.drop_last ? p->n / c.batch * c.batch : p->n;
    assert_int_equal(cnt, p->n);
    assert_permutation(idx, p->n);
    char *seen = calloc((size_t)p->n, 1);
    const float *x;
    const int32_t *y;
    int n, k = 0, steps = 0, rc;
    double t0 = so_now();
    while ((rc = so_loader_next(l, &x, &y, &n)) == 1) {
        assert_true(n == c.batch || (!c.drop_last && n > 0 && n < c.batch));
        for (int j = 0; j < n; j++, k++) {
            int s = idx[k];
            assert_int_equal(seen[s], 0); /* each sample once */
            seen[s] = 1;
            if (y[j] != p->labels[s])
                fail_msg("%s: sample %d of the epoch (index %d) has label %d, want %d", what, k, s, y[j],
                         p->labels[s]);
            if (!c.augment) /* the first and last pixel of every sample, normalised */
                for (size_t q = 0; q < S; q += S - 1) {
                    int ch = (int)(q / ((size_t)p->h * p->w));
                    float v = ((float)p->pixels[(size_t)s * S + q] / 255.0f - p->mean[ch]) / p->std[ch];
                    if (fabsf(x[(size_t)j * S + q] - v) > 1e-5f)
                        fail_msg("%s: sample %d pixel %zu is %g, want %g", what, s, q, x[(size_t)j * S + q], v);
                }
        }
        steps++;
    }
    double dt = so_now() - t0;
    assert_int_equal(rc, 0);
    assert_int_equal(k, want);
    assert_int_equal(steps, so_loader_steps(l));
    print_message("  loader, %s: %d images in %d batches, %.0f images/s (printed only)\n", what, k, steps,
                  dt > 0 ? k / dt : 0.0);
    free(seen);
    free(idx);
    so_loader_destroy(l);
}

static void test_loader_full_epoch(void **state)
{
    (void)state;
    so_dataset *p = make_pixels(60000, 1, 28, 28);
    so_loader_config c = {.batch = 64, .shuffle = 1, .drop_last = 1, .seed = 1, .world = 1};
    check_full_epoch(p, c, "28x28, batch 64, synchronous");
    c.prefetch = 2;
    check_full_epoch(p, c, "28x28, batch 64, prefetch 2");
    free_pixels(p);
    p = make_pixels(5000, 3, 32, 32);
    c = (so_loader_config){.batch = 128, .shuffle = 1, .augment = 1, .pad = 4, .seed = 1, .world = 1};
    check_full_epoch(p, c, "3x32x32, crop+flip, batch 128, synchronous");
    free_pixels(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idx_plain),        cmocka_unit_test(test_idx_gzip),
        cmocka_unit_test(test_missing),          cmocka_unit_test(test_idx_bad),
        cmocka_unit_test(test_idx_parse_memory), cmocka_unit_test(test_read_file),
        cmocka_unit_test(test_cifar),            cmocka_unit_test(test_fashion_mnist_real),
        cmocka_unit_test(test_loader_shuffle),   cmocka_unit_test(test_loader_shards),
        cmocka_unit_test(test_loader_values),    cmocka_unit_test(test_loader_augment),
        cmocka_unit_test(test_loader_prefetch),  cmocka_unit_test(test_loader_abandon),
        cmocka_unit_test(test_loader_errors),    cmocka_unit_test(test_loader_full_epoch),
    };
    return cmocka_run_group_tests(tests, setup_tmp, teardown_tmp);
}
