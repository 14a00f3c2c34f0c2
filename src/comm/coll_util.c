/* Shared building blocks of the hand-written collectives: reduction kernels,
 * the spin-then-watch wait, point-to-point exchanges (plain and segmented
 * exchange-and-reduce) and the fold-in / fold-out steps that let recursive
 * doubling and Rabenseifner run on any process count. */
#include "comm_env.h"
#include "coll_internal.h"

#include "core/vec_clones.h"
#include "scaleout/err.h"
#include "scaleout/timer.h"

#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__SSE__)
#include <immintrin.h>
#endif

/* ---- reduction kernels ----------------------------------------------------------
 * One loop per op with restrict pointers and no branches inside: GCC turns
 * each into AVX-512 / AVX2 / SSE adds and max/min, one copy per ISA picked
 * at load time (SO_VEC_CLONES: the build itself is portable). The
 * ternaries for max/min compile to vmaxps / vminps (no NaN ordering needs). */
void so_reduce_acc(float *dst, const float *src, size_t n, so_reduce_op op)
{
    so_reduce_out(dst, dst, src, n, op);
}

/* dst may equal a: every element is read before it is written, and the
 * compiler is told only b is distinct, so both pointers are not restrict. */
SO_VEC_CLONES static void sum_out(float *dst, const float *a, const float *restrict b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = a[i] + b[i];
}

SO_VEC_CLONES static void max_out(float *dst, const float *a, const float *restrict b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = b[i] > a[i] ? b[i] : a[i];
}

SO_VEC_CLONES static void min_out(float *dst, const float *a, const float *restrict b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = b[i] < a[i] ? b[i] : a[i];
}

void so_reduce_out(float *dst, const float *a, const float *b, size_t n, so_reduce_op op)
{
    if (op == SO_REDUCE_MAX)
        max_out(dst, a, b, n);
    else if (op == SO_REDUCE_MIN)
        min_out(dst, a, b, n);
    else
        sum_out(dst, a, b, n);
}

/* Copy with non-temporal stores: the destination lines go to memory instead
 * of staying modified in this core's cache. Used for data another core reads
 * next: here a read of lines modified in the other vCPU's cache costs a
 * cross-core snoop each (100-350 ns, "near/far" placement), a read of lines
 * in memory / L3 streams at memory bandwidth. */
void so_copy_nt(float *dst, const float *src, size_t n)
{
#if defined(__SSE__)
    size_t i = 0;
    for (; i < n && ((uintptr_t)(dst + i) & 15); i++)
        dst[i] = src[i];
    for (; i + 16 <= n; i += 16) {
        __m128 a = _mm_loadu_ps(src + i), b = _mm_loadu_ps(src + i + 4);
        __m128 c = _mm_loadu_ps(src + i + 8), d = _mm_loadu_ps(src + i + 12);
        _mm_stream_ps(dst + i, a);
        _mm_stream_ps(dst + i + 4, b);
        _mm_stream_ps(dst + i + 8, c);
        _mm_stream_ps(dst + i + 12, d);
    }
    for (; i < n; i++)
        dst[i] = src[i];
    _mm_sfence(); /* order the streaming stores before the flag's release store */
#else
    memcpy(dst, src, n * sizeof *dst);
#endif
}

/* ---- settings read once from the environment ------------------------------------- */

size_t so_coll_seg(void) { return so_comm_env_get()->coll_seg_floats; }

double so_coll_spin_s(void) { return so_comm_env_get()->coll_spin_s; }

/* More ranks on this host than cores (the launcher's count: every process
 * here competes for the cores, whichever group it is talking in). */
int so_coll_oversubscribed(void) { return so_comm_env_get()->oversubscribed; }

/* Process-wide like the oversubscription above: set once from the job's group
 * (so_comm_init) and kept for every group, since the network processing a
 * spinning rank would starve runs on this host whichever group it serves. */
static _Atomic int multi_host;

void so_coll_set_multi_host(int v) { atomic_store_explicit(&multi_host, v, memory_order_relaxed); }

int so_coll_multi_host(void) { return atomic_load_explicit(&multi_host, memory_order_relaxed); }

int so_coll_yield(void)
{
    int m = so_comm_env_get()->coll_yield; /* 1 always, 0 never, -1 auto */
    if (m >= 0)
        return m;
    return so_coll_oversubscribed() || atomic_load_explicit(&multi_host, memory_order_relaxed);
}

/* ---- waits ----------------------------------------------------------------------- */

int so_coll_wait(so_waiter *w, int n, MPI_Request *reqs)
{
    if (!w)
        return so_waiter_wait(NULL, n, reqs);
    int yield = so_coll_yield();
    double budget = so_coll_spin_s(), t0 = 0;
    for (unsigned it = 1;; it++) {
        int done = 0;
        SO_IGNORE_STATUSES_BEGIN
        int mrc = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
        SO_IGNORE_STATUSES_END
        if (mrc != MPI_SUCCESS)
            return so_mpi_err(mrc, "MPI_Testall");
        if (done)
            return 0;
        if (yield)
            sched_yield();
        if ((it & 63) == 0) {
            double now = so_now();
            if (t0 == 0)
                t0 = now;
            else if (now - t0 >= budget)
                break;
        }
    }
    /* Long wait: hand over to the watched wait (backoff, stall report, timeout). */
    return so_waiter_wait(w, n, reqs);
}

/* ---- point-to-point exchanges ------------------------------------------------------ */

#define XCHG_MAX_SEGS 64 /* send requests in flight per exchange */

/* Segment length for a message of n floats: the configured segment, grown so
 * that no message needs more than XCHG_MAX_SEGS of them. */
