/* The recorder: turns the trainer's phase spans, the model's per-node spans
 * and the communication events the CLI feeds into totals, per-layer times,
 * communication statistics and (inside the step window) trace events.
 * Everything is called from the training thread; nothing here allocates in
 * the steady state except the growing event array inside the window. */
#include "prof_internal.h"

#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "scaleout/graph.h"

static const char *const detail_names[] = {"step", "block", "layer"};
static const char *const use_names[SO_PROF_USES] = {"gradients", "params", "evaluation", "metrics", "checkpoint",
                                                           "batchnorm"};
static const char *const span_names[SO_SPAN_KINDS] = {"data", "forward", "backward", "comm_wait",
                                                      "optimizer", "eval", "step"};

int so_prof_detail_parse(const char *s, so_prof_detail *out)
{
    for (int i = 0; i < 3; i++)
        if (s && !strcmp(s, detail_names[i])) {
            *out = (so_prof_detail)i;
            return 0;
        }
    return so_err(SO_EINVAL, "profile detail '%s' is not one of layer, block, step", s ? s : "");
}

const char *so_prof_detail_name(so_prof_detail d) { return (unsigned)d < 3 ? detail_names[d] : "?"; }
const char *so_prof_use_name(so_prof_use u) { return (unsigned)u < SO_PROF_USES ? use_names[u] : "?"; }

int so_prof_window_parse(const char *s, long *first, long *last)
{
    if (s && !strcmp(s, "all")) {
        *first = 0;
        *last = -1; /* no end */
        return 0;
    }
    char *end;
    long a = s ? strtol(s, &end, 10) : -1;
    if (!s || end == s || *end != ':' || a < 0)
        return so_err(SO_EINVAL, "step window '%s' is not A:B (0 <= A < B) or all", s ? s : "");
    char *e2;
    long b = strtol(end + 1, &e2, 10);
    if (e2 == end + 1 || *e2 || b <= a)
        return so_err(SO_EINVAL, "step window '%s' is not A:B (0 <= A < B) or all", s);
    *first = a;
    *last = b;
    return 0;
}

int prof_intern(so_prof *p, const char *s)
{
    for (int i = 0; i < p->nnames; i++)
        if (!strncmp(p->names[i], s, 63))
            return i;
    if (p->nnames == p->capnames) {
        int cap = p->capnames ? 2 * p->capnames : 64;
        void *grown = realloc(p->names, (size_t)cap * sizeof *p->names);
        if (!grown)
            return -1;
        p->names = grown;
        p->capnames = cap;
    }
    snprintf(p->names[p->nnames], 64, "%s", s);
    return p->nnames++;
}

prof_ev *prof_push(so_prof *p, int kind, int track, int name, long step, double t0, double t1)
{
    if (name < 0 || p->nev >= p->cfg.max_events) {
        p->dropped++;
        return NULL;
    }
    if (p->nev == p->capev) {
        size_t cap = p->capev ? 2 * p->capev : 4096;
        if (cap > p->cfg.max_events)
            cap = p->cfg.max_events;
        prof_ev *grown = realloc(p->ev, cap * sizeof *grown);
        if (!grown) {
            p->dropped++;
            return NULL;
        }
        p->ev = grown;
        p->capev = cap;
    }
    prof_ev *e = &p->ev[p->nev++];
    memset(e, 0, sizeof *e);
    *e = (prof_ev){.t0 = t0, .t1 = t1, .step = step, .name = name, .kind = (short)kind, .track = (short)track,
                   .bucket = -1};
    return e;
}

int so_prof_create(const so_prof_config *c, so_prof **out)
{
    so_prof *p = calloc(1, sizeof *p);
    if (!p)
        return so_err(SO_ENOMEM, "out of memory creating the profiler");
    p->cfg = *c;
    if (!p->cfg.max_events)
        p->cfg.max_events = 1000000;
    p->cur_step = -1;
    prof_io_init(p);
    /* Phase names first, so their indices are the span kinds. */
    for (int k = 0; k < SO_SPAN_KINDS; k++)
        if (prof_intern(p, span_names[k]) != k) {
            so_prof_destroy(p);
            return so_err(SO_ENOMEM, "out of memory creating the profiler");
        }
    *out = p;
    return 0;
}

static void free_model(so_prof *p)
{
    free(p->node_name);
    free(p->node_block);
    free(p->node_order);
    free(p->node_edge);
    free(p->lay_fwd);
    free(p->lay_bwd);
    free(p->lay_nfwd);
    free(p->node_flops);
    free(p->node_bf16);
    free(p->pend);
    p->node_name = p->node_block = p->node_order = NULL;
    p->node_edge = p->node_bf16 = NULL;
    p->lay_fwd = p->lay_bwd = p->node_flops = NULL;
    p->lay_nfwd = NULL;
    p->pend = NULL;
    p->nnodes = p->npend = p->cappend = 0;
}

