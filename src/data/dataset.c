/* Dataset loading: finds the distributed files of a split, reads them (gzip
 * or not), validates them with the in-memory parsers and decodes them into one
 * so_dataset of uint8 CHW pixels and int32 labels. Also the seeded synthetic
 * dataset used by tests and benchmarks when no real data is wanted. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data_internal.h"
#include "scaleout/data.h"
#include "scaleout/err.h"
#include "scaleout/rng.h"

#define CIFAR_RECORD 3073
#define CIFAR_PIXELS 3072
#define NUM_CLASSES 10

typedef struct {
    const char *kind;
    float mean[3], std[3];
} dataset_stats;

/* Per-channel statistics of each training set (pixels/255), as everyone normalises them. */
static const dataset_stats STATS[] = {
    {"fashion-mnist", {0.2860f, 0.0f, 0.0f}, {0.3530f, 1.0f, 1.0f}},
    {"mnist", {0.1307f, 0.0f, 0.0f}, {0.3081f, 1.0f, 1.0f}},
    {"cifar10", {0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}},
};

static so_dataset *dataset_new(const char *kind)
{
    so_dataset *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    snprintf(d->name, sizeof d->name, "%s", kind);
    d->classes = NUM_CLASSES;
    for (int c = 0; c < 3; c++)
        d->std[c] = 1.0f;
    for (size_t i = 0; i < sizeof STATS / sizeof STATS[0]; i++)
        if (strcmp(STATS[i].kind, kind) == 0) {
            memcpy(d->mean, STATS[i].mean, sizeof d->mean);
            memcpy(d->std, STATS[i].std, sizeof d->std);
        }
    return d;
}

void so_dataset_destroy(so_dataset *d)
{
    if (!d)
        return;
    free(d->pixels);
    free(d->values);
    free(d->labels);
    image_source_free(d->images);
    free(d);
}

/* Sets path to dir/base or dir/base.gz, whichever exists (plain first). */
static int find_file(const char *dir, const char *base, char *path, size_t size)
{
    static const char *const suffix[] = {"", ".gz"};
    for (int i = 0; i < 2; i++) {
        if ((size_t)snprintf(path, size, "%s/%s%s", dir, base, suffix[i]) >= size)
            return so_err(SO_EIO, "%s/%s: path too long", dir, base);
        if (access(path, F_OK) == 0)
            return 0;
    }
    return so_err(SO_EIO, "%s/%s[.gz]: no such file", dir, base);
}

/* Images and labels of one IDX split, both files read; on success the dataset owns copies. */
static int decode_idx(so_dataset *d, const char *ipath, const uint8_t *ibuf, size_t ilen, const char *lpath,
                      const uint8_t *lbuf, size_t llen)
{
    const uint8_t *px, *lb;
    int n, h, w, nl, rc;
    if ((rc = so_idx_parse_images(ibuf, ilen, ipath, &n, &h, &w, &px)) ||
        (rc = so_idx_parse_labels(lbuf, llen, lpath, &nl, &lb)))
        return rc;
    if (nl != n)
        return so_err(SO_EFORMAT, "%s: %d labels but %s has %d images", lpath, nl, ipath, n);
    for (int i = 0; i < n; i++)
        if (lb[i] >= NUM_CLASSES)
            return so_err(SO_EFORMAT, "%s: label %u at index %d is not below %d classes", lpath, lb[i], i,
                          NUM_CLASSES);
    size_t npix = (size_t)n * h * w;
    d->pixels = malloc(npix);
    d->labels = malloc((size_t)n * sizeof *d->labels);
    if (!d->pixels || !d->labels)
        return so_err(SO_ENOMEM, "%s: cannot allocate %zu bytes of pixels", ipath, npix);
    memcpy(d->pixels, px, npix);
    for (int i = 0; i < n; i++)
        d->labels[i] = lb[i];
    d->n = n;
    d->c = 1;
    d->h = h;
    d->w = w;
    return 0;
}

static int load_idx(so_dataset *d, const char *dir, int train)
{
    const char *split = train ? "train" : "t10k";
    char ipath[PATH_MAX], lpath[PATH_MAX], base[64];
    uint8_t *ibuf = NULL, *lbuf = NULL;
    size_t ilen = 0, llen = 0;
    int rc;
    snprintf(base, sizeof base, "%s-images-idx3-ubyte", split);
    if ((rc = find_file(dir, base, ipath, sizeof ipath)))
        goto out;
    snprintf(base, sizeof base, "%s-labels-idx1-ubyte", split);
    if ((rc = find_file(dir, base, lpath, sizeof lpath)))
        goto out;
    if ((rc = so_read_file(ipath, &ibuf, &ilen)) || (rc = so_read_file(lpath, &lbuf, &llen)))
        goto out;
    rc = decode_idx(d, ipath, ibuf, ilen, lpath, lbuf, llen);
out:
    free(ibuf);
    free(lbuf);
    return rc;
}

