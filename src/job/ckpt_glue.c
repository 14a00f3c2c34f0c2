/* Glue between a job, the checkpoint library and the comm module:
 * fills the so_ckpt_transport from so_comm (blocking bcast and int64
 * allreduce, a non-blocking partner exchange on its own communicator), turns
 * the flags into a so_ckpt_config, restores --resume before training, and runs
 * so_ckpt_step_end from the trainer's step_end hook. */
#include "ckpt_glue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "scaleout/ckpt.h"
#include "scaleout/err.h"
#include "scaleout/log.h"

struct ckpt_glue {
    so_ckpt *ck;
    so_ckpt_transport t;
    int rank, stop_on_error, failed, writes;
    int resume_asked, resume_found;
    long resume_step;
    char stage_dir[2][4200];     /* a pipeline stage's levels (the checkpoint keeps pointers to them) */
    char stage_resume[4300];     /* a pipeline stage's part of --resume PATH */
#ifdef SCALEOUT_HAVE_MPI
    so_comm *comm;
    so_comm_p2p *p2p;
#endif
};

/* ---- transport over so_comm -------------------------------------------------- */
#ifdef SCALEOUT_HAVE_MPI
static int t_bcast(void *ctx, void *buf, size_t n, int root)
{
    return so_comm_bcast_bytes(((ckpt_glue *)ctx)->comm, buf, n, root);
}

static int t_allreduce(void *ctx, int64_t *v, int n, so_ckpt_op op)
{
    so_reduce_op o = op == SO_CKPT_SUM ? SO_REDUCE_SUM : op == SO_CKPT_MIN ? SO_REDUCE_MIN : SO_REDUCE_MAX;
    return so_comm_allreduce_i64(((ckpt_glue *)ctx)->comm, v, (size_t)n, o);
}

static int t_recv(void *ctx, void *rbuf, size_t rn, int src, size_t sn, void **req)
{
    so_comm_xfer *x = NULL;
    int rc = so_comm_exchange_recv(((ckpt_glue *)ctx)->p2p, rbuf, rn, src, sn, &x);
    *req = x;
    return rc;
}

static int t_send(void *ctx, void *req, const void *sbuf, size_t sn, int dst)
{
    return so_comm_exchange_send(((ckpt_glue *)ctx)->p2p, req, sbuf, sn, dst);
}

static int t_test(void *ctx, void *req, int wait, int *done)
{
    return so_comm_exchange_test(((ckpt_glue *)ctx)->p2p, req, wait, done);
}

static int t_isum_start(void *ctx, int64_t *v, int n, void **req)
{
    so_comm_isum *r = NULL;
    int rc = so_comm_isum_start(((ckpt_glue *)ctx)->p2p, v, n, "checkpoint progress agreement", &r);
    *req = r;
    return rc;
}

static int t_isum_wait(void *ctx, void *req) { return so_comm_isum_wait(((ckpt_glue *)ctx)->p2p, req); }

static int transport(ckpt_glue *g, dist_handle *dh, const ckpt_scope *scope)
{
    g->comm = scope->group ? (so_comm *)scope->group : dist_comm(dh);
    if (!g->comm)
        return 0;
    int rc = so_comm_p2p_create(g->comm, &g->p2p);
    if (rc)
        return rc;
    so_comm_node nd;
    so_comm_node_info(g->comm, &nd);
    g->t = (so_ckpt_transport){g, so_comm_rank(g->comm), so_comm_size(g->comm), nd.node_id, nd.num_nodes,
                               nd.node_rank, nd.node_size, t_bcast, t_allreduce, t_recv, t_send,
                               t_test, t_isum_start, t_isum_wait};
    g->rank = g->t.rank;
    return 0;
}
#else
static int transport(ckpt_glue *g, dist_handle *dh, const ckpt_scope *scope)
{
    (void)g, (void)dh, (void)scope;
    return 0;
}
#endif

