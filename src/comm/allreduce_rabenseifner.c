/* Allreduce algorithm "rabenseifner": reduce-scatter by recursive halving,
 * then allgather by recursive doubling (Rabenseifner 2004; MPICH
 * allreduce_intra_reduce_scatter_allgather). Bandwidth of ring with only
 * 2 lg p latency terms: the mid- and large-message algorithm for many ranks.
 *
 * Accepts: any p (fold-in/fold-out for non-powers of two), any count (p'
 *          uneven blocks, so_blk; blocks may be empty), in place or out of
 *          place, SUM / MAX / MIN.
 * Cost:    2 lg p' alpha + 2 (p'-1)/p' n beta + (p'-1)/p' n gamma, plus
 *          2 alpha + 2 n beta + n gamma when p is not a power of two.
 * Phases, p' = 4 (blocks 0-3; new rank nr keeps the half of its current
 *          range whose index bit `mask` equals nr's):
 *            nr 0        nr 1        nr 2        nr 3
 *   RS m=2   keep 0-1    keep 0-1    keep 2-3    keep 2-3   (partner nr^2)
 *   RS m=1   keep 0      keep 1      keep 2      keep 3     (partner nr^1)
 *   AG m=1   get 1       get 0       get 3       get 2
 *   AG m=2   get 2-3     get 2-3     get 0-1     get 0-1
 * The halving steps reduce as they receive (so_xchg_reduce, segmented); the
 * first step reads send directly, so out of place needs no copy. */
#include "coll_internal.h"

#include <string.h>

/* Element range of blocks [b0, b1) of count over p2 blocks. */
static void range(size_t count, int p2, int b0, int b1, size_t *off, size_t *len)
{
    size_t o0, l0, o1, l1;
    so_blk(count, p2, b0, &o0, &l0);
    so_blk(count, p2, b1 - 1, &o1, &l1);
    *off = o0;
    *len = o1 + l1 - o0;
}

/* Reduce-scatter by recursive halving: afterwards recv holds this new rank's
 * block, fully reduced; *cur follows where the kept half lives. */
static int halving(so_coll_ctx *x, const so_fold *f, const void **cur, void *recv, size_t count, so_reduce_op op)
{
    int nr = f->newrank, lo = 0, hi = f->p2; /* block range this rank is responsible for */
    for (int mask = f->p2 / 2; mask >= 1; mask >>= 1) {
        int peer = so_fold_real(f, nr ^ mask), mid = lo + (hi - lo) / 2;
        int klo = nr & mask ? mid : lo, khi = nr & mask ? hi : mid;
        int glo = nr & mask ? lo : mid, ghi = nr & mask ? mid : hi;
        size_t koff, klen, goff, glen;
        range(count, f->p2, klo, khi, &koff, &klen);
        range(count, f->p2, glo, ghi, &goff, &glen);
        int rc = so_xchg_reduce(x, so_el(x, *cur, goff), glen, peer, so_el(x, recv, koff), so_el(x, *cur, koff),
                                klen, peer, op, SO_TAG_RAB);
        if (rc)
            return rc;
        lo = klo;
        hi = khi;
        *cur = recv; /* the kept half now lives in recv */
    }
    return 0;
}

/* Allgather by recursive doubling: the ranges double back up. */
static int doubling(so_coll_ctx *x, const so_fold *f, void *recv, size_t count)
{
    int nr = f->newrank;
    for (int mask = 1; mask < f->p2; mask <<= 1) {
        int peer = so_fold_real(f, nr ^ mask);
        int mlo = nr & ~(mask - 1), plo = (nr ^ mask) & ~(mask - 1);
        size_t moff, mlen, poff, plen;
        range(count, f->p2, mlo, mlo + mask, &moff, &mlen);
        range(count, f->p2, plo, plo + mask, &poff, &plen);
        int rc = so_sendrecv(x, so_el(x, recv, moff), mlen, peer, so_el(x, recv, poff), plen, peer, SO_TAG_RAB);
        if (rc)
            return rc;
    }
    return 0;
}

int so_allreduce_rabenseifner(so_coll_ctx *x, const void *send, void *recv, size_t count, so_reduce_op op)
{
    so_fold f;
    so_fold_init(&f, x->size, x->rank);
    const void *cur;
    int rc = so_fold_in(x, &f, send, recv, count, op, &cur);
    if (!rc && f.newrank >= 0) {
        rc = halving(x, &f, &cur, recv, count, op);
        if (!rc && cur != recv) /* p' == 1 and out of place */
            memcpy(recv, cur, count * x->esz);
        if (!rc)
            rc = doubling(x, &f, recv, count);
    }
    return rc ? rc : so_fold_out(x, &f, recv, count);
}
