/* `scaleout data`: tools for image data sets (docs/DATA.md).
 *   data index DIR   writes DIR/scaleout.idx (every sample's file, offset,
 *                    length and label) so start-up reads one file instead of
 *                    listing a million;
 *   data bench DIR   decode + augment throughput alone, per thread count;
 *   data ls DIR      one line per sample: label, CRC32C of the encoded image,
 *                    bytes, source (cross-checks against other readers). */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "scaleout/cpu.h"
#include "scaleout/crc32c.h"
#include "scaleout/data.h"
#include "scaleout/err.h"
#include "scaleout/json.h"
#include "scaleout/mem.h"
#include "scaleout/timer.h"

static const char *const kinds[] = {"auto", "imagefolder", "tfrecord", NULL};
static const char *const splits[] = {"train", "val", NULL};

int cli_parse_crop_scale(const char *cmd, const char *arg, float *lo, float *hi)
{
    char *end;
    double a = strtod(arg, &end), b = 1.0;
    if (*end == ',')
        b = strtod(end + 1, &end);
    if (end == arg || *end || !(a > 0 && a <= b && b <= 1))
        return cli_error(cmd, CLI_USAGE, "--crop-scale: '%s' is not MIN[,MAX] with 0 < MIN <= MAX <= 1", arg);
    *lo = (float)a;
    *hi = (float)b;
    return 0;
}

const char *cli_image_kind(const char *dir)
{
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/train", dir);
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return "imagefolder";
    DIR *d = opendir(dir);
    struct dirent *e;
    const char *kind = NULL;
    while (d && !kind && (e = readdir(d)))
        if (!strncmp(e->d_name, "train-", 6) && strstr(e->d_name, "-of-"))
            kind = "tfrecord";
    if (d)
        closedir(d);
    return kind;
}

static int resolve_kind(const char *cmd, const char *dir, const char **kind)
{
    if (strcmp(*kind, "auto"))
        return 0;
    if (!(*kind = cli_image_kind(dir)))
        return cli_error(cmd, CLI_USAGE, "%s: neither an imagefolder tree (train/<class>/...) nor TFRecord shards "
                                         "(train-*-of-*); say which with --dataset", dir);
    return 0;
}

static int needs_dir(const char *cmd, int argc, char **argv, const char **dir)
{
    if (argc < 1 || argv[0][0] == '-')
        return cli_error(cmd, CLI_USAGE, "needs the data set directory first (scaleout %s DIR [options])", cmd);
    *dir = argv[0];
    return 0;
}

/* ---- data index ------------------------------------------------------------------ */

static int cmd_data_index(int argc, char **argv)
{
    const char *dir = NULL, *kind = "auto", *out = NULL;
    int rc = needs_dir("data index", argc, argv, &dir);
    if (rc)
        return rc;
    const cli_opt opts[] = {
        {"dataset", OPT_CHOICE, &kind, "KIND", "data set kind (auto: detected)", 0, -1, kinds},
        {"output", OPT_STR, &out, "FILE", "index file (default DIR/scaleout.idx)", 0, -1, NULL},
        {NULL, 0, NULL, NULL, NULL, 0, 0, NULL}};
    rc = cli_parse("data index", "Indexes an image data set: every sample's file, offset, length and label.", opts,
                   argc - 1, argv + 1);
    if (rc)
        return rc == CLI_HELP ? CLI_OK : rc;
    if ((rc = resolve_kind("data index", dir, &kind)))
        return rc;
    long n = 0;
    double t0 = so_now();
    if ((rc = so_image_index_write(kind, dir, NULL, out, &n)))
        return cli_error("data index", cli_exit_code(rc), "%s", so_errmsg());
    printf("indexed %ld samples of %s (%s, both splits) in %.2f s: %s%s\n", n, dir, kind, so_now() - t0,
           out ? out : dir, out ? "" : "/scaleout.idx");
    return CLI_OK;
}

/* ---- data ls ---------------------------------------------------------------------- */

