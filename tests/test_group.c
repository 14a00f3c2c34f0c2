/* MPI tests of process groups (so_comm_split): the world is split so that
 * groups of every size from 1 to np-1 appear (and one with reversed keys and
 * an undefined colour), and on each group every algorithm of every collective
 * kind, the counter reductions, config check, gather, registered buffers, the
 * async engine, isend/irecv, per-group tuning and a split of the split are
 * checked against references computed locally. Values depend on the group rank and the group
 * id, so a collective that ran on the wrong communicator gives wrong numbers.
 * Run as `mpiexec -n NP test_group NP`. Check-and-continue (mpi_check.h). */
#include "scaleout/comm.h"
#include "scaleout/comm_async.h"
#include "scaleout/err.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_check.h"

#define MAXN 65537 /* floats: above hier's one-barrier size (16 Ki floats), so its chunked path runs */
#define P2P_CHUNK 4096 /* SCALEOUT_P2P_CHUNK for this test: the ring's message is 3 chunks */
#define P2P_BYTES (2 * P2P_CHUNK + 123)
#define MAXP 64

static const char *op_names[] = {"sum", "avg", "max", "min"};
static float g_send[MAXN], g_recv[MAXN];

/* What this rank knows about its group without asking it: the world ranks in
 * group-rank order, its id (colour) and, to check the inherited nodes, the
 * parent's node of every member. */
typedef struct {
    int gid, gr, gs;
    int world[MAXP];    /* group rank -> world rank */
    int node_of[MAXP];  /* group rank -> node id in the parent (world) */
    const char *name;   /* for messages */
} group_ref;

/* Group rank r's element i: small integers, so any summation order is exact. */
static float val(const group_ref *g, int r, size_t i, so_reduce_op op)
{
    if (op == SO_REDUCE_MAX || op == SO_REDUCE_MIN)
        return (float)((int)((r * 7 + i * 3 + (size_t)g->gid) % 11) - 5);
    return (float)((r + 1 + 2 * g->gid) * (int)(i % 13 + 1));
}

static float ref(const group_ref *g, size_t i, so_reduce_op op)
{
    float acc = val(g, 0, i, op);
    for (int r = 1; r < g->gs; r++) {
        float v = val(g, r, i, op);
        acc = op == SO_REDUCE_MAX ? (v > acc ? v : acc) : op == SO_REDUCE_MIN ? (v < acc ? v : acc) : acc + v;
    }
    return op == SO_REDUCE_AVG ? acc * (1.0f / (float)g->gs) : acc;
}

/* Wrong elements of recv[0..n) against the reference; *first the first one. */
static size_t count_bad(const group_ref *g, const float *recv, size_t off, size_t n, so_reduce_op op)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += recv[i] != ref(g, off + i, op);
    return bad;
}

/* ---- collectives ---------------------------------------------------------------- */

static void check_allreduce(so_comm *c, const group_ref *g, int algo, const char *layout)
{
    static const size_t counts[] = {0, 1, 1023, MAXN};
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++)
        for (int op = SO_REDUCE_SUM; op <= SO_REDUCE_MIN; op++)
            for (int inplace = 0; inplace < 2; inplace++) {
                size_t n = counts[k];
                if (n == MAXN && (op == SO_REDUCE_MIN || inplace))
                    continue; /* the big count: enough to reach every chunked path */
                for (size_t i = 0; i < n; i++)
                    g_send[i] = g_recv[i] = val(g, g->gr, i, (so_reduce_op)op);
                int rc = so_comm_coll(c, SO_COLL_ALLREDUCE, algo, inplace ? g_recv : g_send, g_recv, n,
                                      (so_reduce_op)op, 0);
                size_t bad = count_bad(g, g_recv, 0, n, (so_reduce_op)op);
                CHECK(rc == 0 && bad == 0, "%s %s: allreduce %s %s n %zu %s: rc %d (%s), %zu wrong", g->name,
                      layout, so_allreduce_algo_name(algo), op_names[op], n, inplace ? "in place" : "",
                      rc, rc ? so_errmsg() : "", bad);
            }
}

