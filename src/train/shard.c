/* The sharded strategies' layout (shard.h): units of consecutive layers,
 * this rank's block of each, and memory mapped per unit. */
#include "shard.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "buckets.h"
#include "scaleout/err.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels say EINVAL and pages fault in on use */
#endif

int shard_units_parse(const char *text, shard_units *u)
{
    static const struct {
        const char *name;
        shard_unit_kind kind;
    } named[] = {{"auto", SHARD_UNIT_AUTO}, {"layer", SHARD_UNIT_LAYER}, {"block", SHARD_UNIT_BLOCK}};
    for (size_t i = 0; i < sizeof named / sizeof *named; i++)
        if (!strcmp(text, named[i].name)) {
            *u = (shard_units){.kind = named[i].kind};
            return 0;
        }
    char *end;
    double mb = strtod(text, &end);
    if (end == text || *end || !(mb > 0) || mb > 1e6)
        return so_err(SO_EINVAL, "--shard-unit: '%s' is not auto, layer, block or a size in MiB", text);
    *u = (shard_units){.kind = SHARD_UNIT_SIZE, .bytes = (size_t)(mb * 1048576.0)};
    return 0;
}

int shard_units_for(const so_strategy_config *c, int stage, shard_units *u)
{
    *u = (shard_units){SHARD_UNIT_BUCKETS, c->bucket_bytes, c->first_bucket_bytes, SHARD_CHUNK_BYTES};
    if (c->shard_unit) {
        int rc = shard_units_parse(c->shard_unit, u);
        if (!rc && u->kind == SHARD_UNIT_SIZE)
            u->chunk_bytes = u->bytes;
        return rc;
    }
    if (stage == 3 && !c->auto_buckets)
        u->kind = SHARD_UNIT_AUTO;
    return 0;
}

/* Whether the part of a module path from p to the next dot is a number
 * followed by more parts (a block's index: "0" of "layer1.0.conv1"). */
static int index_part(const char *p)
{
    const char *q = p;
    while (*q >= '0' && *q <= '9')
        q++;
    return q > p && *q == '.';
}

/* A block's name: the path up to its first index part ("layer1.0.conv1"
 * -> "layer1.0", "transformer.h.3.attn.c_attn" -> "transformer.h.3"), else
 * the first two parts of a path of three or more, else the whole name (a
 * stem layer, "transformer.ln_f", is a block of its own). */
static size_t block_key(const char *name)
{
    for (const char *p = name; p; p = strchr(p, '.') ? strchr(p, '.') + 1 : NULL)
        if (index_part(p))
            return (size_t)(strchr(p, '.') - name);
    const char *dot = strchr(name, '.');
    const char *second = dot ? strchr(dot + 1, '.') : NULL;
    return second ? (size_t)(second - name) : strlen(name);
}

static int same_block(const so_node *a, const so_node *b)
{
    size_t n = block_key(a->name);
    return n == block_key(b->name) && !strncmp(a->name, b->name, n);
}

/* The block that node i (with parameters) opens: its bytes, and whether it
 * holds a table another layer ties to. */
static size_t block_bytes(const so_graph *g, int i, int *tied)
{
    size_t n = 0;
    *tied = 0;
    for (int j = i; j < so_graph_size(g); j++) {
        const so_node *nd = so_graph_node(g, j);
        if (!nd->nparam)
            continue;
        if (!same_block(so_graph_node(g, i), nd))
            break;
        n += nd->nparam;
        *tied |= so_graph_tied_by(g, j) > 0;
    }
    return n * sizeof(float);
}

/* Whether a layer of the open unit (from flat offset open_lo to node prev)
 * holds a table another layer ties to. */
static int open_unit_tied(const so_graph *g, int prev, size_t open_lo)
{
    for (int j = prev; j > 0; j--) {
        const so_node *nd = so_graph_node(g, j);
        if (nd->nparam && nd->param_off < open_lo)
            break;
        if (nd->nparam && so_graph_tied_by(g, j) > 0)
            return 1;
    }
    return 0;
}

/* Whether node i (with parameters) starts a new unit after node prev, the
 * open unit starting at open_lo. auto opens a unit at a block that would
 * take the open one past SHARD_AUTO_BYTES, and around a tied table's block
 * (it has a parameter slot of its own). */
