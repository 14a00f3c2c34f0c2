/* `scaleout bench allreduce|reduce-scatter|allgather|bcast`: the collective
 * benchmark, with OSU Micro-Benchmarks / nccl-tests conventions: one driver,
 * one small descriptor per collective (bus-bandwidth factor, check data),
 * columns time / algbw / busbw / #wrong, and every algorithm interleaved per
 * size against the MPI library's own blocking call in the same run. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "env.h"
#include "scaleout/err.h"
#include "scaleout/json.h"

#ifdef SCALEOUT_HAVE_MPI
#include "coll_bufs.h"
#include "scaleout/comm.h"
#include "scaleout/comm_async.h"
#include "scaleout/timer.h"
#endif

#define MAX_SIZES 64
#define MAX_ALGOS 16

int cli_parse_bytes(const char *s, size_t *out)
{
    char *end;
    double v = strtod(s, &end);
    double mul = 1;
    if (end == s || v < 0)
        return -1;
    switch (*end) {
    case 'k': case 'K': mul = 1024.0; end++; break;
    case 'm': case 'M': mul = 1048576.0; end++; break;
    case 'g': case 'G': mul = 1073741824.0; end++; break;
    default: break;
    }
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end || v * mul > 1e12)
        return -1;
    *out = (size_t)(v * mul);
    return 0;
}

/* "-m 4:64M" style short flags of OSU onto the long names of the option table. */
void cli_short_aliases(int argc, char **argv, const char *const map[][2])
{
    for (int i = 0; i < argc; i++)
        for (int k = 0; map[k][0]; k++)
            if (!strcmp(argv[i], map[k][0]))
                argv[i] = (char *)map[k][1];
}

#ifndef SCALEOUT_HAVE_MPI
int cmd_bench_coll(int argc, char **argv)
{
    (void)argc, (void)argv;
    return cli_error("bench", CLI_FAIL, "this build has no MPI (configure with -DSCALEOUT_MPI=ON)");
}
#else

/* One collective: its name, kind and nccl-tests bus-bandwidth factor. */
typedef struct {
    const char *name;
    so_coll_kind kind;
    double (*busbw)(int n);
} coll_desc;

static double bw_allreduce(int n) { return 2.0 * (n - 1) / n; }
static double bw_scatter(int n) { return (double)(n - 1) / n; }
static double bw_one(int n) { (void)n; return 1.0; }

static const coll_desc descs[] = {
    {"allreduce", SO_COLL_ALLREDUCE, bw_allreduce},
    {"reduce-scatter", SO_COLL_REDUCE_SCATTER, bw_scatter},
    {"allgather", SO_COLL_ALLGATHER, bw_scatter},
    {"bcast", SO_COLL_BCAST, bw_one},
};

typedef struct {
    const char *range, *sizes, *algo, *json, *csv, *tuning;
    int warmup, iters, rpn, check, registered;
    const char *transport, *dtype, *wire; /* names; NULL: auto, f32, as the buffer */
    int handles;                          /* through the communication thread: submit + wait */
} bench_opts;

typedef struct {
    so_comm *c;
    const coll_desc *d;
    int rank, size;
    float *send, *recv;   /* the buffers, of dt elements */
    so_dtype dt, wire;    /* element type of the buffers, and on the wire */
    size_t esz;
    int handles;          /* the vocabulary (so_comm_i*) instead of the blocking calls */
} bench_ctx;

/* The settings and the environment, as in every benchmark record (docs/FORMATS.md). */
static void json_header(so_json *js, const bench_opts *o)
{
    env_info e;
    env_collect(&e);
    so_json_str(js, "schema", "scaleout-bench-1");
    so_json_str(js, "kind", "collective");
    so_json_obj_begin(js, "config");
    so_json_str(js, "message_size", o->sizes ? "" : o->range);
    so_json_str(js, "sizes", o->sizes ? o->sizes : "");
    so_json_int(js, "warmup", o->warmup);
    so_json_int(js, "iterations", o->iters);
    so_json_str(js, "algo", o->algo);
    so_json_int(js, "ranks_per_node", o->rpn);
    so_json_bool(js, "check", o->check);
    so_json_bool(js, "registered", o->registered);
    so_json_str(js, "transport", o->transport ? o->transport : "auto");
    so_json_str(js, "dtype", o->dtype ? o->dtype : "f32");
    so_json_str(js, "wire", o->wire ? o->wire : (o->dtype ? o->dtype : "f32"));
    so_json_bool(js, "handles", o->handles);
    so_json_str(js, "tuning", o->tuning ? o->tuning : "");
    so_json_obj_end(js);
    env_write_json(js, &e, 1, 0);
}