static void check_reduce_scatter(so_comm *c, const group_ref *g, int algo)
{
    static const size_t counts[] = {7, 1023};
    for (size_t k = 0; k < 2; k++)
        for (int op = SO_REDUCE_SUM; op <= SO_REDUCE_MIN; op++) {
            size_t n = counts[k], off, len;
            so_comm_block(n, g->gs, g->gr, &off, &len);
            for (size_t i = 0; i < n; i++)
                g_send[i] = val(g, g->gr, i, (so_reduce_op)op);
            int rc = so_comm_reduce_scatter(c, (so_rs_algo)algo, g_send, g_recv, n, (so_reduce_op)op);
            size_t bad = count_bad(g, g_recv, off, len, (so_reduce_op)op);
            CHECK(rc == 0 && bad == 0, "%s: reduce-scatter %s %s n %zu: rc %d, %zu wrong", g->name,
                  so_coll_algo_name(SO_COLL_REDUCE_SCATTER, algo), op_names[op], n, rc, bad);
        }
}

static void check_allgather(so_comm *c, const group_ref *g, int algo)
{
    size_t n = 1023, off, len, bad = 0;
    so_comm_block(n, g->gs, g->gr, &off, &len);
    for (size_t i = 0; i < len; i++)
        g_send[i] = (float)(g->gr * 10000 + g->gid * 1000) + (float)(off + i) / 1024.0f;
    for (size_t i = 0; i < n; i++)
        g_recv[i] = -1.0f;
    int rc = so_comm_allgather(c, (so_ag_algo)algo, g_send, g_recv, n);
    for (int r = 0; r < g->gs; r++) {
        size_t o, l;
        so_comm_block(n, g->gs, r, &o, &l);
        for (size_t i = 0; i < l; i++)
            bad += g_recv[o + i] != (float)(r * 10000 + g->gid * 1000) + (float)(o + i) / 1024.0f;
    }
    CHECK(rc == 0 && bad == 0, "%s: allgather %s: rc %d, %zu wrong", g->name,
          so_coll_algo_name(SO_COLL_ALLGATHER, algo), rc, bad);
}

/* Every bcast algorithm (and the typed bcast) from the last group rank. */
static void check_bcast(so_comm *c, const group_ref *g)
{
    size_t n = 1023;
    int root = g->gs - 1;
    for (int algo = -1; algo < SO_BCAST_COUNT; algo++) {
        for (size_t i = 0; i < n; i++)
            g_recv[i] = g->gr == root ? (float)(i % 977 + 3 * g->gid + g->gs) : -1.0f;
        int rc = algo < 0 ? so_comm_bcast(c, g_recv, n, root)
                          : so_comm_bcast_algo(c, (so_bcast_algo)algo, g_recv, n, root);
        size_t bad = 0;
        for (size_t i = 0; i < n; i++)
            bad += g_recv[i] != (float)(i % 977 + 3 * g->gid + g->gs);
        CHECK(rc == 0 && bad == 0, "%s: bcast %s: rc %d, %zu wrong", g->name,
              algo < 0 ? "typed" : so_coll_algo_name(SO_COLL_BCAST, algo), rc, bad);
    }
}

