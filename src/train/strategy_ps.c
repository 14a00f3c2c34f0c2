/* A parameter server sharded over the last K ranks (`--sync ssp:S|async
 * --ps-ranks K`, docs/COMPRESSION.md "Parameter server"). The flat parameter
 * vector is cut into K blocks; server s (world rank W + s) holds block s and
 * the optimizer state for it. Workers (world ranks 0..W-1) hold the whole
 * model: each step a worker pushes its gradient, block by block, to the
 * servers and waits for the parameters back, then computes its next step.
 *
 *   ssp:S  the server sums the W gradients of each clock (a worker's step)
 *          and steps once with their mean when the last one is in; it
 *          answers a worker's push of clock k once clock k + 1 - S is
 *          complete, so a worker computing step k + 1 sees every gradient of
 *          the clocks before k + 1 - S: staleness <= S. ssp:0 is synchronous
 *          data parallelism over the W workers, the same sums and steps.
 *   async  the server steps once per push, at lr(k) / W (W pushes move the
 *          model as far as one synchronous step), and answers at once.
 *
 * Messages are the group's point-to-point vocabulary (so_group_isend/irecv):
 * a push is [clock, gradient block], a reply [complete clocks, parameter
 * block]. A push with clock MARK asks for the whole block at a sync point
 * (start, evaluation, the end): then the server has every push of the
 * workers' steps so far and answers with the parameters they produce. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "scaleout/err.h"
#include "scaleout/group.h"
#include "scaleout/log.h"
#include "scaleout/timer.h"
#include "scaleout/train.h"
#include "strategy_internal.h"

enum { TAG_PUSH = 3701, TAG_REPLY = 3702 };
#define MARK (-1.0f) /* a push header asking for a sync point's parameters */
#define FINISH_WAIT_S 30.0 /* how long the end waits for peers that may have failed */

/* A server's view of one worker. */
typedef struct {
    so_handle *reply; /* the last reply's send, until complete */
    float *in, *out;  /* 1 + block floats each: [clock, gradient] in, [clock, parameters] out */
    long next;        /* clock of its next push */
    long owed;        /* ssp: the clock of the push not answered yet (-1: none) */
    int marked;       /* sent its sync-point mark */
} ps_peer;

typedef struct {
    so_group *g;
    so_model *m;
    const so_train_config *c;
    so_train_result *r;
    int async, staleness;        /* async, or ssp:S */
    int W, K, rank;              /* workers, servers, this world rank */
    size_t *lo;                  /* K + 1 block boundaries of the flat vector */
    so_optim *opt;               /* servers: the block's optimizer (owned by so_strategy) */
    /* servers */
    ps_peer *peers;
    long clock;                  /* complete clocks (ssp), min pushes over workers (async) */
    float **acc;                 /* ssp: sums of clock + j in acc[j], j < nacc */
    int *got;                    /* ssp: pushes summed in acc[j] */
    int nacc;
    long *pushes;                /* async: pushes applied per worker */
    /* workers */
    float **send, **recv;        /* per server: 1 + block floats */
    so_handle **hs, **hr;
    long step;                   /* clock of the next push */
    /* statistics (workers): bytes moved, staleness of each step's parameters */
    double bytes, stale_sum, stale_max, stale_n;
    int started;
    /* checkpoints: the parameters every rank holds after the save's drain
     * (the replicated part), the layout handing them over, this rank's
     * section (a server's optimizer slots and step count) */
    float *ck_params;
    size_t ck_units[2];
    so_state_layout layout;
    so_rank_state rs;
    int restored;
    long restored_opt_steps;
    char spec[32];
} ps_state;

static int is_server(const ps_state *s) { return s->rank >= s->W; }
static size_t block_n(const ps_state *s, int k) { return s->lo[k + 1] - s->lo[k]; }

/* ---- messages ---------------------------------------------------------------------- */