static int cmd_data_ls(int argc, char **argv)
{
    const char *dir = NULL, *kind = "auto", *split = "train", *index = NULL;
    int offset = 1;
    int rc = needs_dir("data ls", argc, argv, &dir);
    if (rc)
        return rc;
    const cli_opt opts[] = {
        {"dataset", OPT_CHOICE, &kind, "KIND", "data set kind (auto: detected)", 0, -1, kinds},
        {"split", OPT_CHOICE, &split, "SPLIT", "which split", 0, -1, splits},
        {"label-offset", OPT_INT, &offset, "K", "tfrecord: subtracted from stored labels", -(1 << 30), 1 << 30, NULL},
        {"data-index", OPT_STR, &index, "FILE", "index file (default DIR/scaleout.idx when present)", 0, -1, NULL},
        {NULL, 0, NULL, NULL, NULL, 0, 0, NULL}};
    rc = cli_parse("data ls", "Lists the samples: label, CRC32C of the encoded image, bytes, source.", opts, argc - 1,
                   argv + 1);
    if (rc)
        return rc == CLI_HELP ? CLI_OK : rc;
    if ((rc = resolve_kind("data ls", dir, &kind)))
        return rc;
    so_image_opts o;
    so_image_opts_defaults(&o);
    o.label_offset = offset;
    o.index = index;
    so_dataset *d = NULL;
    if ((rc = so_dataset_open_images(kind, dir, !strcmp(split, "train"), &o, &d)))
        return cli_error("data ls", cli_exit_code(rc), "%s", so_errmsg());
    for (int i = 0; !rc && i < d->n; i++) {
        uint8_t *buf = NULL;
        size_t len = 0;
        const char *src = NULL;
        int e = so_image_read(d, i, &buf, &len, &src);
        if (e)
            rc = cli_error("data ls", cli_exit_code(e), "%s", so_errmsg());
        else
            printf("%d %08x %zu %s\n", d->labels[i], so_crc32c(0, buf, len), len, src);
        free(buf);
    }
    so_dataset_destroy(d);
    return rc;
}

/* ---- data bench ------------------------------------------------------------------- */

typedef struct {
    const char *dir, *kind, *threads, *json, *dct, *index;
    int image_size, batch, images, eval, prefetch;
} bench_args;

typedef struct {
    int threads;
    double images_per_sec, startup_s, mb_per_s;
    long images, skipped;
} bench_run;

/* One pass: open (start-up timed to the first batch), then batches until
 * `images` samples were delivered; the first batch is left out of the rate. */
static int bench_one(const bench_args *a, int threads, bench_run *out)
{
    static const char *const dct[] = {"train", "all", "off"};
    so_image_opts o;
    so_image_opts_defaults(&o);
    o.image_size = a->image_size;
    o.index = a->index;
    so_dataset *d = NULL;
    so_loader *l = NULL;
    double t0 = so_now();
    int rc = so_dataset_open_images(a->kind, a->dir, 1, &o, &d);
    so_loader_config lc = {.batch = a->batch, .shuffle = 1, .drop_last = 0, .augment = !a->eval,
                           .prefetch = a->prefetch > 0 ? a->prefetch : 2 * threads, .seed = 1, .rank = 0, .world = 1,
                           .decode_threads = threads};
    for (int k = 0; k < 3; k++)
        if (!strcmp(a->dct, dct[k]))
            lc.dct_scale = k;
    if (!rc)
        rc = so_loader_create(d, &lc, &l);
    const float *x;
    const int32_t *y;
    int n, got = 1;
    long delivered = 0;
    double t1 = 0;
    for (int epoch = 0; !rc && delivered < a->images; epoch++) {
        rc = so_loader_start_epoch(l, epoch);
        while (!rc && delivered < a->images && (got = so_loader_next(l, &x, &y, &n)) > 0) {
            if (t1 == 0) {
                t1 = so_now();
                out->startup_s = t1 - t0;
                delivered = 0; /* the rate counts from the first batch's arrival */
                continue;
            }
            delivered += n;
        }
        if (got < 0)
            rc = got;
    }
    double t2 = so_now();
    so_loader_stats st;
    so_loader_get_stats(l, &st);
    out->threads = threads;
    out->images = delivered;
    out->skipped = st.skipped;
    out->images_per_sec = t2 > t1 ? delivered / (t2 - t1) : 0;
    out->mb_per_s = t2 > t1 && st.decoded ? st.read_bytes / st.decoded * out->images_per_sec / 1e6 : 0;
    so_loader_destroy(l);
    so_dataset_destroy(d);
    return rc;
}

static void bench_json(FILE *f, const bench_args *a, const bench_run *runs, int nruns)
{
    so_json js;
    so_json_init(&js, f, 1);
    so_json_obj_begin(&js, NULL);
    so_json_str(&js, "benchmark", "data");
    so_json_str(&js, "data_dir", a->dir);
    so_json_str(&js, "dataset", a->kind);
    so_json_str(&js, "transform", a->eval ? "eval" : "train");
    so_json_str(&js, "dct_scale", a->dct);
    so_json_int(&js, "image_size", a->image_size);
    so_json_int(&js, "batch_size", a->batch);
    so_json_str(&js, "cpu_isa", so_isa_label(so_cpu_isa()));
    so_json_num(&js, "images_per_sec", nruns ? runs[0].images_per_sec : 0);
    so_json_num(&js, "startup_seconds", nruns ? runs[0].startup_s : 0);
    so_json_arr_begin(&js, "runs");
    for (int k = 0; k < nruns; k++) {
        so_json_obj_begin(&js, NULL);
        so_json_int(&js, "decode_threads", runs[k].threads);
        so_json_num(&js, "images_per_sec", runs[k].images_per_sec);
        so_json_num(&js, "images_per_sec_per_thread", runs[k].images_per_sec / runs[k].threads);
        so_json_num(&js, "read_mb_per_sec", runs[k].mb_per_s);
        so_json_num(&js, "startup_seconds", runs[k].startup_s);
        so_json_int(&js, "images", runs[k].images);
        so_json_int(&js, "skipped", runs[k].skipped);
        so_json_obj_end(&js);
    }
    so_json_arr_end(&js);
    so_json_obj_end(&js);
}

