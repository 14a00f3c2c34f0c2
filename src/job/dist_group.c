/* The engine's view of a process group (scaleout/group.h) over the comm
 * module's (so_comm and the vocabulary of comm_async.h): every call maps one
 * to one, the handles are the comm module's own. Subgroups are wrapped on
 * first use and owned by the group's wrapper. MPI builds only (dist.h). */
#include "dist.h"

#ifdef SCALEOUT_HAVE_MPI
#include <stdlib.h>

#include "scaleout/comm_async.h"
#include "scaleout/err.h"

typedef struct {
    so_group g;                /* first: a so_group * is a dist_group * */
    so_comm *c;
    so_group *sub[3];          /* NODE, CROSS, LEADERS wrappers (or the group itself) */
    int made[3];
} dist_group;

static so_comm *comm_of(so_group *g) { return ((dist_group *)g)->c; }

/* so_coll_opts from the engine's options: the group's algorithm and transport. */
static so_coll_opts opts(const so_group_opts *o)
{
    so_coll_opts co = SO_COLL_OPTS_INIT;
    if (o) {
        co.wire = o->wire;
        co.tag = o->tag;
    }
    return co;
}

static int g_iallreduce(so_group *g, const void *send, void *recv, size_t count, so_dtype dt, so_reduce_op op,
                        const so_group_opts *o, so_handle **out)
{
    so_coll_opts co = opts(o);
    return so_comm_iallreduce(comm_of(g), send, recv, count, dt, op, &co, out);
}

static int g_ireduce_scatter(so_group *g, const void *send, void *recv, size_t count, const size_t *counts,
                             so_dtype dt, so_reduce_op op, const so_group_opts *o, so_handle **out)
{
    so_coll_opts co = opts(o);
    return counts ? so_comm_ireduce_scatterv(comm_of(g), send, recv, counts, dt, op, &co, out)
                  : so_comm_ireduce_scatter(comm_of(g), send, recv, count, dt, op, &co, out);
}

static int g_iallgather(so_group *g, const void *send, void *recv, size_t count, const size_t *counts, so_dtype dt,
                        const so_group_opts *o, so_handle **out)
{
    so_coll_opts co = opts(o);
    return counts ? so_comm_iallgatherv(comm_of(g), send, recv, counts, dt, &co, out)
                  : so_comm_iallgather(comm_of(g), send, recv, count, dt, &co, out);
}

static int g_ibcast(so_group *g, void *buf, size_t count, so_dtype dt, int root, const so_group_opts *o,
                    so_handle **out)
{
    so_coll_opts co = opts(o);
    return so_comm_ibcast(comm_of(g), buf, count, dt, root, &co, out);
}

static int g_isend(so_group *g, const void *buf, size_t count, so_dtype dt, int peer, int tag, so_handle **out)
{
    return so_comm_isend_to(comm_of(g), buf, count, dt, peer, tag, out);
}

static int g_irecv(so_group *g, void *buf, size_t count, so_dtype dt, int peer, int tag, so_handle **out)
{
    return so_comm_irecv_from(comm_of(g), buf, count, dt, peer, tag, out);
}

static int g_probe(so_group *g, int peer, int tag, int *arrived)
{
    return so_comm_probe_from(comm_of(g), peer, tag, arrived);
}

static int g_test(so_group *g, so_handle *h, int *done) { (void)g; return so_handle_test(h, done); }
static int g_wait(so_group *g, so_handle *h) { (void)g; return so_handle_wait(h); }
static int g_then(so_group *g, so_handle *h, so_then_fn fn, void *arg, so_handle **next)
{
    (void)g;
    return so_handle_then(h, fn, arg, next);
}
static void g_release(so_group *g, so_handle *h) { (void)g; so_handle_release(h); }

static int g_sub(so_group *g, so_group_kind kind, so_group **out);

static const so_group_ops ops = {g_iallreduce, g_ireduce_scatter, g_iallgather, g_ibcast, g_isend,  g_irecv,
                                 g_test,       g_wait,            g_then,      g_release, g_sub,   g_probe};

int dist_group_new(so_comm *c, so_group **out)
{
    *out = NULL;
    dist_group *d = calloc(1, sizeof *d);
    if (!d)
        return so_err(SO_ENOMEM, "out of memory");
    d->g = (so_group){&ops, c, so_comm_rank(c), so_comm_size(c)};
    d->c = c;
    *out = &d->g;
    return 0;
}

void dist_group_free(so_group *g)
{
    if (!g)
        return;
    dist_group *d = (dist_group *)g;
    for (int k = 0; k < 3; k++)
        if (d->sub[k] != g)
            dist_group_free(d->sub[k]);
    free(d);
}

static int g_sub(so_group *g, so_group_kind kind, so_group **out)
{
    dist_group *d = (dist_group *)g;
    *out = NULL;
    if ((unsigned)kind > SO_GROUP_LEADERS)
        return so_err(SO_EINVAL, "invalid subgroup kind %d", (int)kind);
    if (d->made[kind]) {
        *out = d->sub[kind];
        return 0;
    }
    so_comm *s = NULL;
    int rc = 0;
    if (kind == SO_GROUP_NODE)
        s = so_comm_node_group(d->c);
    else if (kind == SO_GROUP_LEADERS)
        s = so_comm_leaders_group(d->c);
    else
        rc = so_comm_cross_group(d->c, &s);
    if (!rc && s)
        rc = s == d->c ? (d->sub[kind] = g, 0) : dist_group_new(s, &d->sub[kind]);
    if (rc)
        return rc;
    d->made[kind] = 1;
    *out = d->sub[kind];
    return 0;
}
#endif
