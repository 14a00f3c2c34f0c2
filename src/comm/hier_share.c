/* What hier's collectives share on a node: the counters of their paths
 * (so_comm_hier_path_counts), and the zero-copy agreement of reduce-scatter
 * and allgather -- every node rank publishes where its send buffer lives in
 * registered memory, one barrier, and all of them read the same answer, so
 * they all read the peers' buffers directly or all take the ring. */
#include "coll_internal.h"

/* hier's calls above the small-message size, by path (all kinds). */
static _Atomic uint64_t n_zero_copy, n_copied;

void so_comm_hier_path_counts(uint64_t *zero_copy, uint64_t *copied)
{
    *zero_copy = atomic_load_explicit(&n_zero_copy, memory_order_relaxed);
    *copied = atomic_load_explicit(&n_copied, memory_order_relaxed);
}

void so_hier_count(int zero_copy)
{
    atomic_fetch_add_explicit(zero_copy ? &n_zero_copy : &n_copied, 1, memory_order_relaxed);
}

int so_hier_share(so_shm *s, so_waiter *w, const void *send, size_t bytes, int *ok)
{
    size_t off = 0;
    so_regbuf *g = bytes ? so_regbuf_find(send, bytes, &off) : NULL;
    if (g && !so_regbuf_matches(g, s))
        g = NULL;
    *s->pub[s->r] = (so_zc_pub){g ? so_regbuf_id(g) : 0, off, 0, 0, bytes};
    int rc = so_shm_barrier(s, w);
    if (rc)
        return rc;
    /* A rank with nothing to share (an empty block) agrees to anything. The
     * same tuples on every rank: the same answer. */
    uint64_t id = 0;
    for (int j = 0; j < s->q && !id; j++)
        id = s->pub[j]->bytes ? s->pub[j]->send_id : 0;
    g = id ? so_regbuf_by_id(id) : NULL;
    *ok = g && so_regbuf_matches(g, s);
    for (int j = 0; *ok && j < s->q; j++) {
        const so_zc_pub *p = s->pub[j];
        *ok = !p->bytes || (p->send_id == id && p->send_off + p->bytes <= so_regbuf_len(g, j));
    }
    for (int j = 0; *ok && j < s->q; j++)
        s->zc_in[j] = so_regbuf_base(g, j) + s->pub[j]->send_off;
    return 0;
}