/* Counter reductions, barrier, configuration check and gather of bytes. */
static void check_small(so_comm *c, const group_ref *g)
{
    int64_t v[2] = {g->gr + 1, 100 * g->gid + g->gr};
    int rc = so_comm_allreduce_i64(c, v, 1, SO_REDUCE_SUM);
    rc = rc ? rc : so_comm_allreduce_i64(c, v + 1, 1, SO_REDUCE_MAX);
    CHECK(rc == 0 && v[0] == (int64_t)g->gs * (g->gs + 1) / 2 && v[1] == 100 * g->gid + g->gs - 1,
          "%s: allreduce_i64 rc %d gave %lld %lld", g->name, rc, (long long)v[0], (long long)v[1]);
    double d = g->gr + 0.5 * g->gid;
    rc = so_comm_allreduce_double(c, &d, 1, SO_REDUCE_AVG);
    CHECK(rc == 0 && d == ((g->gs - 1) / 2.0 + 0.5 * g->gid), "%s: double avg rc %d gave %g", g->name, rc, d);
    CHECK_RC(so_comm_barrier(c));
    char cfg[64], err[256] = "";
    snprintf(cfg, sizeof cfg, "group=%d\nsize=%d\n", g->gid, g->gs);
    CHECK(so_comm_check_config(c, cfg, err, sizeof err) == 0, "%s: config check: %s", g->name, err);
    if (g->gr == g->gs - 1 && g->gs > 1)
        snprintf(cfg, sizeof cfg, "group=%d\nsize=-1\n", g->gid);
    char want[128];
    snprintf(want, sizeof want, "size=%d on rank 0 but size=-1 on rank %d", g->gs, g->gs - 1);
    rc = so_comm_check_config(c, cfg, err, sizeof err);
    CHECK(g->gs == 1 ? rc == 0 : rc == SO_EINVAL && strstr(err, want), "%s: config mismatch: rc %d '%s'",
          g->name, rc, err);
    char mine[32];
    int len = snprintf(mine, sizeof mine, "g%d r%d;", g->gid, g->gr);
    void *all = NULL;
    size_t sizes[MAXP];
    rc = so_comm_gather_bytes(c, mine, (size_t)len, 0, &all, sizes);
    if (g->gr == 0) {
        char want_all[MAXP * 16] = "";
        for (int r = 0; r < g->gs; r++)
            snprintf(want_all + strlen(want_all), sizeof want_all - strlen(want_all), "g%d r%d;", g->gid, r);
        CHECK(rc == 0 && all && memcmp(all, want_all, strlen(want_all)) == 0, "%s: gather rc %d", g->name, rc);
    } else {
        CHECK(rc == 0, "%s: gather rc %d", g->name, rc);
    }
    free(all);
}

/* Registered buffers on the group: hier reduces in them, zero-copy when every
 * node of the group has the same size > 1 (counted by so_comm_hier_path_counts). */
static void check_registered(so_comm *c, const group_ref *g)
{
    float *a = NULL, *b = NULL;
    /* Group 0 allocates one more: node peers that meet again in a later group
     * come with different allocation counts and must still agree on ids. */
    int rc = g->gid == 0 ? so_comm_buf_alloc(c, 4096, (void **)&a) : 0;
    so_comm_buf_free(c, a);
    rc = rc ? rc : so_comm_buf_alloc(c, MAXN * sizeof *a, (void **)&a);
    rc = rc ? rc : so_comm_buf_alloc(c, MAXN * sizeof *b, (void **)&b);
    CHECK(rc == 0, "%s: buf_alloc: %s", g->name, so_errmsg());
    if (rc)
        so_comm_abort(c, 1, so_errmsg());
    so_comm_node nd;
    so_comm_node_info(c, &nd);
    int64_t q[2] = {nd.node_size, -nd.node_size};
    CHECK_RC(so_comm_allreduce_i64(c, q, 2, SO_REDUCE_MAX));
    int want_zc = nd.node_size > 1 && q[0] == -q[1];
    for (size_t i = 0; i < MAXN; i++)
        a[i] = val(g, g->gr, i, SO_REDUCE_SUM);
    uint64_t z0, c0, z1, c1;
    so_comm_hier_path_counts(&z0, &c0);
    rc = so_comm_coll(c, SO_COLL_ALLREDUCE, SO_ALLREDUCE_HIER, a, b, MAXN, SO_REDUCE_SUM, 0);
    so_comm_hier_path_counts(&z1, &c1);
    size_t bad = count_bad(g, b, 0, MAXN, SO_REDUCE_SUM);
    CHECK(rc == 0 && bad == 0 && (z1 - z0 == 1) == want_zc,
          "%s: registered hier: rc %d, %zu wrong, zero copy %d (want %d)", g->name, rc, bad, (int)(z1 - z0), want_zc);
    so_comm_buf_free(c, b);
    so_comm_buf_free(c, a);
}

/* The async engine on the group: two buckets, with ring in group 0 and auto
 * elsewhere (one engine per group: engine threads are slow to oversubscribe). */
