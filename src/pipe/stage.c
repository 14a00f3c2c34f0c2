/* A pipeline device's own graph: its stages' slices of the model (one, or
 * v chunks when interleaved) with recv nodes for the tensors it reads from
 * other devices and send nodes for those other devices read from it, so
 * the engine runs a device like any model and the strategy (exec.c) only
 * moves the edges' bytes and runs each chunk's node range. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "scaleout/pipeline.h"

void so_pipe_stage_edges_free(so_pipe_stage_edges *e)
{
    free(e->chunks);
    free(e->recv);
    free(e->send);
    memset(e, 0, sizeof *e);
}

/* Whether a node of stage s reads node k's output. */
static int stage_reads(const so_pipe_plan *p, int s, int k)
{
    for (int i = p->first[s] > 0 ? p->first[s] : 1; i < p->first[s + 1]; i++) {
        const so_node *nd = so_graph_node(p->g, i);
        for (int j = 0; j < nd->ninputs; j++)
            if (nd->inputs[j] == k)
                return 1;
    }
    return 0;
}

/* The first stage of device d (stages d, d + P, ...) that reads tensor t; -1 if none. */
static int first_reader(const so_pipe_plan *p, int P, int d, const so_pipe_tensor *t)
{
    for (int b = t->to_first; b <= t->to_last; b++)
        if (b % P == d && stage_reads(p, b, t->node))
            return b;
    return -1;
}

static so_pipe_edge edge(int node, int peer, int tag, const so_pipe_tensor *t)
{
    return (so_pipe_edge){node, peer, tag, t->bytes};
}

/* The tag of tensor t's messages to device d. */
static int edge_tag(int t, int P, int d) { return 2 * (t * P + d); }

/* A recv node for every tensor of another device that stage s is the first
 * on this device to read; map[k] becomes its index. */
static int add_recvs(const so_pipe_plan *p, int P, int s, so_graph *g, int *map, so_pipe_stage_edges *e)
{
    for (int t = 0; t < p->ntensors; t++) {
        const so_pipe_tensor *tn = &p->tensors[t];
        if (tn->stage % P == s % P || first_reader(p, P, s % P, tn) != s)
            continue;
        const so_node *src = so_graph_node(p->g, tn->node);
        char name[SO_NAME_LEN];
        snprintf(name, sizeof name, "recv:%.40s", src->name);
        int id = so_g_recv(g, name, src->out);
        if (id < 0)
            return id;
        map[tn->node] = id;
        e->recv[e->nrecv++] = edge(id, tn->stage % P, edge_tag(t, P, s % P), tn);
    }
    return 0;
}

/* A send node for every (tensor of stage s, other device reading it). */
static int add_sends(const so_pipe_plan *p, int P, int s, so_graph *g, const int *map, so_pipe_stage_edges *e)
{
    for (int t = 0; t < p->ntensors; t++) {
        const so_pipe_tensor *tn = &p->tensors[t];
        if (tn->stage != s)
            continue;
        for (int d = 0; d < P; d++) {
            if (d == s % P || first_reader(p, P, d, tn) < 0)
                continue;
            char name[SO_NAME_LEN];
            snprintf(name, sizeof name, "send%d:%.30s", d, so_graph_node(p->g, tn->node)->name);
            int id = so_g_send(g, map[tn->node], name);
            if (id < 0)
                return id;
            e->send[e->nsend++] = edge(id, d, edge_tag(t, P, d), tn);
        }
    }
    return 0;
}

/* A layer tied to a table on another device gets a weight of its own, the
 * table's copy (tie_across). */
static int stage_of(const so_pipe_plan *p, int i);

