/* Allreduce algorithm "rd": recursive doubling (Thakur, Rabenseifner & Gropp
 * 2005; MPICH allreduce_intra_recursive_doubling). Latency-optimal: lg p
 * steps, each exchanging the whole vector with the partner at distance
 * 2^k, so it suits small messages and loses to ring/Rabenseifner on big ones.
 *
 * Accepts: any p (fold-in/fold-out for non-powers of two, so_fold_*), any
 *          count, in place or out of place, SUM / MAX / MIN.
 * Cost:    lg p' (alpha + n beta + n gamma), plus 2 alpha + 2 n beta + n gamma
 *          when p is not a power of two (p' = largest power of two <= p).
 * Steps, p = 4 (new ranks; [ab] = sum of a's and b's vectors):
 *            nr 0      nr 1      nr 2      nr 3
 *   mask 1   <-> 1     <-> 0     <-> 3     <-> 2     -> [01] [01] [23] [23]
 *   mask 2   <-> 2     <-> 3     <-> 0     <-> 1     -> [0123] everywhere
 * Each step receives the partner's whole vector into a scratch buffer (the
 * send is still reading ours) and reduces it as recv = ours op theirs. The
 * two partners combine the same two values (a+b and b+a are the same float),
 * so every rank ends with identical bits. */
#include "coll_internal.h"

#include "scaleout/err.h"

#include <stdlib.h>
#include <string.h>

int so_allreduce_rd(so_coll_ctx *x, const void *send, void *recv, size_t count, so_reduce_op op)
{
    int rc = 0;
    char *tmp = NULL;
    so_fold f;
    so_fold_init(&f, x->size, x->rank);
    const void *cur;
    if ((rc = so_fold_in(x, &f, send, recv, count, op, &cur)))
        goto out;
    if (f.newrank >= 0 && f.p2 > 1) {
        tmp = malloc(count * x->esz);
        if (!tmp) {
            rc = so_err(SO_ENOMEM, "allreduce rd: out of memory for %zu elements", count);
            goto out;
        }
        for (int mask = 1; mask < f.p2; mask <<= 1) {
            int peer = so_fold_real(&f, f.newrank ^ mask);
            if ((rc = so_sendrecv(x, cur, count, peer, tmp, count, peer, SO_TAG_RD)))
                goto out;
            so_red(x->dt, op, recv, cur, tmp, count);
            cur = recv;
        }
    }
    if (f.newrank >= 0 && cur != recv)
        memcpy(recv, cur, count * x->esz); /* p2 == 1 and out of place */
    rc = so_fold_out(x, &f, recv, count);
out:
    free(tmp);
    return rc;
}
