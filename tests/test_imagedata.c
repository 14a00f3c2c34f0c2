/* Image data sets (src/data: imgsrc.c, image.c, stream.c, tfrecord.c):
 * the TFRecord and Example parsers on hand-made bytes, and on the tree
 * tests/image_data.sh builds (IMAGE_TREE: bench/image_tree.py fmnist):
 * imagefolder and tfrecord give the same images and labels, the eval
 * transform equals torchvision's (TORCH_EVAL: its output for the val split)
 * and so do train crops with DCT scaling off (TORCH_CROPS), crops are
 * deterministic per seed whatever the thread count, N ranks see every
 * sample once per epoch, a resume continues the permutation, and memory
 * stays within the loader's bound while streaming more than it holds.
 *   test_imagedata            the tests
 *   test_imagedata crops FILE writes the crop boxes TORCH_CROPS is made from */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "scaleout/crc32c.h"
#include "scaleout/data.h"
#include "scaleout/err.h"

#define CROP_SAMPLES 6
#define CROP_SEED 7

static const char *tree(void)
{
    const char *t = getenv("IMAGE_TREE");
    return t && *t ? t : NULL;
}

#define NEED_TREE()                                                                                                    \
    do {                                                                                                               \
        if (!tree() || !so_image_have_jpeg())                                                                          \
            skip();                                                                                                    \
    } while (0)

static so_dataset *open_set(const char *kind, int train, int size)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s%s", tree(), strcmp(kind, "tfrecord") ? "" : "/tfrecord");
    so_image_opts o;
    so_image_opts_defaults(&o);
    o.image_size = size;
    so_dataset *d = NULL;
    int rc = so_dataset_open_images(kind, dir, train, &o, &d);
    if (rc)
        fail_msg("open %s %s: %s", kind, dir, so_errmsg());
    return d;
}

static so_loader *make_loader(const so_dataset *d, int batch, int augment, int threads, int prefetch, int rank,
                              int world, uint64_t seed)
{
    so_loader_config c = {.batch = batch, .shuffle = 1, .drop_last = 0, .augment = augment, .prefetch = prefetch,
                          .seed = seed, .rank = rank, .world = world, .decode_threads = threads};
    so_loader *l = NULL;
    if (so_loader_create(d, &c, &l))
        fail_msg("so_loader_create: %s", so_errmsg());
    return l;
}

/* Every batch of epoch `epoch` from `first` on, concatenated (x floats, then labels). */
static float *read_epoch(so_loader *l, int epoch, int first, size_t sample, int32_t **labels, int *count)
{
    assert_int_equal(so_loader_start_epoch_at(l, epoch, first), 0);
    size_t cap = 0, n = 0;
    float *all = NULL;
    int32_t *lab = NULL;
    const float *x;
    const int32_t *y;
    int got, nb;
    while ((got = so_loader_next(l, &x, &y, &nb)) > 0) {
        if (n + (size_t)nb > cap) {
            cap = (n + nb) * 2;
            all = realloc(all, cap * sample * sizeof *all);
            lab = realloc(lab, cap * sizeof *lab);
        }
        memcpy(all + n * sample, x, (size_t)nb * sample * sizeof *all);
        memcpy(lab + n, y, (size_t)nb * sizeof *lab);
        n += (size_t)nb;
    }
    assert_int_equal(got, 0);
    *labels = lab;
    *count = (int)n;
    return all;
}

/* ---- parsers on hand-made bytes ------------------------------------------------------ */

static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    do {
        p[n] = (uint8_t)(v & 0x7f) | (v > 0x7f ? 0x80 : 0);
        v >>= 7;
        n++;
    } while (v);
    return n;
}

static size_t put_ld(uint8_t *p, int field, const uint8_t *data, size_t len)
{
    size_t n = put_varint(p, (uint64_t)field << 3 | 2);
    n += put_varint(p + n, len);
    memcpy(p + n, data, len);
    return n + len;
}

/* A map entry {key, Feature}. */
static size_t put_entry(uint8_t *p, const char *key, const uint8_t *feature, size_t flen)
{
    uint8_t e[256];
    size_t n = put_ld(e, 1, (const uint8_t *)key, strlen(key));
    n += put_ld(e + n, 2, feature, flen);
    return put_ld(p, 1, e, n);
}

