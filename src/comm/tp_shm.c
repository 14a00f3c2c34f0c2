/* The shm transport (tp.h): every rank of the group on one host, a FIFO
 * channel per ordered pair in one MPI-3 shared window. The channel from rank
 * j to rank i lives in i's segment: a head counter (bytes ever written, by
 * j), a tail counter (bytes ever read, by i), each on its own cache lines,
 * and a ring of data. A message is a 16-byte header (tag, size: a mismatch
 * is an error, not corrupt data) and its bytes, copied in by the sender as
 * the ring has room and out by the receiver as they arrive -- two copies,
 * no MPI call once the window exists. Messages on one channel travel in
 * posting order; a test moves every posted message of the transport, so a
 * sender that waits only on its receives still drains its sends.
 *
 * Memory order: the sender writes data (streaming stores, so the reader gets
 * them from memory rather than by snooping this core's cache: see reduce.c),
 * fences, then publishes head with a release store; the receiver
 * acquire-loads head before reading and release-stores tail after, which the
 * sender acquire-loads before it overwrites. */
#include "tp.h"

#include "reduce.h"
#include "scaleout/err.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define LINE 64
#define MAX_OPS 512          /* messages in flight on one transport */
#define HDR_MAGIC 0x5c5a0000u

typedef struct {
    _Atomic uint64_t head; /* written by the sender */
    char pad0[LINE - sizeof(uint64_t)];
    _Atomic uint64_t tail; /* written by the receiver */
    char pad1[LINE - sizeof(uint64_t)];
    /* followed by the ring */
} chan_hdr;

typedef struct {
    uint32_t magic_tag, pad;
    uint64_t bytes;
} msg_hdr;

typedef struct {
    int used, send, peer, complete;
    char *buf;
    size_t bytes, moved; /* moved counts the header too: [0, sizeof hdr + bytes] */
    uint64_t seq;        /* its place among the messages with peer in this direction */
    msg_hdr hdr;         /* sent, or received */
    msg_hdr want;        /* a receive's expected header */
} shm_op;

typedef struct {
    so_tp base;
    MPI_Win win;
    size_t ring;          /* data bytes per channel */
    char **seg;           /* [p] every rank's segment, mapped here */
    uint64_t *send_next, *send_turn, *recv_next, *recv_turn; /* [p] per-peer order of messages */
    shm_op ops[MAX_OPS];
    int active[MAX_OPS], nactive; /* used slots in posting order */
    int free_slots[MAX_OPS], nfree;
    int error;            /* a header mismatch was seen: every later test fails */
} tp_shm;

static size_t chan_bytes(const tp_shm *t) { return sizeof(chan_hdr) + t->ring; }

/* The channel from rank `from` to rank `to`, in to's segment. */
static chan_hdr *chan(const tp_shm *t, int from, int to)
{
    return (chan_hdr *)(void *)(t->seg[to] + (size_t)from * chan_bytes(t));
}

static char *ring_of(chan_hdr *c) { return (char *)(c + 1); }

/* ---- moving bytes ------------------------------------------------------------- */

/* Copies n bytes into the ring at stream position pos (wrapping). */
static void ring_put(tp_shm *t, chan_hdr *c, uint64_t pos, const char *src, size_t n)
{
    size_t at = (size_t)(pos % t->ring), first = t->ring - at < n ? t->ring - at : n;
    so_copy_nt(ring_of(c) + at, src, first);
    if (n > first)
        so_copy_nt(ring_of(c), src + first, n - first);
}

static void ring_get(tp_shm *t, chan_hdr *c, uint64_t pos, char *dst, size_t n)
{
    size_t at = (size_t)(pos % t->ring), first = t->ring - at < n ? t->ring - at : n;
    memcpy(dst, ring_of(c) + at, first);
    if (n > first)
        memcpy(dst + first, ring_of(c), n - first);
}

/* Bytes [off, off + n) of the op's stream: its header, then its buffer. */
static void stream_span(shm_op *o, size_t off, size_t n, char **p, size_t *k)
{
    if (off < sizeof o->hdr) {
        *p = (char *)&o->hdr + off;
        *k = sizeof o->hdr - off < n ? sizeof o->hdr - off : n;
    } else {
        *p = o->buf + (off - sizeof o->hdr);
        *k = n;
    }
}

static void push_send(tp_shm *t, shm_op *o)
{
    chan_hdr *c = chan(t, t->base.rank, o->peer);
    uint64_t head = atomic_load_explicit(&c->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&c->tail, memory_order_acquire);
    size_t room = t->ring - (size_t)(head - tail), total = sizeof o->hdr + o->bytes;
    while (room && o->moved < total) {
        char *p;
        size_t k;
        stream_span(o, o->moved, total - o->moved < room ? total - o->moved : room, &p, &k);
        ring_put(t, c, head, p, k);
        head += k, o->moved += k, room -= k;
    }
    atomic_store_explicit(&c->head, head, memory_order_release);
}

