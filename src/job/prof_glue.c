/* The profiler inside a job (prof_glue.h): its life from the start's checks
 * and clock measurement to the finish's exchanges and files, and the hooks
 * that feed the recorder (the trainer's spans, per-node spans on a test
 * clock, the gradient engine's requests, checkpoint stalls and I/O). The
 * pieces: prof_clock.c (clocks), prof_dist.c (timed blocking collectives),
 * prof_gather.c (the exchanges), prof_write.c (the files), prof_sched.c
 * (the pipeline's lanes). */
#include "core/test_hooks.h"
#include "prof_glue.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "prof_clock.h"
#include "prof_dist.h"
#include "prof_gather.h"
#include "prof_sched.h"
#include "prof_write.h"
#include "scaleout/err.h"
#include "scaleout/prof.h"
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
    prof_clocks clocks;
    prof_dist timed;              /* the trainer's so_dist with timed blocking collectives */
    so_node_span_fn node_fn;      /* the recorder's per-node hook, when the test skew wraps it */
    void *node_arg;
    int sleep_rank, sleep_ms;     /* SCALEOUT_PROF_TEST_SLEEP (tests only) */
    int pipelined;                /* layout is set: profile.json gets "pipeline_schedule" */
    prof_sched_layout layout;
};

/* ---- hooks ---------------------------------------------------------------- */

/* The profiler's times: so_now(), or a test-skewed clock (prof_clock.h). */
static double skew(const prof_glue *g, double t) { return prof_clocks_skew(&g->clocks, t); }

/* The gradient engine's requests of the round that just closed, with the
 * algorithm each one ran (the engine's statistics say which). */