void so_prof_destroy(so_prof *p)
{
    if (!p)
        return;
    free_model(p);
    free(p->names);
    free(p->ev);
    free(p->step_useful);
    prof_io_free(p);
    free(p);
}

/* The block of a PyTorch module path: up to and including the first numeric
 * component ("layer1.0.conv1" -> "layer1.0", "features.3" -> "features.3"),
 * else the first component ("fc" -> "fc"). */
static void block_of(const char *name, char *out, size_t len)
{
    const char *s = name, *end = NULL;
    while (*s) {
        const char *dot = strchr(s, '.');
        size_t n = dot ? (size_t)(dot - s) : strlen(s);
        if (!end)
            end = s + n; /* first component */
        if (n > 0 && strspn(s, "0123456789") == n) {
            end = s + n;
            break;
        }
        if (!dot)
            break;
        s = dot + 1;
    }
    size_t n = end ? (size_t)(end - name) : strlen(name);
    snprintf(out, len, "%.*s", (int)(n < len ? n : len - 1), name);
}

/* Parameterless nodes without a PyTorch module (a residual add, pools, the
 * loss) get generated names "<op><digits>" from the graph builder. Nodes with
 * parameters always have their own name ("conv1" looks generated but is not). */
static int generated_name(const so_node *nd)
{
    const char *op = so_op_name(nd->op);
    size_t n = strlen(op);
    return !nd->name[0] || (nd->nparam == 0 &&
           (!strncmp(nd->name, op, n) && nd->name[n] && strspn(nd->name + n, "0123456789") == strlen(nd->name + n)));
}

static void node_span(void *arg, int node, int backward, double t0, double t1);

int so_prof_attach_model(so_prof *p, so_model *m)
{
    free_model(p);
    int n = so_graph_size(m->g);
    p->node_name = calloc((size_t)n, sizeof *p->node_name);
    p->node_block = calloc((size_t)n, sizeof *p->node_block);
    p->node_order = calloc((size_t)n, sizeof *p->node_order);
    p->node_edge = calloc((size_t)n, sizeof *p->node_edge);
    p->lay_fwd = calloc((size_t)n, sizeof *p->lay_fwd);
    p->lay_bwd = calloc((size_t)n, sizeof *p->lay_bwd);
    p->lay_nfwd = calloc((size_t)n, sizeof *p->lay_nfwd);
    p->node_flops = calloc((size_t)n, sizeof *p->node_flops);
    p->node_bf16 = calloc((size_t)n, sizeof *p->node_bf16);
    p->cappend = 2 * n + 64; /* one forward and one backward of every node fit */
    p->pend = calloc((size_t)p->cappend, sizeof *p->pend);
    if (!p->node_name || !p->node_block || !p->node_order || !p->node_edge || !p->lay_fwd || !p->lay_bwd ||
        !p->lay_nfwd || !p->node_flops || !p->node_bf16 || !p->pend) {
        free_model(p);
        return so_err(SO_ENOMEM, "out of memory attaching the profiler");
    }
    p->nnodes = n;
    int prev_block = -1;
    for (int i = 0; i < n; i++) {
        const so_node *nd = so_graph_node(m->g, i);
        char name[64], block[64];
        p->node_order[i] = i; /* the model is the whole one unless told otherwise */
        p->node_edge[i] = nd->op == SO_OP_SEND ? 1 : nd->op == SO_OP_RECV ? 2 : 0;
        p->node_flops[i] = i ? so_node_flops(m->g, i) * m->batch : 0; /* the backend computes whole batches */
        p->node_bf16[i] = so_model_node_precision(m, i) == SO_PRECISION_BF16;
        if (nd->name[0])
            snprintf(name, sizeof name, "%s", nd->name);
        else
            snprintf(name, sizeof name, "%s#%d", so_op_name(nd->op), i);
        block_of(name, block, sizeof block);
        p->node_name[i] = prof_intern(p, name);
        /* Unnamed nodes (a residual add) belong to the block before them. */
        p->node_block[i] = !generated_name(nd) || prev_block < 0 ? prof_intern(p, block) : prev_block;
        prev_block = p->node_block[i];
        if (p->node_name[i] < 0 || p->node_block[i] < 0) {
            free_model(p);
            return so_err(SO_ENOMEM, "out of memory attaching the profiler");
        }
    }
    if (p->cfg.detail != SO_PROF_DETAIL_STEP) {
        m->on_node = node_span;
        m->on_node_arg = p;
    }
    return 0;
}

/* The index of the node of g named `name` (its first `len` characters), -1 if none. */
static int node_named(const so_graph *g, const char *name, size_t len)
{
    for (int i = 0; i < so_graph_size(g); i++) {
        const char *s = so_graph_node(g, i)->name;
        if (strlen(s) == len && !strncmp(s, name, len))
            return i;
    }
    return -1;
}

