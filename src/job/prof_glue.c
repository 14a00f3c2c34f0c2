/* The profiler's MPI side for a job (see prof_glue.h): feeds the
 * async engine's per-bucket timings and the blocking collectives into the
 * recorder, aligns each rank's clock to rank 0's (prof_clock.c), and gathers every rank's trace events and statistics into one timeline
 * and one profile.json on rank 0. */
#include "core/test_hooks.h"
#include "prof_glue.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "prof_clock.h"
#include "prof_sched.h"
#include "scaleout/err.h"
#include "scaleout/json.h"
#include "scaleout/prof.h"
#include "scaleout/threads.h"
#include "scaleout/timer.h"

#define PROF_SKIP_STEPS 1 /* the first step creates oneDNN primitives (JIT): not in the statistics */

struct prof_glue {
    so_prof *p;
    dist_handle *dh;
    int rank, world;
    so_prof_detail detail;
    long first, last;
    char timeline[1024], profile[1024];
    const char *allreduce, *steps, *build_id;
    char *summary;                /* rank 0's short summary, after the finish */
    double origin;                /* rank 0's start on rank 0's clock */
    double start_offset, start_at;/* the offset to rank 0 measured at the start, and when */
    so_prof_clock clock;          /* this rank's clock -> rank 0's (set at the end) */
    so_prof_clock *clocks;        /* every rank's (after the end's exchange) */
    prof_clock_test test;         /* SCALEOUT_PROF_TEST_CLOCK (tests only) */
    so_node_span_fn node_fn;      /* the recorder's per-node hook, when the test skew wraps it */
    void *node_arg;
    so_dist dist;                 /* d with timed blocking collectives */
    const so_dist *inner;
    int sleep_rank, sleep_ms;     /* SCALEOUT_PROF_TEST_SLEEP (tests only) */
    int pipelined;                /* layout is set: profile.json gets "pipeline_schedule" */
    prof_sched_layout layout;
    long sched_step;              /* the step drawn, -1: none (agreed at the finish) */
    double sched_ref;             /* its start on rank 0's clock: the earliest rank's */
};

/* ---- hooks ---------------------------------------------------------------- */

/* The profiler's times: so_now(), or a test-skewed clock (prof_clock.h). */
static double skew(const prof_glue *g, double t) { return prof_clock_skew(&g->test, g->rank, t); }
static double now(const prof_glue *g) { return skew(g, so_now()); }

static void feed_async(prof_glue *g)
{
#ifdef SCALEOUT_HAVE_MPI
    so_async *a = dist_async(g->dh);
    if (!a)
        return;
    const so_async_stat *st;
    size_t n;
    so_async_stats(a, &st, &n);
    so_allreduce_algo algo = SO_ALLREDUCE_MPI;
    so_allreduce_algo_parse(g->allreduce, &algo);
    so_comm_node node;
    so_comm_node_info(dist_comm(g->dh), &node);
    for (size_t i = 0; i < n; i++) {
        so_allreduce_algo used = algo == SO_ALLREDUCE_AUTO
                                     ? so_comm_select(st[i].bytes, g->world, node.ranks_per_node,
                                                      so_comm_get_tuning(dist_comm(g->dh)))
                                     : algo;
        so_prof_comm_event e = {"allreduce", so_allreduce_algo_name(used), SO_PROF_USE_GRADIENTS, st[i].bytes,
                                st[i].tag, skew(g, st[i].t_queued), skew(g, st[i].t_started),
                                skew(g, st[i].t_finished)};
        so_prof_comm(g->p, &e);
    }
#else
    (void)g;
#endif
}

void prof_glue_span(prof_glue *g, so_span_kind kind, long step, int id, double t0, double t1)
{
    if (!g)
        return;
    if (kind == SO_SPAN_COMM_WAIT)
        feed_async(g); /* the round's stats are valid until the next submit */
    so_prof_span(g->p, kind, step, id, skew(g, t0), skew(g, t1));
    /* Test-only imbalance: the slow rank's extra time lands in its backward. */
    if (kind == SO_SPAN_FORWARD && g->rank == g->sleep_rank && g->sleep_ms > 0)
        usleep((useconds_t)g->sleep_ms * 1000);
}

