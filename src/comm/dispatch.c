/* The dispatcher: one collective call (dispatch.h) checked, resolved to an
 * algorithm (the group's choice, `auto` from its tuning table) and a
 * transport, run, and finished -- AVG's 1/p once at the end, so each
 * algorithm implements only SUM, MAX and MIN, and a wire type's conversions
 * around the whole call, so each algorithm sees one element type. */
#include "dispatch.h"

#include "scaleout/err.h"

#include <stdlib.h>
#include <string.h>

static so_allreduce_fn *const ar_fns[SO_ALLREDUCE_AUTO] = {
    [SO_ALLREDUCE_MPI] = so_allreduce_mpi,
    [SO_ALLREDUCE_RING] = so_allreduce_ring,
    [SO_ALLREDUCE_RD] = so_allreduce_rd,
    [SO_ALLREDUCE_RABENSEIFNER] = so_allreduce_rabenseifner,
    [SO_ALLREDUCE_TREE] = so_allreduce_tree,
    [SO_ALLREDUCE_HIER] = so_allreduce_hier,
}; /* SO_ALLREDUCE_AUTO is resolved per call from the group's table (so_comm_auto_algo) */
static so_rs_fn *const rs_fns[SO_RS_COUNT] = {[SO_RS_MPI] = so_reduce_scatter_mpi,
                                              [SO_RS_RING] = so_reduce_scatter_ring,
                                              [SO_RS_HIER] = so_reduce_scatter_hier};
static so_ag_fn *const ag_fns[SO_AG_COUNT] = {[SO_AG_MPI] = so_allgather_mpi, [SO_AG_RING] = so_allgather_ring,
                                              [SO_AG_HIER] = so_allgather_hier};
static so_bcast_fn *const bc_fns[SO_BCAST_COUNT] = {[SO_BCAST_MPI] = so_bcast_mpi,
                                                    [SO_BCAST_BINOMIAL] = so_bcast_binomial,
                                                    [SO_BCAST_PIPELINE] = so_bcast_pipeline};

void so_scratch_free(so_scratch *s)
{
    free(s->p);
    *s = (so_scratch){NULL, 0};
}

/* At least `bytes` of s (grown, contents dropped); NULL when out of memory. */
static void *scratch(so_scratch *s, size_t bytes)
{
    if (s->bytes < bytes) {
        free(s->p);
        s->p = malloc(bytes ? bytes : 1);
        s->bytes = s->p ? bytes : 0;
    }
    return s->p;
}

/* ---- checks --------------------------------------------------------------------------- */

static int check_types(const so_coll_call *k)
{
    int reduces = k->kind == SO_COLL_ALLREDUCE || k->kind == SO_COLL_REDUCE_SCATTER;
    int rc = so_red_check(k->dt, reduces ? k->op : SO_REDUCE_SUM);
    if (rc)
        return rc;
    if (k->wire != k->dt && !(k->dt == SO_DTYPE_F32 && (k->wire == SO_DTYPE_BF16 || k->wire == SO_DTYPE_F16)))
        return so_err(SO_EINVAL, "%s: %s buffers cannot go on the wire as %s (f32 as bf16 or f16 only)",
                      so_coll_kind_name(k->kind), so_dtype_name(k->dt),
                      so_dtype_name(k->wire) ? so_dtype_name(k->wire) : "?");
    int nalgo = so_coll_algo_count(k->kind);
    if (k->algo != SO_ALGO_DEFAULT && (k->algo < 0 || k->algo >= nalgo))
        return so_err(SO_EINVAL, "%s: invalid algorithm %d", so_coll_kind_name(k->kind), k->algo);
    if ((unsigned)k->transport >= SO_TRANSPORT_COUNT)
        return so_err(SO_EINVAL, "%s: invalid transport %d", so_coll_kind_name(k->kind), (int)k->transport);
    return 0;
}

/* This rank's block [*off, *off + *len) of the call. */
static void my_block(const so_comm *c, const so_coll_call *k, size_t *off, size_t *len)
{
    if (!k->counts) {
        so_blk(k->count, c->size, c->rank, off, len);
        return;
    }
    *off = 0;
    for (int i = 0; i < c->rank; i++)
        *off += k->counts[i];
    *len = k->counts[c->rank];
}

