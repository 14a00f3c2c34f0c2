/* Allreduce algorithm "hier": hierarchical, through node shared memory
 * (Horovod's hierarchical allreduce, with the intra-node part done in an
 * MPI-3 shared window instead of MPI messages).
 *
 * Accepts: any p and node layout (real nodes, or emulated ones from
 *          so_comm_set_ranks_per_node), any count, in place or out of
 *          place, SUM / MAX / MIN.
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

#include <stdlib.h>
#include <string.h>

/* Large-message calls by path, for so_comm_hier_path_counts. */
static _Atomic uint64_t n_zero_copy, n_copied;
/* Steps across nodes by transport, for so_comm_hier_across_counts. */
static _Atomic uint64_t n_tcp, n_mpi;

void so_comm_hier_path_counts(uint64_t *zero_copy, uint64_t *copied)
{
    *zero_copy = atomic_load_explicit(&n_zero_copy, memory_order_relaxed);
    *copied = atomic_load_explicit(&n_copied, memory_order_relaxed);
}

void so_comm_hier_across_counts(uint64_t *tcp, uint64_t *mpi)
{
    *tcp = atomic_load_explicit(&n_tcp, memory_order_relaxed);
    *mpi = atomic_load_explicit(&n_mpi, memory_order_relaxed);
}

/* One barrier: publish the vector, reduce all q copies (count <= small_n). */
static int small_reduce(so_shm *s, const float *send, float *recv, size_t count, so_reduce_op op,
                        so_waiter *w)
{
    size_t b = (size_t)(s->calls++ & 1) * s->small_n;
    memcpy(s->small[s->r] + b, send, count * sizeof *send);
    int rc = so_shm_barrier(s, w);
    if (rc)
        return rc;
    so_reduce_out(recv, s->small[0] + b, s->small[1] + b, count, op);
    for (int j = 2; j < s->q; j++)
        so_reduce_acc(recv, s->small[j] + b, count, op);
    return 0;
}

/* Stores into the window: streaming (non-temporal) unless SCALEOUT_SHM_NT=0,
 * so peers read them from memory instead of snooping our cache. On the
 * 2-vCPU EPYC the cached copies fell into a slow mode (1.3-1.6 GB/s busbw,
 * as slow as 0.55x MPI_Allreduce) in half the runs, at near and far core
 * placement alike; streaming stores gave 4-8 GB/s in every run (np 2, 256 KiB
 * to 64 MiB, docs/PERFORMANCE.md). (On the earlier Xeon VM they were slower.) */
static void copy(float *dst, const float *src, size_t n)
{
    if (so_comm_env_get()->shm_nt)
        so_copy_nt(dst, src, n);
    else
        memcpy(dst, src, n * sizeof *dst);
}

/* Floats in the chunk that starts at off. */
static size_t chunk_len(const so_shm *s, size_t count, size_t off)
{
    return count - off < s->chunk_n ? count - off : s->chunk_n;
}

/* Chunk [off, off + cn): the slices the other ranks reduce, into my contribution area. */
static void hand_over(so_shm *s, const float *send, size_t off, size_t cn)
{
    size_t ko, kl;
    for (int k = 0; k < s->q; k++)
        if (k != s->r) {
            so_blk(cn, s->q, k, &ko, &kl);
            copy(s->contrib[s->r] + ko, send + off + ko, kl);
        }
}

/* Chunked reduce-scatter in the window; copies the result into recv on every
 * rank (all = 1) or on the node leader only. primed: the first chunk's
 * hand-over and its barrier are done already (see large()). */
static int chunk_reduce(so_shm *s, const float *send, float *recv, size_t count, so_reduce_op op,
                        int all, int primed, so_waiter *w)
{
    int rc = 0, q = s->q, r = s->r;
    for (size_t off = 0; off < count; off += s->chunk_n) {
        size_t cn = chunk_len(s, count, off), ko, kl, mo, ml;
        if (off > 0 || !primed) {
            hand_over(s, send, off, cn);
            if ((rc = so_shm_barrier(s, w)))
                return rc;
        }
        /* My slice (mine, then the others in node-rank order) into recv (private, cached), then
         * published. In place is safe: only this slice of send is still read. */
        so_blk(cn, q, r, &mo, &ml);
        float *res = recv + off + mo;
        const float *mine = send + off + mo;
        for (int j = 0, first = 1; j < q; j++)
            if (j != r) { /* own slice first: in place, res == mine is read before written */
                so_reduce_out(res, first ? mine : res, s->contrib[j] + mo, ml, op);
                first = 0;
            }
        copy(s->result[r] + mo, res, ml);
        if ((rc = so_shm_barrier(s, w)))
            return rc;
        if (all || r == 0)
            for (int k = 0; k < q; k++) {
                if (k == r)
                    continue;
                so_blk(cn, q, k, &ko, &kl);
                memcpy(recv + off + ko, s->result[k] + ko, kl * sizeof *recv);
            }
    }
    return 0;
}

