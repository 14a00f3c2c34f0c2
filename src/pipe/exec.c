/* The pipeline strategy (scaleout/pipeline.h): one device's side of GPipe,
 * 1F1B and interleaved 1F1B (v chunks of the model per device). Every
 * receive of a step is posted before its first pass, into one buffer per
 * (edge, micro-batch), so no send ever waits for a receiver to make room
 * and no schedule can deadlock; sends leave as each pass ends and are
 * completed at the end of the step, before the replicas' gradient average
 * (the MPI engine must be idle for point-to-point). Devices on one host
 * share the buffers instead (link.share): the receiver of an edge keeps them,
 * both map them, and a message without bytes says a micro-batch is ready,
 * so no copy crosses between the processes. With a BF16 wire (every stage
 * computes in BF16, docs/PRECISION.md) a copied tensor travels as BF16:
 * activations through a half-size staging buffer (the FP32 output stays the
 * producer's for its backward), diffs and received tensors converted in
 * place in their FP32 buffers; shared edges keep FP32 (no bytes cross). */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/dtype.h"
#include "scaleout/err.h"
#include "scaleout/log.h"
#include "scaleout/pipeline.h"
#include "scaleout/timer.h"
#include "scaleout/train.h"

typedef struct {
    so_pipe_config c;
    const so_pipe_stage_edges *e;
    so_model *m;
    so_train_config tc;          /* the run's configuration, overlap off for the replicas' average */
    so_train_result *r;
    int M, P, stage, chunks, slots;
    int has_loss;                /* this rank holds the plan's last stage (loss, labels, accuracy) */
    int *ops;                    /* the schedule's 2 M v passes */
    int *backwards_run;          /* per chunk, this step (its first backward writes the gradients) */
    float **rdata, **rgrad;      /* recv edge x micro-batch: activation in, its diff out */
    float **sdata, **sgrad;      /* send edge x micro-batch: activation out, its diff in */
    void **rreq, **sreq;         /* the posted receives of recv / send edges per micro-batch */
    char *rshared, *sshared;     /* per recv / send edge: its buffers are in memory both devices map */
    uint16_t **swire;            /* send edge x micro-batch: the BF16 activation on its way (BF16 wire, copied edges) */
    const void **msg_out;        /* per edge (the larger count): what a pass's messages carry */
    double step_bytes;           /* bytes this device's training messages carried this step */
    int32_t *labels;             /* the device of the loss, interleaved: micro-batch k's labels at k x per_batch */
    size_t targets, per_batch;   /* labels per sample (a token loss: T), per micro-batch */
    int *nvalid;                 /* and its sample count */
    void **out;                  /* sends in flight */
    int nout, outcap;
    double busy;                 /* forward + backward seconds of the current step */
    float *tie_in;               /* the tie peer's gradient of the tied table (e->tie_n floats) */
    long start_step;
} pipe_state;

/* A device's passes in order: `warm` forwards, then one forward and one
 * backward alternately (gpipe: warm = every forward). fwd / bwd are the
 * forward and backward sequences, n entries each. */
static void interleave_passes(const int *fwd, const int *bwd, int n, int warm, int *ops)
{
    int at = 0, f = 0;
    for (; f < warm && f < n; f++)
        ops[at++] = fwd[f];
    for (int b = 0; b < n; b++) {
        if (f < n)
            ops[at++] = fwd[f++];
        ops[at++] = -(bwd[b] + 1);
    }
}

int so_pipe_schedule_ops(so_pipe_schedule sc, int d, int P, int microbatches, int v, int *ops)
{
    int M = microbatches, n = M * v, warm, i = 0;
    if (v > 1 && sc != SO_PIPE_INTERLEAVED)
        return so_err(SO_EINVAL, "%d chunks per device: only the interleaved schedule runs them", v);
    int *fwd = malloc(2 * (size_t)n * sizeof *fwd), *bwd = fwd + n;
    if (!fwd)
        return so_err(SO_ENOMEM, "out of memory for the schedule");
    if (sc != SO_PIPE_INTERLEAVED) {
        for (int k = 0; k < M; k++)
            fwd[k] = bwd[k] = k;
        warm = sc == SO_PIPE_GPIPE ? M : P - d - 1;
    } else { /* groups of micro-batches: chunk after chunk forward, in reverse backward */
        int last = M < P ? M : P + M % P; /* the last group takes the remainder of M / P */
        for (int k0 = 0; k0 < M; ) {
            int g = M - k0 == last ? last : P;
            for (int c = 0; c < v; c++)
                for (int j = 0; j < g; j++, i++) {
                    fwd[i] = c * M + k0 + j;
                    bwd[i] = (v - 1 - c) * M + k0 + j;
                }
            k0 += g;
        }
        warm = 2 * (P - d - 1) + (v - 1) * last;
    }
    interleave_passes(fwd, bwd, n, warm, ops);
    free(fwd);
    return 0;
}

