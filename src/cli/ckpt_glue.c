/* Glue between `scaleout train`, the checkpoint library and the comm module:
 * fills the so_ckpt_transport from so_comm (blocking bcast and int64
 * allreduce, a non-blocking partner exchange on its own communicator), turns
 * the flags into a so_ckpt_config, restores --resume before training, and runs
 * so_ckpt_step_end from the trainer's step_end hook. */
#include "ckpt_glue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/ckpt.h"
#include "scaleout/err.h"

const char *const ckpt_modes[] = {"scaleout", "naive", NULL};
const char *const ckpt_on_errors[] = {"continue", "stop", NULL};

struct ckpt_glue {
    so_ckpt *ck;
    so_ckpt_transport t;
    int rank, stop_on_error, failed, writes;
    so_train_hooks hooks;
    const so_train_hooks *prev;
#ifdef SCALEOUT_HAVE_MPI
    so_comm *comm;
    so_comm_p2p *p2p;
#endif
};

void ckpt_args_defaults(ckpt_args *a)
{
    memset(a, 0, sizeof *a);
    a->keep = 2;
    a->flush_every = 10;
    a->mode = "scaleout";
    a->on_error = "continue";
}

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
    int rc = so_comm_isum_start(((ckpt_glue *)ctx)->p2p, v, n, &r);
    *req = r;
    return rc;
}

static int t_isum_wait(void *ctx, void *req) { return so_comm_isum_wait(((ckpt_glue *)ctx)->p2p, req); }

