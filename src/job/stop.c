/* The stop request's agreement (stop.h). A signal may reach the ranks at
 * different steps (Slurm signals each task on its own), so the flag is
 * agreed by a non-blocking SUM posted at one step end and completed two step
 * ends later (plus the strategy's lead), as the checkpoint progress
 * agreement does: by then the gradient traffic has progressed it, so no
 * rank waits for another, and every rank acts on the same sum at the same
 * step. */
#include "stop.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "scaleout/err.h"

/* Steps between posting the agreement and completing it, at least: by
 * then the gradient traffic has progressed it. A strategy whose ranks run
 * ahead of each other (so_strategy.lead) gets its lead on top, so the
 * agreement holds no rank back sooner than the strategy does. */
#define STOP_LAG 2

/* Lock-free, so safe from a signal handler too. */
static atomic_int stop_seen;

void stop_request(void) { atomic_store(&stop_seen, 1); }

struct stop_state {
    long stopped_at;
    int lag;          /* steps from posting the agreement to completing it */
#ifdef SCALEOUT_HAVE_MPI
    so_comm_p2p *p2p; /* its own communicator: never matched against the checkpoint's requests */
    so_comm_isum *req;
    long req_step;
    int64_t sum;
#endif
};

int stop_step_end(stop_state *st, const so_train_state *s, int *stop)
{
    *stop = 0;
#ifdef SCALEOUT_HAVE_MPI
    if (st->p2p) {
        int rc = 0;
        if (st->req && s->step >= st->req_step + st->lag) {
            rc = so_comm_isum_wait(st->p2p, st->req);
            st->req = NULL;
            *stop = st->sum > 0;
        }
        if (!rc && !st->req && !*stop) {
            st->sum = atomic_load(&stop_seen);
            st->req_step = s->step;
            rc = so_comm_isum_start(st->p2p, &st->sum, 1, "step-end agreement (a stop on a signal)", &st->req);
        }
        return rc;
    }
#endif
    (void)st, (void)s;
    *stop = atomic_load(&stop_seen);
    return 0;
}

int stop_open(dist_handle *dh, int lead, stop_state **out)
{
    stop_state *st = calloc(1, sizeof *st);
    *out = st;
    if (!st)
        return so_err(SO_ENOMEM, "out of memory");
    st->stopped_at = -1;
    st->lag = STOP_LAG + (lead > 0 ? lead : 0);
#ifdef SCALEOUT_HAVE_MPI
    so_comm *c = dist_comm(dh);
    if (c && so_comm_size(c) > 1)
        return so_comm_p2p_create(c, &st->p2p);
#endif
    (void)dh;
    return 0;
}

void stop_mark(stop_state *st, long step) { st->stopped_at = step; }

long stop_step(const stop_state *st) { return st ? st->stopped_at : -1; }

/* After training on every rank: the agreement still in flight was posted at
 * the same step everywhere, so completing it here matches on all ranks. */
void stop_close(stop_state *st)
{
    if (!st)
        return;
#ifdef SCALEOUT_HAVE_MPI
    if (st->req)
        so_comm_isum_wait(st->p2p, st->req);
    so_comm_p2p_destroy(st->p2p);
#endif
    free(st);
}