/* Example{features{image/encoded: bytes "JPEGDATA", image/class/label: int64 label}}; packed or not. */
static size_t make_example(uint8_t *out, int64_t label, int packed, int with_image, int with_label)
{
    uint8_t feats[512], f[64], l[32];
    size_t nf = 0;
    if (with_image) {
        size_t nl = put_ld(l, 1, (const uint8_t *)"JPEGDATA", 8);
        size_t n = put_ld(f, 1, l, nl); /* bytes_list */
        nf += put_entry(feats + nf, "image/encoded", f, n);
    }
    if (with_label) {
        size_t nl;
        if (packed) {
            uint8_t v[16];
            size_t nv = put_varint(v, (uint64_t)label);
            nl = put_ld(l, 1, v, nv);
        } else {
            nl = put_varint(l, 1 << 3 | 0);
            nl += put_varint(l + nl, (uint64_t)label);
        }
        size_t n = put_ld(f, 3, l, nl); /* int64_list */
        nf += put_entry(feats + nf, "image/class/label", f, n);
    }
    nf += put_entry(feats + nf, "image/format", (const uint8_t *)"\x0a\x06\x0a\x04JPEG", 8);
    return put_ld(out, 1, feats, nf);
}

static void test_example_parser(void **state)
{
    (void)state;
    uint8_t ex[1024];
    const uint8_t *img;
    size_t ilen;
    int64_t label;
    for (int packed = 0; packed < 2; packed++) {
        size_t n = make_example(ex, 417, packed, 1, 1);
        assert_int_equal(so_example_parse(ex, n, "ex", &img, &ilen, &label), 0);
        assert_int_equal(label, 417);
        assert_int_equal(ilen, 8);
        assert_memory_equal(img, "JPEGDATA", 8);
        for (size_t cut = 0; cut < n; cut++) /* every truncation fails cleanly */
            assert_int_not_equal(so_example_parse(ex, cut, "ex", &img, &ilen, &label), 0);
    }
    size_t n = make_example(ex, 3, 1, 0, 1);
    assert_int_equal(so_example_parse(ex, n, "ex", &img, &ilen, &label), SO_EFORMAT);
    assert_non_null(strstr(so_errmsg(), "without image/encoded"));
    n = make_example(ex, 3, 1, 1, 0);
    assert_int_equal(so_example_parse(ex, n, "ex", &img, &ilen, &label), SO_EFORMAT);
    assert_non_null(strstr(so_errmsg(), "image/class/label"));
}

/* A TFRecord: length, masked CRC of it, data, masked CRC of the data. */
static size_t make_record(uint8_t *out, const uint8_t *data, size_t n)
{
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)((uint64_t)n >> (8 * i));
    uint32_t c = so_tfrecord_mask(so_crc32c(0, out, 8));
    memcpy(out + 8, &c, 4);
    memcpy(out + 12, data, n);
    c = so_tfrecord_mask(so_crc32c(0, data, n));
    memcpy(out + 12 + n, &c, 4);
    return 16 + n;
}

static void test_tfrecord_framing(void **state)
{
    (void)state;
    uint8_t rec[128];
    size_t n = make_record(rec, (const uint8_t *)"hello, record", 13), off, len, next;
    assert_int_equal(so_tfrecord_next(rec, n, "r", &off, &len, &next), 0);
    assert_int_equal(off, 12);
    assert_int_equal(len, 13);
    assert_int_equal(next, n);
    /* The masked CRC as TensorFlow computes it, for "" (crc32c 0): the mask's constant. */
    assert_int_equal(so_tfrecord_mask(so_crc32c(0, "", 0)), 0xa282ead8u);
    for (size_t cut = 0; cut < n; cut++)
        assert_int_equal(so_tfrecord_next(rec, cut, "r", &off, &len, &next), SO_EFORMAT);
    rec[3] ^= 1; /* the length */
    assert_int_equal(so_tfrecord_next(rec, n, "r", &off, &len, &next), SO_EFORMAT);
    assert_non_null(strstr(so_errmsg(), "length CRC"));
    rec[3] ^= 1;
    rec[14] ^= 0x40; /* the data */
    assert_int_equal(so_tfrecord_next(rec, n, "r", &off, &len, &next), SO_EFORMAT);
    assert_non_null(strstr(so_errmsg(), "data CRC"));
}

/* ---- on the tree ------------------------------------------------------------------------ */

/* imagefolder and tfrecord: the same labels and bit-identical batches, in
 * the eval and the train transform (crops depend on (seed, epoch, sample)). */