/* Parses -m MIN:MAX (doubling) or --sizes a,b,c into sizes[]; returns the count or -1. */
static int make_sizes(const bench_opts *o, size_t *sizes)
{
    int n = 0;
    if (o->sizes) {
        char buf[1024];
        snprintf(buf, sizeof buf, "%s", o->sizes);
        for (char *t = strtok(buf, ","); t; t = strtok(NULL, ","))
            if (n == MAX_SIZES || cli_parse_bytes(t, &sizes[n++]))
                return -1;
        return n;
    }
    char lo[64], *hi;
    snprintf(lo, sizeof lo, "%s", o->range);
    if (!(hi = strchr(lo, ':')))
        return -1;
    *hi++ = 0;
    size_t a, b;
    if (cli_parse_bytes(lo, &a) || cli_parse_bytes(hi, &b) || a == 0 || b < a)
        return -1;
    for (size_t s = a; s <= b && n < MAX_SIZES; s *= 2)
        sizes[n++] = s;
    return n;
}

/* Check data: value of element i on rank r, and what the result must hold.
 * 16-bit types take smaller factors, so every partial sum stays an integer
 * below 256 (exact in BF16 and FP16) up to 8 ranks. */
static int factor(const bench_ctx *b, size_t i) { return b->dt == SO_DTYPE_F32 ? (int)(i % 13 + 1) : (int)(i % 3 + 1); }
static float in_val(const bench_ctx *b, int r, size_t i) { return (float)((r + 1) * factor(b, i)); }

static void put(const bench_ctx *b, void *buf, size_t i, float v)
{
    if (b->dt == SO_DTYPE_BF16)
        ((uint16_t *)buf)[i] = so_f32_to_bf16_1(v);
    else if (b->dt == SO_DTYPE_F16)
        ((uint16_t *)buf)[i] = so_f32_to_f16_1(v);
    else
        ((float *)buf)[i] = v;
}

static float get(const bench_ctx *b, const void *buf, size_t i)
{
    if (b->dt == SO_DTYPE_BF16)
        return so_bf16_to_f32_1(((const uint16_t *)buf)[i]);
    if (b->dt == SO_DTYPE_F16)
        return so_f16_to_f32_1(((const uint16_t *)buf)[i]);
    return ((const float *)buf)[i];
}

static void fill(bench_ctx *b, size_t count)
{
    size_t off, len;
    so_comm_block(count, b->size, b->rank, &off, &len);
    for (size_t i = 0; i < count; i++) {
        switch (b->d->kind) {
        case SO_COLL_ALLGATHER: put(b, b->recv, i, -1); break;
        case SO_COLL_BCAST: put(b, b->recv, i, b->rank == 0 ? (float)(i % 97 + 1) : -1); break;
        default: put(b, b->send, i, in_val(b, b->rank, i)); put(b, b->recv, i, -1);
        }
    }
    if (b->d->kind == SO_COLL_ALLGATHER)
        for (size_t i = 0; i < len; i++)
            put(b, b->send, i, (float)((off + i) % 97 + 1));
}

static size_t count_wrong(bench_ctx *b, size_t count)
{
    size_t off, len, bad = 0;
    float tri = (float)(b->size * (b->size + 1) / 2);
    so_comm_block(count, b->size, b->rank, &off, &len);
    switch (b->d->kind) {
    case SO_COLL_ALLREDUCE:
        for (size_t i = 0; i < count; i++)
            bad += get(b, b->recv, i) != tri * (float)factor(b, i);
        break;
    case SO_COLL_REDUCE_SCATTER:
        for (size_t i = 0; i < len; i++)
            bad += get(b, b->recv, i) != tri * (float)factor(b, off + i);
        break;
    case SO_COLL_ALLGATHER:
    default:
        for (size_t i = 0; i < count; i++)
            bad += get(b, b->recv, i) != (float)(i % 97 + 1);
    }
    return bad;
}

/* One run: the blocking call (so_comm_coll), or through the communication
 * thread (the vocabulary: submit, wait) with the element and wire types. */