static void feed_async(prof_glue *g)
{
#ifdef SCALEOUT_HAVE_MPI
    so_async *a = dist_async(g->dh);
    if (!a)
        return;
    const so_async_stat *st;
    size_t n;
    so_async_stats(a, &st, &n);
    for (size_t i = 0; i < n; i++) {
        so_prof_comm_event e = {"allreduce", st[i].algo ? st[i].algo : "?", SO_PROF_USE_GRADIENTS, st[i].bytes,
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

const so_dist *prof_glue_dist(prof_glue *g, const so_dist *d)
{
    if (!g || !d)
        return d;
    return prof_dist_wrap(&g->timed, g->p, &g->clocks.test, g->rank, d);
}

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

void prof_glue_pipeline(prof_glue *g, const prof_sched_layout *l)
{
    if (!g || !l)
        return;
    g->layout = *l;
    g->pipelined = 1;
}

void prof_glue_layer_order(prof_glue *g, const so_graph *whole)
{
    if (g && whole)
        so_prof_set_layer_order(g->p, whole);
}

/* ---- start ------------------------------------------------------------------- */

/* The files' paths, checked writable before training rather than after it. */
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
    so_prof_config pc = {g->detail, g->first, g->last, g->rank, 0, PROF_SKIP_STEPS};
    if (so_prof_create(&pc, &g->p) || so_prof_attach_model(g->p, m)) {
        snprintf(msg, sizeof msg, "%s", so_errmsg());
        return so_err(SO_EINVAL, "profiler: %s", msg);
    }
    test_sleep(g);
    if (g->clocks.test.rank == g->rank && m->on_node) { /* the skewed clock reaches per-node spans too */
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
    int rc = prof_clocks_init(&g->clocks, g->rank, g->world);
    if (!rc)
        rc = setup(g, o, m);
    /* Every rank learns whether any failed (rank 0 owns the files). */
    if ((rc = dist_agree(dh, rc)) || (rc = prof_clocks_start(&g->clocks, dh))) {
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
    prof_clocks_deinit(&g->clocks);
    free(g->summary);
    free(g);
}

/* ---- finish: gather, write, summarise ---------------------------------------- */

static int trace_text(void *ctx, FILE *f)
{
    prof_glue *g = ctx;
    return so_prof_write_trace(g->p, f, &g->clocks.clock, g->clocks.origin);
}

static int stats_text(void *ctx, FILE *f)
{
    prof_glue *g = ctx;
    return so_prof_write_rank_json(g->p, f);
}

/* A rank's lane of the agreed step (sched_text's context). */
typedef struct {
    prof_glue *g;
    long step;
    double ref;
} lane_ctx;

static int sched_text(void *ctx, FILE *f)
{
    const lane_ctx *l = ctx;
    prof_glue *g = l->g;
    return prof_sched_write_rank(f, g->p, l->step, g->rank, &g->layout, &g->clocks.clock, l->ref);
}

/* What the finish gathers on rank 0 (freed by collected_free). */
typedef struct {
    so_prof_totals *all;          /* every rank's totals */
    so_prof_pop pop;
    double io[3 * SO_CKPT_IO_KINDS];
    char *trace, *stats, *lanes;  /* the ranks' text parts */
    size_t *trace_sz, *stats_sz, *lanes_sz;
    long sched_step;              /* the pipeline step drawn (-1: none) */
    double sched_ref;             /* its start on rank 0's clock */
} collected;

static void collected_free(collected *c)
{
    free(c->all);
    free(c->trace);
    free(c->stats);
    free(c->lanes);
    free(c->trace_sz);
    free(c->stats_sz);
    free(c->lanes_sz);
}

/* Every exchange of the finish, on every rank in the same order. */
static int collect(prof_glue *g, const prof_ranks *rk, collected *c)
{
    size_t w = (size_t)g->world;
    c->all = calloc(w, sizeof *c->all);
    c->trace_sz = calloc(w, sizeof *c->trace_sz);
    c->stats_sz = calloc(w, sizeof *c->stats_sz);
    c->lanes_sz = calloc(w, sizeof *c->lanes_sz);
    int rc = c->all && c->trace_sz && c->stats_sz && c->lanes_sz ? 0 : so_err(SO_ENOMEM, "out of memory");
    if (!rc)
        rc = prof_clocks_end(&g->clocks, g->dh, rk->d);
    if (!rc)
        rc = prof_gather_totals(rk, g->p, c->all);
    if (!rc) {
        so_prof_pop_compute(c->all, g->world, &c->pop);
        rc = prof_gather_step_balance(rk, g->p, &c->pop);
    }
    if (!rc)
        rc = prof_gather_io(rk, g->p, c->io);
    if (!rc && g->timeline[0])
        rc = prof_gather_text(rk, trace_text, g, &c->trace, c->trace_sz);
    if (!rc && g->profile[0])
        rc = prof_gather_text(rk, stats_text, g, &c->stats, c->stats_sz);
    if (!rc && g->profile[0] && g->pipelined)
        rc = prof_gather_sched_step(rk, g->p, PROF_SKIP_STEPS, &g->clocks.clock, &c->sched_step, &c->sched_ref);
    if (!rc && g->profile[0] && g->pipelined) {
        lane_ctx l = {g, c->sched_step, c->sched_ref};
        rc = prof_gather_text(rk, sched_text, &l, &c->lanes, c->lanes_sz);
    }
    return rc;
}

/* Rank 0: the files and the summary. */
static int write_out(prof_glue *g, const so_train_result *r, const char *config, const collected *c)
{
    prof_run run = {g->world, g->clocks.clocks, g->detail, g->steps, g->allreduce, g->build_id, PROF_SKIP_STEPS,
                    g->timeline, g->profile};
    int rc = 0;
    if (g->timeline[0])
        rc = prof_write_timeline(&run, &(prof_parts){c->trace, c->trace_sz});
    if (!rc && g->profile[0]) {
        double end = g->pipelined ? prof_sched_step_end(g->p, c->sched_step) : NAN; /* rank 0's clock is the common one */
        prof_schedule s = {&g->layout, c->sched_step, isfinite(end) ? (end - c->sched_ref) * 1e3 : NAN,
                           {c->lanes, c->lanes_sz}};
        rc = prof_write_profile(&run, r, config, &c->pop, g->pipelined ? &s : NULL,
                                &(prof_parts){c->stats, c->stats_sz});
    }
    if (!rc)
        rc = prof_write_summary(&run, r, c->all, &c->pop, c->io, &g->summary);
    return rc;
}

int prof_glue_finish(prof_glue *g, const so_train_result *r, const char *config)
{
    if (!g)
        return 0;
    prof_ranks rk = {g->dh, g->timed.inner, g->rank, g->world};
    collected c = {.sched_step = -1};
    int rc = collect(g, &rk, &c);
    if (!rc && g->rank == 0)
        rc = write_out(g, r, config, &c);
    collected_free(&c);
    return rc;
}

const char *prof_glue_summary(const prof_glue *g) { return g && g->summary ? g->summary : ""; }