/* The most micro-batches one chunk holds between its forward and its backward. */
int so_pipe_slots(so_pipe_schedule sc, int d, int P, int microbatches, int v)
{
    int n = 2 * microbatches * v, most = 1;
    int *ops = malloc((size_t)n * sizeof *ops), *live = calloc((size_t)v, sizeof *live);
    if (ops && live && !so_pipe_schedule_ops(sc, d, P, microbatches, v, ops))
        for (int i = 0; i < n; i++) {
            int c = (ops[i] >= 0 ? ops[i] : -ops[i] - 1) / microbatches;
            live[c] += ops[i] >= 0 ? 1 : -1;
            most = live[c] > most ? live[c] : most;
        }
    else
        most = microbatches;
    free(ops);
    free(live);
    return most;
}

static size_t edge_bytes(const pipe_state *s, const so_pipe_edge *e) { return so_model_edge_bytes(s->m, e->node); }

/* The bytes a message of the edge carries: none when its buffers are
 * shared, half the FP32 tensor's on a BF16 wire. */
static size_t wire_bytes(const pipe_state *s, const so_pipe_edge *e)
{
    return s->c.wire_bf16 ? edge_bytes(s, e) / 2 : edge_bytes(s, e);
}
static size_t recv_msg_bytes(const pipe_state *s, int i) { return s->rshared[i] ? 0 : wire_bytes(s, &s->e->recv[i]); }
static size_t send_msg_bytes(const pipe_state *s, int i) { return s->sshared[i] ? 0 : wire_bytes(s, &s->e->send[i]); }

enum { WIRE_CHUNK = 1024 }; /* elements converted at a time through a stack buffer */

/* buf's n FP32 values rounded to BF16 (so_f32_to_bf16: to nearest even)
 * into its first 2 n bytes. Front to back: a chunk's BF16 lands on bytes
 * whose FP32 values were read already. */
static void narrow_in_place(float *buf, size_t n)
{
    uint16_t tmp[WIRE_CHUNK];
    for (size_t lo = 0; lo < n; lo += WIRE_CHUNK) {
        size_t len = n - lo < WIRE_CHUNK ? n - lo : WIRE_CHUNK;
        so_f32_to_bf16(tmp, buf + lo, len);
        memcpy((uint16_t *)buf + lo, tmp, len * sizeof *tmp);
    }
}

/* The n BF16 values in buf's first 2 n bytes widened to FP32 over the whole
 * buffer. Back to front: a chunk's FP32 lands past every BF16 not yet read. */
static void widen_in_place(float *buf, size_t n)
{
    uint16_t tmp[WIRE_CHUNK];
    for (size_t hi = n; hi > 0;) {
        size_t len = hi < WIRE_CHUNK ? hi : WIRE_CHUNK;
        hi -= len;
        memcpy(tmp, (uint16_t *)buf + hi, len * sizeof *tmp);
        so_bf16_to_f32(buf + hi, tmp, len);
    }
}

/* A received tensor of a copied edge on a BF16 wire, back to FP32. */
static void widen_received(const pipe_state *s, float *buf, const so_pipe_edge *e, int shared)
{
    if (s->c.wire_bf16 && !shared)
        widen_in_place(buf, edge_bytes(s, e) / sizeof(float));
}

static int keep_send(pipe_state *s, void *req)
{
    if (s->nout == s->outcap) {
        int cap = s->outcap ? 2 * s->outcap : 64;
        void **grown = realloc(s->out, (size_t)cap * sizeof *grown);
        if (!grown)
            return so_err(SO_ENOMEM, "out of memory for pipeline sends");
        s->out = grown;
        s->outcap = cap;
    }
    s->out[s->nout++] = req;
    return 0;
}

static int send(pipe_state *s, int peer, const void *buf, size_t bytes, int tag)
{
    void *req = NULL;
    s->step_bytes += (double)bytes;
    atomic_thread_fence(memory_order_seq_cst); /* a shared buffer's stores before "it is ready" */
    int rc = s->c.link.isend(s->c.link.ctx, buf, bytes, peer, tag, &req);
    return rc ? rc : keep_send(s, req);
}

static int wait_sends(pipe_state *s)
{
    int rc = 0;
    for (int i = 0; i < s->nout; i++) {
        int w = s->c.link.wait(s->c.link.ctx, s->out[i]);
        rc = rc ? rc : w;
    }
    s->nout = 0;
    return rc;
}

static int wait_req(pipe_state *s, void **req)
{
    int rc = *req ? s->c.link.wait(s->c.link.ctx, *req) : 0;
    atomic_thread_fence(memory_order_seq_cst); /* and the peer's stores before our loads */
    *req = NULL;
    return rc;
}