static void test_formats_agree(void **state)
{
    (void)state;
    NEED_TREE();
    for (int train = 0; train < 2; train++) {
        so_dataset *a = open_set("imagefolder", train, 48), *b = open_set("tfrecord", train, 48);
        assert_int_equal(a->n, b->n);
        assert_int_equal(a->classes, 10);
        assert_int_equal(b->classes, 10);
        assert_memory_equal(a->labels, b->labels, (size_t)a->n * sizeof *a->labels);
        so_loader *la = make_loader(a, 16, train, 2, 2, 0, 1, 5), *lb = make_loader(b, 16, train, 1, 1, 0, 1, 5);
        size_t sample = (size_t)3 * 48 * 48;
        int32_t *ya, *yb;
        int na, nb;
        float *xa = read_epoch(la, 1, 0, sample, &ya, &na), *xb = read_epoch(lb, 1, 0, sample, &yb, &nb);
        assert_int_equal(na, a->n);
        assert_int_equal(nb, na);
        assert_memory_equal(ya, yb, (size_t)na * sizeof *ya);
        assert_memory_equal(xa, xb, (size_t)na * sample * sizeof *xa);
        free(xa), free(xb), free(ya), free(yb);
        so_loader_destroy(la);
        so_loader_destroy(lb);
        so_dataset_destroy(a);
        so_dataset_destroy(b);
    }
}

/* Reads n floats of a raw float32 file. */
static float *read_f32(const char *path, size_t n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("%s: cannot open", path);
    float *v = malloc(n * sizeof *v);
    size_t got = fread(v, sizeof *v, n, f);
    char extra;
    int trailing = fread(&extra, 1, 1, f) == 1;
    fclose(f);
    if (got != n || trailing)
        fail_msg("%s: %zu floats, expected %zu", path, got + trailing, n);
    return v;
}

/* Largest difference in 8-bit pixel levels (the normalisation undone). */
static double max_level_diff(const float *a, const float *b, size_t n, int size, size_t *over)
{
    static const float std[3] = {0.229f, 0.224f, 0.225f};
    size_t plane = (size_t)size * size;
    double worst = 0;
    *over = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) * std[(i / plane) % 3] * 255.0;
        worst = d > worst ? d : worst;
        *over += d > 0.5;
    }
    return worst;
}

/* Eval: Resize(256) + CenterCrop(224) + Normalize as torchvision 0.14 on PIL. */
static void test_eval_matches_torchvision(void **state)
{
    (void)state;
    NEED_TREE();
    const char *ref = getenv("TORCH_EVAL");
    if (!ref)
        skip();
    so_dataset *d = open_set("imagefolder", 0, 224);
    size_t sample = (size_t)3 * 224 * 224;
    float *want = read_f32(ref, (size_t)d->n * sample), *got = malloc(sample * sizeof *got);
    double worst = 0;
    size_t differ = 0;
    for (int i = 0; i < d->n; i++) {
        size_t over;
        assert_int_equal(so_image_sample(d, i, 0, 1, 0, SO_DCT_OFF, got), 0);
        double w = max_level_diff(got, want + (size_t)i * sample, sample, 224, &over);
        worst = w > worst ? w : worst;
        differ += over;
    }
    print_message("eval vs torchvision: %d images, max difference %.3g pixel levels, %zu values differ\n", d->n,
                  worst, differ);
    assert_true(worst <= 1.0 + 1e-3);
    free(want);
    free(got);
    so_dataset_destroy(d);
}

/* Train crops (the boxes written by `test_imagedata crops`) equal torchvision's
 * resized_crop + hflip with DCT scaling off, and stay close with it on. */
static void test_train_crops_match_torchvision(void **state)
{
    (void)state;
    NEED_TREE();
    const char *ref = getenv("TORCH_CROPS");
    if (!ref)
        skip();
    so_dataset *d = open_set("imagefolder", 0, 224);
    size_t sample = (size_t)3 * 224 * 224;
    float *want = read_f32(ref, (size_t)CROP_SAMPLES * sample), *got = malloc(sample * sizeof *got);
    for (int i = 0; i < CROP_SAMPLES; i++) {
        size_t over;
        assert_int_equal(so_image_sample(d, i, 1, CROP_SEED, 0, SO_DCT_OFF, got), 0);
        double w = max_level_diff(got, want + (size_t)i * sample, sample, 224, &over);
        if (w > 1.0 + 1e-3)
            fail_msg("train crop of sample %d: %.3g pixel levels from torchvision's", i, w);
    }
    free(want);
    free(got);
    so_dataset_destroy(d);
}

