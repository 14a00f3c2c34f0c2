/* What a method costs on this CPU (so_compress_calibrate): the real
 * compressor run over the real buckets on a loopback group of one process
 * that stands in for R ranks. An allreduce hands back what was sent (the
 * sum is the link's work, priced by the cost model, not here); an
 * allgather hands back R copies of this rank's message, so decoding does
 * the work of R messages as it would on R ranks. Continuations run at the
 * wait, as a real group runs them on its communication thread: so the
 * compress time is the training thread's part alone (PowerSGD's P = M Q),
 * and the decompress time the rest (its Q = M^T P, P Q^T, the residual).
 * What comes back is then C(g), so the pass also measures how much of the
 * gradient the message loses, and from it the method's steps to a target. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/compress.h"
#include "scaleout/err.h"

/* The loopback's handle: an operation done at submission (prev NULL), or
 * a continuation fn(arg) of prev, run when the handle is waited for. */
struct so_handle {
    int status;
    so_handle *prev;
    so_then_fn fn;
    void *arg;
};

typedef struct {
    so_group g;
} loop_group;

static int loop_handle(int status, so_handle **out)
{
    if (!(*out = malloc(sizeof **out)))
        return so_err(SO_ENOMEM, "out of memory calibrating a compressor");
    **out = (so_handle){.status = status};
    return 0;
}

static int loop_iallreduce(so_group *g, const void *send, void *recv, size_t count, so_dtype dt, so_reduce_op op,
                           const so_group_opts *o, so_handle **out)
{
    (void)g, (void)op, (void)o;
    if (send != recv)
        memmove(recv, send, count * so_dtype_size(dt));
    return loop_handle(0, out);
}

/* counts NULL: even blocks of count / size, every one this rank's. */
static int loop_iallgather(so_group *g, const void *send, void *recv, size_t count, const size_t *counts,
                           so_dtype dt, const so_group_opts *o, so_handle **out)
{
    (void)counts, (void)o;
    size_t blk = count / (size_t)g->size * so_dtype_size(dt);
    for (int r = 0; r < g->size; r++)
        if ((const char *)recv + (size_t)r * blk != send)
            memmove((char *)recv + (size_t)r * blk, send, blk);
    return loop_handle(0, out);
}

/* Runs what h waits on first, then h's continuation and the operation it submitted. */
static int loop_wait(so_group *g, so_handle *h)
{
    int st = h->prev ? loop_wait(g, h->prev) : h->status;
    if (h->fn) {
        so_handle *follow = NULL;
        st = h->fn(h->arg, st, &follow);
        if (follow) /* its operation ran at submission: its status is the continuation's result */
            st = st ? st : loop_wait(g, follow);
    }
    free(h);
    return st;
}

static int loop_then(so_group *g, so_handle *h, so_then_fn fn, void *arg, so_handle **next)
{
    (void)g;
    int rc = loop_handle(0, next);
    if (rc)
        return rc;
    (*next)->prev = h;
    (*next)->fn = fn;
    (*next)->arg = arg;
    return 0;
}

static const so_group_ops loop_ops = {.iallreduce = loop_iallreduce, .iallgather = loop_iallgather,
                                      .wait = loop_wait, .then = loop_then};

/* One pass over every bucket of a copy of g. */
static int pass(so_compressor *c, so_group *lg, float *work, const float *g, size_t n, const size_t *bounds, int nb,
                long step)
{
    memcpy(work, g, n * sizeof *work);
    int rc = 0;
    for (int b = 0; !rc && b < nb; b++)
        rc = so_compressor_submit(c, lg, work, bounds[b], bounds[b + 1], b, step);
    int w = so_compressor_wait(c, lg, NULL);
    return rc ? rc : w;
}

/* ||g - c|| / ||g|| in double (0 for a zero g). */
static double rel_error(const float *g, const float *c, size_t n)
{
    double e = 0, x = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)g[i] - c[i];
        e += d * d;
        x += (double)g[i] * g[i];
    }
    return x > 0 ? sqrt(e / x) : 0;
}

int so_compress_calibrate(const so_compressor_config *cf, const float *g, const size_t *bounds, int nbuckets,
                          int ranks, so_compressor_stats *out, double *rel_err)
{
    memset(out, 0, sizeof *out);
    if (ranks < 1 || nbuckets < 1 || bounds[0] != 0 || bounds[nbuckets] != cf->n)
        return so_err(SO_EINVAL, "so_compress_calibrate: %d buckets over %zu values, %d ranks", nbuckets, cf->n,
                      ranks);
    so_compressor *c = NULL;
    loop_group lg = {{&loop_ops, NULL, 0, ranks}};
    float *work = malloc(cf->n * sizeof *work + 4);
    int rc = work ? so_compressor_create(cf, &c) : so_err(SO_ENOMEM, "out of memory calibrating a compressor");
    long step = cf->spec.method == SO_COMPRESS_POWERSGD ? cf->spec.start_step : 0; /* compressed */
    if (!rc) /* the first pass allocates the buckets' buffers and warms the caches */
        rc = pass(c, &lg.g, work, g, cf->n, bounds, nbuckets, step);
    so_compressor_stats first;
    if (!rc) { /* the measured pass compresses g itself: no residual, but PowerSGD's Q warm from the first */
        float *residual = so_compressor_residual(c);
        if (residual)
            memset(residual, 0, cf->n * sizeof *residual);
        so_compressor_stats_get(c, &first);
        rc = pass(c, &lg.g, work, g, cf->n, bounds, nbuckets, step + 1);
    }
    if (!rc && rel_err)
        *rel_err = rel_error(g, work, cf->n);
    if (!rc) {
        so_compressor_stats_get(c, out);
        out->bytes_sent -= first.bytes_sent;
        out->bytes_dense -= first.bytes_dense;
        out->encode_seconds -= first.encode_seconds;
        out->decode_seconds -= first.decode_seconds;
        out->buckets -= first.buckets;
    }
    so_compressor_destroy(c);
    free(work);
    return rc;
}

/* Why these two (docs/COMPRESSION.md, "auto's rule"): an unbiased C with
 * E||C(g) - g||^2 = omega ||g||^2 adds omega to SGD's gradient variance, and
 * SGD's steps in the noise-bound regime grow with it, by 1 + omega. top-k,
 * sign and PowerSGD are orthogonal projections of g (onto k coordinates,
 * onto sign(g), onto span(P)): <g, C(g)> = ||C(g)||^2 = (1 - e^2) ||g||^2, so
 * a step descends 1 - e^2 as far as SGD's and needs 1 / (1 - e^2) as many.
 * Error feedback sends the rest later, so that is the pessimistic end. */
double so_compress_steps_factor(const so_compress_spec *s, double rel_err)
{
    double e2 = rel_err * rel_err;
    if (s->method == SO_COMPRESS_NONE || e2 <= 0)
        return 1;
    if (s->method == SO_COMPRESS_RANDK || s->method == SO_COMPRESS_QSGD)
        return 1 + e2;
    return e2 < 0.99 ? 1 / (1 - e2) : 100;
}