static void node_span(void *arg, int node, int backward, double t0, double t1)
{
    prof_glue *g = arg;
    g->node_fn(g->node_arg, node, backward, skew(g, t0), skew(g, t1));
}

/* ---- timed blocking collectives ---------------------------------------------- */

static void record(prof_glue *g, const char *coll, so_prof_use use, size_t bytes, double t0, double t1)
{
    so_prof_comm_event e = {coll, "mpi", use, bytes, -1, t0, t0, t1};
    so_prof_comm(g->p, &e);
}

static int grad_submit(void *ctx, float *buf, size_t count, int bucket)
{
    prof_glue *g = ctx;
    return g->inner->grad_submit(g->inner->ctx, buf, count, bucket);
}

static int grad_wait(void *ctx, double *waited)
{
    prof_glue *g = ctx;
    return g->inner->grad_wait(g->inner->ctx, waited);
}

static int sum(void *ctx, double *v, int n)
{
    prof_glue *g = ctx;
    double t0 = now(g);
    int rc = g->inner->sum(g->inner->ctx, v, n);
    record(g, "allreduce", SO_PROF_USE_METRICS, (size_t)n * sizeof *v, t0, now(g));
    return rc;
}

static int max(void *ctx, double *v, int n)
{
    prof_glue *g = ctx;
    double t0 = now(g);
    int rc = g->inner->max(g->inner->ctx, v, n);
    record(g, "allreduce", SO_PROF_USE_METRICS, (size_t)n * sizeof *v, t0, now(g));
    return rc;
}

static int bcast(void *ctx, float *buf, size_t count)
{
    prof_glue *g = ctx;
    double t0 = now(g);
    int rc = g->inner->bcast(g->inner->ctx, buf, count);
    record(g, "bcast", SO_PROF_USE_PARAMS, count * sizeof *buf, t0, now(g));
    return rc;
}

static int allsum(void *ctx, double *v, size_t count)
{
    prof_glue *g = ctx;
    double t0 = now(g);
    int rc = g->inner->allsum(g->inner->ctx, v, count);
    record(g, "allreduce", SO_PROF_USE_BATCHNORM, count * sizeof *v, t0, now(g));
    return rc;
}

static double cost(void *ctx, size_t bytes)
{
    prof_glue *g = ctx;
    return g->inner->cost(g->inner->ctx, bytes);
}

static void *buf_alloc(void *ctx, size_t bytes)
{
    prof_glue *g = ctx;
    return g->inner->buf_alloc(g->inner->ctx, bytes);
}

static void buf_free(void *ctx, void *p)
{
    prof_glue *g = ctx;
    g->inner->buf_free(g->inner->ctx, p);
}

const so_dist *prof_glue_dist(prof_glue *g, const so_dist *d)
{
    if (!g || !d)
        return d;
    g->inner = d;
    g->dist = (so_dist){.rank = d->rank, .world = d->world, .ctx = g, .grad_submit = grad_submit,
                        .grad_wait = grad_wait, .sum = sum, .max = max, .bcast = bcast,
                        .allsum = d->allsum ? allsum : NULL, .cost = d->cost ? cost : NULL,
                        .buf_alloc = d->buf_alloc ? buf_alloc : NULL, .buf_free = d->buf_free ? buf_free : NULL,
                        .group = d->group};
    return &g->dist;
}

/* ---- clocks ------------------------------------------------------------------ */

/* The start's measurement of every rank's offset to rank 0, and rank 0's
 * origin (its start) for everybody. */
static int clock_start(prof_glue *g)
{
    int rc = prof_clock_measure(g->dh, &g->test, g->rank, g->world, &g->start_offset, &g->start_at);
#ifdef SCALEOUT_HAVE_MPI
    if (!rc && dist_comm(g->dh) && g->world > 1)
        rc = so_comm_bcast_bytes(dist_comm(g->dh), &g->origin, sizeof g->origin, 0);
#endif
    return rc;
}

/* The end's measurement, the linear model, and every rank's model on every
 * rank (a world x 3 array summed over ranks). */