/* Every receive of the step: activations of recv edges, diffs of send edges. */
static int post_receives(pipe_state *s)
{
    const so_pipe_stage_edges *e = s->e;
    int rc = 0;
    for (int k = 0; k < s->M; k++) {
        for (int i = 0; !rc && i < e->nrecv; i++)
            rc = s->c.link.irecv(s->c.link.ctx, s->rdata[i * s->M + k], recv_msg_bytes(s, i), e->recv[i].peer,
                                 e->recv[i].tag, &s->rreq[i * s->M + k]);
        for (int i = 0; !rc && i < e->nsend; i++)
            rc = s->c.link.irecv(s->c.link.ctx, s->sgrad[i * s->M + k], send_msg_bytes(s, i), e->send[i].peer,
                                 e->send[i].tag + 1, &s->sreq[i * s->M + k]);
    }
    return rc;
}

/* Chunk ch's edges bound to micro-batch k's buffers: activations for a
 * forward, diffs for a backward. */
static int bind_edges(pipe_state *s, const so_pipe_chunk *ch, int k, int backward)
{
    const so_pipe_stage_edges *e = s->e;
    int rc = 0;
    for (int i = ch->recv_lo; !rc && i < ch->recv_hi; i++)
        rc = so_model_bind_edge(s->m, e->recv[i].node, backward ? NULL : s->rdata[i * s->M + k],
                                backward ? s->rgrad[i * s->M + k] : NULL);
    for (int i = ch->send_lo; !rc && i < ch->send_hi; i++)
        rc = so_model_bind_edge(s->m, e->send[i].node, backward ? NULL : s->sdata[i * s->M + k],
                                backward ? s->sgrad[i * s->M + k] : NULL);
    return rc;
}

/* The first chunk takes micro-batch k from the loader: the images on the
 * device of stage 0, the labels on the device of the loss. A later chunk
 * with the loss (interleaved) sets its labels again before its forward and
 * its backward: a slot's labels are the model state's, which the first
 * chunk of another micro-batch resets meanwhile. */
static int next_input(pipe_state *s, int k, const so_step_io *io)
{
    const float *x;
    const int32_t *y;
    int n;
    int got = io->next(io->arg, &x, &y, &n);
    if (got <= 0)
        return got < 0 ? got : so_err(SO_EINVAL, "the epoch ended inside a pipeline step");
    int loss_here = s->e->chunks[0].stage == s->e->last_stage;
    if (s->labels) {
        memcpy(s->labels + (size_t)k * s->per_batch, y, (size_t)n * s->targets * sizeof *y);
        s->nvalid[k] = n;
    }
    return so_model_set_input(s->m, s->stage == 0 ? x : NULL, loss_here ? y : NULL, n);
}

/* Micro-batch k's labels for a later chunk with the loss. */
static int later_labels(pipe_state *s, const so_pipe_chunk *ch, int c, int k)
{
    if (c == 0 || ch->stage != s->e->last_stage)
        return 0;
    return so_model_set_input(s->m, NULL, s->labels + (size_t)k * s->per_batch, s->nvalid[k]);
}

/* What send edge i's message of micro-batch k carries: its activation, on
 * a BF16 wire rounded into the edge's staging buffer (the FP32 output stays
 * as it is: the producer's backward may read it). Conversion is the
 * stage's work (busy time); the send is not. */
static const void *activation_out(pipe_state *s, int i, int k)
{
    const float *act = s->sdata[i * s->M + k];
    if (!s->c.wire_bf16 || s->sshared[i])
        return act;
    so_f32_to_bf16(s->swire[i * s->M + k], act, edge_bytes(s, &s->e->send[i]) / sizeof(float));
    return s->swire[i * s->M + k];
}

/* Recv edge i's diff of micro-batch k, on a BF16 wire rounded in place (it
 * is not read again this step). */
static const void *diff_out(pipe_state *s, int i, int k)
{
    float *diff = s->rgrad[i * s->M + k];
    if (s->c.wire_bf16 && !s->rshared[i])
        narrow_in_place(diff, edge_bytes(s, &s->e->recv[i]) / sizeof(float));
    return diff;
}