/* Same seed: same crops, whatever the number of decode threads; another seed: others. */
static void test_train_deterministic(void **state)
{
    (void)state;
    NEED_TREE();
    so_dataset *d = open_set("imagefolder", 1, 32);
    size_t sample = (size_t)3 * 32 * 32;
    float *x[3];
    int32_t *y[3];
    int n[3];
    const int threads[3] = {1, 3, 2};
    const uint64_t seeds[3] = {11, 11, 12};
    for (int r = 0; r < 3; r++) {
        so_loader *l = make_loader(d, 24, 1, threads[r], r, 0, 1, seeds[r]);
        x[r] = read_epoch(l, 2, 0, sample, &y[r], &n[r]);
        so_loader_destroy(l);
    }
    assert_int_equal(n[0], d->n);
    assert_memory_equal(x[0], x[1], (size_t)n[0] * sample * sizeof(float));
    assert_memory_equal(y[0], y[1], (size_t)n[0] * sizeof(int32_t));
    assert_memory_not_equal(x[0], x[2], (size_t)n[0] * sample * sizeof(float));
    for (int r = 0; r < 3; r++)
        free(x[r]), free(y[r]);
    so_dataset_destroy(d);
}

/* N ranks (3, with and without fixed shards): every sample once per epoch. */
static void test_ranks_cover_epoch(void **state)
{
    (void)state;
    NEED_TREE();
    so_dataset *d = open_set("tfrecord", 1, 16);
    int *seen = calloc((size_t)d->n, sizeof *seen);
    for (int fixed = 0; fixed < 2; fixed++)
        for (int epoch = 0; epoch < 3; epoch++) {
            memset(seen, 0, (size_t)d->n * sizeof *seen);
            for (int r = 0; r < 3; r++) {
                so_loader_config c = {.batch = 7, .shuffle = 1, .prefetch = 1, .seed = 3, .rank = r, .world = 3,
                                      .decode_threads = 1, .fixed_shard = fixed};
                so_loader *l = NULL;
                assert_int_equal(so_loader_create(d, &c, &l), 0);
                assert_int_equal(so_loader_start_epoch(l, epoch), 0);
                int count;
                const int32_t *idx = so_loader_indices(l, &count);
                for (int k = 0; k < count; k++)
                    seen[idx[k]]++;
                /* the batches carry those samples' labels */
                const float *x;
                const int32_t *y;
                int n, pos = 0;
                while (so_loader_next(l, &x, &y, &n) > 0)
                    for (int k = 0; k < n; k++, pos++)
                        assert_int_equal(y[k], d->labels[idx[pos]]);
                assert_int_equal(pos, count);
                so_loader_destroy(l);
            }
            for (int i = 0; i < d->n; i++)
                if (seen[i] != 1)
                    fail_msg("fixed %d epoch %d: sample %d seen %d times", fixed, epoch, i, seen[i]);
        }
    free(seen);
    so_dataset_destroy(d);
}

/* A resume at batch 3 of epoch 1 delivers what an uninterrupted run delivers from there. */
static void test_resume_continues(void **state)
{
    (void)state;
    NEED_TREE();
    so_dataset *d = open_set("imagefolder", 1, 24);
    size_t sample = (size_t)3 * 24 * 24;
    so_loader *a = make_loader(d, 20, 1, 2, 2, 1, 2, 9), *b = make_loader(d, 20, 1, 1, 3, 1, 2, 9);
    int32_t *ya, *yb;
    int na, nb;
    float *xa = read_epoch(a, 0, 0, sample, &ya, &na); /* epoch 0 first, as the interrupted run */
    free(xa), free(ya);
    xa = read_epoch(a, 1, 0, sample, &ya, &na);
    float *xb = read_epoch(b, 1, 3, sample, &yb, &nb);
    assert_int_equal(nb, na - 3 * 20);
    assert_memory_equal(yb, ya + 60, (size_t)nb * sizeof *yb);
    assert_memory_equal(xb, xa + 60 * sample, (size_t)nb * sample * sizeof *xb);
    free(xa), free(xb), free(ya), free(yb);
    so_loader_destroy(a);
    so_loader_destroy(b);
    so_dataset_destroy(d);
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            kb = atol(line + 6);
    if (f)
        fclose(f);
    return kb;
}

/* Streaming a split whose decoded size is many times what --prefetch holds:
 * resident memory grows by no more than the loader's stated bound. */