static int run_once(bench_ctx *b, int algo, size_t count)
{
    if (!b->handles)
        return so_comm_coll(b->c, b->d->kind, algo, b->send, b->recv, count, SO_REDUCE_SUM, 0);
    so_coll_opts o = SO_COLL_OPTS_INIT;
    o.algo = algo;
    o.wire = b->wire == b->dt ? SO_DTYPE_F32 : b->wire;
    so_handle *h;
    int rc;
    switch (b->d->kind) {
    case SO_COLL_ALLREDUCE:
        rc = so_comm_iallreduce(b->c, b->send, b->recv, count, b->dt, SO_REDUCE_SUM, &o, &h);
        break;
    case SO_COLL_REDUCE_SCATTER:
        rc = so_comm_ireduce_scatter(b->c, b->send, b->recv, count, b->dt, SO_REDUCE_SUM, &o, &h);
        break;
    case SO_COLL_ALLGATHER: rc = so_comm_iallgather(b->c, b->send, b->recv, count, b->dt, &o, &h); break;
    default: rc = so_comm_ibcast(b->c, b->recv, count, b->dt, 0, &o, &h);
    }
    return rc ? rc : so_handle_wait(h);
}

/* Mean seconds per run over n runs after warm untimed ones (a barrier first). */
static int time_runs(bench_ctx *b, int algo, size_t count, int warm, int n, double *secs)
{
    if (!b->handles)
        return so_comm_time_coll(b->c, b->d->kind, algo, b->send, b->recv, count, 0, warm, n, secs);
    int rc = 0;
    for (int i = 0; i < warm && !rc; i++)
        rc = run_once(b, algo, count);
    if (rc || (rc = so_comm_barrier(b->c)))
        return rc;
    double t0 = so_now();
    for (int i = 0; i < n && !rc; i++)
        rc = run_once(b, algo, count);
    *secs = (so_now() - t0) / (n > 0 ? n : 1);
    return rc;
}

/* Default iteration count: enough to time small sizes, bounded for big ones. */
static int auto_iters(size_t bytes)
{
    double n = (double)(256 << 20) / (double)(bytes ? bytes : 1);
    return n > 1000 ? 1000 : n < 10 ? 10 : (int)n;
}

typedef struct {
    int algo;
    double sum_s; /* this rank's seconds over `runs` */
    int runs;
    double avg, mn, mx; /* across ranks, seconds per run */
    int64_t wrong;
    int model_n, model_ok; /* sizes with a prediction, and those within 25 % */
} algo_result;

/* Runs and times every algorithm at one size, interleaved: round 0 in list
 * order, round 1 reversed, so slow drift of the core placement hits all alike. */
static int run_size(bench_ctx *b, const bench_opts *o, size_t bytes, algo_result *res, int nalgo)
{
    size_t count = bytes / b->esz ? bytes / b->esz : 1;
    int iters = o->iters > 0 ? o->iters : auto_iters(bytes);
    int warm = o->warmup >= 0 ? o->warmup : (iters / 10 > 2 ? iters / 10 : 2);
    for (int k = 0; k < nalgo; k++) {
        res[k].sum_s = 0;
        res[k].runs = 0;
        res[k].wrong = 0;
        if (o->check) {
            fill(b, count);
            int rc = run_once(b, res[k].algo, count);
            if (rc)
                return rc;
            res[k].wrong = (int64_t)count_wrong(b, count);
        }
    }
    for (int round = 0; round < 2; round++)
        for (int j = 0; j < nalgo; j++) {
            algo_result *r = &res[round ? nalgo - 1 - j : j];
            int n = round ? iters - iters / 2 : iters / 2;
            double s;
            if (n <= 0)
                continue;
            int rc = time_runs(b, r->algo, count, round ? 0 : warm, n, &s);
            if (rc)
                return rc;
            r->sum_s += s * n;
            r->runs += n;
        }
    for (int k = 0; k < nalgo; k++) {
        double t = res[k].sum_s / res[k].runs, v[3] = {t, t, -t};
        int64_t wr = res[k].wrong;
        int rc = so_comm_allreduce_double(b->c, v, 1, SO_REDUCE_SUM);
        if (!rc)
            rc = so_comm_allreduce_double(b->c, v + 1, 2, SO_REDUCE_MAX);
        if (!rc)
            rc = so_comm_allreduce_i64(b->c, &wr, 1, SO_REDUCE_SUM);
        if (rc)
            return rc;
        res[k].avg = v[0] / b->size;
        res[k].mx = v[1];
        res[k].mn = -v[2];
        res[k].wrong = wr;
    }
    return 0;
}