static int clock_end(prof_glue *g)
{
    double o2, a2;
    int rc = prof_clock_measure(g->dh, &g->test, g->rank, g->world, &o2, &a2);
    if (rc)
        return rc;
    g->clock = prof_clock_model(g->start_offset, g->start_at, o2, a2, g->test.mode);
    double *v = calloc((size_t)g->world * 3, sizeof *v);
    if (!v)
        return so_err(SO_ENOMEM, "out of memory");
    memcpy(v + 3 * g->rank, (double[3]){g->clock.offset, g->clock.drift, g->clock.t_ref}, sizeof(double[3]));
    rc = g->inner && g->world > 1 ? g->inner->sum(g->inner->ctx, v, 3 * g->world) : 0;
    for (int r = 0; !rc && r < g->world; r++)
        g->clocks[r] = (so_prof_clock){v[3 * r], v[3 * r + 1], v[3 * r + 2]};
    free(v);
    return rc;
}

/* ---- start ------------------------------------------------------------------- */

static int paths(prof_glue *g, const so_job_prof_config *o)
{
    const char *env = getenv("SCALEOUT_TIMELINE");
    if (env && *env)
        snprintf(g->timeline, sizeof g->timeline, "%s", env);
    else if (o->dir)
        snprintf(g->timeline, sizeof g->timeline, "%s/timeline.json", o->dir);
    if (o->dir)
        snprintf(g->profile, sizeof g->profile, "%s/profile.json", o->dir);
    if (g->rank == 0 && o->dir && mkdir(o->dir, 0777) && errno != EEXIST)
        return so_err(SO_EINVAL, "--profile: cannot create directory '%s': %s", o->dir,
                         strerror(errno));
    /* Fail before training, not after it, when a file cannot be written. */
    const char *files[2] = {g->timeline, g->profile};
    for (int i = 0; g->rank == 0 && i < 2; i++) {
        FILE *f = files[i][0] ? fopen(files[i], "w") : NULL;
        if (files[i][0] && !f)
            return so_err(SO_EINVAL, "%s: cannot write '%s': %s",
                             i == 0 && env && *env ? "SCALEOUT_TIMELINE" : "--profile", files[i], strerror(errno));
        if (f)
            fclose(f);
    }
    return 0;
}

static void test_sleep(prof_glue *g)
{
    const char *s = so_test_hook("SCALEOUT_PROF_TEST_SLEEP"); /* "RANK:MS", tests only */
    g->sleep_rank = -1;
    if (s && sscanf(s, "%d:%d", &g->sleep_rank, &g->sleep_ms) != 2)
        g->sleep_rank = -1;
}

static int setup(prof_glue *g, const so_job_prof_config *o, so_model *m)
{
    int rc = paths(g, o);
    if (rc)
        return rc;
    char msg[256];
    const char *flag = so_prof_detail_parse(o->detail, &g->detail) ? "profile-detail"
                       : so_prof_window_parse(o->steps, &g->first, &g->last) ? "timeline-steps" : NULL;
    if (flag) {
        snprintf(msg, sizeof msg, "%s", so_errmsg());
        return so_err(SO_EINVAL, "--%s: %s", flag, msg);
    }
    g->clocks = calloc((size_t)g->world, sizeof *g->clocks);
    so_prof_config pc = {g->detail, g->first, g->last, g->rank, 0, PROF_SKIP_STEPS};
    if (!g->clocks)
        return so_err(SO_ENOMEM, "profiler: out of memory");
    if (so_prof_create(&pc, &g->p) || so_prof_attach_model(g->p, m)) {
        snprintf(msg, sizeof msg, "%s", so_errmsg());
        return so_err(SO_EINVAL, "profiler: %s", msg);
    }
    test_sleep(g);
    if (g->test.rank == g->rank && m->on_node) { /* the skewed clock reaches per-node spans too */
        g->node_fn = m->on_node;
        g->node_arg = m->on_node_arg;
        m->on_node = node_span;
        m->on_node_arg = g;
    }
    return 0;
}