/* Sends [clock, this server's parameter block] to worker w. */
static int send_reply(ps_state *s, int w)
{
    ps_peer *p = &s->peers[w];
    int k = s->rank - s->W;
    if (p->reply) {
        int rc = so_group_wait(s->g, p->reply);
        p->reply = NULL;
        if (rc)
            return rc;
    }
    p->out[0] = (float)s->clock;
    memcpy(p->out + 1, s->m->params + s->lo[k], block_n(s, k) * sizeof(float));
    return so_group_isend(s->g, p->out, 1 + block_n(s, k), SO_DTYPE_F32, w, TAG_REPLY, &p->reply);
}

/* ---- the server's updates ------------------------------------------------------------ */

/* One optimizer step of this server's block with gradient grad. */
static int step_block(ps_state *s, const float *grad, float lr)
{
    int k = s->rank - s->W;
    so_optim_range r = {s->m->params + s->lo[k], grad, s->lo[k], 0, block_n(s, k)};
    return so_optim_step_ranges(s->opt, &r, 1, lr);
}

/* ssp: the accumulator of clock `clock` (grown on first use: a worker runs at most S clocks ahead). */
static int acc_slot(ps_state *s, long clock, float **out)
{
    long j = clock - s->clock;
    if (j < 0)
        return so_err(SO_ECOMM, "parameter server: a push of clock %ld after clock %ld completed", clock, s->clock);
    while (j >= s->nacc) {
        size_t n = block_n(s, s->rank - s->W);
        float **a = realloc(s->acc, (size_t)(s->nacc + 1) * sizeof *a);
        int *g = a ? realloc(s->got, (size_t)(s->nacc + 1) * sizeof *g) : NULL;
        if (a)
            s->acc = a;
        if (!g || !(a[s->nacc] = calloc(n ? n : 1, sizeof(float))))
            return so_err(SO_ENOMEM, "parameter server: out of memory for clock %ld's sum", clock);
        s->got = g;
        g[s->nacc++] = 0;
    }
    *out = s->acc[j];
    return 0;
}

