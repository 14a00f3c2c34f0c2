/* The exchanges every hand-written collective is built from, written once
 * over the transport interface (tp.h): a segmented send-receive, the
 * segmented exchange-and-reduce that overlaps the reduction of one segment
 * with the arrival of the next, and the fold-in / fold-out steps that let
 * recursive doubling and Rabenseifner run on any process count. */
#include "coll_internal.h"

#include "scaleout/err.h"

#include <stdlib.h>
#include <string.h>

#define XCHG_MAX_SEGS 64 /* send requests in flight per exchange */

/* Segment length (elements) for a message of n elements: the configured
 * segment, grown so no message needs more than XCHG_MAX_SEGS of them, and
 * never above one transport message. A rule of n alone: both sides agree. */
static size_t seg_for(const so_coll_ctx *x, size_t n)
{
    size_t seg = so_coll_seg_bytes() / x->esz, cap = SO_TP_MAX_BYTES / x->esz;
    if (seg == 0)
        seg = 1;
    if (n / seg + 1 > XCHG_MAX_SEGS)
        seg = n / (XCHG_MAX_SEGS - 1) + 1;
    return seg > cap ? cap : seg;
}

/* Posts buf[0..n) to / from peer in segments of seg elements; *nreq grows. */
static int post_segments(so_coll_ctx *x, void *buf, size_t n, size_t seg, int peer, int tag, int send,
                         so_tp_req *req, int *nreq)
{
    for (size_t off = 0; off < n; off += seg) {
        size_t k = n - off < seg ? n - off : seg;
        int rc = x->tp->ops->post(x->tp, so_el(x, buf, off), k * x->esz, peer, tag, send, &req[(*nreq)++]);
        if (rc)
            return rc;
    }
    return 0;
}

int so_sendrecv(so_coll_ctx *x, const void *sbuf, size_t sn, int dst, void *rbuf, size_t rn, int src, int tag)
{
    so_tp_req req[2 * XCHG_MAX_SEGS];
    int nreq = 0, rc;
    if (dst == SO_TP_NONE)
        sn = 0;
    if (src == SO_TP_NONE)
        rn = 0;
    /* Same segmentation as so_xchg_reduce, so either may talk to the other. */
    if ((rc = post_segments(x, rbuf, rn, seg_for(x, rn), src, tag, 0, req, &nreq)) ||
        (rc = post_segments(x, (void *)sbuf, sn, seg_for(x, sn), dst, tag, 1, req, &nreq)))
        return rc; /* requests may be posted: the caller aborts the job (comm.h's contract) */
    return nreq ? so_tp_wait(x->tp, x->w, req, nreq) : 0;
}

/* Receive segment k of rn elements (length seg) into its half of tmp. */
static int post_recv_seg(so_coll_ctx *x, char *tmp, size_t tseg, size_t rn, size_t seg, size_t k, int src,
                         int tag, so_tp_req *r)
{
    size_t off = k * seg, len = rn - off < seg ? rn - off : seg;
    return x->tp->ops->post(x->tp, tmp + (k & 1) * tseg * x->esz, len * x->esz, src, tag, 0, r);
}

int so_xchg_reduce(so_coll_ctx *x, const void *sbuf, size_t sn, int dst, void *out, const void *a, size_t rn,
                   int src, so_reduce_op op, int tag)
{
    so_tp_req sreq[XCHG_MAX_SEGS], rreq[2];
    int rc = 0, nsend = 0, nr = 0;
    if (dst == SO_TP_NONE)
        sn = 0;
    if (src == SO_TP_NONE)
        rn = 0;
    /* Each message is cut by a rule of its own length only, so the sender's
     * segments match the receiver's exactly (same block on both sides). */
    size_t seg = seg_for(x, rn), nrseg = rn ? (rn + seg - 1) / seg : 0, tseg = rn < seg ? rn : seg;
    char *tmp = rn ? malloc(2 * tseg * x->esz) : NULL;
    if (rn && !tmp)
        return so_err(SO_ENOMEM, "exchange: out of memory for %zu elements", 2 * tseg);
    /* Receives first (two in flight, double-buffered), then every send segment. */
    for (size_t k = 0; k < 2 && k < nrseg && !rc; k++)
        rc = post_recv_seg(x, tmp, tseg, rn, seg, k, src, tag, &rreq[nr++]);
    if (!rc)
        rc = post_segments(x, (void *)sbuf, sn, seg_for(x, sn), dst, tag, 1, sreq, &nsend);
    for (size_t k = 0; k < nrseg && !rc; k++) {
        size_t off = k * seg, len = rn - off < seg ? rn - off : seg;
        if ((rc = so_tp_wait(x->tp, x->w, &rreq[k & 1], 1)))
            break;
        so_red(x->dt, op, so_el(x, out, off), so_el(x, a, off), tmp + (k & 1) * tseg * x->esz, len);
        if (k + 2 < nrseg)
            rc = post_recv_seg(x, tmp, tseg, rn, seg, k + 2, src, tag, &rreq[k & 1]);
    }
    if (!rc && nsend)
        rc = so_tp_wait(x->tp, x->w, sreq, nsend);
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

int so_fold_in(so_coll_ctx *x, so_fold *f, const void *send, void *recv, size_t count, so_reduce_op op,
               const void **cur)
{
    *cur = send;
    if (f->rank >= 2 * f->rem)
        return 0;
    if (f->newrank < 0) /* even: hand the vector to rank+1 and wait for the result */
        return so_sendrecv(x, send, count, f->rank + 1, NULL, 0, SO_TP_NONE, SO_TAG_FOLD);
    *cur = recv; /* odd: recv = send op partner's vector */
    return so_xchg_reduce(x, NULL, 0, SO_TP_NONE, recv, send, count, f->rank - 1, op, SO_TAG_FOLD);
}

int so_fold_out(so_coll_ctx *x, so_fold *f, void *recv, size_t count)
{
    if (f->rank >= 2 * f->rem)
        return 0;
    if (f->newrank < 0)
        return so_sendrecv(x, NULL, 0, SO_TP_NONE, recv, count, f->rank + 1, SO_TAG_FOLD);
    return so_sendrecv(x, recv, count, f->rank - 1, NULL, 0, SO_TP_NONE, SO_TAG_FOLD);
}