int prof_glue_start(const so_job_prof_config *o, const char *allreduce, const char *build_id, dist_handle *dh,
                    so_model *m, prof_glue **out)
{
    *out = NULL;
    const char *env = getenv("SCALEOUT_TIMELINE");
    if (!o->dir && !(env && *env))
        return 0;
    prof_glue *g = calloc(1, sizeof *g);
    if (!g)
        return dist_agree(dh, so_err(SO_ENOMEM, "out of memory"));
    const so_dist *d = dist_get(dh);
    g->dh = dh;
    g->rank = d ? d->rank : 0;
    g->world = d ? d->world : 1;
    g->allreduce = allreduce ? allreduce : "auto";
    g->build_id = build_id ? build_id : "";
    g->steps = o->steps;
    g->origin = so_now();
    prof_clock_test_init(&g->test, g->origin);
    g->origin = now(g);
    int rc = setup(g, o, m);
    /* Every rank learns whether any failed (rank 0 owns the files). */
    if ((rc = dist_agree(dh, rc)) || (rc = clock_start(g))) {
        prof_glue_free(g, m);
        return rc;
    }
    *out = g;
    return 0;
}

void prof_glue_free(prof_glue *g, so_model *m)
{
    if (!g)
        return;
    if (m && m->on_node == node_span && m->on_node_arg == g) {
        m->on_node = g->node_fn;
        m->on_node_arg = g->node_arg;
    }
    so_prof_detach_model(g->p, m);
    so_prof_destroy(g->p);
    free(g->clocks);
    free(g->summary);
    free(g);
}

void prof_glue_pipeline(prof_glue *g, const prof_sched_layout *l)
{
    if (!g || !l)
        return;
    g->layout = *l;
    g->pipelined = 1;
}

/* ---- finish: gather, write, summarise ---------------------------------------- */

/* Every rank's totals on every rank: a world x fields array summed over ranks. */
static int gather_totals(prof_glue *g, so_prof_totals *all)
{
    const int nf = SO_PROF_TOTALS_FIELDS + 1;
    double *v = calloc((size_t)g->world * nf, sizeof *v);
    if (!v)
        return so_err(SO_ENOMEM, "out of memory");
    so_prof_totals mine;
    so_prof_get_totals(g->p, &mine);
    so_prof_totals_pack(&mine, v + (size_t)g->rank * nf);
    int rc = g->inner && g->world > 1 ? g->inner->sum(g->inner->ctx, v, g->world * nf) : 0;
    for (int r = 0; !rc && r < g->world; r++)
        so_prof_totals_unpack(v + (size_t)r * nf, &all[r]);
    free(v);
    return rc;
}

/* The per-step load balance over the last STEP_LB_MAX measured steps: every
 * rank's per-step useful compute, as a world x steps array summed over ranks. */
#define STEP_LB_MAX 20000
static int step_balance(prof_glue *g, so_prof_pop *pop)
{
    long n;
    const double *u = so_prof_step_useful(g->p, &n);
    double least = -(double)n; /* max of -n = -(min n): ranks agree on the count */
    int rc = g->inner && g->world > 1 ? g->inner->max(g->inner->ctx, &least, 1) : 0;
    long m = (long)-least < STEP_LB_MAX ? (long)-least : STEP_LB_MAX;
    if (rc || m < 1)
        return rc;
    double *v = calloc((size_t)g->world * (size_t)m, sizeof *v);
    if (!v)
        return so_err(SO_ENOMEM, "out of memory");
    memcpy(v + (size_t)g->rank * m, u + (n - m), (size_t)m * sizeof *v);
    rc = g->inner && g->world > 1 ? g->inner->sum(g->inner->ctx, v, (int)(g->world * m)) : 0;
    if (!rc)
        so_prof_pop_steps(v, g->world, m, pop);
    free(v);
    return rc;
}

/* Rank 0 receives every rank's text (written by fn into a memory stream),
 * with the parts' sizes; other ranks get *out NULL. */
static int gather_text(prof_glue *g, int (*fn)(prof_glue *, FILE *), char **out, size_t *sizes)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return so_err(SO_ENOMEM, "out of memory");
    int rc = fn(g, f);
    if (fclose(f) && !rc)
        rc = so_err(SO_ENOMEM, "out of memory");
    *out = NULL;
    if (g->world == 1 || rc) {
        *out = buf;
        sizes[0] = len;
        return rc;
    }