static void check_async(so_comm *c, const group_ref *g)
{
    static const so_allreduce_algo algos[] = {SO_ALLREDUCE_RING, SO_ALLREDUCE_AUTO};
    for (int k = g->gid == 0 ? 0 : 1; k < (g->gid == 0 ? 1 : 2); k++) {
        so_async *a = NULL;
        int rc = so_async_create(c, algos[k], &a);
        CHECK(rc == 0, "%s: async create: %s", g->name, so_errmsg());
        if (rc)
            continue;
        size_t n1 = 1000, n2 = 3001;
        for (size_t i = 0; i < n1 + n2; i++)
            g_recv[i] = val(g, g->gr, i, SO_REDUCE_SUM);
        rc = so_async_submit(a, g_recv, n1, SO_REDUCE_SUM, 0);
        rc = rc ? rc : so_async_submit(a, g_recv + n1, n2, SO_REDUCE_SUM, 1);
        rc = rc ? rc : so_async_wait_all(a, 0, NULL);
        size_t bad = count_bad(g, g_recv, 0, n1 + n2, SO_REDUCE_SUM);
        CHECK(rc == 0 && bad == 0, "%s: async %s: rc %d, %zu wrong", g->name, so_allreduce_algo_name(algos[k]),
              rc, bad);
        so_async_destroy(a);
    }
}

/* ---- point-to-point -------------------------------------------------------------- */

/* A ring within the group: a 3-chunk message and a small one with another tag,
 * received in the opposite order; the first request is polled with test. */
static void check_p2p(so_comm *c, const group_ref *g)
{
    static unsigned char out[P2P_BYTES], in[P2P_BYTES];
    int next = (g->gr + 1) % g->gs, prev = (g->gr + g->gs - 1) % g->gs;
    int64_t small_out = 1000 * g->gid + g->gr, small_in = -1;
    for (size_t i = 0; i < P2P_BYTES; i++) {
        out[i] = (unsigned char)(i * 7 + g->gr * 31 + g->gid);
        in[i] = 0;
    }
    so_comm_req *r[4];
    int rc = so_comm_irecv(c, &small_in, sizeof small_in, prev, 9, &r[0]);
    rc = rc ? rc : so_comm_irecv(c, in, P2P_BYTES, prev, 8, &r[1]);
    rc = rc ? rc : so_comm_isend(c, out, P2P_BYTES, next, 8, &r[2]);
    rc = rc ? rc : so_comm_isend(c, &small_out, sizeof small_out, next, 9, &r[3]);
    CHECK(rc == 0, "%s: p2p post: %s", g->name, so_errmsg());
    if (rc)
        so_comm_abort(c, 1, so_errmsg());
    int done = 0;
    for (int polls = 0; !rc && !done; polls++)
        rc = so_comm_req_test(c, r[0], &done);
    for (int k = 1; k < 4 && !rc; k++)
        rc = so_comm_req_wait(c, r[k]);
    size_t bad = 0;
    for (size_t i = 0; i < P2P_BYTES; i++)
        bad += in[i] != (unsigned char)(i * 7 + prev * 31 + g->gid);
    CHECK(rc == 0 && bad == 0 && small_in == 1000 * g->gid + prev, "%s: p2p ring: rc %d, %zu bytes wrong, small %lld",
          g->name, rc, bad, (long long)small_in);
    CHECK(so_comm_isend(c, out, 1, g->gs, 0, &r[0]) == SO_EINVAL && so_comm_irecv(c, in, 1, 0, -1, &r[0]) == SO_EINVAL,
          "%s: p2p peer / tag out of range accepted", g->name);
}

/* ---- topology, subgroups and tuning ------------------------------------------------ */

/* Node of every member under the parent's nodes (node_of): my node's size,
 * whether I lead it (lowest group rank) and the group's node count. */
static void expected_nodes(const group_ref *g, int *size, int *leader, int *nodes)
{
    *size = 0, *leader = 1, *nodes = 0;
    for (int r = 0; r < g->gs; r++) {
        int first = 1;
        for (int s = 0; s < r; s++)
            first &= g->node_of[s] != g->node_of[r];
        *nodes += first;
        if (g->node_of[r] == g->node_of[g->gr]) {
            (*size)++;
            if (r < g->gr)
                *leader = 0;
        }
    }
}