static int forward(pipe_state *s, int c, int k, const so_step_io *io, double *loss)
{
    const so_pipe_stage_edges *e = s->e;
    const so_pipe_chunk *ch = &e->chunks[c];
    int rc = 0;
    for (int i = ch->recv_lo; !rc && i < ch->recv_hi; i++) /* waiting is the bubble, not busy time */
        rc = wait_req(s, &s->rreq[i * s->M + k]);
    double t0 = so_now();
    for (int i = ch->recv_lo; !rc && i < ch->recv_hi; i++)
        widen_received(s, s->rdata[i * s->M + k], &e->recv[i], s->rshared[i]);
    so_model_use_slot(s->m, k % s->slots);
    if (!rc && c == 0)
        rc = next_input(s, k, io);
    if (!rc)
        rc = later_labels(s, ch, c, k);
    if (!rc)
        rc = bind_edges(s, ch, k, 0);
    if (!rc)
        rc = so_model_forward_nodes(s->m, ch->node_lo, ch->node_hi, 1);
    if (!rc && ch->stage == e->last_stage)
        *loss += s->m->loss;
    const void **out = s->msg_out;
    for (int i = ch->send_lo; !rc && i < ch->send_hi; i++)
        out[i] = activation_out(s, i, k);
    double t1 = so_now();
    for (int i = ch->send_lo; !rc && i < ch->send_hi; i++)
        rc = send(s, e->send[i].peer, out[i], send_msg_bytes(s, i), e->send[i].tag);
    s->busy += t1 - t0;
    io->pass(io->arg, 0, k, t0, t1);
    return rc;
}

static int backward(pipe_state *s, int c, int k, const so_step_io *io)
{
    const so_pipe_stage_edges *e = s->e;
    const so_pipe_chunk *ch = &e->chunks[c];
    int rc = 0;
    for (int i = ch->send_lo; !rc && i < ch->send_hi; i++)
        rc = wait_req(s, &s->sreq[i * s->M + k]);
    double t0 = so_now();
    for (int i = ch->send_lo; !rc && i < ch->send_hi; i++)
        widen_received(s, s->sgrad[i * s->M + k], &e->send[i], s->sshared[i]);
    so_model_use_slot(s->m, k % s->slots);
    if (!rc)
        rc = later_labels(s, ch, c, k);
    if (!rc)
        rc = bind_edges(s, ch, k, 1);
    int nth = s->backwards_run[c]++;
    s->m->accumulate_grads = nth > 0;
    const so_strategy *dp = s->c.replicas;
    if (!rc && dp && dp->ops->backward_begin)
        dp->ops->backward_begin(dp->self, nth, s->M);
    if (!rc)
        rc = so_model_backward_nodes(s->m, ch->node_lo, ch->node_hi);
    const void **out = s->msg_out;
    for (int i = ch->recv_lo; !rc && i < ch->recv_hi; i++)
        out[i] = diff_out(s, i, k);
    double t1 = so_now();
    for (int i = ch->recv_lo; !rc && i < ch->recv_hi; i++)
        rc = send(s, e->recv[i].peer, out[i], recv_msg_bytes(s, i), e->recv[i].tag + 1);
    s->busy += t1 - t0;
    io->pass(io->arg, 1, k, t0, t1);
    return rc;
}

static int pipe_run_step(void *self, int K, const so_step_io *io, double *loss)
{
    pipe_state *s = self;
    if (K != s->M)
        return so_err(SO_EINVAL, "pipeline of %d micro-batches run with %d", s->M, K);
    double sum = 0;
    int rc = post_receives(s);
    s->busy = 0;
    s->step_bytes = 0;
    memset(s->backwards_run, 0, (size_t)s->chunks * sizeof *s->backwards_run);
    for (int i = 0; !rc && i < 2 * s->M * s->chunks; i++) {
        int op = s->ops[i], pass = op >= 0 ? op : -op - 1;
        rc = op >= 0 ? forward(s, pass / s->M, pass % s->M, io, &sum) : backward(s, pass / s->M, pass % s->M, io);
    }
    int w = wait_sends(s);
    *loss = s->has_loss ? sum / s->M : NAN;
    return rc ? rc : w ? w : 1;
}

#define SHARED_ALIGN 4096 /* each shared buffer on its own pages: no two writers share a line */

static size_t shared_slot(size_t bytes) { return (bytes + SHARED_ALIGN - 1) / SHARED_ALIGN * SHARED_ALIGN; }

/* Bytes of this device's shared memory: the data and diff buffers of every
 * recv edge whose sender can share, for each micro-batch. */
static size_t shared_bytes(const pipe_state *s)
{
    size_t total = 0;
    for (int i = 0; i < s->e->nrecv; i++)
        if (s->c.link.shares_with(s->c.link.ctx, s->e->recv[i].peer))
            total += 2 * (size_t)s->M * shared_slot(edge_bytes(s, &s->e->recv[i]));
    return total;
}

/* Edge i's 2 M buffers from base: data then diff of each micro-batch. */
static void place_shared(float **data, float **grad, int M, int i, char *base, size_t slot)
{
    for (int k = 0; k < M; k++) {
        data[i * M + k] = (float *)(base + 2 * (size_t)k * slot);
        grad[i * M + k] = (float *)(base + (2 * (size_t)k + 1) * slot);
    }
}

/* Device `peer`'s shared memory mapped here (and its *len), or NULL when
 * the two do not share. */