/* One output row, to stdout, JSON and CSV. */
typedef struct {
    FILE *csv;
    so_json js;
    int json;
} sinks;

static void emit(bench_ctx *b, sinks *s, size_t bytes, const algo_result *r, double ref_avg,
                 double pred, int check)
{
    const char *name = so_coll_algo_name(b->d->kind, r->algo);
    double algbw = (double)bytes / r->avg * 1e-9, busbw = algbw * b->d->busbw(b->size);
    double ratio = ref_avg > 0 ? ref_avg / r->avg : NAN, err = pred > 0 ? (pred / r->avg - 1) * 100 : NAN;
    printf("%12zu %-18s %11.2f %11.2f %11.2f %8.3f %8.3f", bytes, name, r->avg * 1e6, r->mn * 1e6,
           r->mx * 1e6, algbw, busbw);
    if (check)
        printf(" %7lld", (long long)r->wrong);
    if (ref_avg > 0)
        printf(" %7.2fx", ratio);
    if (pred > 0)
        printf(" %10.2f %+6.0f%%", pred * 1e6, err);
    printf("\n");
    if (s->csv)
        fprintf(s->csv, "%s,%d,%zu,%s,%.4f,%.4f,%.4f,%.5f,%.5f,%lld,%.4f,%.4f,%.2f\n", b->d->name, b->size,
                bytes, name, r->avg * 1e6, r->mn * 1e6, r->mx * 1e6, algbw, busbw, (long long)r->wrong,
                ratio, pred * 1e6, err);
    if (s->json) {
        so_json_obj_begin(&s->js, NULL);
        so_json_int(&s->js, "bytes", (int64_t)bytes);
        so_json_str(&s->js, "algo", name);
        so_json_num(&s->js, "avg_us", r->avg * 1e6);
        so_json_num(&s->js, "min_us", r->mn * 1e6);
        so_json_num(&s->js, "max_us", r->mx * 1e6);
        so_json_num(&s->js, "algbw_gbs", algbw);
        so_json_num(&s->js, "busbw_gbs", busbw);
        so_json_int(&s->js, "wrong", r->wrong);
        so_json_num(&s->js, "speedup_vs_mpi", ratio);
        so_json_num(&s->js, "model_us", pred > 0 ? pred * 1e6 : NAN);
        so_json_num(&s->js, "model_err_pct", err);
        so_json_obj_end(&s->js);
    }
}

static void header(bench_ctx *b, const bench_opts *o, double ref, double memcpy_bw, int model)
{
    so_comm_node nd;
    so_comm_node_info(b->c, &nd);
    printf("# scaleout bench %s: %d ranks, %d node(s) (ranks-per-node %d), out of place, %s sum%s%s%s, "
           "transport %s%s\n",
           b->d->name, b->size, nd.num_nodes, o->rpn, so_dtype_name(b->dt), b->wire != b->dt ? " on a " : "",
           b->wire != b->dt ? so_dtype_name(b->wire) : "", b->wire != b->dt ? " wire" : "",
           so_transport_name(so_comm_get_transport(b->c)),
           b->handles ? ", through the communication thread (submit + wait)" : "");
    if (o->registered)
        printf("# registered buffers (so_comm_buf_alloc)\n");
    printf("# memcpy bandwidth (one rank, 64 MiB): %.2f GB/s; busbw = algbw * %.3f\n", memcpy_bw * 1e-9,
           b->d->busbw(b->size));
    printf("# %10s %-18s %11s %11s %11s %8s %8s", "size(B)", "algorithm", "avg(us)", "min(us)", "max(us)",
           "algbw", "busbw");
    if (o->check)
        printf(" %7s", "#wrong");
    if (ref)
        printf(" %8s", "vs_mpi");
    if (model)
        printf(" %10s %7s", "model(us)", "err");
    printf("\n");
}

/* Per algorithm: sizes whose model time is within 25 % of this run's time. */
static void model_summary(const bench_opts *o, const algo_result *res, int nalgo)
{
    printf("# model (%s) within 25%% of the measured time:", o->tuning ? o->tuning : "built-in");
    for (int k = 0; k < nalgo; k++)
        if (res[k].model_n > 0)
            printf(" %s %d/%d", so_allreduce_algo_name((so_allreduce_algo)res[k].algo), res[k].model_ok,
                   res[k].model_n);
    printf("\n");
}