void so_prof_set_layer_order(so_prof *p, const so_graph *whole)
{
    for (int i = 0; whole && i < p->nnodes; i++) {
        const char *name = p->names[p->node_name[i]];
        const char *colon = p->node_edge[i] ? strchr(name, ':') : NULL; /* "recv:X", "send1:X": X's place */
        const char *own = colon ? colon + 1 : name;
        int k = node_named(whole, own, strlen(own));
        p->node_order[i] = k >= 0 ? k : -1;
    }
}

void so_prof_detach_model(so_prof *p, so_model *m)
{
    if (m && m->on_node == node_span && m->on_node_arg == p) {
        m->on_node = NULL;
        m->on_node_arg = NULL;
    }
}

/* Per-node spans wait here until the FORWARD/BACKWARD span that contains them
 * arrives: evaluation forwards (never followed by one) are then dropped. */
static void node_span(void *arg, int node, int backward, double t0, double t1)
{
    so_prof *p = arg;
    if (p->npend < p->cappend)
        p->pend[p->npend++] = (struct pend_node){node, backward, t0, t1};
}

/* Inside the first skip_steps steps nothing is added to the statistics. */
static int skipping(const so_prof *p) { return p->seen < p->cfg.skip_steps; }

int prof_in_window(const so_prof *p, long step)
{
    return step >= p->cfg.window_first && (p->cfg.window_last < 0 || step < p->cfg.window_last);
}

/* Moves the pending node spans inside [t0, t1] into the per-layer totals and,
 * in the window, into events (merged per block for detail "block"). */
static void commit_nodes(so_prof *p, int backward, double t0, double t1)
{
    int trace = prof_in_window(p, p->cur_step);
    prof_ev *last = NULL;
    for (int i = 0; i < p->npend; i++) {
        struct pend_node *n = &p->pend[i];
        if (n->bwd != backward || n->t0 < t0 || n->t1 > t1 || n->node < 0 || n->node >= p->nnodes)
            continue;
        if (!skipping(p)) {
            (backward ? p->lay_bwd : p->lay_fwd)[n->node] += n->t1 - n->t0;
            p->lay_nfwd[n->node] += !backward;
        }
        if (!trace)
            continue;
        if (p->cfg.detail == SO_PROF_DETAIL_BLOCK) {
            int b = p->node_block[n->node];
            if (last && last->name == b) {
                last->t1 = n->t1;
                continue;
            }
            last = prof_push(p, EV_NODE, TRACK_COMPUTE, b, p->cur_step, n->t0, n->t1);
        } else {
            last = prof_push(p, EV_NODE, TRACK_COMPUTE, p->node_name[n->node], p->cur_step, n->t0, n->t1);
        }
        if (last)
            last->sub = (short)backward;
    }
    p->npend = 0;
}

static void push_comm_event(so_prof *p, const so_prof_comm_event *e)
{
    prof_ev *ev = prof_push(p, EV_COMM, TRACK_COMM, prof_intern(p, e->coll), p->cur_step, e->t_started,
                            e->t_finished);
    if (!ev)
        return;
    ev->sub = (short)e->use;
    ev->bucket = e->bucket;
    ev->u.c.bytes = e->bytes;
    ev->u.c.t_queued = e->t_queued;
    ev->u.c.algo = prof_intern(p, e->algo ? e->algo : "?");
}

/* Blocking collectives are committed at the next span; those inside an EVAL
 * span become evaluation traffic. */
static void commit_blocking(so_prof *p, so_span_kind kind, double t0, double t1)
{
    for (int i = 0; i < p->npend_comm; i++) {
        so_prof_comm_event *e = &p->pend_comm[i];
        if (kind == SO_SPAN_EVAL && e->use == SO_PROF_USE_METRICS && e->t_started >= t0 && e->t_finished <= t1)
            e->use = SO_PROF_USE_EVAL;
        prof_stats_add(p, e);
        push_comm_event(p, e);
    }
    p->npend_comm = 0;
}

static void push_step_useful(so_prof *p, double v)
{
    if (p->nstep_useful == p->capstep_useful) {
        long cap = p->capstep_useful ? 2 * p->capstep_useful : 1024;
        double *g = realloc(p->step_useful, (size_t)cap * sizeof *g);
        if (!g)
            return; /* the per-step balance then covers the steps recorded so far */
        p->step_useful = g;
        p->capstep_useful = cap;
    }
    p->step_useful[p->nstep_useful++] = v;
}

const double *so_prof_step_useful(const so_prof *p, long *n)
{
    *n = p->nstep_useful;
    return p->step_useful;
}