static char *peer_shared(const so_pipe_link *l, int peer, size_t *len)
{
    return l->shares_with(l->ctx, peer) ? l->peer_memory(l->ctx, peer, len) : NULL;
}

/* The receiver of each edge on this host lays its buffers out in its shared
 * memory and sends the sender their offset; the sender maps them there. */
static int share_buffers(pipe_state *s)
{
    const so_pipe_stage_edges *e = s->e;
    const so_pipe_link *l = &s->c.link;
    char *mine = NULL;
    if (!l->shares_with || !l->share || !l->peer_memory)
        return 0;
    uint64_t *offsets = calloc((size_t)e->nrecv + 1, sizeof *offsets); /* until their sends complete */
    int rc = offsets ? l->share(l->ctx, shared_bytes(s), (void **)&mine)
                     : so_err(SO_ENOMEM, "out of memory for the pipeline's buffers");
    uint64_t at = 0;
    size_t len = 0;
    for (int i = 0; !rc && mine && i < e->nrecv; i++) {
        if (!peer_shared(l, e->recv[i].peer, &len))
            continue;
        size_t slot = shared_slot(edge_bytes(s, &e->recv[i]));
        s->rshared[i] = 1;
        offsets[i] = at;
        place_shared(s->rdata, s->rgrad, s->M, i, mine + at, slot);
        at += 2 * (uint64_t)s->M * slot;
        rc = send(s, e->recv[i].peer, (const float *)&offsets[i], sizeof offsets[i], e->recv[i].tag);
    }
    for (int i = 0; !rc && i < e->nsend; i++) {
        char *peer = peer_shared(l, e->send[i].peer, &len);
        if (!peer)
            continue;
        uint64_t off = 0;
        void *req = NULL;
        size_t slot = shared_slot(edge_bytes(s, &e->send[i]));
        rc = l->irecv(l->ctx, &off, sizeof off, e->send[i].peer, e->send[i].tag, &req);
        if (!rc)
            rc = l->wait(l->ctx, req);
        if (!rc && (off > len || 2 * (uint64_t)s->M * slot > len - off))
            rc = so_err(SO_ECOMM, "pipeline edge to stage %d: its shared buffers end past the memory it shares",
                        e->send[i].peer);
        if (!rc) {
            s->sshared[i] = 1;
            place_shared(s->sdata, s->sgrad, s->M, i, peer + off, slot);
        }
    }
    int w = wait_sends(s), shared = 0;
    free(offsets);
    for (int i = 0; i < e->nrecv; i++)
        shared += s->rshared[i];
    for (int i = 0; i < e->nsend; i++)
        shared += s->sshared[i];
    if (!rc && !w && shared)
        so_log(SO_LOG_INFO, "pipeline: %d of %d edge(s) of this stage through shared memory", shared,
               e->nrecv + e->nsend);
    return rc ? rc : w;
}

/* One buffer per (edge, micro-batch) and direction: in shared memory for
 * devices on this host (share_buffers), else this device's own. */
static int alloc_buffers(pipe_state *s)
{
    const so_pipe_stage_edges *e = s->e;
    size_t nr = (size_t)e->nrecv * s->M, ns = (size_t)e->nsend * s->M;
    s->rdata = calloc(nr + 1, sizeof *s->rdata);
    s->rgrad = calloc(nr + 1, sizeof *s->rgrad);
    s->sdata = calloc(ns + 1, sizeof *s->sdata);
    s->sgrad = calloc(ns + 1, sizeof *s->sgrad);
    s->rreq = calloc(nr + 1, sizeof *s->rreq);
    s->sreq = calloc(ns + 1, sizeof *s->sreq);
    s->rshared = calloc((size_t)e->nrecv + 1, 1);
    s->sshared = calloc((size_t)e->nsend + 1, 1);
    s->swire = calloc(ns + 1, sizeof *s->swire);
    s->msg_out = calloc((size_t)(e->nrecv > e->nsend ? e->nrecv : e->nsend) + 1, sizeof *s->msg_out);
    s->ops = malloc(2 * (size_t)s->M * s->chunks * sizeof *s->ops);
    s->backwards_run = calloc((size_t)s->chunks, sizeof *s->backwards_run);
    if (!s->rdata || !s->rgrad || !s->sdata || !s->sgrad || !s->rreq || !s->sreq || !s->rshared || !s->sshared ||
        !s->swire || !s->msg_out || !s->ops || !s->backwards_run)
        return so_err(SO_ENOMEM, "out of memory for the pipeline's buffers");
    if (e->tie_n && !(s->tie_in = malloc(e->tie_n * sizeof *s->tie_in)))
        return so_err(SO_ENOMEM, "out of memory for the tied table's gradient");
    if (s->chunks > 1 && s->has_loss) {
        s->targets = (size_t)so_graph_targets(s->m->g);
        s->per_batch = (size_t)s->m->batch * s->targets;
        s->labels = calloc((size_t)s->M * s->per_batch, sizeof *s->labels);
        s->nvalid = calloc((size_t)s->M, sizeof *s->nvalid);
        if (!s->labels || !s->nvalid)
            return so_err(SO_ENOMEM, "out of memory for the pipeline's labels");
    }
    int rc = share_buffers(s);
    if (rc)
        return rc;
    for (size_t i = 0; i < nr; i++) {
        size_t b = edge_bytes(s, &e->recv[i / (size_t)s->M]);
        if (!s->rshared[i / (size_t)s->M] && (!(s->rdata[i] = malloc(b)) || !(s->rgrad[i] = malloc(b))))
            return so_err(SO_ENOMEM, "out of memory for the pipeline's receive buffers");
    }
    for (size_t i = 0; i < ns; i++) {
        size_t b = edge_bytes(s, &e->send[i / (size_t)s->M]);
        if (!s->sshared[i / (size_t)s->M] && (!(s->sdata[i] = malloc(b)) || !(s->sgrad[i] = malloc(b))))
            return so_err(SO_ENOMEM, "out of memory for the pipeline's send buffers");
        if (s->c.wire_bf16 && !s->sshared[i / (size_t)s->M] && !(s->swire[i] = malloc(b / 2)))
            return so_err(SO_ENOMEM, "out of memory for the pipeline's BF16 send buffers");
    }
    return 0;
}