static void test_memory_bound(void **state)
{
    (void)state;
    NEED_TREE();
    so_dataset *d = open_set("imagefolder", 1, 160);
    size_t decoded = (size_t)d->n * 3 * 160 * 160 * sizeof(float);
    long before = rss_kb(), peak = before;
    so_loader *l = make_loader(d, 8, 1, 2, 1, 0, 1, 1);
    const float *x;
    const int32_t *y;
    int n;
    for (int epoch = 0; epoch < 2; epoch++) {
        assert_int_equal(so_loader_start_epoch(l, epoch), 0);
        while (so_loader_next(l, &x, &y, &n) > 0) {
            long r = rss_kb();
            peak = r > peak ? r : peak;
        }
    }
    so_loader_stats st;
    so_loader_get_stats(l, &st);
    double grown = (double)(peak - before) * 1024;
    print_message("streamed %zu MB decoded through a bound of %.1f MB: resident +%.1f MB\n", decoded >> 20,
                  st.memory_bound / 1e6, grown / 1e6);
    assert_true(decoded > 4 * st.memory_bound);
    assert_true(grown <= st.memory_bound + 8e6); /* + allocator and thread stacks */
    so_loader_destroy(l);
    so_dataset_destroy(d);
}

/* The index gives the listing the scan gives; a damaged one is refused. */
static void test_index(void **state)
{
    (void)state;
    NEED_TREE();
    char path[4096];
    snprintf(path, sizeof path, "%s/test-index.idx", tree());
    long n = 0;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tfrecord", tree());
    assert_int_equal(so_image_index_write("tfrecord", dir, NULL, path, &n), 0);
    so_dataset *scan = open_set("tfrecord", 1, 16), *idx = NULL;
    assert_int_equal(n, scan->n + 100);
    so_image_opts o;
    so_image_opts_defaults(&o);
    o.image_size = 16;
    o.index = path;
    assert_int_equal(so_dataset_open_images("tfrecord", dir, 1, &o, &idx), 0);
    assert_int_equal(idx->n, scan->n);
    assert_memory_equal(idx->labels, scan->labels, (size_t)scan->n * sizeof *scan->labels);
    float a[3 * 16 * 16], b[3 * 16 * 16];
    assert_int_equal(so_image_sample(scan, 17, 1, 1, 0, SO_DCT_TRAIN, a), 0);
    assert_int_equal(so_image_sample(idx, 17, 1, 1, 0, SO_DCT_TRAIN, b), 0);
    assert_memory_equal(a, b, sizeof a);
    so_dataset_destroy(idx);
    /* a flipped byte fails the checksum */
    FILE *f = fopen(path, "r+b");
    fseek(f, 40, SEEK_SET);
    int c = fgetc(f);
    fseek(f, 40, SEEK_SET);
    fputc(c ^ 0x10, f);
    fclose(f);
    idx = NULL;
    assert_int_equal(so_dataset_open_images("tfrecord", dir, 1, &o, &idx), SO_EFORMAT);
    assert_non_null(strstr(so_errmsg(), "checksum"));
    unlink(path);
    so_dataset_destroy(scan);
}

/* `test_imagedata crops FILE`: "top left height width flip" of the first
 * CROP_SAMPLES val images at CROP_SEED, epoch 0, for torchvision. */
static int write_crops(const char *out)
{
    so_dataset *d = NULL;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", tree() ? tree() : ".");
    if (so_dataset_open_images("imagefolder", dir, 0, NULL, &d)) {
        fprintf(stderr, "%s\n", so_errmsg());
        return 1;
    }
    FILE *f = fopen(out, "w");
    for (int i = 0; f && i < CROP_SAMPLES; i++) {
        uint8_t *buf;
        size_t len;
        const char *src;
        if (so_image_read(d, i, &buf, &len, &src))
            return 1;
        /* the size from the JPEG's SOF0 marker: FF C0 len(2) precision(1) height(2) width(2) */
        int w = 0, h = 0;
        for (size_t k = 2; k + 9 < len; k++)
            if (buf[k] == 0xff && (buf[k + 1] == 0xc0 || buf[k + 1] == 0xc2)) {
                h = buf[k + 5] << 8 | buf[k + 6];
                w = buf[k + 7] << 8 | buf[k + 8];
                break;
            }
        int box[4], flip;
        so_image_train_crop(d, CROP_SEED, 0, i, w, h, box, &flip);
        fprintf(f, "%s %d %d %d %d %d\n", src, box[0], box[1], box[2], box[3], flip);
        free(buf);
    }
    so_dataset_destroy(d);
    return f && fclose(f) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "crops"))
        return write_crops(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory_bound), /* first: before other tests grow the heap */
        cmocka_unit_test(test_example_parser),
        cmocka_unit_test(test_tfrecord_framing),
        cmocka_unit_test(test_formats_agree),
        cmocka_unit_test(test_eval_matches_torchvision),
        cmocka_unit_test(test_train_crops_match_torchvision),
        cmocka_unit_test(test_train_deterministic),
        cmocka_unit_test(test_ranks_cover_epoch),
        cmocka_unit_test(test_resume_continues),
        cmocka_unit_test(test_index),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
