/* Allreduce algorithm "hier", zero-copy path: when the send and recv buffers
 * of every node rank are registered (so_comm_buf_alloc: they live in one node
 * shared window), each rank reduces its slice reading the peers' buffers
 * directly and stores the result straight into every peer's recv buffer.
 * No copies into or out of hier's own window (allreduce_hier.c moves ~4.5n
 * bytes per rank; this moves 2n).
 *
 * Accepts: q > 1 node ranks, count > SCALEOUT_SHM_SMALL (below, hier's
 *          one-barrier path is cheaper), send and recv each inside a
 *          registered region of this node grouping (one region or two), in
 *          place or out of place, SUM / MAX / MIN. Several nodes: the same q
 *          on every node; otherwise hier's leader path runs.
 * Phases:  0. decide: every node rank publishes (send region, offset, recv
 *             region, offset, count), or region 0 for "not registered", in
 *             its flag line; one barrier; every rank reads all q publications
 *             and decides the same way: zero copy only if all are equal and
 *             nonzero. Several nodes: the nodes' decisions are combined by a
 *             one-int MPI_MIN over the cross communicator (node rank r of
 *             every node), so all nodes take the same path. Otherwise the
 *             copy path of allreduce_hier.c runs; a rank that published
 *             "none" handed its first chunk over before the barrier, so when
 *             nobody registered the barrier is the copy path's first one (no
 *             cost); when some did (mixed), they hand over after it and one
 *             more barrier follows -- the same count on every node rank.
 *          1. node rank r reduces slice r (so_blk of the whole vector) of the
 *             q send buffers in node-rank order 0..q-1 -- the small path's
 *             order, so bits do not depend on bucket size or sub-chunking and
 *             are the same on every rank -- through a private temp of
 *             SO_ZC_SUB elements (stays in L1/L2), then stores it into the q
 *             recv buffers (own, and the peers').
 *          2. several nodes: rank r stores only its own recv, allreduces
 *             slice r with node rank r of the other nodes (rd small,
 *             Rabenseifner large, as the leaders do), then copies it into
 *             its node peers' recv buffers.
 *          3. one barrier: every recv buffer is complete.
 *          AVG: the dispatcher's 1/p is applied in the reduction's last
 *          pass into the temp (or, across nodes, to slice r after the cross
 *          allreduce) before the stores, instead of in a second pass over
 *          recv (so_allreduce_hier_avg);
 *          BF16 / F16: the sum is rounded to the type first, as elsewhere.
 * Cost (one node of q ranks, n bytes): 2 alpha_shm + per rank n read (its
 *          slice of q buffers, (q-1)/q of it remote) + n written ((q-1)/q
 *          remote) + n/q gamma. Several nodes add the cross allreduce of n/q
 *          bytes, run by all q ranks of a node in parallel (each rank's share
 *          of the network traffic is 1/q of the leader path's), and
 *          (q-1)/q n remote writes. Across nodes the one-int allreduce of
 *          phase 0 is paid on every large call, registered or not.
 * Step table, q = 2, one node, in place (b0, b1: the ranks' buffers):
 *            node rank 0                       node rank 1
 *   publish  (id, off, id, off, n)             (id, off, id, off, n)
 *   barrier  -- both match: zero copy --
 *   reduce   t = b0[s0] + b1[s0]  (per sub)    t = b0[s1] + b1[s1]
 *   store    b0[s0] = t, b1[s0] = t            b0[s1] = t, b1[s1] = t
 *   barrier
 * In place is safe: only rank r reads or writes slice r of any buffer, and
 * it reads a sub-chunk of all q inputs before storing it anywhere. */
#include "comm_env.h"
#include "coll_internal.h"

#include <stdlib.h>
#include <string.h>

/* Stores into a peer's buffer. Plain stores by default: measured faster
 * here than streaming ones (docs/COLLECTIVES.md); SCALEOUT_SHM_ZC_NT=1
 * streams them instead. */
static void store_peer(void *dst, const void *src, size_t bytes)
{
    if (so_comm_env_get()->shm_zc_nt)
        so_copy_nt(dst, src, bytes);
    else
        memcpy(dst, src, bytes);
}

/* The region of [p, p + bytes) usable on s's node, else NULL. */
static so_regbuf *usable(so_shm *s, const void *p, size_t bytes, size_t *off)
{
    so_regbuf *g = so_regbuf_find(p, bytes, off);
    return g && so_regbuf_matches(g, s) ? g : NULL;
}