/* Which of hier's paths ran (registered buffers should make them zero-copy). */
static void path_summary(void)
{
    uint64_t zc, copied, tcp, mpi;
    so_comm_hier_path_counts(&zc, &copied);
    so_comm_hier_across_counts(&tcp, &mpi);
    if (zc + copied > 0)
        printf("# hier above the small-message size: %llu zero-copy calls, %llu through the window (rank 0)\n",
               (unsigned long long)zc, (unsigned long long)copied);
    if (tcp + mpi > 0)
        printf("# hier across nodes: %llu steps on scaleout's tcp ring, %llu on MPI (rank 0)\n",
               (unsigned long long)tcp, (unsigned long long)mpi);
}

static int bench_run(bench_ctx *b, const bench_opts *o, const size_t *sizes, int nsizes,
                     algo_result *res, int nalgo, sinks *s)
{
    size_t maxb = 0;
    for (int i = 0; i < nsizes; i++)
        maxb = sizes[i] > maxb ? sizes[i] : maxb;
    /* Registered: every algorithm, the MPI reference included, runs on them. */
    int rc = coll_bufs_alloc(b->c, (maxb / sizeof(float) + 1) * sizeof(float), o->registered, &b->send, &b->recv);
    /* size(B) counts the buffer's bytes: the same elements whatever the wire carries. */
    if (rc)
        return rc;
    for (int k = 0; k < nalgo; k++)
        res[k].model_n = res[k].model_ok = 0;
    double bw = b->rank == 0 ? so_comm_memcpy_bw(64 << 20) : 0;
    int model = b->d->kind == SO_COLL_ALLREDUCE;
    if (b->rank == 0)
        header(b, o, res[0].algo == SO_COLL_REFERENCE && nalgo > 1, bw, model);
    int64_t wrong = 0;
    for (int i = 0; i < nsizes; i++) {
        rc = run_size(b, o, sizes[i], res, nalgo);
        if (rc)
            return rc;
        double ref = res[0].algo == SO_COLL_REFERENCE && nalgo > 1 ? res[0].avg : 0, best = INFINITY;
        int bi = -1;
        for (int k = 0; k < nalgo; k++) {
            wrong += res[k].wrong;
            double pred = model && res[k].algo >= 0
                              ? so_comm_predict((so_allreduce_algo)res[k].algo, sizes[i], b->size, o->rpn,
                                                so_comm_get_tuning(b->c))
                              : 0;
            if (b->rank == 0)
                emit(b, s, sizes[i], &res[k], ref, pred, o->check);
            if (pred > 0) {
                res[k].model_n++;
                res[k].model_ok += fabs(pred / res[k].avg - 1) <= 0.25;
            }
            if (res[k].algo > 0 && !(model && res[k].algo == SO_ALLREDUCE_AUTO) && res[k].avg < best) {
                best = res[k].avg;
                bi = k;
            }
        }
        if (b->rank == 0 && ref > 0 && bi >= 0)
            printf("# %zu B: best scaleout algorithm %s, %.2fx the speed of %s\n", sizes[i],
                   so_coll_algo_name(b->d->kind, res[bi].algo), ref / best,
                   so_coll_algo_name(b->d->kind, SO_COLL_REFERENCE));
        fflush(stdout);
    }
    if (b->rank == 0 && model)
        model_summary(o, res, nalgo);
    if (b->rank == 0)
        path_summary();
    return wrong ? 1 : 0;
}

/* The algorithm list: all (the reference followed by every algorithm), or
 * names separated by commas (the reference by its name, e.g. MPI_Allreduce:
 * first in the list, it is the speedup column's baseline). */
static int make_algos(const coll_desc *d, const char *name, int with_ref, algo_result *res)
{
    int n = 0;
    if (strcmp(name, "all") == 0) {
        if (with_ref)
            res[n++].algo = SO_COLL_REFERENCE;
        for (int a = 0; a < so_coll_algo_count(d->kind) && n < MAX_ALGOS; a++)
            res[n++].algo = a;
        return n;
    }
    char one[64];
    for (const char *p = name; n < MAX_ALGOS; p++) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof one)
            return so_err(SO_EINVAL, "bad algorithm list '%s'", name), -1;
        memcpy(one, p, len);
        one[len] = '\0';
        if (so_coll_algo_parse(d->kind, one, &res[n++].algo))
            return -1;
        p += len;
        if (!*p)
            return n;
    }
    return so_err(SO_EINVAL, "--algo: more than %d algorithms", MAX_ALGOS), -1;
}