/* A weight tie between devices: the copy takes the table's values before
 * the first step, however each side was set (the whole model's initial
 * values, --init-from, a checkpoint), so the two step alike from equal bits. */
static int share_tied(pipe_state *s)
{
    const so_pipe_stage_edges *e = s->e;
    const so_pipe_link *l = &s->c.link;
    void *req = NULL;
    if (!e->tie_n)
        return 0;
    float *table = s->m->params + e->tie_off;
    int rc = e->tie_copy ? l->irecv(l->ctx, table, e->tie_n * sizeof *table, e->tie_peer, e->tie_tag, &req)
                         : l->isend(l->ctx, table, e->tie_n * sizeof *table, e->tie_peer, e->tie_tag, &req);
    int w = req ? l->wait(l->ctx, req) : 0;
    if (!rc && !w && e->tie_copy)
        so_model_params_changed(s->m);
    return rc ? rc : w;
}

static int pipe_start(void *self, so_model *m, const so_train_config *c, so_train_result *r)
{
    pipe_state *s = self;
    s->m = m;
    s->r = r;
    s->tc = *c;
    s->tc.overlap = 0; /* the replicas' average waits until the step's sends are done */
    s->start_step = c->start_step;
    if (c->accumulate != s->M)
        return so_err(SO_EINVAL, "pipeline of %d micro-batches trained with --accumulate %d", s->M, c->accumulate);
    int rc = m->slots ? 0 : so_model_set_slots(m, s->slots);
    if (!rc && !s->rdata)
        rc = alloc_buffers(s);
    r->pipe_act_bytes = so_model_activation_bytes(m);
    r->pipe_edge_bytes = 0; /* data and diff, per micro-batch, of every edge */
    for (int i = 0; i < s->e->nrecv; i++)
        r->pipe_edge_bytes += 2 * (size_t)s->M * edge_bytes(s, &s->e->recv[i]);
    for (int i = 0; i < s->e->nsend; i++) /* and the BF16 wire's staging of activations sent */
        r->pipe_edge_bytes += (size_t)s->M * edge_bytes(s, &s->e->send[i]) *
                              (s->c.wire_bf16 && !s->sshared[i] ? 5 : 4) / 2;
    r->pipe_wire_bf16 = s->c.wire_bf16;
    if (!rc)
        rc = so_pipe_schedule_ops(s->c.schedule, s->stage, s->P, s->M, s->chunks, s->ops);
    if (!rc)
        rc = share_tied(s);
    /* The loop set the world's sum for --sync-bn; a stage's statistics are its replicas'. */
    m->bn_allsum = c->sync_bn ? s->c.bn_allsum : NULL;
    m->bn_allsum_arg = c->sync_bn ? s->c.bn_allsum_arg : NULL;
    const so_strategy *dp = s->c.replicas;
    if (!rc && dp && dp->ops->start)
        rc = dp->ops->start(dp->self, m, &s->tc, r);
    return rc;
}

/* A weight tie between devices (GPT-2's token table, on the first and the
 * last stage): each device sends its gradient of the table to the other and
 * adds the other's, so both hold the same sum (a + b == b + a in IEEE
 * arithmetic) and their copies step alike, as Megatron's allreduce between
 * the embedding's owners. Before the replicas' average, which then averages
 * the same values on both devices. */
