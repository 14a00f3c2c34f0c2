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

int so_allreduce_rd(const float *send, float *recv, size_t count, so_reduce_op op, MPI_Comm comm,
                    so_waiter *w)
{
    int rc = 0, p, r;
    float *tmp = NULL;
    SO_MPI_TRY(MPI_Comm_size(comm, &p));
    SO_MPI_TRY(MPI_Comm_rank(comm, &r));
    so_fold f;
    so_fold_init(&f, p, r);
    const float *cur;
    if ((rc = so_fold_in(&f, send, recv, count, op, &cur, comm, w)))
        goto out;
    if (f.newrank >= 0 && f.p2 > 1) {
        tmp = malloc(count * sizeof *tmp);
        if (!tmp) {
            rc = so_err(SO_ENOMEM, "allreduce rd: out of memory for %zu floats", count);
            goto out;
        }
        for (int mask = 1; mask < f.p2; mask <<= 1) {
            int peer = so_fold_real(&f, f.newrank ^ mask);
            if ((rc = so_sendrecv(cur, count, peer, tmp, count, peer, SO_TAG_RD, comm, w)))
                goto out;
            so_reduce_out(recv, cur, tmp, count, op);
            cur = recv;
        }
    }
    if (f.newrank >= 0 && cur != recv)
        memcpy(recv, cur, count * sizeof *recv); /* p2 == 1 and out of place */
    rc = so_fold_out(&f, recv, count, comm, w);
out:
    free(tmp);
    return rc;
}