static int cmd_data_bench(int argc, char **argv)
{
    bench_args a = {.kind = "auto", .threads = "1", .dct = "train", .image_size = 224, .batch = 64, .images = 1024};
    int rc = needs_dir("data bench", argc, argv, &a.dir);
    if (rc)
        return rc;
    static const char *const dcts[] = {"train", "all", "off", NULL};
    const cli_opt opts[] = {
        {"dataset", OPT_CHOICE, &a.kind, "KIND", "data set kind (auto: detected)", 0, -1, kinds},
        {"decode-threads", OPT_STR, &a.threads, "N[,M...]", "decoding threads, one run per count", 0, -1, NULL},
        {"image-size", OPT_INT, &a.image_size, "S", "crop side", 1, 4096, NULL},
        {"batch-size", OPT_INT, &a.batch, "N", "samples per batch", 1, 1 << 16, NULL},
        {"images", OPT_INT, &a.images, "N", "images timed per run (after the first batch)", 1, 1 << 30, NULL},
        {"prefetch", OPT_INT, &a.prefetch, "N", "batches in flight (0: twice the threads)", 0, 64, NULL},
        {"eval", OPT_FLAG, &a.eval, NULL, "the eval transform (resize + centre crop) instead of the train one", 0, -1, NULL},
        {"dct-scale", OPT_CHOICE, &a.dct, "WHEN", "JPEG DCT-domain downscaling: train crops, all, or off", 0, -1, dcts},
        {"data-index", OPT_STR, &a.index, "FILE", "index file (default DIR/scaleout.idx when present)", 0, -1, NULL},
        {"json", OPT_STR, &a.json, "FILE", "write the results (images_per_sec, per run) as JSON", 0, -1, NULL},
        {NULL, 0, NULL, NULL, NULL, 0, 0, NULL}};
    rc = cli_parse("data bench", "Decode + augment throughput of the training split alone, per thread count.", opts,
                   argc - 1, argv + 1);
    if (rc)
        return rc == CLI_HELP ? CLI_OK : rc;
    if ((rc = resolve_kind("data bench", a.dir, &a.kind)))
        return rc;
    bench_run runs[16];
    int nruns = 0;
    for (const char *p = a.threads; *p && nruns < 16;) {
        char *end;
        long t = strtol(p, &end, 10);
        if (end == p || t < 1 || t > 256 || (*end && *end != ','))
            return cli_error("data bench", CLI_USAGE, "--decode-threads: '%s' is not a list like 1,2", a.threads);
        memset(&runs[nruns], 0, sizeof runs[nruns]);
        if ((rc = bench_one(&a, (int)t, &runs[nruns])))
            return cli_error("data bench", cli_exit_code(rc), "%s", so_errmsg());
        printf("decode threads %2d: %8.1f images/s (%.1f per thread), %.1f MB/s read, start-up %.3f s, %ld skipped\n",
               runs[nruns].threads, runs[nruns].images_per_sec, runs[nruns].images_per_sec / runs[nruns].threads,
               runs[nruns].mb_per_s, runs[nruns].startup_s, runs[nruns].skipped);
        nruns++;
        p = *end ? end + 1 : end;
    }
    if (!a.json)
        return CLI_OK;
    FILE *f = fopen(a.json, "w");
    if (!f)
        return cli_error("data bench", CLI_USAGE, "--json: cannot write '%s'", a.json);
    bench_json(f, &a, runs, nruns);
    return fclose(f) ? cli_error("data bench", CLI_FAIL, "--json: error writing '%s'", a.json) : CLI_OK;
}

int cmd_data(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)(int, char **);
    } subs[] = {{"index", cmd_data_index}, {"bench", cmd_data_bench}, {"ls", cmd_data_ls}};
    if (argc < 1 || !strcmp(argv[0], "-h") || !strcmp(argv[0], "--help")) {
        fprintf(argc < 1 ? stderr : stdout,
                "usage: scaleout data index|bench|ls DIR [options]   (scaleout data SUB --help)\n"
                "  index  write DIR/scaleout.idx: every sample's file, offset, length and label\n"
                "  bench  decode + augment throughput per thread count (--decode-threads 1,2 --json FILE)\n"
                "  ls     one line per sample: label, CRC32C of the encoded image, bytes, source\n");
        return argc < 1 ? CLI_USAGE : CLI_OK;
    }
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        if (!strcmp(argv[0], subs[i].name))
            return subs[i].run(argc - 1, argv + 1);
    return cli_error("data", CLI_USAGE, "unknown subcommand '%s' (index, bench, ls)", argv[0]);
}