static int copy_nodes(const so_pipe_plan *p, int P, int s, so_graph *g, int *map)
{
    for (int i = p->first[s] > 0 ? p->first[s] : 1; i < p->first[s + 1]; i++) {
        const so_node *nd = so_graph_node(p->g, i);
        int in[SO_MAX_INPUTS];
        for (int j = 0; j < nd->ninputs; j++)
            in[j] = map[nd->inputs[j]];
        so_attrs a = nd->a;
        if (nd->op == SO_OP_LINEAR && a.tie > 0)
            a.tie = stage_of(p, a.tie) % P == s % P ? map[a.tie] : 0; /* map[]: a recv node on other devices */
        int id = so_graph_add(g, nd->op, nd->name, in, nd->ninputs, &a);
        if (id < 0)
            return id;
        map[i] = id;
    }
    return 0;
}

static void slice(const so_pipe_plan *p, int s, so_pipe_chunk *c)
{
    const so_node *lo = so_graph_node(p->g, p->first[s]);
    const so_node *hi = so_graph_node(p->g, p->first[s + 1] - 1);
    c->param_lo = lo->param_off;
    c->param_hi = hi->param_off + hi->nparam;
    c->buf_lo = lo->buf_off;
    c->buf_hi = hi->buf_off + hi->nbuf;
}

/* Chunk c of device d: its recvs, nodes and sends appended to g. */
static int add_chunk(const so_pipe_plan *p, int P, int d, int c, so_graph *g, int *map, so_pipe_stage_edges *e)
{
    so_pipe_chunk *ch = &e->chunks[c];
    ch->stage = c * P + d;
    ch->node_lo = so_graph_size(g);
    ch->recv_lo = e->nrecv;
    ch->send_lo = e->nsend;
    int rc = add_recvs(p, P, ch->stage, g, map, e);
    if (!rc)
        rc = copy_nodes(p, P, ch->stage, g, map);
    if (!rc)
        rc = add_sends(p, P, ch->stage, g, map, e);
    ch->node_hi = so_graph_size(g);
    ch->recv_hi = e->nrecv;
    ch->send_hi = e->nsend;
    slice(p, ch->stage, ch);
    return rc;
}

/* The plan's stage of whole-graph node i. */
static int stage_of(const so_pipe_plan *p, int i)
{
    int s = 0;
    while (s + 1 < p->nstages && p->first[s + 1] <= i)
        s++;
    return s;
}

/* This device's side of a weight tie between devices (the tie_* fields):
 * the tied layer's device keeps the table's copy as its own weight, which
 * must be its last parameters (so its chunks' slices of the model stay
 * contiguous before it); the table's device sums its gradient with it. */
/* The first whole-graph node from i on that is a layer tied to a table on
 * another of the P devices, or -1. */
static int next_tie(const so_pipe_plan *p, int P, int i)
{
    for (; i < so_graph_size(p->g); i++) {
        const so_node *nd = so_graph_node(p->g, i);
        if (nd->op == SO_OP_LINEAR && nd->a.tie > 0 && stage_of(p, i) % P != stage_of(p, nd->a.tie) % P)
            return i;
    }
    return -1;
}

/* The token table's size, (vocab, C): what a tied layer's device copies. */
static size_t table_size(const so_pipe_plan *p, int table)
{
    const so_node *tab = so_graph_node(p->g, table);
    return (size_t)tab->a.vocab * (size_t)tab->out.w;
}

size_t so_pipe_tied_copy(const so_pipe_plan *p, int devices, int d)
{
    size_t n = 0;
    for (int i = next_tie(p, devices, 1); devices > 0 && i >= 0; i = next_tie(p, devices, i + 1))
        if (stage_of(p, i) % devices == d)
            n += table_size(p, so_graph_node(p->g, i)->a.tie);
    return n;
}

