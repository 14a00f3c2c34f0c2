/* The layouts of the tensors that cross between pipeline devices
 * (pipeline.h, "tensor layouts between devices"): one fixed-size message
 * per edge over the so_pipe_link, passed down the pipeline once, or
 * settled in rounds of trial builds when devices send both ways. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "scaleout/pipeline.h"

/* One layout message: fixed size, so a failure mark is a message too. */
enum { LAYOUT_MAX = 2048 };
typedef struct {
    int32_t ok;                  /* 0: the sending device could not build its model */
    uint32_t len;                /* bytes of desc used (0: plain NCHW) */
    char desc[LAYOUT_MAX];
} layout_msg;

struct so_pipe_layouts {
    const so_pipe_stage_edges *e;   /* borrowed */
    layout_msg *got;                /* one per recv edge */
};

int so_pipe_layouts_create(const so_pipe_stage_edges *e, so_pipe_layouts **out)
{
    so_pipe_layouts *l = calloc(1, sizeof *l);
    *out = l;
    if (!l || !(l->got = calloc((size_t)e->nrecv + 1, sizeof *l->got)))
        return so_err(SO_ENOMEM, "out of memory");
    l->e = e;
    return 0;
}

void so_pipe_layouts_destroy(so_pipe_layouts *l)
{
    if (!l)
        return;
    free(l->got);
    free(l);
}

int so_pipe_layouts_of(void *ctx, int node, const void **desc, size_t *len)
{
    const so_pipe_layouts *l = ctx;
    for (int i = 0; i < l->e->nrecv; i++)
        if (l->e->recv[i].node == node) {
            *desc = l->got[i].desc;
            *len = l->got[i].len;
            return 0;
        }
    *len = 0;
    return 0;
}

/* A message of m's layout for send edge e (m NULL: the failure mark). */
static void fill(layout_msg *msg, so_model *m, const so_pipe_edge *e)
{
    msg->ok = m != NULL;
    msg->len = m ? (uint32_t)so_model_edge_layout(m, e->node, msg->desc, sizeof msg->desc) : 0;
}

/* One message, sent or received to completion. */
static int send_one(const so_pipe_link *k, const layout_msg *msg, const so_pipe_edge *e)
{
    void *req = NULL;
    int rc = k->isend(k->ctx, msg, sizeof *msg, e->peer, e->tag, &req);
    return rc ? rc : k->wait(k->ctx, req);
}

static int recv_one(const so_pipe_link *k, layout_msg *msg, const so_pipe_edge *e)
{
    void *req = NULL;
    int rc = k->irecv(k->ctx, msg, sizeof *msg, e->peer, e->tag, &req);
    return rc ? rc : k->wait(k->ctx, req);
}

int so_pipe_layouts_receive(so_pipe_layouts *l, const so_pipe_link *link)
{
    int rc = 0, failed = -1;
    for (int i = 0; i < l->e->nrecv; i++) {
        int r = recv_one(link, &l->got[i], &l->e->recv[i]);
        rc = rc ? rc : r;
        if (!r && !l->got[i].ok)
            failed = l->e->recv[i].peer;
    }
    if (!rc && failed >= 0)
        rc = so_err(SO_ECOMM, "stage %d could not build its model (see its message)", failed);
    return rc;
}

int so_pipe_layouts_send(const so_pipe_stage_edges *e, const so_pipe_link *link, so_model *m)
{
    layout_msg *msg = calloc(1, sizeof *msg);
    if (!msg)
        return so_err(SO_ENOMEM, "out of memory");
    int rc = 0;
    for (int i = 0; i < e->nsend; i++) {
        fill(msg, m, &e->send[i]);
        int r = send_one(link, msg, &e->send[i]);
        rc = rc ? rc : r;
    }
    free(msg);
    return rc;
}

/* ---- interleaved: rounds of trial builds --------------------------------------- */

/* One round: a trial model built with the layouts known so far, its send
 * edges' layouts sent (the failure mark when it could not be built) while
 * the recv edges' are received into got. *failed = a device that could not
 * build (-1: none). */
static int round_trip(so_pipe_layouts *l, const so_pipe_link *k, int (*build)(void *, so_model **), void *ctx,
                      layout_msg *out, layout_msg *got, int *failed)
{
    const so_pipe_stage_edges *e = l->e;
    so_model *m = NULL;
    int built = build(ctx, &m);
    void **req = calloc((size_t)e->nsend + 1, sizeof *req);
    int rc = req ? 0 : so_err(SO_ENOMEM, "out of memory");
    for (int i = 0; !rc && i < e->nsend; i++) {
        fill(&out[i], built ? NULL : m, &e->send[i]);
        rc = k->isend(k->ctx, &out[i], sizeof out[i], e->send[i].peer, e->send[i].tag, &req[i]);
    }
    for (int i = 0; !rc && i < e->nrecv; i++) {
        rc = recv_one(k, &got[i], &e->recv[i]);
        if (!rc && !got[i].ok)
            *failed = e->recv[i].peer;
    }
    for (int i = 0; req && i < e->nsend; i++)
        if (req[i]) {
            int w = k->wait(k->ctx, req[i]);
            rc = rc ? rc : w;
        }
    free(req);
    so_model_destroy(m);
    return built ? built : rc;
}

/* How many recv edges' layouts differ between a and b. */
static double changes(const so_pipe_stage_edges *e, const layout_msg *a, const layout_msg *b)
{
    double changed = 0;
    for (int i = 0; i < e->nrecv; i++)
        changed += a[i].len != b[i].len || memcmp(a[i].desc, b[i].desc, a[i].len);
    return changed;
}

int so_pipe_layouts_settle(so_pipe_layouts *l, const so_pipe_link *link, const so_pipe_world *w,
                           int (*build)(void *ctx, so_model **m), void *build_ctx)
{
    const so_pipe_stage_edges *e = l->e;
    int rc = 0;
    layout_msg *out = calloc((size_t)e->nsend + 1, sizeof *out), *got = calloc((size_t)e->nrecv + 1, sizeof *got);
    if (!out || !got)
        rc = so_err(SO_ENOMEM, "out of memory");
    for (int round = 0; !rc; round++) {
        int failed = -1;
        rc = round_trip(l, link, build, build_ctx, out, got, &failed);
        if (!rc && failed >= 0)
            rc = so_err(SO_ECOMM, "pipeline device %d could not build its model (see its message)", failed);
        double changed = rc ? 0 : changes(e, got, l->got);
        if (!rc)
            memcpy(l->got, got, (size_t)e->nrecv * sizeof *got);
        if ((rc = w->agree(w->ctx, rc)) || (rc = w->sum(w->ctx, &changed, 1)) || changed == 0)
            break;
        if (round > e->nstages * e->nchunks)
            rc = so_err(SO_ECOMM, "the pipeline's tensor layouts did not settle in %d rounds", round);
    }
    free(out);
    free(got);
    return rc;
}