static void check_subgroups(so_comm *c, const group_ref *g)
{
    int size, leader, nodes;
    expected_nodes(g, &size, &leader, &nodes);
    so_comm_node nd;
    so_comm_node_info(c, &nd);
    so_comm *ng = so_comm_node_group(c), *lg = so_comm_leaders_group(c);
    CHECK(nd.node_size == size && nd.num_nodes == nodes && (nd.node_rank == 0) == leader,
          "%s: node size %d of %d nodes (node rank %d), want %d of %d", g->name, nd.node_size, nd.num_nodes,
          nd.node_rank, size, nodes);
    CHECK(ng && so_comm_size(ng) == size && so_comm_node_group(ng) == ng, "%s: node group size %d, want %d",
          g->name, ng ? so_comm_size(ng) : -1, size);
    CHECK(leader ? lg && so_comm_size(lg) == nodes && so_comm_rank(lg) == nd.node_id : !lg,
          "%s: leaders group %p size %d (leader %d), want %d", g->name, (void *)lg, lg ? so_comm_size(lg) : -1, leader,
          nodes);
    int64_t v = g->gr; /* the node's group ranks, summed on the node group */
    int64_t want = 0;
    for (int r = 0; r < g->gs; r++)
        want += g->node_of[r] == g->node_of[g->gr] ? r : 0;
    CHECK(ng && so_comm_allreduce_i64(ng, &v, 1, SO_REDUCE_SUM) == 0 && v == want, "%s: node group sum %lld, want %lld",
          g->name, (long long)v, (long long)want);
    if (lg) {
        v = 1;
        CHECK(so_comm_allreduce_i64(lg, &v, 1, SO_REDUCE_SUM) == 0 && v == nodes, "%s: leaders sum %lld", g->name,
              (long long)v);
    }
}

/* Groups 0 and 1 get tables that force different algorithms; auto must follow
 * the group's own table, and NULL goes back to the built-in model. */
static void check_tuning(so_comm *c, const group_ref *g)
{
    so_comm_node nd;
    so_comm_node_info(c, &nd);
    so_allreduce_algo want = g->gid == 0 ? SO_ALLREDUCE_TREE : SO_ALLREDUCE_RING;
    so_comm_tuning t;
    so_comm_tuning_default(&t);
    t.p = g->gs;
    t.ranks_per_node = nd.ranks_per_node;
    t.nrules = 1;
    t.rule[0].max_bytes = UINT64_MAX;
    t.rule[0].algo = want;
    CHECK_RC(so_comm_set_tuning(c, &t));
    CHECK(so_comm_auto_algo(c, 4096) == want && so_comm_get_tuning(c)->rule[0].algo == want,
          "%s: auto picks %s, want %s", g->name, so_allreduce_algo_name(so_comm_auto_algo(c, 4096)),
          so_allreduce_algo_name(want));
    check_allreduce(c, g, SO_ALLREDUCE_AUTO, "tuned");
    CHECK_RC(so_comm_set_tuning(c, NULL));
    CHECK(so_comm_auto_algo(c, 4096) == so_comm_select(4096, g->gs, nd.ranks_per_node, NULL),
          "%s: set_tuning(NULL) did not restore the built-in table", g->name);
}

/* A group split again (replica groups within a pipeline stage): odd and even
 * group ranks; the grandchild keeps the world's nodes through its parent. */
static void check_nested(so_comm *c, const group_ref *g)
{
    so_comm *sub = NULL;
    int rc = so_comm_split(c, g->gr % 2, 0, &sub);
    char name[96];
    snprintf(name, sizeof name, "%s, %s ranks", g->name, g->gr % 2 ? "odd" : "even");
    group_ref h = {.gid = 10 + 2 * g->gid + g->gr % 2, .name = name};
    for (int r = g->gr % 2; r < g->gs; r += 2) {
        if (r == g->gr)
            h.gr = h.gs;
        h.node_of[h.gs] = g->node_of[r];
        h.world[h.gs++] = g->world[r];
    }
    CHECK(rc == 0 && sub && so_comm_rank(sub) == h.gr && so_comm_size(sub) == h.gs, "%s: split rc %d", name, rc);
    if (!sub)
        so_comm_abort(c, 1, "nested split failed");
    check_subgroups(sub, &h);
    check_allreduce(sub, &h, SO_ALLREDUCE_HIER, "nested");
    CHECK_RC(so_comm_finalize(sub));
}

/* ---- the suite on one group --------------------------------------------------------- */