#ifdef SCALEOUT_HAVE_MPI
    void *all = NULL;
    rc = so_comm_gather_bytes(dist_comm(g->dh), buf, len, 0, &all, sizes);
    *out = all;
#endif
    free(buf);
    return rc;
}

/* The step of the pipeline schedule, rank 0's choice for everybody, and its
 * start: the earliest rank's on rank 0's clock (a min as a max of negatives). */
static int sched_agree(prof_glue *g)
{
    double v[2] = {g->rank == 0 ? (double)prof_sched_choose(g->p, PROF_SKIP_STEPS) : 0, 0};
    int rc = g->inner && g->world > 1 ? g->inner->sum(g->inner->ctx, v, 1) : 0;
    g->sched_step = (long)v[0];
    double t0 = g->sched_step >= 0 ? prof_sched_step_start(g->p, g->sched_step) : NAN;
    v[1] = isfinite(t0) ? -so_prof_clock_map(&g->clock, t0) : -1e300;
    if (!rc && g->inner && g->world > 1)
        rc = g->inner->max(g->inner->ctx, v + 1, 1);
    g->sched_ref = -v[1];
    return rc;
}

static int sched_text(prof_glue *g, FILE *f)
{
    return prof_sched_write_rank(f, g->p, g->sched_step, g->rank, &g->layout, &g->clock, g->sched_ref);
}

static int trace_text(prof_glue *g, FILE *f) { return so_prof_write_trace(g->p, f, &g->clock, g->origin); }
static int stats_text(prof_glue *g, FILE *f) { return so_prof_write_rank_json(g->p, f); }

/* Writes parts[0..world) (consecutive in `parts`) joined by sep. */
static void write_parts(FILE *f, const char *parts, const size_t *sizes, int world, const char *sep)
{
    size_t off = 0;
    for (int r = 0; r < world; r++) {
        if (r)
            fputs(sep, f);
        fwrite(parts + off, 1, sizes[r], f);
        off += sizes[r];
    }
}

static int write_timeline(prof_glue *g, const char *parts, const size_t *sizes)
{
    FILE *f = fopen(g->timeline, "w");
    if (!f)
        return so_err(SO_EIO, "cannot write '%s'", g->timeline);
    fputs("{\"traceEvents\":[\n", f);
    write_parts(f, parts, sizes, g->world, ",\n");
    fprintf(f, "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"tool\":\"scaleout %s\",\"detail\":\"%s\","
               "\"timeline_steps\":\"%s\",\"clock_offsets_us\":[", SCALEOUT_VERSION, so_prof_detail_name(g->detail),
            g->steps);
    for (int r = 0; r < g->world; r++)
        fprintf(f, "%s%.3f", r ? "," : "", g->clocks[r].offset * 1e6);
    fputs("],\"clock_drift_ppm\":[", f);
    for (int r = 0; r < g->world; r++)
        fprintf(f, "%s%.3f", r ? "," : "", g->clocks[r].drift * 1e6);
    fputs("]}}\n", f);
    return fclose(f) ? so_err(SO_EIO, "error writing '%s'", g->timeline) : 0;
}

/* "key=value" lines as a JSON object of strings. */
static void config_object(so_json *js, const char *config)
{
    so_json_obj_begin(js, "config");
    for (const char *s = config; s && *s;) {
        const char *nl = strchr(s, '\n'), *eq = strchr(s, '=');
        size_t n = nl ? (size_t)(nl - s) : strlen(s);
        if (eq && eq < s + n) {
            char key[64], val[256];
            snprintf(key, sizeof key, "%.*s", (int)(eq - s), s);
            snprintf(val, sizeof val, "%.*s", (int)(s + n - eq - 1), eq + 1);
            so_json_str(js, key, val);
        }
        s += n + (nl ? 1 : 0);
    }
    so_json_obj_end(js);
}

static double median(const double *v, long n)
{
    if (n < 1)
        return 0;
    double *c = malloc((size_t)n * sizeof *c);
    if (!c)
        return 0;
    memcpy(c, v, (size_t)n * sizeof *c);
    for (long i = 1; i < n; i++) /* insertion sort: step counts are modest */
        for (long j = i; j > 0 && c[j - 1] > c[j]; j--) {
            double t = c[j];
            c[j] = c[j - 1];
            c[j - 1] = t;
        }
    double m = n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
    free(c);
    return m;
}