static const so_ckpt_transport *tp(const ckpt_glue *g) { return g->t.bcast ? &g->t : NULL; }

/* ---- the observer ----------------------------------------------------------- */

static int ckpt_error(ckpt_glue *g, int rc);

int ckpt_glue_before_update(ckpt_glue *g)
{
    return g && g->writes ? ckpt_error(g, so_ckpt_before_update(g->ck)) : 0;
}

int ckpt_glue_step_end(ckpt_glue *g, const so_train_state *s)
{
    return g && g->writes ? ckpt_error(g, so_ckpt_step_end(g->ck, s)) : 0;
}

/* A checkpoint error is reported and either ignored or turned into a clean
 * stop (on_error "stop"); other errors (communication) end training. */
static int ckpt_error(ckpt_glue *g, int rc)
{
    if (!rc || !so_ckpt_last_error_is_ckpt(g->ck))
        return rc;
    const char *msg = so_errmsg();
    if (g->rank == 0 || !strstr(msg, "another rank"))
        so_log(SO_LOG_WARN, "%s%s", msg,
               g->stop_on_error ? " (stopping: --ckpt-on-error stop)" : "; training continues, the previous "
                                                                        "checkpoint stays valid");
    if (!g->stop_on_error)
        return 0;
    g->failed = 1;
    return SO_STOP;
}

/* ---- flags ---------------------------------------------------------------------- */

static int usage_err(const char *fmt, const char *arg) { return so_err(SO_EINVAL, fmt, arg); }

static int parse_every(const so_job_ckpt_config *a, so_ckpt_config *c)
{
    const char *e = a->every;
    char *end;
    if (!strcmp(e, "auto")) {
        if (a->mtbf_hours <= 0)
            return usage_err("--ckpt-every %s needs --mtbf HOURS", e);
        c->mtbf_hours = a->mtbf_hours;
        return 0;
    }
    long n = strtol(e, &end, 10);
    if (n < 1 || end == e || (*end && strcmp(end, "epoch") && strcmp(end, "epochs")))
        return usage_err("--ckpt-every: '%s' is not N, Nepoch or auto", e);
    if (*end)
        c->every_epochs = (int)n;
    else
        c->every_steps = n;
    return 0;
}

static int make_config(const so_job_ckpt_config *a, const char *model, const char *optimizer, const char *config,
                       so_ckpt_config *c)
{
    *c = (so_ckpt_config){.local_dir = a->local, .shared_dir = a->dir, .keep = a->keep,
                          .flush_every = a->flush_every, .naive = !strcmp(a->mode, "naive"),
                          .stop_on_error = !strcmp(a->on_error, "stop"),
                          .model_name = model, .optimizer = optimizer, .config_text = config};
    if (!a->every && !a->resume)
        return 0;
    if (!a->local && !a->dir && !(a->resume && strcmp(a->resume, "auto")))
        return usage_err("%s needs --ckpt-dir or --ckpt-local", a->every ? "--ckpt-every" : "--resume auto");
    return a->every ? parse_every(a, c) : 0;
}

/* The per-rank part of the set-up; every rank's status is agreed afterwards. */
static int setup(const so_job_ckpt_config *a, ckpt_glue *g, dist_handle *dh, const ckpt_scope *scope, so_model *m,
                 so_optim *opt, const so_ckpt_config *c)
{
    if (!a->every && !a->resume)
        return 0;
    int rc = transport(g, dh, scope);
    if (rc)
        return rc;
    g->stop_on_error = !strcmp(a->on_error, "stop");
    return so_ckpt_create(c, tp(g), m, opt, &g->ck);
}

/* A stage's directory under a level: DIR/stage<s> (NULL stays NULL). */
static const char *stage_dir(const char *dir, int stage, char *buf, size_t len)
{
    if (!dir || stage < 0)
        return dir;
    snprintf(buf, len, "%s/stage%d", dir, stage);
    return buf;
}