static int opens_unit(const so_graph *g, const shard_units *u, int prev, int i, size_t open_lo)
{
    const so_node *nd = so_graph_node(g, i);
    if (prev < 0)
        return 1;
    switch (u->kind) {
    case SHARD_UNIT_LAYER:
        return 1;
    case SHARD_UNIT_BLOCK:
        return !same_block(so_graph_node(g, prev), nd);
    case SHARD_UNIT_SIZE:
        return (nd->param_off - open_lo) * sizeof(float) >= u->bytes;
    case SHARD_UNIT_AUTO: {
        if (same_block(so_graph_node(g, prev), nd))
            return 0;
        int tied;
        size_t b = block_bytes(g, i, &tied);
        return tied || open_unit_tied(g, prev, open_lo) ||
               (nd->param_off - open_lo) * sizeof(float) + b > SHARD_AUTO_BYTES;
    }
    default:
        return 0;
    }
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* A chunked dense layer is units of its own, one per chunk of rows: its
 * start, its chunks' starts and its end join the buckets' boundaries. */
static void add_chunk_bounds(const so_graph *g, const shard_units *u, size_t *lo, int *n)
{
    for (int i = 1; i < so_graph_size(g); i++) {
        const so_node *nd = so_graph_node(g, i);
        int K = nd->nparam ? so_graph_dense_chunks(g, i, u->chunk_bytes) : 1;
        for (int k = 0; k < K && K > 1; k++) {
            int r0, r1;
            size_t hi;
            so_graph_chunk_rows(g, i, K, k, &r0, &r1, &lo[*n], &hi);
            (*n)++;
        }
        if (K > 1 && nd->param_off + nd->nparam < so_graph_nparams(g))
            lo[(*n)++] = nd->param_off + nd->nparam;
    }
    qsort(lo, (size_t)*n, sizeof *lo, cmp_size);
    int m = 0;
    for (int k = 0; k < *n; k++)
        if (!m || lo[k] != lo[m - 1])
            lo[m++] = lo[k];
    *n = m;
}

/* The unit boundaries in flat order: lo[0..n], n returned in *n. */
static int unit_bounds(const so_graph *g, const shard_units *u, size_t *lo, int *n)
{
    *n = 0;
    if (u->kind == SHARD_UNIT_BUCKETS) {
        so_bucket_plan p;
        int rc = so_bucket_plan_build(g, u->first_bytes, u->bytes, &p);
        if (rc)
            return rc;
        so_bucket_plan_lows(&p, lo);
        *n = p.n;
        so_bucket_plan_free(&p);
        add_chunk_bounds(g, u, lo, n);
    } else {
        int prev = -1, prev_chunked = 0;
        size_t open_lo = 0;
        for (int i = 1; i < so_graph_size(g); i++) {
            const so_node *nd = so_graph_node(g, i);
            if (!nd->nparam)
                continue;
            int K = so_graph_dense_chunks(g, i, u->chunk_bytes);
            if (K > 1 || prev_chunked || opens_unit(g, u, prev, i, open_lo))
                lo[(*n)++] = open_lo = nd->param_off;
            for (int k = 1; k < K; k++) { /* a unit per chunk of rows */
                int r0, r1;
                size_t hi;
                so_graph_chunk_rows(g, i, K, k, &r0, &r1, &lo[*n], &hi);
                open_lo = lo[(*n)++];
            }
            prev = i;
            prev_chunked = K > 1;
        }
    }
    lo[*n] = so_graph_nparams(g);
    return 0;
}

/* Which unit each node belongs to, and each unit's node range. */
static int map_nodes(const so_graph *g, shard_layout *l)
{
    int nodes = so_graph_size(g);
    l->unit_of = malloc((size_t)nodes * sizeof *l->unit_of);
    l->node_lo = malloc((size_t)l->nunits * sizeof *l->node_lo);
    l->node_hi = calloc((size_t)l->nunits, sizeof *l->node_hi);
    if (!l->unit_of || !l->node_lo || !l->node_hi)
        return so_err(SO_ENOMEM, "out of memory for the shard layout");
    int u = 0;
    for (int i = 0; i < nodes; i++) {
        const so_node *nd = so_graph_node(g, i);
        l->unit_of[i] = -1;
        if (i == 0 || !nd->nparam)
            continue;
        while (nd->param_off >= l->lo[u + 1])
            u++;
        l->unit_of[i] = u;
        for (int k = 0; k < l->chunks[i]; k++, u += k < l->chunks[i]) { /* a whole node: once */
            if (!l->node_hi[u])
                l->node_lo[u] = i;
            l->node_hi[u] = i + 1;
        }
        if (nd->param_off + nd->nparam > l->lo[u + 1])
            return so_err(SO_EINVAL, "node %s straddles shard units", nd->name);
    }
    return 0;
}

/* The unit whose table node i's weight is tied to, or -1. */
static int tied_unit(const so_graph *g, const shard_layout *l, int i)
{
    const so_node *nd = so_graph_node(g, i);
    return i > 0 && nd->op == SO_OP_LINEAR && nd->a.tie > 0 ? l->unit_of[nd->a.tie] : -1;
}

/* Node i reads unit u: its place in the read order (shard_layout.seq). */
static void read_unit(shard_layout *l, int i, int u)
{
    if (u < 0)
        return;
    if (!l->nseq || l->seq[l->nseq - 1] != u)
        l->seq[l->nseq++] = u;
    if (l->use_lo[i] < 0)
        l->use_lo[i] = l->nseq - 1;
    l->use_hi[i] = l->nseq - 1;
}

/* The read order: per node the tied table's unit first (the LM head reads
 * it before its own bias, if it has one), then its own. */
static int read_order(const so_graph *g, shard_layout *l)
{
    int nodes = so_graph_size(g);
    l->seq = malloc((2 * (size_t)nodes + (size_t)l->nunits + 1) * sizeof *l->seq);
    l->use_lo = malloc((size_t)nodes * sizeof *l->use_lo);
    l->use_hi = malloc((size_t)nodes * sizeof *l->use_hi);
    char *counted = calloc((size_t)l->nunits, 1);
    if (!l->seq || !l->use_lo || !l->use_hi || !counted) {
        free(counted);
        return so_err(SO_ENOMEM, "out of memory for the shard layout");
    }
    l->widest = 1;
    for (int i = 0; i < nodes; i++) {
        int tie = tied_unit(g, l, i);
        l->use_lo[i] = l->use_hi[i] = -1;
        read_unit(l, i, tie);
        for (int k = 0; l->unit_of[i] >= 0 && k < l->chunks[i]; k++)
            read_unit(l, i, l->unit_of[i] + k);
        int span = l->use_lo[i] < 0 || l->chunks[i] > 1 ? 1 : l->use_hi[i] - l->use_lo[i] + 1;
        l->widest = span > l->widest ? span : l->widest;
        if (tie >= 0 && tie != l->unit_of[i] && !counted[tie]) {
            counted[tie] = 1;
            l->tied += l->lo[tie + 1] - l->lo[tie];
        }
    }
    free(counted);
    return 0;
}

/* Block k of n over p, as so_comm_block cuts it. */
static void block(size_t n, int p, int k, size_t *off, size_t *len)
{
    size_t base = n / (size_t)p, extra = n % (size_t)p;
    *off = (size_t)k * base + ((size_t)k < extra ? (size_t)k : extra);
    *len = base + ((size_t)k < extra ? 1 : 0);
}

static int own_blocks(shard_layout *l)
{
    int U = l->nunits, S = l->shards;
    l->counts = malloc((size_t)U * (size_t)S * sizeof *l->counts);
    l->mine_off = malloc((size_t)U * sizeof *l->mine_off);
    l->mine_len = malloc((size_t)U * sizeof *l->mine_len);
    l->cbase = malloc((size_t)U * sizeof *l->cbase);
    if (!l->counts || !l->mine_off || !l->mine_len || !l->cbase)
        return so_err(SO_ENOMEM, "out of memory for the shard layout");
    l->nmine = l->max_unit = 0;
    for (int u = 0; u < U; u++) {
        size_t n = l->lo[u + 1] - l->lo[u], off;
        for (int k = 0; k < S; k++)
            block(n, S, k, &off, &l->counts[(size_t)u * S + k]);
        block(n, S, l->shard, &off, &l->mine_len[u]);
        l->mine_off[u] = l->lo[u] + off;
        l->cbase[u] = l->nmine;
        l->nmine += l->mine_len[u];
        l->max_unit = n > l->max_unit ? n : l->max_unit;
    }
    return 0;
}

int shard_layout_build(const so_graph *g, const shard_units *u, int shards, int shard, shard_layout *l)
{
    memset(l, 0, sizeof *l);
    l->shards = shards;
    l->shard = shard;
    size_t cap = (size_t)so_graph_size(g) + 1;
    l->chunks = malloc((size_t)so_graph_size(g) * sizeof *l->chunks);
    for (int i = 0; l->chunks && i < so_graph_size(g); i++)
        cap += (size_t)(l->chunks[i] = so_graph_dense_chunks(g, i, u->chunk_bytes)) - 1;
    l->lo = l->chunks ? malloc(cap * sizeof *l->lo) : NULL;
    if (!l->lo) {
        free(l->chunks);
        return so_err(SO_ENOMEM, "out of memory for the shard layout");
    }
    int rc = unit_bounds(g, u, l->lo, &l->nunits);
    if (!rc && l->nunits == 0)
        rc = so_err(SO_EINVAL, "a sharded strategy needs a model with parameters");
    if (!rc)
        rc = map_nodes(g, l);
    if (!rc)
        rc = own_blocks(l);
    if (!rc)
        rc = read_order(g, l);
    if (rc)
        shard_layout_free(l);
    return rc;
}

void shard_layout_free(shard_layout *l)
{
    free(l->lo);
    free(l->node_lo);
    free(l->node_hi);
    free(l->unit_of);
    free(l->chunks);
    free(l->counts);
    free(l->mine_off);
    free(l->mine_len);
    free(l->cbase);
    free(l->seq);
    free(l->use_lo);
    free(l->use_hi);
    memset(l, 0, sizeof *l);
}

/* Bytes of the largest run of k consecutive units (the window zero3 keeps
 * gathered, the units backward writes and reduces). */
static double largest_run(const shard_layout *l, int k)
{
    size_t best = 0;
    for (int u = 0; u < l->nunits; u++) {
        int v = u + k < l->nunits ? u + k : l->nunits;
        best = l->lo[v] - l->lo[u] > best ? l->lo[v] - l->lo[u] : best;
    }
    return (double)best * sizeof(float);
}

void shard_slots(const shard_layout *l, signed char *slot_of, size_t len[2])
{
    enum { UNSEEN = -1 };
    len[0] = len[1] = 0;
    memset(slot_of, UNSEEN, (size_t)l->nunits);
    int k = 0;
    for (int p = l->nseq - 1; p >= 0; p--) {
        int u = l->seq[p];
        if (slot_of[u] != UNSEEN)
            continue;
        if (shard_unit_tied(l, u)) { /* its two users write it at both ends of backward */
            slot_of[u] = SHARD_SLOT_TIED;
            continue;
        }
        int i = k++ & 1;
        size_t n = l->lo[u + 1] - l->lo[u];
        slot_of[u] = (signed char)i;
        len[i] = n > len[i] ? n : len[i];
    }
}

/* Bytes of the largest set of units read at k consecutive places of the
 * read order (zero3's gathered window; a unit read twice counts once). */
static double largest_window(const shard_layout *l, int k)
{
    size_t best = 0;
    for (int p = 0; p < l->nseq; p++) {
        size_t sum = 0;
        for (int q = p; q < l->nseq && q < p + k; q++) {
            int seen = 0;
            for (int r = p; r < q; r++)
                seen |= l->seq[r] == l->seq[q];
            sum += seen ? 0 : l->lo[l->seq[q] + 1] - l->lo[l->seq[q]];
        }
        best = sum > best ? sum : best;
    }
    return (double)best * sizeof(float);
}

size_t shard_largest_tied(const shard_layout *l)
{
    size_t best = 0;
    for (int u = 0; u < l->nunits; u++)
        if (shard_unit_tied(l, u) && l->lo[u + 1] - l->lo[u] > best)
            best = l->lo[u + 1] - l->lo[u];
    return best;
}

int shard_unit_tied(const shard_layout *l, int u)
{
    int seen = 0;
    for (int p = 0; p < l->nseq; p++)
        seen += l->seq[p] == u;
    return seen > 1;
}

int shard_param_slots(const shard_layout *l, int prefetch, size_t *len, int cap)
{
    int n = prefetch > l->widest ? prefetch : l->widest;
    n = n < cap ? n : cap;
    for (int k = 0; k < n; k++)
        len[k] = 0;
    for (int u = 0; u < l->nunits; u++) { /* keep the n largest, largest first */
        size_t v = l->lo[u + 1] - l->lo[u];
        if (shard_unit_tied(l, u))
            continue;
        for (int k = 0; k < n; k++)
            if (v > len[k]) {
                size_t t = len[k];
                len[k] = v;
                v = t;
            }
    }
    return n;
}

/* Bytes of zero3's gathered parameters: its slots, plus the largest tied
 * table (a slot of its own). */
static double param_slot_bytes(const shard_layout *l, int prefetch)
{
    size_t len[SHARD_MAX_PSLOTS], sum = 0;
    int n = shard_param_slots(l, prefetch, len, SHARD_MAX_PSLOTS);
    for (int k = 0; k < n; k++)
        sum += len[k];
    return (double)(sum + shard_largest_tied(l)) * sizeof(float);
}

/* Bytes of zero2/3's gradients backward writes with one micro-batch: the
 * two slots (the tied tables are counted apart). */
static double slot_bytes(const shard_layout *l)
{
    signed char *slot_of = malloc((size_t)(l->nunits ? l->nunits : 1));
    size_t len[2] = {0, 0};
    if (!slot_of)
        return largest_run(l, 2);
    shard_slots(l, slot_of, len);
    free(slot_of);
    return (double)(len[0] + len[1]) * sizeof(float);
}

void shard_memory(int stage, const shard_layout *l, size_t nparams, int nslots, int prefetch, int accumulate,
                  so_strategy_memory *out)
{
    double whole = (double)nparams * sizeof(float), mine = (double)l->nmine * sizeof(float);
    double gathered = prefetch > SHARD_MAX_PSLOTS ? largest_window(l, prefetch) : param_slot_bytes(l, prefetch);
    double writing = (accumulate > 1 ? largest_run(l, 2) : slot_bytes(l)) + (double)l->tied * sizeof(float);
    *out = (so_strategy_memory){.params = stage == 3 ? mine + gathered : whole,
                                .grads = stage == 1 || accumulate > 1 ? whole : mine + writing,
                                .optimizer = mine * nslots};
}

double shard_wire_scratch(const shard_layout *l, so_dtype wire)
{
    return wire == SO_DTYPE_F32 ? 0 : (double)l->max_unit * (double)so_dtype_size(wire);
}

/* ---- memory mapped per unit ----------------------------------------------------- */

/* The mapping starts one page before the pointer handed out: that page
 * keeps the length for unreserve. */
void *shard_reserve(void *ctx, size_t bytes)
{
    (void)ctx;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), len = page + (bytes + page - 1) / page * page;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        so_err(SO_ENOMEM, "cannot reserve %zu bytes of address space", bytes);
        return NULL;
    }
    *(size_t *)p = len;
    return (char *)p + page;
}

void shard_unreserve(void *ctx, void *p)
{
    (void)ctx;
    if (!p)
        return;
    char *base = (char *)p - sysconf(_SC_PAGESIZE);
    munmap(base, *(size_t *)base);
}

void shard_commit(float *base, size_t lo, size_t hi)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)(base + lo) & ~(page - 1), b = ((uintptr_t)(base + hi) + page - 1) & ~(page - 1);
    if (hi > lo)
        madvise((void *)a, b - a, MADV_POPULATE_WRITE);
}

void shard_release(float *base, size_t lo, size_t hi)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)(base + lo) + page - 1) & ~(page - 1), b = (uintptr_t)(base + hi) & ~(page - 1);
    if (b > a)
        madvise((void *)a, b - a, MADV_DONTNEED);
}
