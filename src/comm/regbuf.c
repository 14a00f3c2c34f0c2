/* Registered buffers: memory a collective can read and write on every rank of
 * a node without copies. Each so_comm_buf_alloc is one MPI-3 shared window
 * over the node of the communicator's hier context (the same grouping, real
 * or emulated), so every node rank maps every other's buffer; a process-wide
 * registry turns a pointer into (region, offset) for hier's zero-copy path. */
#include "coll_internal.h"

#include "scaleout/err.h"
#include "scaleout/log.h"
#include "scaleout/mem.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define PAGE 4096 /* buffers start on a page: also 64-byte (AVX-512 line) aligned */

struct so_regbuf {
    uint64_t id;         /* same on every node rank of the window, unique in each process */
    so_comm *owner;      /* so_comm_finalize frees what the caller left */
    MPI_Win win;         /* MPI_WIN_NULL: the plain fallback (base[r] from so_alloc) */
    MPI_Group group;     /* the window's node ranks */
    int q, r;
    char **base;         /* [q] node rank j's buffer, mapped in this process */
    size_t *len;         /* [q] its usable bytes */
    uint64_t seen_serial; /* the last hier context compared with, and the answer */
    int seen_ok;
    struct so_regbuf *next;
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static so_regbuf *regions;  /* newest first */
static uint64_t next_id = 1;

/* ---- the registry ------------------------------------------------------------- */

so_regbuf *so_regbuf_find(const void *p, size_t bytes, size_t *off)
{
    so_regbuf *g;
    uintptr_t a = (uintptr_t)p;
    pthread_mutex_lock(&reg_mu);
    for (g = regions; g; g = g->next) {
        uintptr_t b = (uintptr_t)g->base[g->r];
        if (g->win != MPI_WIN_NULL && a >= b && a - b <= g->len[g->r] && bytes <= g->len[g->r] - (a - b)) {
            *off = a - b;
            break;
        }
    }
    pthread_mutex_unlock(&reg_mu);
    return g;
}

so_regbuf *so_regbuf_by_id(uint64_t id)
{
    so_regbuf *g;
    pthread_mutex_lock(&reg_mu);
    for (g = regions; g && !(g->id == id && g->win != MPI_WIN_NULL); g = g->next)
        ;
    pthread_mutex_unlock(&reg_mu);
    return g;
}

uint64_t so_regbuf_id(const so_regbuf *g) { return g->id; }
char *so_regbuf_base(const so_regbuf *g, int j) { return g->base[j]; }
size_t so_regbuf_len(const so_regbuf *g, int j) { return g->len[j]; }

int so_regbuf_matches(so_regbuf *g, const so_shm *s)
{
    if (g->seen_serial != s->serial) { /* only hier calls this: one thread in MPI at a time */
        int res = MPI_UNEQUAL;
        g->seen_ok = g->q == s->q && g->r == s->r &&
                     MPI_Group_compare(g->group, s->group, &res) == MPI_SUCCESS && res == MPI_IDENT;
        g->seen_serial = s->serial;
    }
    return g->seen_ok;
}

static void unlink_region(so_regbuf *g)
{
    pthread_mutex_lock(&reg_mu);
    for (so_regbuf **pp = &regions; *pp; pp = &(*pp)->next)
        if (*pp == g) {
            *pp = g->next;
            break;
        }
    pthread_mutex_unlock(&reg_mu);
}

/* Frees the window (collective over the node) and the record. */
static int destroy_region(so_regbuf *g)
{
    int rc = 0;
    if (g->win != MPI_WIN_NULL) {
        MPI_Win_unlock_all(g->win);
        int mrc = MPI_Win_free(&g->win);
        if (mrc != MPI_SUCCESS)
            rc = so_mpi_err(mrc, "MPI_Win_free");
    } else if (g->base) {
        so_free(g->base[g->r]);
    }
    if (g->group != MPI_GROUP_NULL)
        MPI_Group_free(&g->group);
    free(g->base);
    free(g->len);
    free(g);
    return rc;
}

/* ---- allocation ------------------------------------------------------------------ */

/* Every node rank's buffer: its segment, moved up to a page boundary. The
 * segments are mapped at page granularity, so the offset within a page (and
 * with it the padding and usable length) is the same in every process. */
static int map_region(so_regbuf *g)
{
    int rc = 0;
    SO_MPI_TRY(MPI_Win_set_errhandler(g->win, MPI_ERRORS_RETURN));
    for (int j = 0; j < g->q; j++) {
        MPI_Aint sz;
        int disp;
        char *b;
        SO_MPI_TRY(MPI_Win_shared_query(g->win, j, &sz, &disp, &b));
        size_t pad = (size_t)(-(uintptr_t)b & (PAGE - 1));
        g->base[j] = b + pad;
        g->len[j] = (size_t)sz > pad ? (size_t)sz - pad : 0;
    }
    /* Passive-target epoch for the region's life: the standard's condition for
     * load/store by peers; ordering comes from hier's flag barriers. */
    SO_MPI_TRY(MPI_Win_lock_all(MPI_MODE_NOCHECK, g->win));
out:
    return rc;
}

/* The window over s's node. All node ranks must agree it exists: 0 with
 * *made = 1 (window), 0 with *made = 0 (nobody got one: use plain memory),
 * or an error when only some ranks did (no way back to a common state).
 * The same reduction agrees on the id: the largest of the node ranks' next
 * ids (g->id in and out). Ranks of one node may have allocated different
 * counts in other groups, so a per-process counter alone would not agree. */
static int make_window(so_regbuf *g, so_shm *s, size_t bytes, so_waiter *w, int *made)
{
    int rc = 0;
    int64_t ok[3];
    MPI_Info info = MPI_INFO_NULL;
    MPI_Request req;
    char *mine = NULL;
    size_t want = (bytes + PAGE - 1) / PAGE * PAGE + PAGE; /* + PAGE: room to align */
    SO_MPI_TRY(MPI_Info_create(&info));
    SO_MPI_TRY(MPI_Info_set(info, "alloc_shared_noncontig", "true"));
    ok[0] = MPI_Win_allocate_shared((MPI_Aint)want, 1, info, s->node, &mine, &g->win) == MPI_SUCCESS;
    if (!ok[0])
        g->win = MPI_WIN_NULL;
    ok[1] = -ok[0];
    ok[2] = (int64_t)g->id;
    SO_MPI_TRY(MPI_Iallreduce(MPI_IN_PLACE, ok, 3, MPI_INT64_T, MPI_MAX, s->node, &req));
    if ((rc = so_coll_wait(w, 1, &req)))
        goto out;
    if (ok[0] != -ok[1]) { /* some have a window, some not: it cannot be freed collectively */
        g->win = MPI_WIN_NULL;
        rc = so_err(SO_ECOMM, "registered buffer: the shared window failed on some node ranks");
        goto out;
    }
    *made = (int)ok[0];
    g->id = (uint64_t)ok[2];
    if (*made)
        SO_MPI_TRY(MPI_Win_get_group(g->win, &g->group));
out:
    if (info != MPI_INFO_NULL)
        MPI_Info_free(&info);
    return rc;
}

/* A region record for s's node (no window yet). */
static so_regbuf *new_region(so_comm *c, const so_shm *s)
{
    so_regbuf *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->owner = c;
    g->win = MPI_WIN_NULL;
    g->group = MPI_GROUP_NULL;
    g->q = s->q;
    g->r = s->r;
    g->base = calloc((size_t)s->q, sizeof *g->base);
    g->len = calloc((size_t)s->q, sizeof *g->len);
    if (!g->base || !g->len) {
        free(g->base);
        free(g->len);
        free(g);
        return NULL;
    }
    return g;
}

/* The shared window (node ranks that share it), else plain so_alloc memory:
 * callers free both alike. */
static int fill_region(so_regbuf *g, so_shm *s, size_t bytes, so_waiter *w)
{
    int rc = 0, made = 0;
    if (s->q > 1) { /* alone on the node: every node rank decides alike (sizes may differ, 0 too) */
        rc = make_window(g, s, bytes, w, &made);
        if (!rc && made)
            rc = map_region(g);
        if (rc)
            return rc;
        if (!made)
            so_log(SO_LOG_WARN, "registered buffer of %zu bytes: no shared window, using plain memory", bytes);
    }
    if (made) {
        memset(g->base[g->r], 0, bytes); /* zero-filled like so_alloc; first touch by the owner */
        return 0;
    }
    g->base[g->r] = so_alloc(bytes);
    g->len[g->r] = bytes;
    return g->base[g->r] ? 0 : so_err(SO_ENOMEM, "registered buffer: out of memory for %zu bytes", bytes);
}

int so_comm_buf_alloc(so_comm *c, size_t bytes, void **out)
{
    *out = NULL;
    int rc = so_comm_check_idle(c);
    if (rc)
        return rc;
    if (bytes > SIZE_MAX / 2)
        return so_err(SO_EINVAL, "registered buffer of %zu bytes is too large", bytes);
    so_waiter w;
    so_waiter_init(&w, c, "registered buffer");
    so_shm *s;
    if ((rc = so_shm_get(c->mcomm, &w, &s)))
        return rc;
    so_regbuf *g = new_region(c, s);
    if (!g)
        return so_err(SO_ENOMEM, "registered buffer: out of memory");
    pthread_mutex_lock(&reg_mu);
    g->id = next_id; /* a proposal: the window's node ranks agree on the largest */
    pthread_mutex_unlock(&reg_mu);
    if ((rc = fill_region(g, s, bytes, &w))) {
        destroy_region(g);
        return rc;
    }
    pthread_mutex_lock(&reg_mu);
    if (g->id < next_id) /* plain memory: no agreement, nobody compares its id */
        g->id = next_id;
    next_id = g->id + 1;
    g->next = regions;
    regions = g;
    pthread_mutex_unlock(&reg_mu);
    *out = g->base[g->r];
    return 0;
}

void *so_comm_buf_peer(so_comm *c, const void *mine, int peer, size_t *bytes)
{
    *bytes = 0;
    size_t off;
    so_regbuf *g = mine ? so_regbuf_find(mine, 0, &off) : NULL;
    MPI_Group cg;
    int j = MPI_UNDEFINED;
    if (!g || off != 0 || peer < 0 || peer >= c->size || MPI_Comm_group(c->mcomm, &cg) != MPI_SUCCESS)
        return NULL;
    if (MPI_Group_translate_ranks(cg, 1, &peer, g->group, &j) != MPI_SUCCESS)
        j = MPI_UNDEFINED;
    MPI_Group_free(&cg);
    if (j == MPI_UNDEFINED || j < 0 || j >= g->q)
        return NULL;
    *bytes = g->len[j];
    return g->base[j];
}

void so_comm_buf_free(so_comm *c, void *p)
{
    if (!p)
        return;
    so_regbuf *g;
    pthread_mutex_lock(&reg_mu);
    for (g = regions; g && g->base[g->r] != p; g = g->next)
        ;
    pthread_mutex_unlock(&reg_mu);
    if (!g) {
        so_log(SO_LOG_ERROR, "so_comm_buf_free: %p is not a buffer of so_comm_buf_alloc", p);
        return;
    }
    if (g->win != MPI_WIN_NULL && so_comm_check_idle(c)) { /* in use: so_comm_finalize frees it */
        so_log(SO_LOG_ERROR, "so_comm_buf_free: %s", so_errmsg());
        return;
    }
    unlink_region(g);
    if (destroy_region(g))
        so_log(SO_LOG_ERROR, "so_comm_buf_free: %s", so_errmsg());
}

void so_regbuf_release_all(so_comm *c)
{
    for (;;) { /* oldest first: the order every rank allocated in */
        so_regbuf *g = NULL;
        pthread_mutex_lock(&reg_mu);
        for (so_regbuf *h = regions; h; h = h->next)
            if (h->owner == c)
                g = h;
        pthread_mutex_unlock(&reg_mu);
        if (!g)
            return;
        unlink_region(g);
        destroy_region(g);
    }
}