int so_coll_check(const so_comm *c, const so_coll_call *k)
{
    if ((unsigned)k->kind >= SO_COLL_KINDS)
        return so_err(SO_EINVAL, "invalid collective kind %d", (int)k->kind);
    int rc = check_types(k);
    if (rc)
        return rc;
    const char *what = so_coll_kind_name(k->kind);
    size_t off, len;
    switch (k->kind) {
    case SO_COLL_ALLREDUCE:
        if (k->count && (!k->send || !k->recv))
            return so_err(SO_EINVAL, "%s of %zu elements with a NULL buffer", what, k->count);
        break;
    case SO_COLL_BCAST:
        if (k->root < 0 || k->root >= c->size)
            return so_err(SO_EINVAL, "bcast root %d out of range (size %d)", k->root, c->size);
        if (k->count && !k->recv)
            return so_err(SO_EINVAL, "bcast of %zu elements with a NULL buffer", k->count);
        break;
    default:
        my_block(c, k, &off, &len);
        if (k->count && (!k->send || !k->recv) && len)
            return so_err(SO_EINVAL, "%s of %zu elements with a NULL buffer", what, k->count);
        if (k->kind == SO_COLL_ALLGATHER && k->count && !k->recv)
            return so_err(SO_EINVAL, "allgather of %zu elements with a NULL recv buffer", k->count);
    }
    return 0;
}

/* ---- running ----------------------------------------------------------------------------- */

/* The concrete algorithm of the call. */
static int resolve_algo(so_comm *c, const so_coll_call *k, size_t bytes)
{
    int a = k->algo;
    if (k->kind == SO_COLL_ALLREDUCE) {
        if (a == SO_ALGO_DEFAULT)
            a = c->algo;
        return a == SO_ALLREDUCE_AUTO ? (int)so_comm_auto_algo(c, bytes) : a;
    }
    if (a != SO_ALGO_DEFAULT)
        return a;
    /* hier: zero copy on one node from registered buffers, else the same
     * node-rank order through the window (reduce-scatter) or the ring
     * (allgather, which adds nothing); the ring across nodes. */
    return k->kind == SO_COLL_BCAST ? SO_BCAST_BINOMIAL : k->kind == SO_COLL_REDUCE_SCATTER ? SO_RS_HIER : SO_AG_HIER;
}

/* Block offsets of the call: displ[0..size]. */
static void fill_displ(const so_comm *c, const so_coll_call *k, size_t *displ)
{
    size_t off, len;
    displ[0] = 0;
    for (int i = 0; i < c->size; i++) {
        if (k->counts)
            len = k->counts[i];
        else
            so_blk(k->count, c->size, i, &off, &len);
        displ[i + 1] = displ[i] + len;
    }
}

static int run_allreduce(so_coll_ctx *x, int algo, const void *send, void *recv, size_t count, so_reduce_op op)
{
    int rc, scaled = 0;
    if (op == SO_REDUCE_AVG && algo == SO_ALLREDUCE_HIER) /* zero copy averages before its stores */
        rc = so_allreduce_hier_avg(x, send, recv, count, x->size, &scaled);
    else
        rc = ar_fns[algo](x, send, recv, count, op == SO_REDUCE_AVG ? SO_REDUCE_SUM : op);
    if (!rc && op == SO_REDUCE_AVG && !scaled)
        so_red_avg(x->dt, recv, count, x->size);
    return rc;
}

/* The call on buffers of x->dt (the wire type), displ for the blocks. */
static int run_typed(so_coll_ctx *x, const so_coll_call *k, int algo, const void *send, void *recv,
                     const size_t *displ)
{
    int r = x->rank, rc;
    so_reduce_op op = k->op == SO_REDUCE_AVG ? SO_REDUCE_SUM : k->op;
    switch (k->kind) {
    case SO_COLL_ALLREDUCE: return run_allreduce(x, algo, send, recv, k->count, k->op);
    case SO_COLL_REDUCE_SCATTER:
        rc = rs_fns[algo](x, send, recv, displ, op);
        if (!rc && k->op == SO_REDUCE_AVG)
            so_red_avg(x->dt, recv, displ[r + 1] - displ[r], x->size);
        return rc;
    case SO_COLL_ALLGATHER: return ag_fns[algo](x, send, recv, displ);
    default: return bc_fns[algo](x, recv, k->count, k->root);
    }
}

static void widen(so_dtype wire, float *dst, const void *src, size_t n)
{
    if (wire == SO_DTYPE_BF16)
        so_bf16_to_f32(dst, src, n);
    else
        so_f16_to_f32(dst, src, n);
}

static void narrow(so_dtype wire, void *dst, const float *src, size_t n)
{
    if (wire == SO_DTYPE_BF16)
        so_f32_to_bf16(dst, src, n);
    else
        so_f32_to_f16(dst, src, n);
}

/* F32 buffers on a 16-bit wire: the data goes through a scratch copy of the
 * wire type, in place there; every rank widens the same 16-bit result, so
 * all get the same bits (the root of a bcast and a block's owner too). */