int ckpt_glue_stage_resume(const char *resume, int stage, char *root, size_t root_len, char *path, size_t path_len)
{
    size_t n = strlen(resume), cut, tail;
    while (n > 1 && resume[n - 1] == '/') /* DIR/ is DIR */
        n--;
    cut = tail = n; /* no stage<k> component: PATH is the root */
    for (const char *p = strstr(resume, "/stage"); p && (size_t)(p - resume) < n; p = strstr(p + 1, "/stage")) {
        size_t q = (size_t)(p - resume) + 6;
        while (q < n && resume[q] >= '0' && resume[q] <= '9')
            q++;
        if (q > (size_t)(p - resume) + 6 && (q == n || resume[q] == '/')) {
            cut = (size_t)(p - resume);
            tail = q;
        }
    }
    snprintf(root, root_len, "%.*s", (int)cut, resume);
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/stage0", root);
    struct stat st;
    if (stat(probe, &st) || !S_ISDIR(st.st_mode))
        return so_err(SO_EINVAL, "--resume %s: no pipeline checkpoints there (no %s/)", resume, probe);
    if (path)
        snprintf(path, path_len, "%s/stage%d%.*s", root, stage, (int)(n - tail), resume + tail);
    return 0;
}

/* Every stage must continue from the same step, or the pipeline would mix
 * parameters of different steps: the step and whether one was found,
 * compared over the whole job. */
static int agree_resume(ckpt_glue *g, dist_handle *dh)
{
    const so_dist *d = dist_get(dh);
    if (!d)
        return 0;
    double lo[2] = {-(double)g->resume_step, -(double)g->resume_found}, hi[2] = {(double)g->resume_step,
                                                                                  (double)g->resume_found};
    int rc = d->max(d->ctx, lo, 2);
    if (!rc)
        rc = d->max(d->ctx, hi, 2);
    if (rc || (-lo[0] == hi[0] && -lo[1] == hi[1]))
        return rc;
    return so_err(SO_EIO, "--resume: the pipeline stages' newest complete checkpoints are of different steps "
                  "(%.0f to %.0f): resume one stage's step on all by hand, or start again", -lo[0], hi[0]);
}

int ckpt_glue_open(const so_job_ckpt_config *a_in, dist_handle *dh, const ckpt_scope *scope, so_model *m,
                   so_optim *opt, const char *model, const char *optimizer, const char *config,
                   so_train_config *tc, ckpt_glue **out)
{
    *out = NULL;
    ckpt_glue *g = calloc(1, sizeof *g);
    if (!g)
        return dist_agree(dh, so_err(SO_ENOMEM, "out of memory"));
    so_job_ckpt_config stage_cfg = *a_in;
    const so_job_ckpt_config *a = &stage_cfg;
    stage_cfg.dir = stage_dir(a_in->dir, scope->stage, g->stage_dir[0], sizeof g->stage_dir[0]);
    stage_cfg.local = stage_dir(a_in->local, scope->stage, g->stage_dir[1], sizeof g->stage_dir[1]);
    so_ckpt_config c;
    int rc = make_config(a, model, optimizer, config, &c);
    c.state = scope->state;
    c.rank_state = scope->rank_state;
    if (!rc && scope->stage >= 0 && a->resume && strcmp(a->resume, "auto")) { /* this stage's part of PATH */
        char root[4096];
        rc = ckpt_glue_stage_resume(a_in->resume, scope->stage, root, sizeof root, g->stage_resume,
                                    sizeof g->stage_resume);
        stage_cfg.resume = g->stage_resume;
    }
    if (!rc)
        rc = setup(a, g, dh, scope, m, opt, &c);
    if ((rc = dist_agree(dh, rc)) || !g->ck) {
        ckpt_glue_close(g);
        return rc;
    }
    if (a->resume) {
        rc = so_ckpt_restore(g->ck, a->resume, &g->resume_step, &g->resume_found);
        if (scope->stage >= 0 && !(rc = dist_agree(dh, rc))) /* stages: every rank learns of any stage's failure */
            rc = dist_agree(dh, agree_resume(g, dh));
        if (rc) {
            if (scope->stage < 0 && g->rank != 0 && rc != SO_ECOMM && rc != SO_ENOMEM)
                dist_mark_elsewhere(dh); /* the same input error on every rank: rank 0 says it */
            ckpt_glue_close(g);
            return rc;
        }
        g->resume_asked = 1;
        tc->start_step = g->resume_step;
        tc->no_initial_bcast = g->resume_found;
    }
    g->writes = a->every != NULL;
    *out = g;
    return 0;
}