static int bench_main(const coll_desc *d, const bench_opts *o, const size_t *sizes, int nsizes)
{
    bench_ctx b = {0};
    b.d = d;
    algo_result res[MAX_ALGOS];
    so_comm_tuning t;
    if (o->tuning && so_comm_tuning_load(o->tuning, &t))
        return cli_error("bench", CLI_USAGE, "--tuning: %s", so_errmsg());
    so_transport tp = SO_TRANSPORT_AUTO;
    if (o->transport && so_transport_parse(o->transport, &tp))
        return cli_error("bench", CLI_USAGE, "--transport: %s", so_errmsg());
    b.dt = b.wire = SO_DTYPE_F32;
    if ((o->dtype && so_dtype_parse(o->dtype, &b.dt)) || (o->wire && so_dtype_parse(o->wire, &b.wire)))
        return cli_error("bench", CLI_USAGE, "--dtype / --wire: %s", so_errmsg());
    if (!o->wire)
        b.wire = b.dt;
    if (b.dt != SO_DTYPE_F32 && b.dt != SO_DTYPE_BF16 && b.dt != SO_DTYPE_F16)
        return cli_error("bench", CLI_USAGE, "--dtype: f32, bf16 or f16");
    if (b.wire != b.dt && !(b.dt == SO_DTYPE_F32 && (b.wire == SO_DTYPE_BF16 || b.wire == SO_DTYPE_F16)))
        return cli_error("bench", CLI_USAGE, "--wire: f32 buffers go on a bf16 or f16 wire, others as they are");
    b.esz = so_dtype_size(b.dt);
    b.handles = o->handles || b.dt != SO_DTYPE_F32 || b.wire != b.dt;
    int nalgo = make_algos(d, o->algo, !b.handles, res); /* the blocking reference times f32 on this thread */
    if (nalgo < 0)
        return cli_error("bench", CLI_USAGE, "--algo: %s", so_errmsg());
    for (int k = 0; b.handles && k < nalgo; k++)
        if (res[k].algo == SO_COLL_REFERENCE)
            return cli_error("bench", CLI_USAGE, "--algo: the blocking MPI reference times f32 only, not through "
                                                 "the communication thread (name the library's own algorithm: mpi)");
    if (so_comm_init(NULL, NULL, &b.c))
        so_comm_abort(NULL, CLI_FAIL, so_errmsg());
    b.rank = so_comm_rank(b.c);
    b.size = so_comm_size(b.c);
    if (o->tuning)
        so_comm_set_tuning(b.c, &t);
    if (so_comm_set_ranks_per_node(b.c, o->rpn) || so_comm_set_transport(b.c, tp))
        so_comm_abort(b.c, CLI_FAIL, so_errmsg());
    sinks s = {0};
    if (b.rank == 0 && o->csv && !(s.csv = fopen(o->csv, "w")))
        so_comm_abort(b.c, CLI_FAIL, "cannot write the --csv file");
    FILE *jf = NULL;
    if (b.rank == 0 && o->json) {
        if (!(jf = fopen(o->json, "w")))
            so_comm_abort(b.c, CLI_FAIL, "cannot write the --json file");
        so_json_init(&s.js, jf, 1);
        s.json = 1;
        so_json_obj_begin(&s.js, NULL);
        so_json_str(&s.js, "collective", d->name);
        so_json_int(&s.js, "ranks", b.size);
        so_json_int(&s.js, "ranks_per_node", o->rpn);
        json_header(&s.js, o);
        so_json_arr_begin(&s.js, "results");
    }
    if (s.csv)
        fprintf(s.csv, "collective,ranks,bytes,algo,avg_us,min_us,max_us,algbw_gbs,busbw_gbs,wrong,speedup_vs_mpi,"
                       "model_us,model_err_pct\n");
    int rc = bench_run(&b, o, sizes, nsizes, res, nalgo, &s);
    if (rc < 0)
        so_comm_abort(b.c, CLI_FAIL, so_errmsg());
    if (s.json) {
        so_json_arr_end(&s.js);
        so_json_obj_end(&s.js);
        fputc('\n', jf);
        fclose(jf);
    }
    if (s.csv)
        fclose(s.csv);
    if (rc && b.rank == 0)
        fprintf(stderr, "scaleout bench: wrong results (see #wrong)\n");
    coll_bufs_free(b.c, o->registered, b.send, b.recv);
    so_comm_finalize(b.c);
    return rc ? CLI_FAIL : CLI_OK;
}