/* "pipeline_schedule": the step, the layout, and the ranks' lanes (text parts). */
static void write_schedule(prof_glue *g, FILE *f, const char *parts, const size_t *sizes)
{
    const prof_sched_layout *l = &g->layout;
    double end = prof_sched_step_end(g->p, g->sched_step); /* rank 0's clock is the common one */
    fprintf(f, ",\n  \"pipeline_schedule\": {\"step\": %ld, \"chosen\": \"median duration on rank 0 among the "
               "detailed steps after the first\", \"schedule\": \"%s\", \"stages\": %d, \"replicas\": %d, "
               "\"microbatches\": %d, \"virtual_stages\": %d, \"max_spans\": %d, ",
            g->sched_step, l->schedule, l->stages, l->replicas, l->microbatches, l->chunks, PROF_SCHED_SPANS);
    if (isfinite(end))
        fprintf(f, "\"step_ms\": %.3f,\n    \"ranks\": [\n    ", (end - g->sched_ref) * 1e3);
    else
        fputs("\"step_ms\": null,\n    \"ranks\": [\n    ", f);
    write_parts(f, parts, sizes, g->world, ",\n    ");
    fputs("]}", f);
}

static void write_header(prof_glue *g, FILE *f, const so_train_result *r, const char *config, const so_prof_pop *pop)
{
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    so_json js;
    so_json_init(&js, f, 1);
    so_json_obj_begin(&js, NULL);
    so_json_str(&js, "format", "scaleout-profile");
    so_json_int(&js, "version", 1);
    config_object(&js, config);
    so_json_obj_begin(&js, "environment");
    so_json_str(&js, "host", host);
    so_json_str(&js, "scaleout", SCALEOUT_VERSION);
    so_json_str(&js, "git", g->build_id);
    so_json_int(&js, "world_size", g->world);
    so_json_int(&js, "threads", so_threads_get());
    so_json_str(&js, "allreduce", g->allreduce);
    so_json_str(&js, "detail", so_prof_detail_name(g->detail));
    so_json_str(&js, "timeline_steps", g->steps);
    so_json_int(&js, "statistics_skip_steps", PROF_SKIP_STEPS);
    so_json_int(&js, "unix_time", (int64_t)time(NULL));
    so_json_obj_end(&js);
    so_json_obj_begin(&js, "throughput");
    so_json_int(&js, "steps", r->steps);
    so_json_num(&js, "images_per_sec", r->images_per_sec);
    so_json_num(&js, "wall_seconds", r->wall_seconds);
    so_json_num(&js, "median_step_s", median(r->step_seconds, r->nstep_seconds));
    so_json_int(&js, "gradient_buckets", r->nbuckets);
    if (r->pipe_bubble_formula > 0) { /* pipeline stages (docs/PARALLELISM.md) */
        so_json_num(&js, "pipeline_bubble_measured", r->pipe_bubble);
        so_json_num(&js, "pipeline_bubble_formula", r->pipe_bubble_formula);
        so_json_num(&js, "pipeline_bubble_stage_times", r->pipe_bubble_stages);
    }
    so_json_obj_end(&js);
    so_json_obj_begin(&js, "pop");
    so_json_num(&js, "load_balance", pop->load_balance);
    so_json_num(&js, "comm_efficiency", pop->comm_efficiency);
    so_json_num(&js, "parallel_efficiency", pop->parallel_efficiency);
    if (pop->overlap_pct >= 0)
        so_json_num(&js, "overlap_pct", pop->overlap_pct);
    else
        so_json_null(&js, "overlap_pct");
    so_json_num(&js, "data_wait_share", pop->data_wait_share);
    if (pop->step_load_balance >= 0)
        so_json_num(&js, "step_load_balance", pop->step_load_balance);
    else
        so_json_null(&js, "step_load_balance");
    so_json_num(&js, "runtime_s", pop->runtime);
    so_json_obj_end(&js);
    so_json_arr_begin(&js, "clock_offsets_s");
    for (int i = 0; i < g->world; i++)
        so_json_num(&js, NULL, g->clocks[i].offset);
    so_json_arr_end(&js);
    so_json_arr_begin(&js, "clock_drifts");
    for (int i = 0; i < g->world; i++)
        so_json_num(&js, NULL, g->clocks[i].drift);
    so_json_arr_end(&js);
}