int ckpt_glue_resumed(const ckpt_glue *g, long *step, int *found)
{
    if (!g || !g->resume_asked)
        return -1;
    *step = g->resume_step;
    *found = g->resume_found;
    return 0;
}

static double mb_per_s(double bytes, double seconds)
{
    return seconds > 0 ? bytes / seconds / 1e6 : 0;
}

int ckpt_glue_finish(ckpt_glue *g, so_job_ckpt_summary *out)
{
    memset(out, 0, sizeof *out);
    if (!g || !g->ck)
        return 0;
    int rc = so_ckpt_finish(g->ck);
    if (rc && so_ckpt_last_error_is_ckpt(g->ck)) {
        so_log(SO_LOG_WARN, "%s", so_errmsg());
        if (g->stop_on_error)
            g->failed = 1;
        rc = 0;
    }
    if (rc)
        return rc;
    so_ckpt_stats st;
    so_ckpt_get_stats(g->ck, &st);
    int64_t mx[3] = {(int64_t)(st.stall_total * 1e6), (int64_t)(st.stall_max * 1e6), (int64_t)(st.drain_seconds * 1e6)};
    int64_t cpu = (int64_t)(st.bg_cpu_seconds * 1e6);
    if (tp(g) && ((rc = g->t.allreduce_i64(g->t.ctx, mx, 3, SO_CKPT_MAX)) ||
                  (rc = g->t.allreduce_i64(g->t.ctx, &cpu, 1, SO_CKPT_SUM))))
        return rc;
    *out = (so_job_ckpt_summary){
        .complete = st.count, .flushed = st.flushes, .failed = st.failures,
        .stall_total_s = mx[0] * 1e-6, .stall_max_s = mx[1] * 1e-6,
        .write_mb_s = mb_per_s(st.write_bytes, st.write_seconds),
        .flush_mb_s = mb_per_s(st.flush_bytes, st.flush_seconds),
        .own_write_mb_s = mb_per_s(st.write_bytes - st.partner_bytes, st.write_seconds - st.partner_seconds),
        .partner_mb_s = mb_per_s(st.partner_bytes, st.partner_seconds),
        .background_cpu_s = cpu * 1e-6 / (tp(g) ? g->t.world : 1), .drain_s = mx[2] * 1e-6,
        .daly_interval = st.interval > 0 ? st.interval : 0, .stopped_by_failure = g->failed};
    return 0;
}

void ckpt_glue_request(ckpt_glue *g)
{
    if (g && g->ck && g->writes)
        so_ckpt_request(g->ck);
}

int ckpt_glue_writes(const ckpt_glue *g) { return g && g->ck && g->writes; }

void ckpt_glue_close(ckpt_glue *g)
{
    if (!g)
        return;
    so_ckpt_destroy(g->ck);
#ifdef SCALEOUT_HAVE_MPI
    so_comm_p2p_destroy(g->p2p);
#endif
    free(g);
}

void ckpt_glue_set_span(ckpt_glue *g, so_ckpt_span_fn fn, void *arg)
{
    if (g && g->ck)
        so_ckpt_set_span(g->ck, fn, arg);
}

void ckpt_glue_set_io(ckpt_glue *g, so_ckpt_io_fn fn, void *arg)
{
    if (g && g->ck)
        so_ckpt_set_io(g->ck, fn, arg);
}