int cmd_bench_coll(int argc, char **argv)
{
    const coll_desc *d = NULL;
    for (size_t i = 0; argc > 0 && i < sizeof descs / sizeof *descs; i++)
        if (!strcmp(argv[0], descs[i].name))
            d = &descs[i];
    if (!d)
        return cli_error("bench", CLI_USAGE, "%s (choose allreduce, reduce-scatter, allgather or bcast)",
                         argc > 0 ? "unknown collective" : "missing collective");
    bench_opts o = {"4:64M", NULL, "all", NULL, NULL, NULL, -1, 0, 0, 0, 0, NULL, NULL, NULL, 0};
    const cli_opt opts[] = {
        {"message-size", OPT_STR, &o.range, "MIN:MAX", "sizes in bytes, doubling (-m; K/M/G suffixes)", 0, -1, NULL},
        {"sizes", OPT_STR, &o.sizes, "A,B,..", "explicit list of sizes instead of -m", 0, -1, NULL},
        {"warmup", OPT_INT, &o.warmup, "N", "untimed runs per size and algorithm (-x; -1 = auto)", -1, 1e6, NULL},
        {"iterations", OPT_INT, &o.iters, "N", "timed runs per size and algorithm (-i; 0 = auto)", 0, 1e7, NULL},
        {"algo", OPT_STR, &o.algo, "NAME", "all (with the MPI reference), or a comma list (e.g. MPI_Allreduce,hier)", 0, -1, NULL},
        {"ranks-per-node", OPT_INT, &o.rpn, "K", "emulate nodes of K ranks (0 = real nodes)", 0, 1e6, NULL},
        {"check", OPT_FLAG, &o.check, NULL, "verify results (exit 1 if any is wrong)", 0, -1, NULL},
        {"registered", OPT_FLAG, &o.registered, NULL,
         "send/recv in registered memory (so_comm_buf_alloc): hier runs zero-copy", 0, -1, NULL},
        {"transport", OPT_STR, &o.transport, "NAME",
         "how the hand-written algorithms reach the ranks: auto, mpi, shm (one host), tcp", 0, -1, NULL},
        {"dtype", OPT_STR, &o.dtype, "TYPE", "element type of the buffers: f32 (default), bf16, f16", 0, -1, NULL},
        {"wire", OPT_STR, &o.wire, "TYPE", "f32 buffers sent as bf16 or f16 (rounded once, reduced in f32)", 0, -1,
         NULL},
        {"handles", OPT_FLAG, &o.handles, NULL,
         "through the communication thread (so_comm_i*, submit + wait); implied by --dtype / --wire", 0, -1, NULL},
        {"tuning", OPT_STR, &o.tuning, "FILE", "tuning table for auto and the model column", 0, -1, NULL},
        {"json", OPT_STR, &o.json, "FILE", "also write the results as JSON", 0, -1, NULL},
        {"csv", OPT_STR, &o.csv, "FILE", "also write the results as CSV", 0, -1, NULL},
        {NULL, 0, NULL, NULL, NULL, 0, 0, NULL}};
    static const char *const aliases[][2] = {
        {"-m", "--message-size"}, {"-x", "--warmup"}, {"-i", "--iterations"}, {NULL, NULL}};
    cli_short_aliases(argc - 1, argv + 1, aliases);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "bench %s", d->name);
    int rc = cli_parse(cmd, "Times a collective for every message size (OSU / nccl-tests style); run under mpirun.",
                       opts, argc - 1, argv + 1);
    if (rc)
        return rc == CLI_HELP ? CLI_OK : rc;
    size_t sizes[MAX_SIZES];
    int nsizes = make_sizes(&o, sizes);
    if (nsizes <= 0)
        return cli_error(cmd, CLI_USAGE, "bad sizes '%s' (want MIN:MAX or a,b,c in bytes, K/M/G suffixes)",
                         o.sizes ? o.sizes : o.range);
    return bench_main(d, &o, sizes, nsizes);
}
#endif