/* Appends the records of one CIFAR batch file to d (pixels are already CHW). */
static int append_cifar(so_dataset *d, const char *path)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    int n = 0, rc;
    if ((rc = so_read_file(path, &buf, &len)) || (rc = so_cifar_parse(buf, len, path, &n)))
        goto out;
    if (n > INT_MAX - d->n) {
        rc = so_err(SO_EFORMAT, "%s: too many CIFAR-10 records in total", path);
        goto out;
    }
    size_t total = (size_t)d->n + (size_t)n;
    uint8_t *px = realloc(d->pixels, total * CIFAR_PIXELS);
    if (px)
        d->pixels = px;
    int32_t *lb = realloc(d->labels, total * sizeof *lb);
    if (lb)
        d->labels = lb;
    if (!px || !lb) {
        rc = so_err(SO_ENOMEM, "%s: cannot allocate %zu records", path, total);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        const uint8_t *rec = buf + (size_t)i * CIFAR_RECORD;
        d->labels[d->n + i] = rec[0];
        memcpy(d->pixels + ((size_t)d->n + i) * CIFAR_PIXELS, rec + 1, CIFAR_PIXELS);
    }
    d->n += n;
out:
    free(buf);
    return rc;
}

/* path = dir/name; an over-long path is an error rather than a silent truncation. */
static int join_path(char *path, size_t size, const char *dir, const char *name)
{
    if ((size_t)snprintf(path, size, "%s/%s", dir, name) >= size)
        return so_err(SO_EIO, "%s/%s: path too long", dir, name);
    return 0;
}

static int load_cifar(so_dataset *d, const char *dir, int train)
{
    char path[PATH_MAX], sub[PATH_MAX], name[32];
    int rc;
    /* Accept the directory the tarball extracts to as well as its parent. */
    if ((rc = join_path(path, sizeof path, dir, train ? "data_batch_1.bin" : "test_batch.bin")) ||
        (rc = join_path(sub, sizeof sub, dir, "cifar-10-batches-bin")))
        return rc;
    if (access(path, F_OK) != 0 && access(sub, F_OK) == 0)
        dir = sub;
    d->c = 3;
    d->h = d->w = 32;
    for (int i = 1; i <= (train ? 5 : 1); i++) {
        snprintf(name, sizeof name, train ? "data_batch_%d.bin" : "test_batch.bin", i);
        if ((rc = join_path(path, sizeof path, dir, name)))
            return rc;
        if (access(path, F_OK) != 0)
            return so_err(SO_EIO, "%s: %s", path, strerror(errno));
        if ((rc = append_cifar(d, path)))
            return rc;
    }
    return 0;
}

static int check_dir(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return so_err(SO_EIO, "%s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return so_err(SO_EIO, "%s: not a directory", dir);
    return 0;
}

int so_dataset_load(const char *kind, const char *dir, int train, so_dataset **out)
{
    so_dataset *d = NULL;
    int rc;
    *out = NULL;
    if (!kind || !dir)
        return so_err(SO_EINVAL, "so_dataset_load: kind and dir are required");
    int idx = strcmp(kind, "fashion-mnist") == 0 || strcmp(kind, "mnist") == 0;
    if (!idx && strcmp(kind, "cifar10") != 0)
        return so_err(SO_EINVAL, "unknown dataset '%s' (fashion-mnist, mnist, cifar10)", kind);
    if ((rc = check_dir(dir)))
        return rc;
    if (!(d = dataset_new(kind)))
        return so_err(SO_ENOMEM, "cannot allocate a dataset");
    rc = idx ? load_idx(d, dir, train) : load_cifar(d, dir, train);
    if (rc)
        so_dataset_destroy(d);
    else
        *out = d;
    return rc;
}

int so_dataset_synthetic(int n, int c, int h, int w, int classes, uint64_t seed, so_dataset **out)
{
    *out = NULL;
    if (n < 1 || c < 1 || h < 1 || w < 1 || classes < 1 || c > 4096 || h > 65535 || w > 65535)
        return so_err(SO_EINVAL, "synthetic dataset: bad shape n=%d c=%d h=%d w=%d classes=%d", n, c, h, w, classes);
    size_t sample = (size_t)c * h * w;
    if (sample > SIZE_MAX / sizeof(float) / (size_t)n)
        return so_err(SO_EINVAL, "synthetic dataset: %d samples of %zu values overflow", n, sample);
    so_dataset *d = dataset_new("synthetic");
    if (!d)
        return so_err(SO_ENOMEM, "cannot allocate a dataset");
    d->values = malloc((size_t)n * sample * sizeof(float));
    d->labels = malloc((size_t)n * sizeof(int32_t));
    if (!d->values || !d->labels) {
        so_dataset_destroy(d);
        return so_err(SO_ENOMEM, "synthetic dataset: cannot allocate %d samples of %zu values", n, sample);
    }
    d->n = n, d->c = c, d->h = h, d->w = w, d->classes = classes;
    so_rng r;
    so_rng_seed(&r, seed);
    for (size_t i = 0; i < (size_t)n * sample; i++)
        d->values[i] = so_rng_normal(&r);
    for (int i = 0; i < n; i++)
        d->labels[i] = (int32_t)so_rng_below(&r, (uint64_t)classes);
    *out = d;
    return 0;
}
