/* A pipeline stage's own graph: the stage's slice of the model with recv
 * nodes for the tensors it reads from earlier stages and send nodes for
 * those later stages read from it, so the engine runs a stage like any
 * model and the strategy (exec.c) only moves the edges' bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "scaleout/pipeline.h"

void so_pipe_stage_edges_free(so_pipe_stage_edges *e)
{
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

static so_pipe_edge edge(int node, int peer, int tensor, const so_pipe_tensor *t)
{
    return (so_pipe_edge){node, peer, 2 * tensor, t->bytes};
}

/* A recv node for every tensor of an earlier stage that stage s reads;
 * map[k] becomes its index. */
static int add_recvs(const so_pipe_plan *p, int s, so_graph *g, int *map, so_pipe_stage_edges *e)
{
    for (int t = 0; t < p->ntensors; t++) {
        const so_pipe_tensor *tn = &p->tensors[t];
        if (tn->stage >= s || !stage_reads(p, s, tn->node))
            continue;
        const so_node *src = so_graph_node(p->g, tn->node);
        char name[SO_NAME_LEN];
        snprintf(name, sizeof name, "recv:%.40s", src->name);
        int id = so_g_recv(g, name, src->out);
        if (id < 0)
            return id;
        map[tn->node] = id;
        e->recv[e->nrecv++] = edge(id, tn->stage, t, tn);
    }
    return 0;
}

/* A send node for every (tensor of stage s, later stage reading it). */
static int add_sends(const so_pipe_plan *p, int s, so_graph *g, const int *map, so_pipe_stage_edges *e)
{
    for (int t = 0; t < p->ntensors; t++) {
        const so_pipe_tensor *tn = &p->tensors[t];
        if (tn->stage != s)
            continue;
        for (int b = tn->to_first; b <= tn->to_last; b++) {
            if (!stage_reads(p, b, tn->node))
                continue;
            char name[SO_NAME_LEN];
            snprintf(name, sizeof name, "send%d:%.36s", b, so_graph_node(p->g, tn->node)->name);
            int id = so_g_send(g, map[tn->node], name);
            if (id < 0)
                return id;
            e->send[e->nsend++] = edge(id, b, t, tn);
        }
    }
    return 0;
}

static int copy_nodes(const so_pipe_plan *p, int s, so_graph *g, int *map)
{
    for (int i = p->first[s] > 0 ? p->first[s] : 1; i < p->first[s + 1]; i++) {
        const so_node *nd = so_graph_node(p->g, i);
        int in[SO_MAX_INPUTS];
        for (int j = 0; j < nd->ninputs; j++)
            in[j] = map[nd->inputs[j]];
        int id = so_graph_add(g, nd->op, nd->name, in, nd->ninputs, &nd->a);
        if (id < 0)
            return id;
        map[i] = id;
    }
    return 0;
}

static void slice(const so_pipe_plan *p, int s, so_pipe_stage_edges *e)
{
    const so_node *lo = so_graph_node(p->g, p->first[s]);
    const so_node *hi = so_graph_node(p->g, p->first[s + 1] - 1);
    e->param_lo = lo->param_off;
    e->param_hi = hi->param_off + hi->nparam;
    e->buf_lo = lo->buf_off;
    e->buf_hi = hi->buf_off + hi->nbuf;
}

int so_pipe_stage_graph(const so_pipe_plan *p, int s, so_graph **out, so_pipe_stage_edges *e)
{
    *out = NULL;
    memset(e, 0, sizeof *e);
    if (s < 0 || s >= p->nstages)
        return so_err(SO_EINVAL, "stage %d of %d", s, p->nstages);
    int n = so_graph_size(p->g), nt = p->ntensors, cap = nt * (p->nstages > 1 ? p->nstages : 1);
    so_shape in = so_graph_input_shape(p->g);
    so_graph *g = so_graph_create(in.c, in.h, in.w);
    int *map = malloc((size_t)n * sizeof *map);
    e->recv = calloc((size_t)nt + 1, sizeof *e->recv);
    e->send = calloc((size_t)cap + 1, sizeof *e->send);
    int rc = g && map && e->recv && e->send ? 0 : so_err(SO_ENOMEM, "out of memory for stage %d's graph", s);
    for (int i = 0; !rc && i < n; i++)
        map[i] = i == 0 ? 0 : -1;
    e->stage = s;
    e->nstages = p->nstages;
    if (!rc)
        rc = add_recvs(p, s, g, map, e);
    if (!rc)
        rc = copy_nodes(p, s, g, map);
    if (!rc)
        rc = add_sends(p, s, g, map, e);
    if (!rc)
        rc = so_graph_finalize(g);
    slice(p, s, e);
    free(map);
    if (rc) {
        so_graph_destroy(g);
        so_pipe_stage_edges_free(e);
        return rc;
    }
    *out = g;
    return 0;
}
