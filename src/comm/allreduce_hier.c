/* Allreduce algorithm "hier": hierarchical, through node shared memory
 * (Horovod's hierarchical allreduce, with the intra-node part done in an
 * MPI-3 shared window instead of MPI messages).
 *
 * Accepts: any p and node layout (real nodes, or emulated ones from
 *          so_comm_set_ranks_per_node), up to 256 ranks per node, any count,
 *          in place or out of place, SUM / MAX / MIN, any element type
 *          (BF16 / F16: a node's q contributions are summed in FP32 and
 *          rounded once; the step across nodes rounds per hop).
 * Phases:  1. intra-node reduce in shared memory, in chunks that stay in L2:
 *             every rank copies the slices of its chunk that others own into
 *             its contribution area; barrier; node rank k reduces slice k of
 *             all q contributions (a reduce-scatter with no MPI copies) into
 *             its result area; barrier. Small messages (<= SCALEOUT_SHM_SMALL)
 *             take one barrier instead: every rank publishes its whole vector
 *             (double-buffered) and reduces all q of them itself.
 *          2. one node: every rank copies the q result slices into recv.
 *             Several nodes: the node leader copies them, leaders run a p2p
 *             allreduce (rd small, Rabenseifner large) over the leaders
 *             communicator, and the leader broadcasts through the window.
 * Cost (one node of q ranks, chunk c bytes): 2 ceil(n/c) alpha_shm +
 *          (q-1)/q n (copy in) + n/q gamma-ish reduce + (q-1)/q n (copy out),
 *          at memory bandwidth; alpha_shm is one flag barrier (~0.1-1 us).
 *          Several nodes add the leaders' allreduce and 2 ceil(n/c) barriers.
 * Chunk step table, q = 2 (C = contribution area, R = result area):
 *            node rank 0                     node rank 1
 *   copy     send[slice1] -> C0              send[slice0] -> C1
 *   barrier
 *   reduce   recv[s0] = send[s0] op C1[s0]  recv[s1] = send[s1] op C0[s1]
 *   publish  recv[s0] -> R0                 recv[s1] -> R1
 *   barrier
 *   copy     R1 -> recv[s1]                  R0 -> recv[s0]
 * Every slice is reduced once (owner's values first, then node-rank order)
 * and copied: all ranks get identical bits.
 * Zero copy: above the small-message size, when every node rank's send and
 * recv live in registered memory (so_comm_buf_alloc), allreduce_hier_zc.c
 * runs instead of phases 1-2 (it decides, with all node ranks, first). */
#include "comm_env.h"
#include "coll_internal.h"

#include "scaleout/err.h"

#include <stdlib.h>
#include <string.h>

#define SO_HIER_MAX_Q 256 /* node ranks a reduction reads at once (an array on the stack) */


/* One barrier: publish the vector, reduce all q copies in node-rank order
 * (bytes <= small_bytes). BF16 / F16: all q summed in FP32, rounded once.
 * avg_p > 0: the sum times 1/avg_p in the same pass (so_red_multi_avg). */
static int small_reduce(so_coll_ctx *x, so_shm *s, const void *send, void *recv, size_t count, so_reduce_op op,
                        int avg_p)
{
    size_t b = (size_t)(s->calls++ & 1) * s->small_bytes;
    memcpy(s->small[s->r] + b, send, count * x->esz);
    int rc = so_shm_barrier(s, x->w);
    if (rc)
        return rc;
    const void *in[SO_HIER_MAX_Q];
    for (int j = 0; j < s->q; j++)
        in[j] = s->small[j] + b;
    if (avg_p)
        so_red_multi_avg(x->dt, recv, in, s->q, count, avg_p);
    else
        so_red_multi(x->dt, op, recv, in, s->q, count);
    return 0;
}

/* Stores into the window: streaming (non-temporal) unless SCALEOUT_SHM_NT=0,
 * so peers read them from memory instead of snooping our cache. On the
 * 2-vCPU EPYC the cached copies fell into a slow mode (1.3-1.6 GB/s busbw,
 * as slow as 0.55x MPI_Allreduce) in half the runs, at near and far core
 * placement alike; streaming stores gave 4-8 GB/s in every run (np 2, 256 KiB
 * to 64 MiB, docs/PERFORMANCE.md). (On the earlier Xeon VM they were slower.) */