/* ssp: answers every push whose clock k now has k + 1 - S complete. */
static int ssp_answer(ps_state *s)
{
    for (int w = 0; w < s->W; w++) {
        ps_peer *p = &s->peers[w];
        if (p->owed >= 0 && p->owed + 1 - s->staleness <= s->clock) {
            p->owed = -1;
            int rc = send_reply(s, w);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* ssp: steps every clock whose W gradients are in, with their mean, then rotates the sums. */
static int ssp_advance(ps_state *s)
{
    size_t n = block_n(s, s->rank - s->W);
    while (s->nacc > 0 && s->got[0] == s->W) {
        float *a = s->acc[0];
        so_optim_scale(a, n, 1.0f / (float)s->W); /* as the AVG allreduce: the sum times 1/size */
        int rc = step_block(s, a, so_lr_at(&s->c->lr, s->clock));
        if (rc)
            return rc;
        memset(a, 0, n * sizeof *a);
        memmove(s->acc, s->acc + 1, (size_t)(s->nacc - 1) * sizeof *s->acc);
        memmove(s->got, s->got + 1, (size_t)(s->nacc - 1) * sizeof *s->got);
        s->acc[s->nacc - 1] = a;
        s->got[s->nacc - 1] = 0;
        s->clock++;
    }
    return ssp_answer(s);
}

static int ssp_push(ps_state *s, int w, long clock, const float *grad)
{
    size_t n = block_n(s, s->rank - s->W);
    float *a = NULL;
    int rc = acc_slot(s, clock, &a);
    if (rc)
        return rc;
    for (size_t i = 0; i < n; i++)
        a[i] += grad[i];
    s->got[clock - s->clock]++;
    s->peers[w].owed = clock;
    return ssp_advance(s);
}

static int async_push(ps_state *s, int w, long clock, const float *grad)
{
    int rc = step_block(s, grad, so_lr_at(&s->c->lr, clock) / (float)s->W);
    if (rc)
        return rc;
    s->pushes[w]++;
    long lo = s->pushes[0];
    for (int v = 1; v < s->W; v++)
        lo = s->pushes[v] < lo ? s->pushes[v] : lo;
    s->clock = lo;
    return send_reply(s, w);
}

/* A push from worker w arrived in its buffer: apply it, or note the mark. */
static int on_push(ps_state *s, int w)
{
    ps_peer *p = &s->peers[w];
    float h = p->in[0];
    if (h == MARK) {
        p->marked = 1;
        return 0;
    }
    long clock = (long)h;
    if (clock != p->next)
        return so_err(SO_ECOMM, "parameter server: worker %d pushed clock %ld, expected %ld", w, clock, p->next);
    p->next++;
    return s->async ? async_push(s, w, clock, p->in + 1) : ssp_push(s, w, clock, p->in + 1);
}

static void pause_briefly(int idle)
{
    if (idle < 64)
        return;
    struct timespec ts = {0, idle < 1024 ? 20000 : 200000};
    nanosleep(&ts, NULL);
}

/* Tests the replies in flight; *busy = 1 while any is (a worker posted
 * their receive before its push, so they complete as soon as it polls). */
static int replies_busy(ps_state *s, int *busy)
{
    *busy = 0;
    for (int w = 0; w < s->W; w++) {
        ps_peer *p = &s->peers[w];
        int done = 0, rc = p->reply ? so_group_test(s->g, p->reply, &done) : 0;
        if (done || rc)
            p->reply = NULL;
        if (rc)
            return rc;
        *busy |= p->reply != NULL;
    }
    return 0;
}

/* Takes worker w's next push when it has arrived (*took = 1) and applies
 * it. Probed before it is received: a receive posted ahead would stay
 * outstanding across this server's step ends, where the job's agreements
 * need the communication thread idle, and would keep workers from running
 * ahead. A worker sends nothing after its mark until the sync point's reply. */
static int take_push(ps_state *s, int w, int *took)
{
    ps_peer *p = &s->peers[w];
    int arrived = 0, rc = p->marked ? 0 : so_group_probe(s->g, w, TAG_PUSH, &arrived);
    *took = 0;
    if (rc || !arrived)
        return rc;
    so_handle *h;
    if ((rc = so_group_irecv(s->g, p->in, 1 + block_n(s, s->rank - s->W), SO_DTYPE_F32, w, TAG_PUSH, &h)) ||
        (rc = so_group_wait(s->g, h)))
        return rc;
    *took = 1;
    return on_push(s, w);
}

/* Serves pushes until clock >= target (target >= 0), or until every
 * worker's mark is in (target < 0); whichever worker's push comes, of any
 * clock, so workers run as far ahead as the method lets them. Probes only
 * while no reply is in flight (probing needs the communication thread
 * idle). deadline > 0: give up (SO_ECOMM) then. */
static int serve(ps_state *s, long target, double deadline)
{
    for (int idle = 0, first = 0;; idle++, first = (first + 1) % s->W) {
        int marks = 0, busy = 0, rc;
        for (int w = 0; w < s->W; w++)
            marks += s->peers[w].marked;
        if (target >= 0 ? s->clock >= target : marks == s->W)
            return 0;
        if ((rc = replies_busy(s, &busy)))
            return rc;
        for (int i = 0; !busy && i < s->W; i++) { /* from a rotating first worker: none is favoured */
            int took = 0;
            if ((rc = take_push(s, (first + i) % s->W, &took)))
                return rc;
            if (!took)
                continue;
            idle = 0;
            if ((rc = replies_busy(s, &busy)))
                return rc;
        }
        if (deadline > 0 && so_now() > deadline)
            return so_err(SO_ECOMM, "parameter server: the workers' final marks did not come");
        pause_briefly(idle);
    }
}

/* ---- sync points: every worker has the servers' current parameters ---------------------- */

static int wait_all(ps_state *s, so_handle **h, int n, double deadline)
{
    int rc = 0;
    for (int i = 0; i < n; i++) {
        for (int idle = 0; h[i] && deadline > 0; idle++) {
            int done = 0;
            int r = so_group_test(s->g, h[i], &done);
            if (r || done) {
                h[i] = NULL;
                rc = rc ? rc : r;
            } else if (so_now() > deadline) {
                return so_err(SO_ECOMM, "parameter server: a peer did not answer at the end");
            } else {
                pause_briefly(idle);
            }
        }
        if (h[i]) {
            int r = so_group_wait(s->g, h[i]);
            h[i] = NULL;
            rc = rc ? rc : r;
        }
    }
    return rc;
}

/* Worker: waits for the K replies and takes their parameter blocks; the
 * replies' clocks say how stale the parameters of step s->step are. */
static int take_replies(ps_state *s, double deadline, int count)
{
    int rc = wait_all(s, s->hs, s->K, deadline);
    int r2 = wait_all(s, s->hr, s->K, deadline);
    if ((rc = rc ? rc : r2))
        return rc;
    long seen = s->step;
    for (int k = 0; k < s->K; k++) {
        long c = (long)s->recv[k][0];
        seen = c < seen ? c : seen;
        memcpy(s->m->params + s->lo[k], s->recv[k] + 1, block_n(s, k) * sizeof(float));
    }
    so_model_params_changed(s->m);
    if (count) {
        double st = (double)(s->step - seen);
        s->stale_sum += st;
        s->stale_n++;
        s->stale_max = st > s->stale_max ? st : s->stale_max;
        s->bytes += 2.0 * (double)(s->m->nparams + s->K) * sizeof(float);
    }
    return 0;
}

/* Worker: sends [clock or MARK, gradient / K blocks] and posts the replies' receives. */
static int push(ps_state *s, float header, float scale)
{
    for (int k = 0; k < s->K; k++) {
        size_t n = block_n(s, k);
        float *b = s->send[k];
        b[0] = header;
        const float *g = s->m->grads + s->lo[k];
        for (size_t i = 0; i < n; i++)
            b[1 + i] = header == MARK ? 0.0f : g[i] * scale;
        int rc = so_group_irecv(s->g, s->recv[k], 1 + n, SO_DTYPE_F32, s->W + k, TAG_REPLY, &s->hr[k]);
        if (!rc)
            rc = so_group_isend(s->g, b, 1 + n, SO_DTYPE_F32, s->W + k, TAG_PUSH, &s->hs[k]);
        if (rc)
            return rc;
    }
    return 0;
}

/* Every rank: the servers answer each worker's mark with their blocks. */
static int sync_point(ps_state *s, double wait_s)
{
    double deadline = wait_s > 0 ? so_now() + wait_s : 0;
    if (!is_server(s)) {
        int rc = push(s, MARK, 0);
        return rc ? rc : take_replies(s, deadline, 0);
    }
    int rc = serve(s, -1, deadline);
    for (int w = 0; !rc && w < s->W; w++)
        rc = send_reply(s, w);
    for (int w = 0; w < s->W; w++) {
        int r = wait_all(s, &s->peers[w].reply, 1, deadline);
        rc = rc ? rc : r;
        s->peers[w].marked = 0;
    }
    return rc;
}

/* ---- checkpoints: a consistent cut ---------------------------------------------------------
 * At a checkpoint's step end every rank drains: the workers' marks reach
 * the servers after every push of the steps so far is applied (ssp: every
 * clock complete, no sum in flight), and the servers answer with their
 * blocks; rank 0 (a worker) then broadcasts the whole model, so every rank
 * writes its block of the same parameters. A server's section holds its
 * optimizer slots and step count (async steps once per push); a worker's
 * holds nothing but the same number of bytes. The sums, clocks and pushes
 * are all the step itself after a drain. */

enum { PS_CKPT_HEADER = 4 }; /* doubles: the server optimizer's step count, then reserved */

static size_t ps_ckpt_slot_floats(const ps_state *s) { return block_n(s, 0); /* the longest block */ }

static int ps_drain(ps_state *s)
{
    so_handle *h;
    int rc = sync_point(s, 0);
    if (!rc)
        rc = so_group_ibcast(s->g, s->m->params, s->m->nparams, SO_DTYPE_F32, 0, NULL, &h);
    if (!rc)
        rc = so_group_wait(s->g, h);
    so_model_params_changed(s->m);
    memcpy(s->ck_params, s->m->params, s->m->nparams * sizeof *s->ck_params);
    return rc;
}

static void ps_rank_get(void *ctx, void *dst)
{
    ps_state *s = ctx;
    if (ps_drain(s)) /* a failed message or collective ends the job in the comm layer */
        so_log(SO_LOG_WARN, "checkpoint: the parameter server's drain failed: %s", so_errmsg());
    double h[PS_CKPT_HEADER] = {is_server(s) ? (double)so_optim_steps(s->opt) : 0};
    memcpy(dst, h, sizeof h);
    float *p = (float *)((char *)dst + sizeof h);
    size_t n = ps_ckpt_slot_floats(s);
    memset(p, 0, (size_t)so_optim_nslots(s->opt) * n * sizeof *p);
    for (int i = 0; is_server(s) && i < so_optim_nslots(s->opt); i++)
        memcpy(p + (size_t)i * n, so_optim_slot(s->opt, i), block_n(s, s->rank - s->W) * sizeof *p);
}

static void ps_rank_set(void *ctx, const void *src)
{
    ps_state *s = ctx;
    double h[PS_CKPT_HEADER];
    memcpy(h, src, sizeof h);
    s->restored_opt_steps = (long)h[0];
    const float *p = (const float *)((const char *)src + sizeof h);
    size_t n = ps_ckpt_slot_floats(s);
    for (int i = 0; is_server(s) && i < so_optim_nslots(s->opt); i++)
        memcpy(so_optim_slot(s->opt, i), p + (size_t)i * n, block_n(s, s->rank - s->W) * sizeof *p);
    s->restored = 1;
}

/* The replicated part: the drained parameters, and zeros for the optimizer
 * slots (the servers' are in their sections). */
static void ps_layout_get(void *ctx, int seg, size_t lo, size_t n, float *dst)
{
    ps_state *s = ctx;
    if (seg == 0)
        memcpy(dst, s->ck_params + lo, n * sizeof *dst);
    else
        memset(dst, 0, n * sizeof *dst);
}

static void ps_layout_set(void *ctx, int seg, size_t lo, size_t n, const float *src)
{
    ps_state *s = ctx;
    if (seg == 0)
        memcpy(s->m->params + lo, src, n * sizeof *src);
}

static const so_state_layout *ps_state_layout(void *self) { return &((ps_state *)self)->layout; }
static const so_rank_state *ps_rank_state(void *self) { return &((ps_state *)self)->rs; }

/* At create: the layout (rank r writes block r of the parameters) and the section's size. */
static int ps_ckpt_init(ps_state *s, int world)
{
    if (!(s->ck_params = malloc((s->m->nparams + 1) * sizeof *s->ck_params)))
        return SO_ENOMEM;
    s->ck_units[0] = 0;
    s->ck_units[1] = s->m->nparams;
    s->layout = (so_state_layout){.nunits = 1, .units = s->ck_units, .shards = world, .replicas = 1,
                                  .shard = s->rank, .get = ps_layout_get, .set = ps_layout_set, .ctx = s};
    s->rs = (so_rank_state){.bytes = PS_CKPT_HEADER * sizeof(double) +
                                     (uint64_t)so_optim_nslots(s->opt) * ps_ckpt_slot_floats(s) * sizeof(float),
                            .required = 1, .get = ps_rank_get, .set = ps_rank_set, .ctx = s};
    snprintf(s->rs.tag, sizeof s->rs.tag, "sync=%s,ps_ranks=%d", s->spec, s->K);
    return 0;
}

/* ---- the seam ------------------------------------------------------------------------ */

static int ps_start(void *self, so_model *m, const so_train_config *c, so_train_result *r)
{
    ps_state *s = self;
    s->m = m;
    s->c = c;
    s->r = r;
    if (c->start_step > 0 && !s->restored)
        return so_err(SO_EINVAL, "--sync %s: resuming at step %ld needs the parameter server's state from a "
                      "checkpoint of --sync %s --ps-ranks %d on the same number of ranks (%d); this one was "
                      "written by another method or number of ranks", s->spec, c->start_step, s->spec, s->K,
                      s->W + s->K);
    if (s->restored && is_server(s))
        so_optim_set_steps(s->opt, s->restored_opt_steps); /* after the checkpoint set every rank's to rank 0's */
    s->step = s->clock = c->start_step;
    for (int w = 0; is_server(s) && w < s->W; w++)
        s->peers[w].next = c->start_step;
    for (int w = 0; s->pushes && w < s->W; w++)
        s->pushes[w] = c->start_step;
    int rc = sync_point(s, 0); /* the servers' initial parameters on every worker */
    s->started = !rc;
    return rc;
}

/* Server: one step = until clock `step` is complete (ssp: every worker's
 * push of it in; async: every worker pushed that often), taking the pushes
 * of faster workers' later clocks as they come. Nothing stays in flight past
 * the step (the job's step-end agreements run on the training thread and
 * need the communication thread idle): pushes are probed before they are
 * received, and the replies are waited for. How far ahead a worker runs is
 * then bounded by the method (ssp: S clocks) and by the job's lagged
 * step-end agreements (stop.c: a rank waits at step end 2k for every rank's
 * step end 2k - 2). */
static int ps_run_step(void *self, int K, const so_step_io *io, double *loss)
{
    ps_state *s = self;
    (void)K, (void)io;
    *loss = NAN;
    long target = s->step + 1;
    double t0 = so_now();
    int rc = serve(s, target, 0);
    for (int w = 0; w < s->W; w++) { /* the replies too are done before the step ends */
        int r = wait_all(s, &s->peers[w].reply, 1, 0);
        rc = rc ? rc : r;
    }
    s->r->comm_exposed += so_now() - t0;
    s->step = target;
    return rc ? rc : 1;
}

/* Worker: pushes the step's gradient, waits for the parameters of the next. */
static int worker_grads_done(ps_state *s, double *exposed)
{
    double t0 = so_now();
    int rc = push(s, (float)s->step, 1.0f / (float)s->c->accumulate);
    s->step++;
    if (!rc)
        rc = take_replies(s, 0, 1);
    *exposed = so_now() - t0;
    return rc;
}

static int ps_grads_done(void *self, double *exposed)
{
    ps_state *s = self;
    *exposed = 0;
    return is_server(s) ? 0 : worker_grads_done(s, exposed);
}

/* The parameters were stepped by the servers (worker: taken in grads_done). */
static int ps_update(void *self, so_optim *opt, float *params, float *grads, float lr)
{
    (void)self, (void)opt, (void)params, (void)grads, (void)lr;
    return 0;
}

/* Gradients are scaled by 1/K as they are pushed. */
static int ps_grad_scale(void *self, float f)
{
    (void)self, (void)f;
    return 0;
}

/* The servers' parameters on every worker, then each worker's share of the test set. */
static int ps_evaluate(void *self, so_loader *test, double sums[3])
{
    ps_state *s = self;
    int rc = sync_point(s, 0);
    const float *x;
    const int32_t *y;
    int n, got = 0;
    while (!rc && !is_server(s) && (got = so_loader_next(test, &x, &y, &n)) > 0) {
        rc = so_model_forward(s->m, x, y, n, 0);
        if (!rc)
            rc = so_model_add_scores(s->m, y, n, sums);
    }
    return rc ? rc : got < 0 ? got : 0;
}

static int ps_params_whole(void *self)
{
    ps_state *s = self;
    return s->started ? sync_point(s, 0) : 0;
}

/* Staleness and bytes over every rank (one sum and one max on the whole group). */
static void report(ps_state *s)
{
    double sum[4] = {s->stale_sum, s->stale_n, s->bytes, is_server(s) ? 0 : 1}, mx = s->stale_max;
    if (so_group_allreduce(s->g, sum, 4, SO_DTYPE_F64, SO_REDUCE_SUM) ||
        so_group_allreduce(s->g, &mx, 1, SO_DTYPE_F64, SO_REDUCE_MAX))
        return;
    so_train_result *r = s->r;
    r->ps_staleness_mean = sum[1] > 0 ? sum[0] / sum[1] : 0;
    r->ps_staleness_max = mx;
    r->ps_bytes_per_step = sum[1] > 0 ? sum[2] / sum[1] : 0; /* per worker step, both ways */
    r->ps_workers = s->W;
    r->ps_servers = s->K;
}

/* After the last step: a sync point consumes the receives the servers keep
 * posted (bounded: a peer that failed ends the job instead). */
static void ps_finish(void *self)
{
    ps_state *s = self;
    if (!s->started)
        return;
    s->started = 0;
    if (!sync_point(s, FINISH_WAIT_S))
        report(s);
    s->started = 1; /* params_whole may follow */
}

static void ps_destroy(void *self)
{
    ps_state *s = self;
    for (int w = 0; s->peers && w < s->W; w++) {
        free(s->peers[w].in);
        free(s->peers[w].out);
    }
    for (int j = 0; j < s->nacc; j++)
        free(s->acc[j]);
    for (int k = 0; s->send && k < s->K; k++) {
        free(s->send[k]);
        free(s->recv[k]);
    }
    free(s->peers), free(s->acc), free(s->got), free(s->pushes);
    free(s->send), free(s->recv), free(s->hs), free(s->hr), free(s->lo), free(s->ck_params);
    free(s);
}

static const so_strategy_ops ps_server_ops = {
    .name = "ps-server", .start = ps_start, .run_step = ps_run_step, .grads_done = ps_grads_done,
    .update = ps_update, .grad_scale = ps_grad_scale, .evaluate = ps_evaluate, .finish = ps_finish,
    .destroy = ps_destroy, .params_whole = ps_params_whole, .state = ps_state_layout, .rank_state = ps_rank_state,
};
static const so_strategy_ops ps_worker_ops = {
    .name = "ps-worker", .start = ps_start, .grads_done = ps_grads_done, .update = ps_update,
    .grad_scale = ps_grad_scale, .evaluate = ps_evaluate, .finish = ps_finish, .destroy = ps_destroy,
    .params_whole = ps_params_whole, .state = ps_state_layout, .rank_state = ps_rank_state,
};

/* ---- creation ------------------------------------------------------------------------- */

static float *alloc_floats(size_t n) { return malloc((n ? n : 1) * sizeof(float)); }

static int alloc_server(ps_state *s)
{
    size_t n = block_n(s, s->rank - s->W);
    if (!(s->peers = calloc((size_t)s->W, sizeof *s->peers)))
        return SO_ENOMEM;
    for (int w = 0; w < s->W; w++) {
        s->peers[w].owed = -1;
        if (!(s->peers[w].in = alloc_floats(1 + n)) || !(s->peers[w].out = alloc_floats(1 + n)))
            return SO_ENOMEM;
    }
    if (s->async && !(s->pushes = calloc((size_t)s->W, sizeof *s->pushes)))
        return SO_ENOMEM;
    return 0;
}

static int alloc_worker(ps_state *s)
{
    if (!(s->send = calloc((size_t)s->K, sizeof *s->send)) || !(s->recv = calloc((size_t)s->K, sizeof *s->recv)) ||
        !(s->hs = calloc((size_t)s->K, sizeof *s->hs)) || !(s->hr = calloc((size_t)s->K, sizeof *s->hr)))
        return SO_ENOMEM;
    for (int k = 0; k < s->K; k++)
        if (!(s->send[k] = alloc_floats(1 + block_n(s, k))) || !(s->recv[k] = alloc_floats(1 + block_n(s, k))))
            return SO_ENOMEM;
    return 0;
}

/* The layout: K blocks of the flat vector (the first nparams % K one longer). */
static int ps_layout(ps_state *s, size_t nparams)
{
    if (!(s->lo = malloc(((size_t)s->K + 1) * sizeof *s->lo)))
        return SO_ENOMEM;
    size_t base = nparams / (size_t)s->K, extra = nparams % (size_t)s->K;
    for (int k = 0; k <= s->K; k++)
        s->lo[k] = (size_t)k * base + ((size_t)k < extra ? (size_t)k : extra);
    return is_server(s) ? alloc_server(s) : alloc_worker(s);
}

static int check_config(const so_strategy_config *c, int world)
{
    char spec[32];
    so_sync_format(&c->sync, spec, sizeof spec);
    if (c->ps_ranks < 1 || c->ps_ranks >= world)
        return so_err(SO_EINVAL, "--ps-ranks %d: --sync %s needs fewer server ranks than the %d rank(s) started "
                      "(at least one worker)", c->ps_ranks, spec, world);
    if (!c->group || !c->group->ops->probe)
        return so_err(SO_EINVAL, "--sync %s needs the collective vocabulary with messages and probes "
                      "(so_dist.group)", spec);
    return 0;
}

static int ps_create(const so_strategy_config *c, so_model *m, so_strategy **out)
{
    int world = c->dist ? c->dist->world : 1, rc = check_config(c, world);
    if (rc)
        return rc;
    ps_state *s = calloc(1, sizeof *s);
    so_strategy *st = calloc(1, sizeof *st);
    if (!s || !st) {
        free(s), free(st);
        return so_err(SO_ENOMEM, "out of memory");
    }
    *s = (ps_state){.g = c->group, .m = m, .async = c->sync.method == SO_SYNC_ASYNC,
                    .staleness = c->sync.staleness, .K = c->ps_ranks, .W = world - c->ps_ranks, .rank = c->dist->rank};
    *st = (so_strategy){.ops = is_server(s) ? &ps_server_ops : &ps_worker_ops, .self = s, .replicas = s->W,
                        .no_loss = is_server(s), .lead = s->async ? SO_PS_ASYNC_LEAD : s->staleness};
    if ((rc = ps_layout(s, m->nparams)) == 0) {
        size_t n = is_server(s) ? block_n(s, s->rank - s->W) : 1; /* workers step nothing (one float: a valid optimizer) */
        rc = so_optim_create(&c->optim, n, &st->opt);
        s->opt = st->opt;
        so_sync_format(&c->sync, s->spec, sizeof s->spec);
        if (!rc && ps_ckpt_init(s, world))
            rc = so_err(SO_ENOMEM, "out of memory for the parameter server's checkpoint buffer");
    } else {
        rc = so_err(SO_ENOMEM, "out of memory for the parameter server's buffers");
    }
    if (rc) {
        so_strategy_free(st);
        return rc;
    }
    *out = st;
    return 0;
}

const so_strategy_kind so_strategy_kind_ps = {
    "ps", "parameter server (--sync ssp:S | async): the last --ps-ranks ranks hold the parameters and the "
          "optimizer in blocks, the others push gradients and pull parameters", 0, NULL, ps_create};