/* Outside the window a step becomes one event per track carrying its totals. */
static void close_step(so_prof *p, double t0, double t1)
{
    if (!prof_in_window(p, p->cur_step)) {
        prof_ev *e = prof_push(p, EV_STEP, TRACK_COMPUTE, SO_SPAN_STEP, p->cur_step, t0, t1);
        for (int k = 0; e && k < AGG_FIELDS; k++)
            e->u.agg[k] = (float)p->step_agg[k];
        if (p->step_ncomm) {
            e = prof_push(p, EV_STEP_COMM, TRACK_COMM, prof_intern(p, "gradient allreduces"), p->cur_step,
                          p->step_comm_t0, p->step_comm_t1);
            if (e) {
                e->bucket = p->step_ncomm;
                e->u.c.bytes = p->step_bytes;
            }
        }
    }
    if (!skipping(p))
        push_step_useful(p, p->step_agg[AGG_FORWARD] + p->step_agg[AGG_BACKWARD] + p->step_agg[AGG_OPTIMIZER]);
    memset(p->step_agg, 0, sizeof p->step_agg);
    p->step_ncomm = 0;
    p->step_bytes = 0;
    if (!skipping(p))
        p->tot.steps++;
    p->seen++;
}

/* The total a span kind adds to (NULL: none). */
static double *total_of(so_prof *p, so_span_kind kind)
{
    switch (kind) {
    case SO_SPAN_DATA: return &p->tot.data_wait;
    case SO_SPAN_FORWARD: return &p->tot.forward;
    case SO_SPAN_BACKWARD: return &p->tot.backward;
    case SO_SPAN_COMM_WAIT: return &p->tot.comm_wait;
    case SO_SPAN_OPTIMIZER: return &p->tot.optimizer;
    case SO_SPAN_EVAL: return &p->tot.eval;
    case SO_SPAN_STEP: return &p->tot.runtime;
    default: return NULL;
    }
}

void so_prof_span(void *arg, so_span_kind kind, long step, int id, double t0, double t1)
{
    so_prof *p = arg;
    double *total = total_of(p, kind);
    if (!total)
        return;
    if (p->npend_comm)
        commit_blocking(p, kind, t0, t1);
    /* STEP arrives after the trainer advanced its counter: it closes cur_step. */
    if (kind != SO_SPAN_STEP && kind != SO_SPAN_EVAL)
        p->cur_step = step;
    if (kind == SO_SPAN_EVAL || !skipping(p))
        *total += t1 - t0;
    if (kind == SO_SPAN_DATA || kind == SO_SPAN_EVAL)
        p->npend = 0; /* node spans so far were not part of a training forward */
    else if (kind == SO_SPAN_FORWARD || kind == SO_SPAN_BACKWARD)
        commit_nodes(p, kind == SO_SPAN_BACKWARD, t0, t1);
    if (kind <= SO_SPAN_OPTIMIZER)
        p->step_agg[kind] += t1 - t0; /* AGG_* follow the span kinds' order */
    if (kind == SO_SPAN_EVAL || prof_in_window(p, p->cur_step)) {
        prof_ev *e = prof_push(p, EV_PHASE, TRACK_COMPUTE, (int)kind, p->cur_step, t0, t1);
        if (e)
            e->sub = (short)id;
    }
    if (kind == SO_SPAN_STEP)
        close_step(p, t0, t1);
}

void so_prof_comm(so_prof *p, const so_prof_comm_event *e)
{
    if (e->use != SO_PROF_USE_GRADIENTS) {
        if (p->npend_comm == PROF_PENDING_COMM)
            commit_blocking(p, SO_SPAN_KINDS, 0, 0);
        p->pend_comm[p->npend_comm++] = *e;
        p->tot.comm_blocking += e->t_finished - e->t_started;
        return;
    }
    if (!skipping(p)) {
        prof_stats_add(p, e);
        p->tot.comm_pure += e->t_finished - e->t_started;
        p->tot.comm_queue += e->t_started - e->t_queued;
    }
    if (prof_in_window(p, p->cur_step)) {
        push_comm_event(p, e);
        return;
    }
    if (!p->step_ncomm++)
        p->step_comm_t0 = e->t_started;
    p->step_comm_t1 = e->t_finished;
    p->step_bytes += e->bytes;
}

void so_prof_mark(so_prof *p, const char *name, int track, double t0, double t1)
{
    prof_push(p, EV_MARK, track ? TRACK_COMM : TRACK_COMPUTE, prof_intern(p, name), p->cur_step, t0, t1);
}

void so_prof_get_totals(const so_prof *p, so_prof_totals *out)
{
    *out = p->tot;
    out->useful = p->tot.forward + p->tot.backward + p->tot.optimizer;
}

void so_prof_event_counts(const so_prof *p, size_t *kept, size_t *dropped)
{
    *kept = p->nev;
    *dropped = p->dropped;
}