/* 0, or -1 when the header announces another message than the one posted. */
static int pull_recv(tp_shm *t, shm_op *o)
{
    chan_hdr *c = chan(t, o->peer, t->base.rank);
    uint64_t tail = atomic_load_explicit(&c->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&c->head, memory_order_acquire);
    size_t have = (size_t)(head - tail), total = sizeof o->hdr + o->bytes;
    while (have && o->moved < total) {
        char *p;
        size_t k;
        stream_span(o, o->moved, total - o->moved < have ? total - o->moved : have, &p, &k);
        ring_get(t, c, tail, p, k);
        tail += k, o->moved += k, have -= k;
        if (o->moved == sizeof o->hdr && (o->hdr.magic_tag != o->want.magic_tag || o->hdr.bytes != o->want.bytes))
            return -1;
    }
    atomic_store_explicit(&c->tail, tail, memory_order_release);
    return 0;
}

/* Moves every posted message as far as the channels allow, in posting order
 * per peer (a message waits until the one before it on its channel is over). */
static int progress(tp_shm *t)
{
    for (int i = 0; i < t->nactive; i++) {
        shm_op *o = &t->ops[t->active[i]];
        if (o->complete)
            continue;
        uint64_t *turn = o->send ? &t->send_turn[o->peer] : &t->recv_turn[o->peer];
        if (o->seq != *turn)
            continue;
        if (o->send)
            push_send(t, o);
        else if (pull_recv(t, o))
            return t->error = so_err(SO_ECOMM, "shm transport: rank %d expected a message of %zu bytes (tag %u) "
                                               "from rank %d, the channel holds one of %llu bytes (tag %u)",
                                     t->base.rank, o->bytes, o->want.magic_tag & 0xffffu, o->peer,
                                     (unsigned long long)o->hdr.bytes, o->hdr.magic_tag & 0xffffu);
        if (o->moved == sizeof o->hdr + o->bytes) {
            o->complete = 1;
            ++*turn;
        }
    }
    return 0;
}

/* ---- the interface ---------------------------------------------------------------- */

static int shm_post(so_tp *base, void *buf, size_t bytes, int peer, int tag, int send, so_tp_req *r)
{
    tp_shm *t = (tp_shm *)base;
    r->slot = -1;
    r->mpi = MPI_REQUEST_NULL;
    if (peer == SO_TP_NONE)
        return 0;
    if (peer < 0 || peer >= base->size)
        return so_err(SO_EINVAL, "shm transport: peer %d out of range (group of %d)", peer, base->size);
    if (!t->nfree)
        return so_err(SO_ENOMEM, "shm transport: more than %d messages in flight", MAX_OPS);
    int s = t->free_slots[--t->nfree];
    uint64_t *next = send ? &t->send_next[peer] : &t->recv_next[peer];
    msg_hdr h = {HDR_MAGIC | ((uint32_t)tag & 0xffffu), 0, (uint64_t)bytes};
    t->ops[s] = (shm_op){1, send, peer, 0, buf, bytes, 0, (*next)++, h, h};
    t->active[t->nactive++] = s;
    r->slot = s;
    return 0;
}

/* Frees slot s (complete) and drops it from the active list. */
static void release(tp_shm *t, int s)
{
    t->ops[s].used = 0;
    t->free_slots[t->nfree++] = s;
    for (int i = 0; i < t->nactive; i++)
        if (t->active[i] == s) {
            memmove(&t->active[i], &t->active[i + 1], (size_t)(t->nactive - i - 1) * sizeof *t->active);
            t->nactive--;
            break;
        }
}

static int shm_test(so_tp *base, so_tp_req *r, int n, int *done)
{
    tp_shm *t = (tp_shm *)base;
    *done = 0;
    if (t->error)
        return t->error;
    int rc = progress(t);
    if (rc)
        return rc;
    for (int i = 0; i < n; i++)
        if (r[i].slot >= 0 && !t->ops[r[i].slot].complete)
            return 0;
    for (int i = 0; i < n; i++)
        if (r[i].slot >= 0) {
            release(t, r[i].slot);
            r[i].slot = -1;
        }
    *done = 1;
    return 0;
}

static void shm_free(so_tp *base)
{
    tp_shm *t = (tp_shm *)base;
    if (t->win != MPI_WIN_NULL) {
        MPI_Win_unlock_all(t->win);
        MPI_Win_free(&t->win);
    }
    free(t->seg);
    free(t->send_next);
    free(t->send_turn);
    free(t->recv_next);
    free(t->recv_turn);
    free(t);
}