/* The ranks' text parts of profile.json: statistics, and the pipeline's lanes (NULL without stages). */
typedef struct {
    char *stats, *sched;
    size_t *ssz, *schsz;
} profile_parts;

static int write_profile(prof_glue *g, const so_train_result *r, const char *config, const so_prof_pop *pop,
                         const profile_parts *pp)
{
    const char *parts = pp->stats;
    const size_t *sizes = pp->ssz;
    FILE *f = fopen(g->profile, "w");
    if (!f)
        return so_err(SO_EIO, "cannot write '%s'", g->profile);
    write_header(g, f, r, config, pop);
    if (pp->sched)
        write_schedule(g, f, pp->sched, pp->schsz);
    fputs(",\n  \"ranks\": [\n", f); /* the ranks' objects follow as text */
    write_parts(f, parts, sizes, g->world, ",\n");
    fputs("\n  ]\n}\n", f);
    return fclose(f) ? so_err(SO_EIO, "error writing '%s'", g->profile) : 0;
}

static void print_summary(const prof_glue *g, FILE *out, const so_train_result *r, const so_prof_totals *all,
                          const so_prof_pop *pop)
{
    long steps = all[0].steps > 0 ? all[0].steps : 1;
    fprintf(out, "profile: %d rank(s), %ld of %ld steps (the first %d left out): parallel efficiency %.2f = load "
           "balance %.2f x communication efficiency %.2f; per-step load balance %.2f\n", g->world, all[0].steps,
           r->steps, PROF_SKIP_STEPS, pop->parallel_efficiency, pop->load_balance, pop->comm_efficiency,
           pop->step_load_balance);
    fprintf(out, "profile: per step %.2f ms compute, %.2f ms data wait (%.1f%%)", 1e3 * pop->useful_mean / steps,
           1e3 * all[0].data_wait / steps, 100 * pop->data_wait_share);
    if (pop->overlap_pct >= 0)
        fprintf(out, ", %.2f ms gradient communication, %.0f%% overlapped, %.2f ms exposed",
               1e3 * all[0].comm_pure / steps, pop->overlap_pct, 1e3 * all[0].comm_wait / steps);
    fprintf(out, "\n");
    if (g->timeline[0])
        fprintf(out, "profile: timeline %s", g->timeline);
    if (g->profile[0])
        fprintf(out, "%sstatistics %s (scaleout report %s)", g->timeline[0] ? ", " : "profile: ", g->profile,
               g->profile);
    fprintf(out, "\n");
}

/* Count, bytes and seconds of each checkpoint I/O kind, summed over ranks. */
static int gather_io(prof_glue *g, double *v)
{
    so_prof_io_total t[SO_PROF_IO_KINDS];
    int n = so_prof_io_totals(g->p, t, SO_PROF_IO_KINDS);
    memset(v, 0, 3 * SO_CKPT_IO_KINDS * sizeof *v);
    for (int k = 0; k < SO_CKPT_IO_KINDS; k++)
        for (int i = 0; i < n; i++)
            if (!strcmp(t[i].kind, so_ckpt_io_name((so_ckpt_io_kind)k))) {
                v[3 * k] = (double)t[i].count;
                v[3 * k + 1] = (double)t[i].bytes;
                v[3 * k + 2] = t[i].seconds;
            }
    return g->inner && g->world > 1 ? g->inner->sum(g->inner->ctx, v, 3 * SO_CKPT_IO_KINDS) : 0;
}

/* One line of the background checkpoint work, when there was any. */
static void print_io(FILE *out, const double *v)
{
    const char *sep = "profile: checkpoint I/O (all ranks): ";
    for (int k = 0; k < SO_CKPT_IO_KINDS; k++) {
        if (v[3 * k] <= 0)
            continue;
        fprintf(out, "%s%s %.0f x, %.2f MB in %.1f ms (%.0f MB/s)", sep, so_ckpt_io_name((so_ckpt_io_kind)k), v[3 * k],
               v[3 * k + 1] / 1e6, v[3 * k + 2] * 1e3, v[3 * k + 2] > 0 ? v[3 * k + 1] / v[3 * k + 2] / 1e6 : 0);
        sep = "; ";
    }
    if (sep[0] == ';')
        fprintf(out, "\n");
}