static int tie_across(const so_pipe_plan *p, int P, int d, const so_graph *g, const int *map, so_pipe_stage_edges *e)
{
    for (int i = next_tie(p, P, 1); i >= 0; i = next_tie(p, P, i + 1)) {
        const so_node *nd = so_graph_node(p->g, i);
        int user = stage_of(p, i) % P, owner = stage_of(p, nd->a.tie) % P;
        if (user != d && owner != d)
            continue;
        const so_node *tab = so_graph_node(p->g, nd->a.tie);
        if (e->tie_n)
            return so_err(SO_EUNSUP, "%s: a second weight tie between pipeline stages (one is supported)", nd->name);
        const so_node *here = so_graph_node(g, map[user == d ? i : nd->a.tie]);
        e->tie_peer = user == d ? owner : user;
        e->tie_copy = user == d;
        e->tie_tag = 2 * (p->ntensors * P + P); /* above every edge's tags */
        e->tie_off = here->param_off;
        e->tie_n = table_size(p, nd->a.tie);
        e->tie_whole = tab->param_off;
        if (e->tie_copy && (nd->a.bias || here->param_off + here->nparam != so_graph_nparams(g)))
            return so_err(SO_EUNSUP, "%s: its weight is tied to %s on another pipeline stage, so it must be its "
                          "stage's last layer with parameters, without a bias", nd->name, tab->name);
    }
    return 0;
}

int so_pipe_stage_graph(const so_pipe_plan *p, int devices, int d, so_graph **out, so_pipe_stage_edges *e)
{
    *out = NULL;
    memset(e, 0, sizeof *e);
    int P = devices;
    if (P < 1 || p->nstages % P || d < 0 || d >= P)
        return so_err(SO_EINVAL, "device %d of %d for a plan of %d stages", d, P, p->nstages);
    int n = so_graph_size(p->g), nt = p->ntensors, v = p->nstages / P;
    so_shape in = so_graph_input_shape(p->g);
    so_graph *g = so_graph_create(in.c, in.h, in.w);
    int *map = malloc((size_t)n * sizeof *map);
    e->recv = calloc((size_t)nt + 1, sizeof *e->recv);
    e->send = calloc((size_t)nt * P + 1, sizeof *e->send);
    e->chunks = calloc((size_t)v, sizeof *e->chunks);
    int rc = g && map && e->recv && e->send && e->chunks ? 0 : so_err(SO_ENOMEM, "out of memory for device %d's graph", d);
    for (int i = 0; !rc && i < n; i++)
        map[i] = i == 0 ? 0 : -1;
    e->stage = d;
    e->nstages = P;
    e->nchunks = v;
    e->last_stage = p->nstages - 1;
    for (int c = 0; !rc && c < v; c++)
        rc = add_chunk(p, P, d, c, g, map, e);
    if (!rc)
        rc = so_graph_finalize(g);
    if (!rc)
        rc = tie_across(p, P, d, g, map, e);
    free(map);
    if (rc) {
        so_graph_destroy(g);
        so_pipe_stage_edges_free(e);
        return rc;
    }
    *out = g;
    return 0;
}

int so_pipe_model_order(const so_pipe_plan *p, int devices, int bufs, const float *by_device, size_t n, float *model)
{
    size_t total = bufs ? so_graph_nbufs(p->g) : so_graph_nparams(p->g), at = 0;
    if (devices < 1 || p->nstages % devices)
        return so_err(SO_EINVAL, "a partition of %d stages cannot be spread over %d pipeline ranks (its stages must "
                      "be a multiple of them)", p->nstages, devices);
    if (n != total)
        return so_err(SO_EINVAL, "the %d pipeline ranks hold %zu %s, the model has %zu", devices, n,
                      bufs ? "running statistics" : "parameters", total);
    for (int d = 0; d < devices; d++)
        for (int s = d; s < p->nstages; s += devices) {
            so_pipe_chunk ch;
            slice(p, s, &ch);
            size_t lo = bufs ? ch.buf_lo : ch.param_lo, hi = bufs ? ch.buf_hi : ch.param_hi;
            memcpy(model + lo, by_device + at, (hi - lo) * sizeof *model);
            at += hi - lo;
        }
    return 0;
}