static int transport(ckpt_glue *g, dist_handle *dh)
{
    g->comm = dist_comm(dh);
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
static int transport(ckpt_glue *g, dist_handle *dh)
{
    (void)g, (void)dh;
    return 0;
}
#endif

static const so_ckpt_transport *tp(const ckpt_glue *g) { return g->t.bcast ? &g->t : NULL; }

/* ---- the hook ------------------------------------------------------------------ */

static void hook_span(void *arg, so_span_kind kind, long step, int id, double t0, double t1)
{
    ckpt_glue *g = arg;
    if (g->prev && g->prev->span)
        g->prev->span(g->prev->arg, kind, step, id, t0, t1);
}

static int ckpt_error(ckpt_glue *g, int rc);

static int hook_before_update(void *arg)
{
    ckpt_glue *g = arg;
    int rc = g->prev && g->prev->before_update ? g->prev->before_update(g->prev->arg) : 0;
    return rc ? rc : ckpt_error(g, so_ckpt_before_update(g->ck));
}

static int hook_step_end(void *arg, const so_train_state *s)
{
    ckpt_glue *g = arg;
    int rc = g->prev && g->prev->step_end ? g->prev->step_end(g->prev->arg, s) : 0;
    if (rc)
        return rc;
    return ckpt_error(g, so_ckpt_step_end(g->ck, s));
}

/* A checkpoint error is reported and either ignored or turned into a clean
 * stop (--ckpt-on-error); other errors (communication) end training. */
static int ckpt_error(ckpt_glue *g, int rc)
{
    if (!rc || !so_ckpt_last_error_is_ckpt(g->ck))
        return rc;
    const char *msg = so_errmsg();
    if (g->rank == 0 || !strstr(msg, "another rank"))
        fprintf(stderr, "scaleout train: %s%s\n", msg,
                g->stop_on_error ? " (stopping: --ckpt-on-error stop)" : "; training continues, the previous "
                                                                         "checkpoint stays valid");
    if (!g->stop_on_error)
        return 0;
    g->failed = 1;
    return SO_STOP;
}

/* ---- flags ---------------------------------------------------------------------- */

/* Leaves the message in so_errmsg() for dist_agree and returns exit status 2. */
static int usage_err(const char *fmt, const char *arg)
{
    so_err(SO_EINVAL, fmt, arg);
    return CLI_USAGE;
}

static int parse_every(const ckpt_args *a, so_ckpt_config *c)
{
    const char *e = a->every;
    char *end;
    if (!strcmp(e, "auto")) {
        if (a->mtbf <= 0)
            return usage_err("--ckpt-every %s needs --mtbf HOURS", e);
        c->mtbf_hours = a->mtbf;
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

static int make_config(const ckpt_args *a, const char *model, const char *optimizer, const char *config,
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

static int init_from(const char *path, so_model *m)
{
    if (!so_ckpt_safetensors_load(path, m))
        return 0;
    char msg[600];
    snprintf(msg, sizeof msg, "%s", so_errmsg());
    return usage_err("--init-from: %s", msg);
}

/* The per-rank part of the set-up; every rank's status is agreed afterwards. */
static int setup(const ckpt_args *a, ckpt_glue *g, dist_handle *dh, so_model *m, so_optim *opt,
                 const so_ckpt_config *c)
{
    if ((a->every || a->resume) && transport(g, dh))
        return CLI_FAIL;
    int rc = a->init_from ? init_from(a->init_from, m) : 0; /* every rank reads the file: no broadcast */
    if (rc || (!a->every && !a->resume))
        return rc;
    g->stop_on_error = !strcmp(a->on_error, "stop");
    return so_ckpt_create(c, tp(g), m, opt, &g->ck) ? CLI_USAGE : 0;
}

int ckpt_glue_open(const ckpt_args *a, dist_handle *dh, so_model *m, so_optim *opt, const char *model,
                   const char *optimizer, const char *config, so_train_config *tc, ckpt_glue **out)
{
    *out = NULL;
    ckpt_glue *g = calloc(1, sizeof *g);
    if (!g)
        return cli_error("train", CLI_FAIL, "out of memory");
    so_ckpt_config c;
    int rc = make_config(a, model, optimizer, config, &c);
    if (!rc)
        rc = setup(a, g, dh, m, opt, &c);
    if ((rc = dist_agree(dh, "train", rc, so_errmsg())) || !g->ck) {
        ckpt_glue_close(g);
        return rc;
    }
    if (a->resume) {
        long step = 0;
        int found = 0;
        if ((rc = so_ckpt_restore(g->ck, a->resume, &step, &found))) {
            int code = rc == SO_ECOMM || rc == SO_ENOMEM ? CLI_FAIL : CLI_USAGE;
            if (g->rank == 0 || code == CLI_FAIL) /* input errors are the same on every rank */
                cli_error("train", code, "%s", so_errmsg());
            ckpt_glue_close(g);
            return code;
        }
        if (g->rank == 0)
            printf(found ? "resuming from the checkpoint at step %ld\n" : "no checkpoint to resume from: starting "
                                                                          "at step %ld\n", step);
        tc->start_step = step;
        tc->no_initial_bcast = found;
    }
    g->prev = tc->hooks;
    g->hooks = (so_train_hooks){g, g->prev && g->prev->span ? hook_span : NULL, hook_step_end, hook_before_update};
    if (a->every)
        tc->hooks = &g->hooks;
    g->writes = a->every != NULL;
    *out = g;
    return 0;
}

static double mb_per_s(double bytes, double seconds)
{
    return seconds > 0 ? bytes / seconds / 1e6 : 0;
}

int ckpt_glue_finish(ckpt_glue *g)
{
    if (!g || !g->ck)
        return 0;
    int rc = so_ckpt_finish(g->ck);
    if (rc && so_ckpt_last_error_is_ckpt(g->ck)) {
        fprintf(stderr, "scaleout train: %s\n", so_errmsg());
        if (g->stop_on_error)
            g->failed = 1;
        rc = 0;
    }
    if (rc)
        return cli_error("train", CLI_FAIL, "%s", so_errmsg());
    so_ckpt_stats st;
    so_ckpt_get_stats(g->ck, &st);
    int64_t mx[3] = {(int64_t)(st.stall_total * 1e6), (int64_t)(st.stall_max * 1e6), (int64_t)(st.drain_seconds * 1e6)};
    int64_t cpu = (int64_t)(st.bg_cpu_seconds * 1e6);
    if (tp(g) && (g->t.allreduce_i64(g->t.ctx, mx, 3, SO_CKPT_MAX) || g->t.allreduce_i64(g->t.ctx, &cpu, 1, SO_CKPT_SUM)))
        return cli_error("train", CLI_FAIL, "%s", so_errmsg());
    if (g->rank == 0 && st.count + st.failures > 0)
        printf("checkpoints: %ld complete, %ld flushed, %ld failed; stall total %.6f s, max %.6f s per checkpoint "
               "(slowest rank); write %.1f MB/s, flush %.1f MB/s (rank 0; write = own shard %.1f MB/s + partner copy "
               "%.1f MB/s); background CPU %.4f s per rank; exit drain %.4f s\n",
               st.count, st.flushes, st.failures, mx[0] * 1e-6, mx[1] * 1e-6,
               mb_per_s(st.write_bytes, st.write_seconds), mb_per_s(st.flush_bytes, st.flush_seconds),
               mb_per_s(st.write_bytes - st.partner_bytes, st.write_seconds - st.partner_seconds),
               mb_per_s(st.partner_bytes, st.partner_seconds),
               cpu * 1e-6 / (tp(g) ? g->t.world : 1), mx[2] * 1e-6);
    if (g->rank == 0 && st.interval > 0)
        printf("checkpoint interval (Daly, --mtbf): %ld steps\n", st.interval);
    return g->failed ? CLI_FAIL : 0;
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