int so_hier_zc_publish(so_shm *s, const void *send, const void *recv, size_t bytes)
{
    size_t so = 0, ro = 0;
    so_regbuf *a = usable(s, send, bytes, &so), *b = usable(s, recv, bytes, &ro);
    int reg = a && b;
    s->zc_send = reg ? a : NULL;
    s->zc_recv = reg ? b : NULL;
    *s->pub[s->r] = reg ? (so_zc_pub){so_regbuf_id(a), so, so_regbuf_id(b), ro, bytes}
                        : (so_zc_pub){0, 0, 0, 0, bytes};
    return reg;
}

/* After the barrier: every node rank registered, at the same regions and
 * offsets, inside every rank's buffer? Then point zc_in / zc_out at them.
 * *any: somebody registered (the others then hand over late: MIXED). */
static int all_match(so_shm *s, int *any)
{
    const so_zc_pub *me = s->pub[s->r];
    size_t end = (size_t)me->bytes;
    int ok = 1;
    *any = 0;
    for (int j = 0; j < s->q; j++) {
        const so_zc_pub *p = s->pub[j];
        *any |= p->send_id != 0;
        ok = ok && p->send_id != 0 && p->send_id == me->send_id && p->send_off == me->send_off &&
             p->recv_id == me->recv_id && p->recv_off == me->recv_off && p->bytes == me->bytes &&
             me->send_off + end <= so_regbuf_len(s->zc_send, j) &&
             me->recv_off + end <= so_regbuf_len(s->zc_recv, j);
    }
    for (int j = 0; ok && j < s->q; j++) {
        s->zc_in[j] = so_regbuf_base(s->zc_send, j) + me->send_off;
        s->zc_out[j] = so_regbuf_base(s->zc_recv, j) + me->recv_off;
    }
    return ok;
}

/* Every node's answer, the same on every rank: MIN over node rank r's peers. */
static int cross_agree(so_shm *s, so_waiter *w, int *ok)
{
    int rc = 0;
    MPI_Request req;
    SO_MPI_TRY(MPI_Iallreduce(MPI_IN_PLACE, ok, 1, MPI_INT, MPI_MIN, s->cross, &req));
    rc = so_coll_wait(w, 1, &req);
out:
    return rc;
}

int so_hier_zc_decide(so_shm *s, so_waiter *w, so_zc_mode *mode)
{
    int any = 0, ok, rc = so_shm_barrier(s, w);
    if (rc)
        return rc;
    ok = all_match(s, &any); /* reads only the tuples: the same answer on every node rank */
    if (s->nodes > 1 && (rc = cross_agree(s, w, &ok)))
        return rc;
    *mode = ok ? SO_ZC_RUN : any ? SO_ZC_MIXED : SO_ZC_COPY;
    return 0;
}

/* Phase 1 on elements [lo, lo + len): reduce in node-rank order through the
 * temp (averaged in the last input's pass), then store into every recv buffer
 * (all = 1) or only our own. */
static void reduce_slice(so_coll_ctx *x, so_shm *s, size_t lo, size_t len, so_reduce_op op, int avg_p, int all)
{
    const void *in[256];
    size_t e = x->esz;
    for (size_t o = lo; o < lo + len; o += SO_ZC_SUB) {
        size_t k = lo + len - o < SO_ZC_SUB ? lo + len - o : SO_ZC_SUB;
        for (int j = 0; j < s->q; j++)
            in[j] = s->zc_in[j] + o * e;
        if (all && avg_p)
            so_red_multi_avg(x->dt, s->zc_tmp, in, s->q, k, avg_p);
        else
            so_red_multi(x->dt, op, s->zc_tmp, in, s->q, k);
        for (int j = 0; j < s->q; j++)
            if (j == s->r)
                memcpy(s->zc_out[j] + o * e, s->zc_tmp, k * e);
            else if (all)
                store_peer(s->zc_out[j] + o * e, s->zc_tmp, k * e);
    }
}

int so_hier_zc_run(so_coll_ctx *x, so_shm *s, size_t count, so_reduce_op op, int avg_p)
{
    size_t lo, len;
    so_blk(count, s->q, s->r, &lo, &len);
    reduce_slice(x, s, lo, len, op, avg_p, s->nodes == 1);
    if (s->nodes > 1 && len > 0) { /* same q everywhere: node rank r's slice is the same on every node */
        char *mine = s->zc_out[s->r] + lo * x->esz;
        int rc = so_hier_across(x, mine, len, op, s->cross, s->nodes);
        if (rc)
            return rc;
        if (avg_p)
            so_red_avg(x->dt, mine, len, avg_p);
        for (int j = 0; j < s->q; j++)
            if (j != s->r)
                store_peer(s->zc_out[j] + lo * x->esz, mine, len * x->esz);
    }
    return so_shm_barrier(s, x->w);
}