void so_shm_copy(void *dst, const void *src, size_t bytes)
{
    if (so_comm_env_get()->shm_nt)
        so_copy_nt(dst, src, bytes);
    else
        memcpy(dst, src, bytes);
}

/* Elements in the chunk that starts at element off. */
static size_t chunk_len(const so_coll_ctx *x, const so_shm *s, size_t count, size_t off)
{
    size_t n = s->chunk_bytes / x->esz;
    return count - off < n ? count - off : n;
}

/* Chunk [off, off + cn): the slices the other ranks reduce, into my contribution area. */
static void hand_over(so_coll_ctx *x, so_shm *s, const void *send, size_t off, size_t cn)
{
    size_t ko, kl;
    for (int k = 0; k < s->q; k++)
        if (k != s->r) {
            so_blk(cn, s->q, k, &ko, &kl);
            so_shm_copy(s->contrib[s->r] + ko * x->esz, so_el(x, send, off + ko), kl * x->esz);
        }
}

/* My slice of the chunk at off: mine, then the others in node-rank order,
 * into recv (private, cached), averaged when avg_p > 0, then published. In
 * place is safe: only this slice of send is still read. */
static void reduce_mine(so_coll_ctx *x, so_shm *s, const void *send, void *recv, size_t off, size_t cn,
                        so_reduce_op op, int avg_p)
{
    size_t mo, ml;
    so_blk(cn, s->q, s->r, &mo, &ml);
    const void *in[SO_HIER_MAX_Q];
    int k = 0;
    in[k++] = so_el(x, send, off + mo); /* own slice first: in place, the result overwrites it */
    for (int j = 0; j < s->q; j++)
        if (j != s->r)
            in[k++] = s->contrib[j] + mo * x->esz;
    if (avg_p)
        so_red_multi_avg(x->dt, so_el(x, recv, off + mo), in, k, ml, avg_p);
    else
        so_red_multi(x->dt, op, so_el(x, recv, off + mo), in, k, ml);
    so_shm_copy(s->result[s->r] + mo * x->esz, so_el(x, recv, off + mo), ml * x->esz);
}

/* Chunked reduce-scatter in the window; copies the result into recv on every
 * rank (all = 1) or on the node leader only. primed: the first chunk's
 * hand-over and its barrier are done already (see large()). avg_p > 0: each
 * slice averaged as it is reduced. */
static int chunk_reduce(so_coll_ctx *x, so_shm *s, const void *send, void *recv, size_t count, so_reduce_op op,
                        int all, int primed, int avg_p)
{
    int rc = 0;
    for (size_t off = 0; off < count; off += chunk_len(x, s, count, 0)) {
        size_t cn = chunk_len(x, s, count, off), ko, kl;
        if (off > 0 || !primed) {
            hand_over(x, s, send, off, cn);
            if ((rc = so_shm_barrier(s, x->w)))
                return rc;
        }
        reduce_mine(x, s, send, recv, off, cn, op, avg_p);
        if ((rc = so_shm_barrier(s, x->w)))
            return rc;
        if (all || s->r == 0)
            for (int k = 0; k < s->q; k++) {
                if (k == s->r)
                    continue;
                so_blk(cn, s->q, k, &ko, &kl);
                memcpy(so_el(x, recv, off + ko), s->result[k] + ko * x->esz, kl * x->esz);
            }
    }
    return 0;
}

/* The node leader's recv to every node rank, chunk by chunk through R0. */
static int shm_bcast(so_coll_ctx *x, so_shm *s, void *recv, size_t count)
{
    int rc = 0;
    for (size_t off = 0; off < count; off += chunk_len(x, s, count, 0)) {
        size_t bytes = chunk_len(x, s, count, off) * x->esz;
        if (off && (rc = so_shm_barrier(s, x->w))) /* the others have copied the last chunk */
            return rc;
        if (s->r == 0)
            memcpy(s->result[0], so_el(x, recv, off), bytes);
        if ((rc = so_shm_barrier(s, x->w)))
            return rc;
        if (s->r != 0)
            memcpy(so_el(x, recv, off), s->result[0], bytes);
    }
    return 0;
}