static int sum_tied(pipe_state *s)
{
    const so_pipe_stage_edges *e = s->e;
    const so_pipe_link *l = &s->c.link;
    if (!e->tie_n)
        return 0;
    float *g = s->m->grads + e->tie_off;
    void *out = NULL, *in = NULL;
    int rc = l->irecv(l->ctx, s->tie_in, e->tie_n * sizeof *g, e->tie_peer, e->tie_tag, &in);
    if (!rc)
        rc = l->isend(l->ctx, g, e->tie_n * sizeof *g, e->tie_peer, e->tie_tag, &out);
    int w1 = in ? l->wait(l->ctx, in) : 0, w2 = out ? l->wait(l->ctx, out) : 0;
    rc = rc ? rc : w1 ? w1 : w2;
    for (size_t i = 0; !rc && i < e->tie_n; i++)
        g[i] += s->tie_in[i];
    return rc;
}

static int pipe_grads_done(void *self, double *exposed)
{
    pipe_state *s = self;
    const so_strategy *dp = s->c.replicas;
    *exposed = 0;
    double t0 = so_now();
    int rc = sum_tied(s);
    *exposed = so_now() - t0;
    double more = 0;
    if (!rc && dp)
        rc = dp->ops->grads_done(dp->self, &more);
    *exposed += more;
    return rc;
}

/* --clip-norm: the squared norm of the model's gradient, each parameter
 * once (a tied table's copy is counted on the table's device), summed over
 * the stages; every replica holds the same gradient after the average. */
static int pipe_grad_sqnorm(void *self, double *sq)
{
    pipe_state *s = self;
    size_t n = s->m->nparams - (s->e->tie_copy ? s->e->tie_n : 0);
    *sq = so_optim_sqnorm(s->m->grads, n);
    int rc = s->c.sum ? s->c.sum(s->c.sum_ctx, sq, 1) : 0;
    *sq /= s->c.nreplicas > 0 ? s->c.nreplicas : 1;
    return rc;
}

static int pipe_step_done(void *self, long step)
{
    pipe_state *s = self;
    if (step - 1 - s->start_step >= s->tc.throughput_skip)
        s->r->pipe_busy += s->busy;
    s->r->pipe_bytes_sent += s->step_bytes;
    const so_strategy *dp = s->c.replicas;
    return dp && dp->ops->step_done ? dp->ops->step_done(dp->self, step) : 0;
}

/* The optimizer's step is work of the stage too (busy, not bubble). */
static int pipe_update(void *self, so_optim *opt, float *params, float *grads, float lr)
{
    pipe_state *s = self;
    const so_strategy *dp = s->c.replicas;
    double t0 = so_now();
    int rc = 0;
    if (dp && dp->ops->update)
        rc = dp->ops->update(dp->self, opt, params, grads, lr);
    else
        so_optim_step(opt, params, grads, lr);
    s->busy += so_now() - t0;
    return rc;
}

static void pipe_finish(void *self)
{
    pipe_state *s = self;
    const so_strategy *dp = s->c.replicas;
    if (dp && dp->ops->finish)
        dp->ops->finish(dp->self);
}

/* One test batch through this device's chunks in order: receive, forward,
 * send on (a later chunk waits for the devices in between). Buffer j holds
 * batches j, j + M, ...: before it is written again the batch before must
 * have left, which a shared buffer learns from its reader's empty reply. */
static int eval_chunk(pipe_state *s, int c, int j)
{
    const so_pipe_stage_edges *e = s->e;
    const so_pipe_chunk *ch = &e->chunks[c];
    int rc = 0;
    for (int i = ch->recv_lo; !rc && i < ch->recv_hi; i++) {
        const so_pipe_edge *ed = &e->recv[i];
        void *req = NULL;
        rc = s->c.link.irecv(s->c.link.ctx, s->rdata[i * s->M + j], recv_msg_bytes(s, i), ed->peer, ed->tag, &req);
        if (!rc)
            rc = s->c.link.wait(s->c.link.ctx, req);
        if (!rc)
            widen_received(s, s->rdata[i * s->M + j], ed, s->rshared[i]);
    }
    for (int i = ch->send_lo; !rc && i < ch->send_hi; i++)
        rc = wait_req(s, &s->sreq[i * s->M + j]); /* this buffer's batch b - M has left */
    if (!rc)
        rc = bind_edges(s, ch, j, 0);
    if (!rc)
        rc = so_model_forward_nodes(s->m, ch->node_lo, ch->node_hi, 0);
    for (int i = ch->recv_lo; !rc && i < ch->recv_hi; i++) /* read: the sender may write it again */
        if (s->rshared[i])
            rc = send(s, e->recv[i].peer, s->rgrad[i * s->M + j], 0, e->recv[i].tag + 1);
    for (int i = ch->send_lo; !rc && i < ch->send_hi; i++) {
        const so_pipe_edge *ed = &e->send[i];
        void **req = &s->sreq[i * s->M + j];
        if (!s->sshared[i]) {
            rc = s->c.link.isend(s->c.link.ctx, activation_out(s, i, j), send_msg_bytes(s, i), ed->peer, ed->tag, req);
            continue;
        }
        rc = send(s, ed->peer, s->sdata[i * s->M + j], 0, ed->tag);
        if (!rc)
            rc = s->c.link.irecv(s->c.link.ctx, s->sgrad[i * s->M + j], 0, ed->peer, ed->tag + 1, req);
    }
    return rc;
}