static size_t seg_for(size_t n)
{
    size_t seg = so_coll_seg();
    if (n / seg + 1 > XCHG_MAX_SEGS)
        seg = n / (XCHG_MAX_SEGS - 1) + 1;
    return seg > SO_MPI_CHUNK ? SO_MPI_CHUNK : seg;
}

int so_sendrecv(const float *sbuf, size_t sn, int dst, float *rbuf, size_t rn, int src, int tag,
                MPI_Comm comm, so_waiter *w)
{
    int rc = 0, nreq = 0;
    MPI_Request req[2 * XCHG_MAX_SEGS];
    if (dst == MPI_PROC_NULL)
        sn = 0;
    if (src == MPI_PROC_NULL)
        rn = 0;
    /* Same segmentation as so_xchg_reduce, so either may talk to the other. */
    size_t rseg = seg_for(rn), sseg = seg_for(sn);
    for (size_t off = 0; off < rn; off += rseg) {
        size_t k = rn - off < rseg ? rn - off : rseg;
        SO_MPI_TRY(MPI_Irecv(rbuf + off, (int)k, MPI_FLOAT, src, tag, comm, &req[nreq++]));
    }
    for (size_t off = 0; off < sn; off += sseg) {
        size_t k = sn - off < sseg ? sn - off : sseg;
        SO_MPI_TRY(MPI_Isend(sbuf + off, (int)k, MPI_FLOAT, dst, tag, comm, &req[nreq++]));
    }
    if (nreq)
        rc = so_coll_wait(w, nreq, req);
out:
    return rc;
}

int so_xchg_reduce(const float *sbuf, size_t sn, int dst, float *out, const float *a, size_t rn,
                   int src, so_reduce_op op, int tag, MPI_Comm comm, so_waiter *w)
{
    int rc = 0, nsend = 0;
    MPI_Request sreq[XCHG_MAX_SEGS], rreq[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    if (dst == MPI_PROC_NULL)
        sn = 0;
    if (src == MPI_PROC_NULL)
        rn = 0;
    /* Each message is cut by a rule of its own length only, so the sender's
     * segments match the receiver's exactly (same block on both sides). */
    size_t seg = seg_for(rn), sseg = seg_for(sn), nrseg = rn ? (rn + seg - 1) / seg : 0;
    size_t tseg = rn < seg ? rn : seg;
    float *tmp = rn ? malloc(2 * tseg * sizeof *tmp) : NULL;
    if (rn && !tmp)
        return so_err(SO_ENOMEM, "exchange: out of memory for %zu floats", 2 * tseg);
    /* Receives first (two in flight, double-buffered), then every send segment. */
    for (size_t k = 0; k < 2 && k < nrseg; k++) {
        size_t len = rn - k * seg < seg ? rn - k * seg : seg;
        SO_MPI_TRY(MPI_Irecv(tmp + (k & 1) * tseg, (int)len, MPI_FLOAT, src, tag, comm, &rreq[k]));
    }
    for (size_t off = 0; off < sn; off += sseg) {
        size_t len = sn - off < sseg ? sn - off : sseg;
        SO_MPI_TRY(MPI_Isend(sbuf + off, (int)len, MPI_FLOAT, dst, tag, comm, &sreq[nsend++]));
    }
    for (size_t k = 0; k < nrseg; k++) {
        size_t off = k * seg, len = rn - off < seg ? rn - off : seg;
        if ((rc = so_coll_wait(w, 1, &rreq[k & 1])))
            goto out;
        so_reduce_out(out + off, a + off, tmp + (k & 1) * tseg, len, op);
        if (k + 2 < nrseg) {
            size_t o2 = (k + 2) * seg, l2 = rn - o2 < seg ? rn - o2 : seg;
            SO_MPI_TRY(MPI_Irecv(tmp + (k & 1) * tseg, (int)l2, MPI_FLOAT, src, tag, comm, &rreq[k & 1]));
        }
    }
    if (nsend)
        rc = so_coll_wait(w, nsend, sreq);
out:
    /* After an error requests may still be active; the contract (comm.h) is
     * that the caller then aborts the job, so freeing tmp is safe enough. */
    free(tmp);
    return rc;
}

/* ---- fold-in / fold-out ------------------------------------------------------------ */

void so_fold_init(so_fold *f, int p, int rank)
{
    int p2 = 1;
    while (p2 * 2 <= p)
        p2 *= 2;
    f->p = p;
    f->rank = rank;
    f->p2 = p2;
    f->rem = p - p2;
    if (rank < 2 * f->rem)
        f->newrank = rank % 2 ? rank / 2 : -1;
    else
        f->newrank = rank - f->rem;
}

int so_fold_in(so_fold *f, const float *send, float *recv, size_t count, so_reduce_op op,
               const float **cur, MPI_Comm comm, so_waiter *w)
{
    *cur = send;
    if (f->rank >= 2 * f->rem)
        return 0;
    if (f->newrank < 0) /* even: hand the vector to rank+1 and wait for the result */
        return so_sendrecv(send, count, f->rank + 1, NULL, 0, MPI_PROC_NULL, SO_TAG_FOLD, comm, w);
    *cur = recv; /* odd: recv = send op partner's vector */
    return so_xchg_reduce(NULL, 0, MPI_PROC_NULL, recv, send, count, f->rank - 1, op, SO_TAG_FOLD,
                          comm, w);
}

int so_fold_out(so_fold *f, float *recv, size_t count, MPI_Comm comm, so_waiter *w)
{
    if (f->rank >= 2 * f->rem)
        return 0;
    if (f->newrank < 0)
        return so_sendrecv(NULL, 0, MPI_PROC_NULL, recv, count, f->rank + 1, SO_TAG_FOLD, comm, w);
    return so_sendrecv(recv, count, f->rank - 1, NULL, 0, MPI_PROC_NULL, SO_TAG_FOLD, comm, w);
}