/* Above the small-message size: zero copy when every node rank's buffers are
 * registered (allreduce_hier_zc.c; *whole = 1: it ran the whole allreduce),
 * else the chunked copy path. Either averages (avg_p > 0) on one node; zero
 * copy across nodes too. A rank that is not registered hands its first chunk
 * over before the decision barrier, so when nobody registered that barrier
 * is also the first chunk's: the copy path pays nothing extra. Mixed: the
 * registered ranks hand over after it and one more barrier follows. The mode
 * is the same on every node rank, so are the barrier counts. */
static int large(so_coll_ctx *x, so_shm *s, const void *send, void *recv, size_t count, so_reduce_op op, int avg_p,
                 int *whole)
{
    if (s->nodes > 1 && !s->equal_q) { /* no zero copy across unequal nodes: known on every rank */
        so_hier_count(0);
        return chunk_reduce(x, s, send, recv, count, op, 0, 0, 0);
    }
    int reg = so_hier_zc_publish(s, send, recv, count * x->esz), rc;
    if (!reg)
        hand_over(x, s, send, 0, chunk_len(x, s, count, 0));
    so_zc_mode mode;
    if ((rc = so_hier_zc_decide(s, x->w, &mode)))
        return rc;
    so_hier_count(mode == SO_ZC_RUN);
    if (mode == SO_ZC_RUN) {
        *whole = 1;
        return so_hier_zc_run(x, s, count, op, avg_p);
    }
    if (mode == SO_ZC_MIXED) {
        if (reg)
            hand_over(x, s, send, 0, chunk_len(x, s, count, 0));
        if ((rc = so_shm_barrier(s, x->w)))
            return rc;
    }
    return chunk_reduce(x, s, send, recv, count, op, s->nodes == 1, 1, s->nodes == 1 ? avg_p : 0);
}

/* hier with an optional average (see so_allreduce_hier_avg): on one node
 * every path averages inside its reduction; across nodes only zero copy
 * does (the leaders' sum is not final until after the step across). */
static int hier(so_coll_ctx *x, const void *send, void *recv, size_t count, so_reduce_op op, int avg_p,
                int *scaled)
{
    so_shm *s;
    int rc = so_shm_get(x->comm, x->w, &s), whole = 0;
    *scaled = 0;
    if (rc)
        return rc;
    if (s->q > SO_HIER_MAX_Q)
        return so_err(SO_EINVAL, "hier: %d ranks on a node (at most %d)", s->q, SO_HIER_MAX_Q);
    int one_node = s->nodes == 1;
    if (s->q == 1) {
        if (send != recv)
            memcpy(recv, send, count * x->esz);
        one_node = 0; /* nothing reduced here: the dispatcher averages */
    } else if (count * x->esz <= s->small_bytes) {
        rc = small_reduce(x, s, send, recv, count, op, one_node ? avg_p : 0);
    } else if ((rc = large(x, s, send, recv, count, op, avg_p, &whole)) || whole) {
        *scaled = whole && avg_p > 0;
        return rc; /* zero copy ran the whole allreduce */
    }
    *scaled = one_node && avg_p > 0;
    if (rc || s->nodes == 1)
        return rc;
    if (s->r == 0)
        rc = so_hier_across(x, recv, count, op, s->leaders, s->nodes);
    if (!rc && s->q > 1)
        rc = shm_bcast(x, s, recv, count);
    return rc;
}

int so_allreduce_hier(so_coll_ctx *x, const void *send, void *recv, size_t count, so_reduce_op op)
{
    int scaled;
    return hier(x, send, recv, count, op, 0, &scaled);
}

int so_allreduce_hier_avg(so_coll_ctx *x, const void *send, void *recv, size_t count, int avg_p, int *scaled)
{
    return hier(x, send, recv, count, SO_REDUCE_SUM, avg_p, scaled);
}