static int eval_batch(pipe_state *s, int b, const float *x, const int32_t *y, int n, double sums[3])
{
    int j = b % s->M;
    so_model_use_slot(s->m, 0);
    int rc = so_model_set_input(s->m, s->stage == 0 ? x : NULL, s->has_loss ? y : NULL, n);
    for (int c = 0; !rc && c < s->chunks; c++)
        rc = eval_chunk(s, c, j);
    if (!rc && s->has_loss)
        rc = so_model_add_scores(s->m, y, n, sums);
    return rc;
}

/* Every stage walks the same test shard; stage 0 feeds the images, the
 * last stage scores them, and the sends let stage 0 run ahead. */
static int pipe_evaluate(void *self, so_loader *test, double sums[3])
{
    pipe_state *s = self;
    const float *x;
    const int32_t *y;
    int n, got, rc = 0;
    for (int b = 0; !rc && (got = so_loader_next(test, &x, &y, &n)) > 0; b++)
        rc = eval_batch(s, b, x, y, n, sums);
    if (!rc && got < 0)
        rc = got;
    for (size_t i = 0; i < (size_t)s->e->nsend * s->M; i++) {
        int w = wait_req(s, &s->sreq[i]);
        rc = rc ? rc : w;
    }
    int w = wait_sends(s);
    return rc ? rc : w;
}

/* Frees n = edges x M buffers but those of shared edges (the link's memory). */
static void free_bufs(float **b, const char *shared, size_t n, int M)
{
    for (size_t i = 0; b && i < n; i++)
        if (!shared || !shared[i / (size_t)M])
            free(b[i]);
    free(b);
}

static void pipe_destroy(void *self)
{
    pipe_state *s = self;
    size_t nr = (size_t)s->e->nrecv * s->M, ns = (size_t)s->e->nsend * s->M;
    free_bufs(s->rdata, s->rshared, nr, s->M);
    free_bufs(s->rgrad, s->rshared, nr, s->M);
    free_bufs(s->sdata, s->sshared, ns, s->M);
    free_bufs(s->sgrad, s->sshared, ns, s->M);
    free_bufs((float **)s->swire, NULL, ns, s->M);
    free(s->rshared);
    free(s->msg_out);
    free(s->sshared);
    free(s->rreq);
    free(s->sreq);
    free(s->out);
    free(s->ops);
    free(s->backwards_run);
    free(s->labels);
    free(s->nvalid);
    free(s->tie_in);
    free(s);
}

static const so_strategy_ops pipe_ops = {.name = "pipeline", .start = pipe_start, .grads_done = pipe_grads_done,
                                         .update = pipe_update, .grad_sqnorm = pipe_grad_sqnorm, .step_done = pipe_step_done, .finish = pipe_finish,
                                         .run_step = pipe_run_step, .evaluate = pipe_evaluate, .destroy = pipe_destroy};

int so_strategy_pipeline(const so_pipe_config *c, const so_pipe_stage_edges *e, so_strategy **out)
{
    *out = NULL;
    if (c->microbatches < 1)
        return so_err(SO_EINVAL, "--microbatches %d must be >= 1", c->microbatches);
    if (!c->link.isend || !c->link.irecv || !c->link.wait)
        return so_err(SO_EINVAL, "a pipeline needs a link between its stages");
    so_strategy *st = calloc(1, sizeof *st);
    pipe_state *s = calloc(1, sizeof *s);
    if (!st || !s) {
        free(st);
        free(s);
        return so_err(SO_ENOMEM, "out of memory");
    }
    s->c = *c;
    s->e = e;
    s->M = c->microbatches;
    s->P = e->nstages;
    s->stage = e->stage;
    s->chunks = e->nchunks > 0 ? e->nchunks : 1;
    s->has_loss = e->last_stage % s->P == e->stage;
    s->slots = so_pipe_slots(c->schedule, e->stage, e->nstages, c->microbatches, s->chunks);
    *st = (so_strategy){.ops = &pipe_ops, .self = s, .replicas = c->nreplicas > 0 ? c->nreplicas : 1,
                        .no_loss = !s->has_loss};
    *out = st;
    return 0;
}