/* The node leader's recv to every node rank, chunk by chunk through R0. */
static int shm_bcast(so_shm *s, float *recv, size_t count, so_waiter *w)
{
    int rc = 0;
    for (size_t off = 0; off < count; off += s->chunk_n) {
        size_t cn = count - off < s->chunk_n ? count - off : s->chunk_n;
        if (off && (rc = so_shm_barrier(s, w))) /* the others have copied the last chunk */
            return rc;
        if (s->r == 0)
            memcpy(s->result[0], recv + off, cn * sizeof *recv);
        if ((rc = so_shm_barrier(s, w)))
            return rc;
        if (s->r != 0)
            memcpy(recv + off, s->result[0], cn * sizeof *recv);
    }
    return 0;
}

/* Above the small-message size: zero copy when every node rank's buffers are
 * registered (allreduce_hier_zc.c; *scaled = 1), else the chunked copy path.
 * A rank that is not registered hands its first chunk over before the
 * decision barrier, so when nobody registered that barrier is also the first
 * chunk's: the copy path pays nothing extra. Mixed: the registered ranks hand
 * over after it and one more barrier follows. The mode is the same on every
 * node rank, so are the barrier counts. */
static int large(so_shm *s, const float *send, float *recv, size_t count, so_reduce_op op, float scale,
                 so_waiter *w, int *scaled)
{
    if (s->nodes > 1 && !s->equal_q) { /* no zero copy across unequal nodes: known on every rank */
        atomic_fetch_add_explicit(&n_copied, 1, memory_order_relaxed);
        return chunk_reduce(s, send, recv, count, op, 0, 0, w);
    }
    int reg = so_hier_zc_publish(s, send, recv, count), rc;
    if (!reg)
        hand_over(s, send, 0, chunk_len(s, count, 0));
    so_zc_mode mode;
    if ((rc = so_hier_zc_decide(s, w, &mode)))
        return rc;
    atomic_fetch_add_explicit(mode == SO_ZC_RUN ? &n_zero_copy : &n_copied, 1, memory_order_relaxed);
    if (mode == SO_ZC_RUN) {
        *scaled = 1;
        return so_hier_zc_run(s, count, op, scale, w);
    }
    if (mode == SO_ZC_MIXED) {
        if (reg)
            hand_over(s, send, 0, chunk_len(s, count, 0));
        if ((rc = so_shm_barrier(s, w)))
            return rc;
    }
    return chunk_reduce(s, send, recv, count, op, s->nodes == 1, 1, w);
}

int so_hier_across(so_tcp_slot *slot, float *buf, size_t count, so_reduce_op op, MPI_Comm comm, int nodes,
                   so_waiter *w)
{
    if (so_tcp_wanted(count)) {
        int rc = 0;
        if (!slot->tried) { /* the same call on every member: its first large step */
            slot->tried = 1;
            rc = so_tcp_ring_open(comm, w, &slot->ring);
        }
        if (rc)
            return rc;
        if (slot->ring) {
            atomic_fetch_add_explicit(&n_tcp, 1, memory_order_relaxed);
            return so_tcp_allreduce(slot->ring, buf, count, op, w);
        }
    }
    atomic_fetch_add_explicit(&n_mpi, 1, memory_order_relaxed);
    so_allreduce_algo a = so_allreduce_leaders_algo(count * sizeof *buf, nodes);
    return so_allreduce_fn_of(a)(buf, buf, count, op, comm, w);
}

/* hier with an optional scale (see so_allreduce_hier_scaled). */
static int hier(const float *send, float *recv, size_t count, so_reduce_op op, float scale, MPI_Comm comm,
                so_waiter *w, int *scaled)
{
    so_shm *s;
    int rc = so_shm_get(comm, w, &s);
    *scaled = 0;
    if (rc)
        return rc;
    if (s->q == 1) {
        if (send != recv)
            memcpy(recv, send, count * sizeof *recv);
    } else if (count <= s->small_n) {
        rc = small_reduce(s, send, recv, count, op, w);
    } else if ((rc = large(s, send, recv, count, op, scale, w, scaled)) || *scaled) {
        return rc; /* zero copy ran the whole allreduce */
    }
    if (rc || s->nodes == 1)
        return rc;
    if (s->r == 0) {
        rc = so_hier_across(&s->tcp_leaders, recv, count, op, s->leaders, s->nodes, w);
    }
    if (!rc && s->q > 1)
        rc = shm_bcast(s, recv, count, w);
    return rc;
}

int so_allreduce_hier(const float *send, float *recv, size_t count, so_reduce_op op, MPI_Comm comm,
                      so_waiter *w)
{
    int scaled;
    return hier(send, recv, count, op, 1.0f, comm, w, &scaled);
}

int so_allreduce_hier_scaled(const float *send, float *recv, size_t count, float scale, MPI_Comm comm,
                             so_waiter *w, int *scaled)
{
    return hier(send, recv, count, SO_REDUCE_SUM, scale, comm, w, scaled);
}