static const so_tp_ops shm_ops = {shm_post, shm_test, NULL, shm_free};

/* ---- set-up ---------------------------------------------------------------------------- */

/* Whether every rank of comm shares memory with every other (collective). */
static int one_host(MPI_Comm comm, int p, so_waiter *w, int *yes)
{
    int rc = 0, q = 0;
    MPI_Comm shared = MPI_COMM_NULL;
    SO_MPI_TRY(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shared));
    SO_MPI_TRY(MPI_Comm_size(shared, &q));
    *yes = q == p;
    MPI_Request req;
    SO_MPI_TRY(MPI_Iallreduce(MPI_IN_PLACE, yes, 1, MPI_INT, MPI_MIN, comm, &req));
    rc = so_coll_wait(w, 1, &req);
out:
    if (shared != MPI_COMM_NULL)
        MPI_Comm_free(&shared);
    return rc;
}

/* The window: p channels in every rank's segment; mine zeroed before use. */
static int map(tp_shm *t, MPI_Comm comm, so_waiter *w)
{
    int rc = 0, p = t->base.size;
    MPI_Info info = MPI_INFO_NULL;
    char *base;
    size_t bytes = (size_t)p * chan_bytes(t);
    SO_MPI_TRY(MPI_Info_create(&info));
    SO_MPI_TRY(MPI_Info_set(info, "alloc_shared_noncontig", "true"));
    SO_MPI_TRY(MPI_Win_allocate_shared((MPI_Aint)bytes, 1, info, comm, &base, &t->win));
    for (int j = 0; j < p; j++) {
        MPI_Aint sz;
        int disp;
        SO_MPI_TRY(MPI_Win_shared_query(t->win, j, &sz, &disp, &t->seg[j]));
    }
    for (int j = 0; j < p; j++) {
        chan_hdr *c = chan(t, j, t->base.rank);
        atomic_init(&c->head, 0);
        atomic_init(&c->tail, 0);
    }
    /* A passive-target epoch for the window's life: the standard's condition
     * for direct load/store; ordering comes from the C11 atomics. */
    SO_MPI_TRY(MPI_Win_lock_all(MPI_MODE_NOCHECK, t->win));
    MPI_Request req;
    SO_MPI_TRY(MPI_Ibarrier(comm, &req)); /* every counter is zeroed before use */
    rc = so_coll_wait(w, 1, &req);
out:
    if (info != MPI_INFO_NULL)
        MPI_Info_free(&info);
    return rc;
}

int so_tp_shm_new(MPI_Comm comm, so_waiter *w, so_tp **out)
{
    int rc = 0, p, me, yes = 0;
    *out = NULL;
    SO_MPI_TRY(MPI_Comm_size(comm, &p));
    SO_MPI_TRY(MPI_Comm_rank(comm, &me));
    if ((rc = one_host(comm, p, w, &yes)))
        return rc;
    if (!yes)
        return so_err(SO_EINVAL, "the shm transport needs every rank of the group on one host");
    tp_shm *t = calloc(1, sizeof *t);
    if (!t)
        return so_err(SO_ENOMEM, "shm transport: out of memory");
    t->base = (so_tp){&shm_ops, SO_TRANSPORT_SHM, me, p, comm, 0};
    t->win = MPI_WIN_NULL;
    /* 512 KiB a channel: two exchange segments (SCALEOUT_COLL_SEG) in flight;
     * less for large groups, so a rank's segment stays near 8 MiB. */
    t->ring = p <= 16 ? (size_t)512 << 10 : ((size_t)8 << 20) / (size_t)p;
    t->ring = t->ring < ((size_t)64 << 10) ? (size_t)64 << 10 : t->ring & ~(size_t)(LINE - 1);
    t->seg = calloc((size_t)p, sizeof *t->seg);
    t->send_next = calloc((size_t)p, sizeof(uint64_t));
    t->send_turn = calloc((size_t)p, sizeof(uint64_t));
    t->recv_next = calloc((size_t)p, sizeof(uint64_t));
    t->recv_turn = calloc((size_t)p, sizeof(uint64_t));
    for (int i = 0; i < MAX_OPS; i++)
        t->free_slots[i] = MAX_OPS - 1 - i;
    t->nfree = MAX_OPS;
    if (!t->seg || !t->send_next || !t->send_turn || !t->recv_next || !t->recv_turn)
        rc = so_err(SO_ENOMEM, "shm transport: out of memory");
    if (!rc)
        rc = map(t, comm, w);
    if (rc) {
        shm_free(&t->base);
        return rc;
    }
    *out = &t->base;
    return 0;
out:
    return rc;
}