static int run_wire(so_coll_ctx *x, const so_coll_call *k, int algo, const size_t *displ, so_scratch *s)
{
    size_t n = k->count, off = displ[x->rank], len = displ[x->rank + 1] - off;
    char *t = scratch(s, n * x->esz);
    if (!t && n)
        return so_err(SO_ENOMEM, "%s: out of memory converting %zu elements", so_coll_kind_name(k->kind), n);
    const float *send = k->send;
    float *recv = k->recv;
    switch (k->kind) {
    case SO_COLL_REDUCE_SCATTER: narrow(x->dt, t, send, n); break;
    case SO_COLL_ALLGATHER: narrow(x->dt, so_el(x, t, off), send, len); break;
    case SO_COLL_BCAST: if (x->rank == k->root) narrow(x->dt, t, recv, n); break;
    default: narrow(x->dt, t, send, n);
    }
    /* In place in t: reduce-scatter writes, allgather reads, this rank's block at its offset. */
    char *mine = so_el(x, t, off);
    int rc = run_typed(x, k, algo, k->kind == SO_COLL_ALLGATHER ? mine : t,
                       k->kind == SO_COLL_REDUCE_SCATTER ? mine : t, displ);
    if (!rc && k->kind == SO_COLL_REDUCE_SCATTER)
        widen(x->dt, recv, so_el(x, t, off), len);
    else if (!rc)
        widen(x->dt, recv, t, n);
    return rc;
}

/* The transport of one of our algorithms' calls: the call's, else the
 * group's. `auto` is MPI, except that a reduce-scatter or an allgather of a
 * group spanning hosts takes scaleout's tcp from so_tcp_wanted's size on, as
 * hier's step across hosts does (Open MPI's TCP keeps a link about half
 * busy, tp_tcp.c; the sharded strategies' collectives ran there at 1 Gbit/s).
 * Every rank decides alike (the same count, group and job); a tcp set-up
 * that did not connect everyone (agreed, warned) leaves the group on MPI. */
static int resolve_transport(so_comm *c, MPI_Comm comm, const so_coll_call *k, so_waiter *w, so_tp **tp)
{
    so_transport tk = k->transport == SO_TRANSPORT_AUTO ? c->transport : k->transport;
    int across = tk == SO_TRANSPORT_AUTO && c->topo.num_nodes > 1 &&
                 (k->kind == SO_COLL_REDUCE_SCATTER || k->kind == SO_COLL_ALLGATHER) &&
                 so_tcp_wanted(k->count * so_dtype_size(k->wire));
    if (!across)
        return so_tp_get(comm, tk, w, tp);
    return so_tp_tcp_or_mpi(comm, w, "this group's reduce-scatters and allgathers", tp);
}

int so_coll_run(so_comm *c, MPI_Comm comm, const so_coll_call *k, so_waiter *w, so_scratch *s,
                const char **algo_ran, const char **tp_ran)
{
    int rc = so_coll_check(c, k);
    if (rc)
        return rc;
    so_transport tk = k->transport == SO_TRANSPORT_AUTO ? c->transport : k->transport;
    int algo = resolve_algo(c, k, k->count * so_dtype_size(k->dt));
    if (algo_ran)
        *algo_ran = so_coll_algo_name(k->kind, algo);
    if (tp_ran)
        *tp_ran = so_transport_name(tk == SO_TRANSPORT_AUTO ? SO_TRANSPORT_MPI : tk);
    if (k->count == 0)
        return 0;
    /* The MPI library's own algorithms (index 0 of every kind) and hier reach
     * no transport of ours: do not make one (its set-up is collective). */
    so_tp *tp = NULL;
    int ours = algo != 0 && !(k->kind == SO_COLL_ALLREDUCE && algo == SO_ALLREDUCE_HIER);
    if (ours && (rc = resolve_transport(c, comm, k, w, &tp)))
        return rc;
    if (tp && tp_ran)
        *tp_ran = so_transport_name(tp->kind);
    so_coll_ctx x = {tp, comm, w, k->wire, so_dtype_size(k->wire), c->rank, c->size, SO_TRANSPORT_AUTO};
    size_t small[65], *displ = c->size < 65 ? small : malloc(((size_t)c->size + 1) * sizeof *displ);
    if (!displ)
        return so_err(SO_ENOMEM, "%s: out of memory", so_coll_kind_name(k->kind));
    fill_displ(c, k, displ);
    so_scratch mine = {NULL, 0};
    if (k->wire != k->dt)
        rc = run_wire(&x, k, algo, displ, s ? s : &mine);
    else
        rc = run_typed(&x, k, algo, k->send, k->recv, displ);
    so_scratch_free(&mine);
    if (displ != small)
        free(displ);
    return rc;
}
