/* The pipeline's messages over so_comm (pipe_link.h): the two groups, and
 * the so_pipe_link whose sends and receives address stages, turned here
 * into pipeline group ranks; stages on one node share memory unless
 * SCALEOUT_PIPE_SHARED=0 or the pair talks over the TCP mesh. */
#ifdef SCALEOUT_HAVE_MPI
#include "pipe_link.h"

#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"

static int peer_of(const pipe_link *l, int stage) { return so_pipe_group_rank(stage, l->stages); }

static int link_isend(void *ctx, const void *buf, size_t bytes, int stage, int tag, void **req)
{
    pipe_link *l = ctx;
    return so_comm_isend(l->pipeline, buf, bytes, peer_of(l, stage), tag, (so_comm_req **)req);
}

static int link_irecv(void *ctx, void *buf, size_t bytes, int stage, int tag, void **req)
{
    pipe_link *l = ctx;
    return so_comm_irecv(l->pipeline, buf, bytes, peer_of(l, stage), tag, (so_comm_req **)req);
}

static int link_wait(void *ctx, void *req) { return so_comm_req_wait(((pipe_link *)ctx)->pipeline, req); }

static int link_shares_with(void *ctx, int stage)
{
    pipe_link *l = ctx;
    int peer = peer_of(l, stage), me = peer_of(l, l->stage);
    const char *env = getenv("SCALEOUT_PIPE_SHARED");
    if ((env && !strcmp(env, "0")) || !l->node_of || so_comm_p2p_on_tcp(l->pipeline, peer))
        return 0;
    return l->node_of[peer] == l->node_of[me];
}

static int link_share(void *ctx, size_t bytes, void **mine)
{
    pipe_link *l = ctx;
    *mine = NULL;
    int rc = l->shared ? so_err(SO_EINVAL, "the pipeline's memory is shared already") :
                         so_comm_buf_alloc(l->pipeline, bytes, &l->shared);
    *mine = l->shared;
    return rc;
}

static void *link_peer_memory(void *ctx, int stage, size_t *bytes)
{
    pipe_link *l = ctx;
    return so_comm_buf_peer(l->pipeline, l->shared, peer_of(l, stage), bytes);
}

so_pipe_link pipe_link_ops(pipe_link *l)
{
    return (so_pipe_link){l, link_isend, link_irecv, link_wait, link_shares_with, link_share, link_peer_memory};
}

/* Every pipeline group rank's node id. */
static int learn_nodes(pipe_link *l)
{
    so_comm_node me;
    so_comm_node_info(l->pipeline, &me);
    int64_t *ids = calloc((size_t)l->stages, sizeof *ids);
    l->node_of = calloc((size_t)l->stages, sizeof *l->node_of);
    if (!ids || !l->node_of) {
        free(ids);
        return so_err(SO_ENOMEM, "out of memory");
    }
    ids[peer_of(l, l->stage)] = me.node_id;
    int rc = so_comm_allreduce_i64(l->pipeline, ids, (size_t)l->stages, SO_REDUCE_SUM);
    for (int q = 0; q < l->stages; q++)
        l->node_of[q] = (int)ids[q];
    free(ids);
    return rc;
}

int pipe_link_open(pipe_link *l, so_comm *world, const so_pipe_ranks *r)
{
    *l = (pipe_link){.stage = r->stage, .stages = r->stages};
    int rc = so_comm_split(world, r->replica, peer_of(l, r->stage), &l->pipeline);
    if (!rc) /* activations and diffs cross at once both ways: scaleout's TCP between hosts */
        rc = so_comm_p2p_connect(l->pipeline);
    if (!rc)
        rc = learn_nodes(l);
    if (!rc)
        rc = so_comm_split(world, r->stage, r->replica, &l->replicas);
    return rc;
}

void pipe_link_close(pipe_link *l)
{
    so_comm_finalize(l->replicas);
    so_comm_finalize(l->pipeline); /* and l->shared with it */
    free(l->node_of);
    *l = (pipe_link){0};
}
#endif