/* Rank 0's summary lines, kept for the caller to print. */
static int summarise(prof_glue *g, const so_train_result *r, const so_prof_totals *all, const so_prof_pop *pop,
                     const double *io)
{
    size_t len = 0;
    FILE *f = open_memstream(&g->summary, &len);
    if (!f)
        return so_err(SO_ENOMEM, "out of memory");
    print_summary(g, f, r, all, pop);
    print_io(f, io);
    return fclose(f) ? so_err(SO_ENOMEM, "out of memory") : 0;
}

/* profile.json's per-rank parts on rank 0: the statistics, and with
 * pipeline stages the lanes of the agreed step. Collective. */
static int gather_profile(prof_glue *g, profile_parts *pp)
{
    pp->ssz = calloc((size_t)g->world, sizeof *pp->ssz);
    pp->schsz = calloc((size_t)g->world, sizeof *pp->schsz);
    if (!pp->ssz || !pp->schsz)
        return so_err(SO_ENOMEM, "out of memory");
    int rc = gather_text(g, stats_text, &pp->stats, pp->ssz);
    if (!rc && g->pipelined)
        rc = sched_agree(g);
    if (!rc && g->pipelined)
        rc = gather_text(g, sched_text, &pp->sched, pp->schsz);
    return rc;
}

int prof_glue_finish(prof_glue *g, const so_train_result *r, const char *config)
{
    if (!g)
        return 0;
    int rc = 0;
    char *trace = NULL;
    profile_parts pp = {0};
    size_t *tsz = calloc((size_t)g->world, sizeof *tsz);
    so_prof_totals *all = calloc((size_t)g->world, sizeof *all);
    if (!tsz || !all)
        rc = so_err(SO_ENOMEM, "out of memory");
    /* All ranks take part in every exchange, in the same order. */
    if (!rc)
        rc = clock_end(g);
    if (!rc)
        rc = gather_totals(g, all);
    so_prof_pop pop;
    so_prof_pop_compute(all, g->world, &pop);
    if (!rc)
        rc = step_balance(g, &pop);
    double io[3 * SO_CKPT_IO_KINDS];
    if (!rc)
        rc = gather_io(g, io);
    if (!rc && g->timeline[0])
        rc = gather_text(g, trace_text, &trace, tsz);
    if (!rc && g->profile[0])
        rc = gather_profile(g, &pp);
    if (!rc && g->rank == 0) {
        if (g->timeline[0])
            rc = write_timeline(g, trace, tsz);
        if (!rc && g->profile[0])
            rc = write_profile(g, r, config, &pop, &pp);
        if (!rc)
            rc = summarise(g, r, all, &pop, io);
    }
    free(trace);
    free(pp.stats);
    free(pp.sched);
    free(pp.ssz);
    free(pp.schsz);
    free(tsz);
    free(all);
    return rc;
}

const char *prof_glue_summary(const prof_glue *g) { return g && g->summary ? g->summary : ""; }

void prof_glue_checkpoint_io(void *arg, const so_ckpt_io_event *e)
{
    prof_glue *g = arg;
    if (!g || !g->p)
        return;
    int flush = e->kind == SO_CKPT_IO_FLUSH || e->kind == SO_CKPT_IO_FLUSH_MANIFEST;
    so_prof_io_event pe = {so_ckpt_io_name(e->kind), flush ? SO_PROF_TRACK_CKPT_FLUSH : SO_PROF_TRACK_CKPT_IO,
                           e->step, e->bytes, skew(g, e->t0), skew(g, e->t1), e->rc != 0};
    so_prof_io(g->p, &pe);
}

void prof_glue_checkpoint_span(void *arg, double t0, double t1)
{
    prof_glue *g = arg;
    if (g && g->p)
        so_prof_mark(g->p, "checkpoint", 0, skew(g, t0), skew(g, t1));
}