static void run_suite(so_comm *c, const group_ref *g)
{
    CHECK(so_comm_rank(c) == g->gr && so_comm_size(c) == g->gs, "%s: rank %d of %d, want %d of %d", g->name,
          so_comm_rank(c), so_comm_size(c), g->gr, g->gs);
    check_subgroups(c, g);
    for (int a = 0; a < SO_ALLREDUCE_COUNT; a++)
        check_allreduce(c, g, a, "parent's nodes");
    for (int a = 0; a < SO_RS_COUNT; a++)
        check_reduce_scatter(c, g, a);
    for (int a = 0; a < SO_AG_COUNT; a++)
        check_allgather(c, g, a);
    check_bcast(c, g);
    check_small(c, g);
    check_registered(c, g);
    check_async(c, g);
    check_p2p(c, g);
    check_tuning(c, g);
    check_nested(c, g);
    /* The group's own emulation: nodes of 3 consecutive group ranks. */
    CHECK_RC(so_comm_set_ranks_per_node(c, 3));
    group_ref own = *g;
    for (int r = 0; r < g->gs; r++)
        own.node_of[r] = r / 3;
    check_subgroups(c, &own);
    check_allreduce(c, &own, SO_ALLREDUCE_HIER, "3 per node");
    check_registered(c, &own);
}

/* Splits the world by (color, key) of every world rank, fills this rank's
 * reference from the same rule, runs the suite on its group and frees it. */
static void split_and_run(so_comm *world, const int *color, const int *key, int wrpn, const char *name)
{
    so_comm *c = NULL;
    int rc = so_comm_split(world, color[g_rank], key[g_rank], &c);
    CHECK(rc == 0 && (c != NULL) == (color[g_rank] >= 0), "%s: split rc %d (%s)", name, rc, so_errmsg());
    if (!c)
        return;
    group_ref g = {.gid = color[g_rank], .gs = 0, .name = name};
    for (int k = -MAXP; k <= MAXP; k++) /* members by key, then world rank */
        for (int w = 0; w < g_size; w++)
            if (color[w] == g.gid && key[w] == k) {
                if (w == g_rank)
                    g.gr = g.gs;
                g.node_of[g.gs] = w / wrpn;
                g.world[g.gs++] = w;
            }
    char full[64];
    snprintf(full, sizeof full, "%s group %d (size %d)", name, g.gid, g.gs);
    g.name = full;
    run_suite(c, &g);
    CHECK_RC(so_comm_finalize(c));
}

int main(int argc, char **argv)
{
    char chunk[16];
    snprintf(chunk, sizeof chunk, "%d", P2P_CHUNK);
    setenv("SCALEOUT_P2P_CHUNK", chunk, 1);
    so_comm *world;
    if (so_comm_init(&argc, &argv, &world)) {
        fprintf(stderr, "so_comm_init: %s\n", so_errmsg());
        return 1;
    }
    g_rank = so_comm_rank(world);
    g_size = so_comm_size(world);
    if ((argc > 1 && atoi(argv[1]) != g_size) || g_size > MAXP)
        so_comm_abort(world, 1, "size mismatch (wrong mpiexec for this MPI?) or more than 64 ranks");
    so_comm_set_timeouts(world, 20, 60);
    /* Emulated nodes of 2 world ranks: every group must keep them. */
    const int wrpn = 2;
    if (so_comm_set_ranks_per_node(world, wrpn))
        so_comm_abort(world, 1, so_errmsg());
    int color[MAXP], key[MAXP];
    for (int s = 1; 2 * s <= g_size; s++) { /* sizes {s, np - s}: 1 .. np-1 at np 8 */
        for (int w = 0; w < g_size; w++) {
            color[w] = w < s ? 0 : 1;
            key[w] = 0;
        }
        char name[32];
        snprintf(name, sizeof name, "split %d|%d", s, g_size - s);
        split_and_run(world, color, key, wrpn, name);
    }
    for (int w = 0; w < g_size; w++) { /* reversed ranks; the last rank sits out */
        color[w] = w == g_size - 1 && g_size > 1 ? SO_COMM_UNDEFINED : 0;
        key[w] = g_size - w;
    }
    split_and_run(world, color, key, wrpn, "reversed");

    int64_t tot[2] = {g_pass, g_fail};
    if (so_comm_allreduce_i64(world, tot, 2, SO_REDUCE_SUM))
        so_comm_abort(world, 1, so_errmsg());
    if (g_rank == 0)
        printf("test_group np=%d: %lld checks passed, %lld failed\n", g_size, (long long)tot[0], (long long)tot[1]);
    so_comm_finalize(world);
    return tot[1] ? 1 : 0;
}
