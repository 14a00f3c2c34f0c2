/* Rounds of gradient buckets (comm_async.h's earlier interface), built on the
 * vocabulary: each bucket is one so_comm_iallreduce, wait_all waits for the
 * round's handles in order and keeps their records for the profiler. No
 * thread of its own: the communication thread (engine.c) runs them. */
#include "engine.h"

#include "scaleout/err.h"
#include "scaleout/timer.h"

#include <stdlib.h>

#define FIRST_CAPACITY 64

struct so_async {
    so_comm *comm;
    so_allreduce_algo algo;
    so_async_stat *stats;  /* the round's requests in submission order */
    so_handle **handles;   /* [n] outstanding ones (NULL once waited for) */
    size_t cap, n;
    int round_closed;      /* wait_all completed everything: the next submit starts a new round */
    so_async_totals totals;
};

int so_async_create(so_comm *c, so_allreduce_algo algo, so_async **out)
{
    *out = NULL;
    if ((unsigned)algo >= SO_ALLREDUCE_COUNT)
        return so_err(SO_EINVAL, "invalid allreduce algorithm %d", (int)algo);
    int rc = so_comm_check_idle(c);
    if (rc)
        return rc;
    so_async *a = calloc(1, sizeof *a);
    if (!a)
        return so_err(SO_ENOMEM, "gradient rounds: out of memory");
    a->comm = c;
    a->algo = algo;
    if (algo == SO_ALLREDUCE_AUTO) /* the communication thread only reads c's table */
        so_comm_get_tuning(c);
    *out = a;
    return 0;
}

void so_async_destroy(so_async *a)
{
    if (!a)
        return;
    so_async_wait_all(a, 0, NULL);
    free(a->stats);
    free(a->handles);
    free(a);
}

/* Room for one more request of the round. */
static int grow(so_async *a)
{
    if (a->n < a->cap)
        return 0;
    size_t cap = a->cap ? 2 * a->cap : FIRST_CAPACITY;
    so_async_stat *s = realloc(a->stats, cap * sizeof *s);
    if (s)
        a->stats = s;
    so_handle **h = s ? realloc(a->handles, cap * sizeof *h) : NULL;
    if (!h)
        return so_err(SO_ENOMEM, "gradient rounds: cannot grow to %zu requests", cap);
    a->handles = h;
    a->cap = cap;
    return 0;
}

static int submit(so_async *a, void *buf, size_t count, so_dtype dt, so_reduce_op op, int algo, int tag)
{
    if (a->round_closed) {
        a->n = 0;
        a->round_closed = 0;
    }
    int rc = grow(a);
    if (rc)
        return rc;
    so_coll_opts o = SO_COLL_OPTS_INIT;
    o.algo = algo;
    o.tag = tag;
    size_t i = a->n;
    a->stats[i] = (so_async_stat){0, tag, op, count, count * so_dtype_size(dt), so_now(), 0, 0, NULL};
    if ((rc = so_comm_iallreduce(a->comm, buf, buf, count, dt, op, &o, &a->handles[i])))
        return rc;
    a->n++;
    return 0;
}

int so_async_submit(so_async *a, float *buf, size_t count, so_reduce_op op, int tag)
{
    if ((unsigned)op > SO_REDUCE_MIN)
        return so_err(SO_EINVAL, "async submit: invalid reduce op %d", (int)op);
    return submit(a, buf, count, SO_DTYPE_F32, op, (int)a->algo, tag);
}

int so_async_submit_sum_double(so_async *a, double *buf, size_t count, int tag)
{
    return submit(a, buf, count, SO_DTYPE_F64, SO_REDUCE_SUM, SO_ALLREDUCE_MPI, tag);
}

/* Request i is done (its handle waited for): its record and the totals. */
static void note_done(so_async *a, size_t i, const so_op_stat *st)
{
    a->handles[i] = NULL;
    so_async_stat *s = &a->stats[i];
    s->seq = st->seq;
    s->t_started = st->t_started;
    s->t_finished = st->t_finished;
    s->algo = st->algo;
    a->totals.requests++;
    a->totals.bytes += s->bytes;
    a->totals.comm_s += st->t_finished - st->t_started;
}

int so_async_wait_all(so_async *a, double timeout_s, double *waited_s)
{
    double t0 = so_now();
    int rc = 0;
    for (size_t i = 0; i < a->n; i++) {
        if (!a->handles[i])
            continue;
        so_op_stat st;
        double left = timeout_s > 0 ? timeout_s - (so_now() - t0) : 0;
        int r = so_handle_wait_until(a->handles[i], timeout_s > 0 && left <= 0 ? 1e-9 : left, &st);
        if (r == SO_ECOMM && timeout_s > 0 && so_now() - t0 >= timeout_s) { /* still the caller's */
            a->totals.waited_s += so_now() - t0;
            return so_err(SO_ECOMM, "async wait_all timed out after %.1f s with requests outstanding", timeout_s);
        }
        note_done(a, i, &st);
        rc = rc ? rc : r;
    }
    double waited = so_now() - t0;
    a->round_closed = 1;
    a->totals.waited_s += waited;
    if (waited_s)
        *waited_s = waited;
    return rc;
}

int so_async_wait_one(so_async *a, size_t i, double *waited_s)
{
    if (a->round_closed || i >= a->n)
        return so_err(SO_EINVAL, "async wait_one: request %zu is not in the round (%zu submitted)", i,
                      a->round_closed ? (size_t)0 : a->n);
    double t0 = so_now();
    int rc = 0;
    if (a->handles[i]) {
        so_op_stat st;
        rc = so_handle_wait_until(a->handles[i], 0, &st);
        note_done(a, i, &st);
    }
    double waited = so_now() - t0;
    a->totals.waited_s += waited;
    if (waited_s)
        *waited_s = waited;
    return rc;
}

void so_async_stats(const so_async *a, const so_async_stat **stats, size_t *n)
{
    *stats = a->stats;
    *n = a->n;
}

void so_async_get_totals(so_async *a, so_async_totals *out) { *out = a->totals; }
