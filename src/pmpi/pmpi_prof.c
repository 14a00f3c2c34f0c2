/* libscaleout-prof.so: communication statistics for ANY MPI program through
 * the PMPI profiling interface (what mpiP and hvprof do). LD_PRELOAD it;
 * every intercepted call is timed (blocking calls: call to return;
 * non-blocking: post to the Wait/Test that completes them; persistent ones:
 * each MPI_Start to its completion) and binned by
 * message size in powers of two. At MPI_Finalize rank 0 gathers all ranks and
 * writes SCALEOUT_PMPI_OUT (default scaleout-pmpi.json) in the profile.json
 * format (`scaleout report` reads it) plus the same path + ".txt" as a table.
 * docs/PROFILING.md. */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- statistics ------------------------------------------------------------- */

enum {
    OP_ALLREDUCE, OP_IALLREDUCE, OP_BCAST, OP_IBCAST, OP_REDUCE, OP_REDUCE_SCATTER, OP_IREDUCE_SCATTER,
    OP_REDUCE_SCATTER_BLOCK, OP_IREDUCE_SCATTER_BLOCK, OP_ALLGATHER, OP_IALLGATHER, OP_ALLGATHERV,
    OP_IALLGATHERV, OP_ALLTOALL, OP_IALLTOALL, OP_GATHER, OP_BARRIER, OP_IBARRIER, OP_SEND, OP_RECV,
    OP_ISEND, OP_IRECV, OP_SENDRECV, OP_SEND_INIT, OP_RECV_INIT, OP_ALLREDUCE_INIT, OP_BCAST_INIT, OP_REDUCE_INIT,
    OP_ALLGATHER_INIT, OP_ALLTOALL_INIT, OP_BARRIER_INIT, OP_REDUCE_SCATTER_BLOCK_INIT, OP_COUNT
};
static const char *const op_names[OP_COUNT] = {
    "MPI_Allreduce", "MPI_Iallreduce", "MPI_Bcast", "MPI_Ibcast", "MPI_Reduce", "MPI_Reduce_scatter",
    "MPI_Ireduce_scatter", "MPI_Reduce_scatter_block", "MPI_Ireduce_scatter_block", "MPI_Allgather",
    "MPI_Iallgather", "MPI_Allgatherv", "MPI_Iallgatherv", "MPI_Alltoall", "MPI_Ialltoall", "MPI_Gather",
    "MPI_Barrier", "MPI_Ibarrier", "MPI_Send", "MPI_Recv", "MPI_Isend", "MPI_Irecv", "MPI_Sendrecv",
    "MPI_Send_init", "MPI_Recv_init", "MPI_Allreduce_init", "MPI_Bcast_init", "MPI_Reduce_init", "MPI_Allgather_init",
    "MPI_Alltoall_init", "MPI_Barrier_init", "MPI_Reduce_scatter_block_init"};

#define NBINS 48
typedef struct {
    uint64_t n;
    double sum, min, max;
} bin;
typedef struct {
    uint64_t calls, bytes;
    double seconds;
    bin bins[NBINS];
} op_stat;

static op_stat stats[OP_COUNT];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* the async engine calls MPI from its own thread */
static double t_init;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int size_bin(uint64_t bytes)
{
    int k = 0;
    while (k < NBINS - 1 && ((uint64_t)1 << k) < bytes)
        k++;
    return k;
}

static void record(int op, uint64_t bytes, double secs)
{
    pthread_mutex_lock(&lock);
    op_stat *s = &stats[op];
    bin *b = &s->bins[size_bin(bytes)];
    s->calls++;
    s->bytes += bytes;
    s->seconds += secs;
    if (!b->n || secs < b->min)
        b->min = secs;
    if (!b->n || secs > b->max)
        b->max = secs;
    b->n++;
    b->sum += secs;
    pthread_mutex_unlock(&lock);
}

static uint64_t type_bytes(int count, MPI_Datatype t)
{
    int sz = 0;
    if (count <= 0 || t == MPI_DATATYPE_NULL || PMPI_Type_size(t, &sz) != MPI_SUCCESS)
        return 0;
    return (uint64_t)count * (uint64_t)sz;
}

/* Ranks in c (collectives whose byte count is per rank). */
static uint64_t comm_size(MPI_Comm c)
{
    int p = 1;
    PMPI_Comm_size(c, &p);
    return (uint64_t)p;
}

static uint64_t sum_counts(MPI_Comm comm, const int *counts, MPI_Datatype t)
{
    int p = 0;
    uint64_t n = 0;
    PMPI_Comm_size(comm, &p);
    for (int i = 0; counts && i < p; i++)
        n += type_bytes(counts[i], t);
    return n;
}

/* ---- outstanding non-blocking requests ------------------------------------------
 * A list of the requests in flight, keyed by the handle's bits (an int in
 * MPICH, a pointer in Open MPI); programs keep few in flight, so a scan is
 * cheap. A full list drops the request from the statistics. */
#define NREQ 8192
static struct {
    uint64_t key, bytes;
    int op;
    double t0;
} reqs[NREQ];
static int nreqs;

static uint64_t req_key(MPI_Request r)
{
    uint64_t k = 0;
    memcpy(&k, &r, sizeof r < sizeof k ? sizeof r : sizeof k);
    return k;
}

static void req_start(MPI_Request r, int op, uint64_t bytes, double t0)
{
    pthread_mutex_lock(&lock);
    if (nreqs < NREQ) {
        reqs[nreqs].key = req_key(r);
        reqs[nreqs].op = op;
        reqs[nreqs].bytes = bytes;
        reqs[nreqs].t0 = t0;
        nreqs++;
    }
    pthread_mutex_unlock(&lock);
}

/* Persistent requests (MPI_*_init): what each MPI_Start of the handle posts. */
typedef struct {
    uint64_t key, bytes;
    int op;
} persist_req;
static persist_req persist[NREQ];
static int npersist;

static void persist_add(MPI_Request r, int op, uint64_t bytes)
{
    pthread_mutex_lock(&lock);
    if (npersist < NREQ)
        persist[npersist++] = (persist_req){req_key(r), bytes, op};
    pthread_mutex_unlock(&lock);
}

/* Posts the request started by MPI_Start; not a persistent one we know: nothing. */
static void persist_start(MPI_Request r, double t0)
{
    uint64_t k = req_key(r), bytes = 0;
    int op = -1;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < npersist; i++)
        if (persist[i].key == k) {
            op = persist[i].op;
            bytes = persist[i].bytes;
            break;
        }
    pthread_mutex_unlock(&lock);
    if (op >= 0)
        req_start(r, op, bytes, t0);
}

static void persist_forget(uint64_t k)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < npersist; i++)
        if (persist[i].key == k) {
            persist[i] = persist[--npersist];
            break;
        }
    pthread_mutex_unlock(&lock);
}

/* Completes (rec = 1) or forgets a request; unknown requests are ignored. */
static void req_end(uint64_t k, double t1, int rec)
{
    int op = -1;
    uint64_t bytes = 0;
    double t0 = 0;
    pthread_mutex_lock(&lock);
    for (int i = nreqs - 1; i >= 0; i--)
        if (reqs[i].key == k) {
            op = reqs[i].op;
            bytes = reqs[i].bytes;
            t0 = reqs[i].t0;
            reqs[i] = reqs[--nreqs];
            break;
        }
    pthread_mutex_unlock(&lock);
    if (op >= 0 && rec)
        record(op, bytes, t1 - t0);
}

/* ---- blocking calls ------------------------------------------------------------- */

#define TIMED(op, bytes, call)        \
    do {                              \
        double t0_ = now();           \
        int rc_ = (call);             \
        record(op, bytes, now() - t0_); \
        return rc_;                   \
    } while (0)

int MPI_Allreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c)
{
    TIMED(OP_ALLREDUCE, type_bytes(n, t), PMPI_Allreduce(s, r, n, t, o, c));
}

int MPI_Bcast(void *b, int n, MPI_Datatype t, int root, MPI_Comm c)
{
    TIMED(OP_BCAST, type_bytes(n, t), PMPI_Bcast(b, n, t, root, c));
}

int MPI_Reduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op o, int root, MPI_Comm c)
{
    TIMED(OP_REDUCE, type_bytes(n, t), PMPI_Reduce(s, r, n, t, o, root, c));
}

int MPI_Reduce_scatter(const void *s, void *r, const int rc[], MPI_Datatype t, MPI_Op o, MPI_Comm c)
{
    TIMED(OP_REDUCE_SCATTER, sum_counts(c, rc, t), PMPI_Reduce_scatter(s, r, rc, t, o, c));
}

int MPI_Reduce_scatter_block(const void *s, void *r, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c)
{
    TIMED(OP_REDUCE_SCATTER_BLOCK, type_bytes(n, t) * comm_size(c), PMPI_Reduce_scatter_block(s, r, n, t, o, c));
}

int MPI_Allgather(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, MPI_Comm c)
{
    TIMED(OP_ALLGATHER, type_bytes(rn, rt) * comm_size(c), PMPI_Allgather(s, sn, st, r, rn, rt, c));
}

int MPI_Allgatherv(const void *s, int sn, MPI_Datatype st, void *r, const int rn[], const int d[], MPI_Datatype rt,
                   MPI_Comm c)
{
    TIMED(OP_ALLGATHERV, sum_counts(c, rn, rt), PMPI_Allgatherv(s, sn, st, r, rn, d, rt, c));
}

int MPI_Alltoall(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, MPI_Comm c)
{
    (void)sn, (void)st; /* ignored with MPI_IN_PLACE: count the receive side */
    TIMED(OP_ALLTOALL, type_bytes(rn, rt) * comm_size(c), PMPI_Alltoall(s, sn, st, r, rn, rt, c));
}

int MPI_Gather(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, int root, MPI_Comm c)
{
    TIMED(OP_GATHER, type_bytes(sn, st), PMPI_Gather(s, sn, st, r, rn, rt, root, c));
}

int MPI_Barrier(MPI_Comm c) { TIMED(OP_BARRIER, 0, PMPI_Barrier(c)); }

int MPI_Send(const void *b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm c)
{
    TIMED(OP_SEND, type_bytes(n, t), PMPI_Send(b, n, t, dest, tag, c));
}

int MPI_Recv(void *b, int n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Status *st)
{
    TIMED(OP_RECV, type_bytes(n, t), PMPI_Recv(b, n, t, src, tag, c, st));
}

int MPI_Sendrecv(const void *sb, int sn, MPI_Datatype st, int dest, int stag, void *rb, int rn, MPI_Datatype rt,
                 int src, int rtag, MPI_Comm c, MPI_Status *status)
{
    TIMED(OP_SENDRECV, type_bytes(sn, st), PMPI_Sendrecv(sb, sn, st, dest, stag, rb, rn, rt, src, rtag, c, status));
}

/* ---- non-blocking calls ------------------------------------------------------------ */

#define POSTED(op, bytes, call, req)          \
    do {                                      \
        double t0_ = now();                   \
        int rc_ = (call);                     \
        if (rc_ == MPI_SUCCESS)               \
            req_start(*(req), op, bytes, t0_); \
        return rc_;                           \
    } while (0)

int MPI_Iallreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c, MPI_Request *q)
{
    POSTED(OP_IALLREDUCE, type_bytes(n, t), PMPI_Iallreduce(s, r, n, t, o, c, q), q);
}

int MPI_Ibcast(void *b, int n, MPI_Datatype t, int root, MPI_Comm c, MPI_Request *q)
{
    POSTED(OP_IBCAST, type_bytes(n, t), PMPI_Ibcast(b, n, t, root, c, q), q);
}

int MPI_Ireduce_scatter(const void *s, void *r, const int rc[], MPI_Datatype t, MPI_Op o, MPI_Comm c, MPI_Request *q)
{
    POSTED(OP_IREDUCE_SCATTER, sum_counts(c, rc, t), PMPI_Ireduce_scatter(s, r, rc, t, o, c, q), q);
}

int MPI_Ireduce_scatter_block(const void *s, void *r, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c, MPI_Request *q)
{
    POSTED(OP_IREDUCE_SCATTER_BLOCK, type_bytes(n, t) * comm_size(c), PMPI_Ireduce_scatter_block(s, r, n, t, o, c, q),
           q);
}

int MPI_Iallgather(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, MPI_Comm c,
                   MPI_Request *q)
{
    POSTED(OP_IALLGATHER, type_bytes(rn, rt) * comm_size(c), PMPI_Iallgather(s, sn, st, r, rn, rt, c, q), q);
}

int MPI_Iallgatherv(const void *s, int sn, MPI_Datatype st, void *r, const int rn[], const int d[], MPI_Datatype rt,
                    MPI_Comm c, MPI_Request *q)
{
    POSTED(OP_IALLGATHERV, sum_counts(c, rn, rt), PMPI_Iallgatherv(s, sn, st, r, rn, d, rt, c, q), q);
}

int MPI_Ialltoall(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, MPI_Comm c,
                  MPI_Request *q)
{
    POSTED(OP_IALLTOALL, type_bytes(rn, rt) * comm_size(c), PMPI_Ialltoall(s, sn, st, r, rn, rt, c, q), q);
}

int MPI_Ibarrier(MPI_Comm c, MPI_Request *q) { POSTED(OP_IBARRIER, 0, PMPI_Ibarrier(c, q), q); }

int MPI_Isend(const void *b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm c, MPI_Request *q)
{
    POSTED(OP_ISEND, type_bytes(n, t), PMPI_Isend(b, n, t, dest, tag, c, q), q);
}

int MPI_Irecv(void *b, int n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Request *q)
{
    POSTED(OP_IRECV, type_bytes(n, t), PMPI_Irecv(b, n, t, src, tag, c, q), q);
}

/* ---- completion ------------------------------------------------------------------ */

int MPI_Wait(MPI_Request *q, MPI_Status *st)
{
    uint64_t k = req_key(*q);
    int rc = PMPI_Wait(q, st);
    if (rc == MPI_SUCCESS)
        req_end(k, now(), 1);
    return rc;
}

int MPI_Test(MPI_Request *q, int *flag, MPI_Status *st)
{
    uint64_t k = req_key(*q);
    int rc = PMPI_Test(q, flag, st);
    if (rc == MPI_SUCCESS && *flag)
        req_end(k, now(), 1);
    return rc;
}

/* Keys of n requests (on the stack for the usual few, else the heap). */
static uint64_t *keys_of(int n, MPI_Request q[], uint64_t *small, int nsmall)
{
    uint64_t *k = n <= nsmall ? small : malloc((size_t)n * sizeof *k);
    for (int i = 0; k && i < n; i++)
        k[i] = req_key(q[i]);
    return k;
}

/* Ends the requests that completed among k[0..n): indices idx[0..out)
 * (MPI_Waitsome, MPI_Testsome; one for the -any calls), or all n when idx is NULL. */
static void end_some(const uint64_t *k, int out, const int idx[], double t1)
{
    for (int i = 0; out != MPI_UNDEFINED && i < out; i++)
        req_end(k[idx ? idx[i] : i], t1, 1);
}

/* A completion call on q[0..n): the requests' keys are taken before it (it
 * may free them), `ended` runs after it succeeded with k_ and t1_ set. */
#define COMPLETION(n, q, call, ended)                     \
    do {                                                  \
        uint64_t small_[64], *k_ = keys_of(n, q, small_, 64); \
        int rc_ = (call);                                 \
        double t1_ = now();                               \
        if (k_ && rc_ == MPI_SUCCESS)                     \
            ended;                                        \
        if (k_ != small_)                                 \
            free(k_);                                     \
        return rc_;                                       \
    } while (0)

int MPI_Waitall(int n, MPI_Request q[], MPI_Status st[])
{
    COMPLETION(n, q, PMPI_Waitall(n, q, st), end_some(k_, n, NULL, t1_));
}

int MPI_Testall(int n, MPI_Request q[], int *flag, MPI_Status st[])
{
    COMPLETION(n, q, PMPI_Testall(n, q, flag, st), end_some(k_, *flag ? n : 0, NULL, t1_));
}

int MPI_Waitany(int n, MPI_Request q[], int *index, MPI_Status *st)
{
    COMPLETION(n, q, PMPI_Waitany(n, q, index, st), end_some(k_, *index != MPI_UNDEFINED, index, t1_));
}

int MPI_Testany(int n, MPI_Request q[], int *index, int *flag, MPI_Status *st)
{
    COMPLETION(n, q, PMPI_Testany(n, q, index, flag, st),
               end_some(k_, *flag && *index != MPI_UNDEFINED, index, t1_));
}

int MPI_Waitsome(int n, MPI_Request q[], int *out, int idx[], MPI_Status st[])
{
    COMPLETION(n, q, PMPI_Waitsome(n, q, out, idx, st), end_some(k_, *out, idx, t1_));
}

int MPI_Testsome(int n, MPI_Request q[], int *out, int idx[], MPI_Status st[])
{
    COMPLETION(n, q, PMPI_Testsome(n, q, out, idx, st), end_some(k_, *out, idx, t1_));
}

int MPI_Request_free(MPI_Request *q)
{
    uint64_t k = req_key(*q);
    req_end(k, 0, 0);
    persist_forget(k);
    return PMPI_Request_free(q);
}

/* ---- persistent requests: MPI_*_init, then MPI_Start / MPI_Startall ----------------- */

#define PERSISTENT(op, bytes, call, req)         \
    do {                                         \
        int rc_ = (call);                        \
        if (rc_ == MPI_SUCCESS)                  \
            persist_add(*(req), op, bytes);      \
        return rc_;                              \
    } while (0)

int MPI_Send_init(const void *b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm c, MPI_Request *q)
{
    PERSISTENT(OP_SEND_INIT, type_bytes(n, t), PMPI_Send_init(b, n, t, dest, tag, c, q), q);
}

int MPI_Recv_init(void *b, int n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Request *q)
{
    PERSISTENT(OP_RECV_INIT, type_bytes(n, t), PMPI_Recv_init(b, n, t, src, tag, c, q), q);
}

/* Persistent collectives are MPI 4.0 (MPICH 4; not Open MPI 4.1). */
#if MPI_VERSION >= 4
int MPI_Allreduce_init(const void *s, void *r, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c, MPI_Info i,
                       MPI_Request *q)
{
    PERSISTENT(OP_ALLREDUCE_INIT, type_bytes(n, t), PMPI_Allreduce_init(s, r, n, t, o, c, i, q), q);
}

int MPI_Bcast_init(void *b, int n, MPI_Datatype t, int root, MPI_Comm c, MPI_Info i, MPI_Request *q)
{
    PERSISTENT(OP_BCAST_INIT, type_bytes(n, t), PMPI_Bcast_init(b, n, t, root, c, i, q), q);
}

int MPI_Reduce_init(const void *s, void *r, int n, MPI_Datatype t, MPI_Op o, int root, MPI_Comm c, MPI_Info i,
                    MPI_Request *q)
{
    PERSISTENT(OP_REDUCE_INIT, type_bytes(n, t), PMPI_Reduce_init(s, r, n, t, o, root, c, i, q), q);
}

int MPI_Allgather_init(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, MPI_Comm c,
                       MPI_Info i, MPI_Request *q)
{
    PERSISTENT(OP_ALLGATHER_INIT, type_bytes(rn, rt) * comm_size(c), PMPI_Allgather_init(s, sn, st, r, rn, rt, c, i, q),
               q);
}

int MPI_Alltoall_init(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, MPI_Comm c,
                      MPI_Info i, MPI_Request *q)
{
    PERSISTENT(OP_ALLTOALL_INIT, type_bytes(rn, rt) * comm_size(c), PMPI_Alltoall_init(s, sn, st, r, rn, rt, c, i, q),
               q);
}

int MPI_Barrier_init(MPI_Comm c, MPI_Info i, MPI_Request *q)
{
    PERSISTENT(OP_BARRIER_INIT, 0, PMPI_Barrier_init(c, i, q), q);
}

int MPI_Reduce_scatter_block_init(const void *s, void *r, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c, MPI_Info i,
                                  MPI_Request *q)
{
    PERSISTENT(OP_REDUCE_SCATTER_BLOCK_INIT, type_bytes(n, t) * comm_size(c),
               PMPI_Reduce_scatter_block_init(s, r, n, t, o, c, i, q), q);
}
#endif

int MPI_Start(MPI_Request *q)
{
    double t0 = now();
    int rc = PMPI_Start(q);
    if (rc == MPI_SUCCESS)
        persist_start(*q, t0);
    return rc;
}

int MPI_Startall(int n, MPI_Request q[])
{
    double t0 = now();
    int rc = PMPI_Startall(n, q);
    for (int i = 0; rc == MPI_SUCCESS && i < n; i++)
        persist_start(q[i], t0);
    return rc;
}

/* ---- start and finish ---------------------------------------------------------------- */

int MPI_Init(int *argc, char ***argv)
{
    t_init = now();
    return PMPI_Init(argc, argv);
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    t_init = now();
    return PMPI_Init_thread(argc, argv, required, provided);
}

/* This rank's object of the profile.json "ranks" array. */
static char *rank_json(int rank, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f)
        return NULL;
    double mpi = 0;
    for (int o = 0; o < OP_COUNT; o++)
        mpi += stats[o].seconds;
    fprintf(f, "{\"rank\":%d,\"totals\":{\"runtime_s\":%.9g,\"mpi_s\":%.9g},\"layers\":[],\"comm\":[", rank,
            now() - t_init, mpi);
    int first = 1;
    for (int o = 0; o < OP_COUNT; o++) {
        const op_stat *s = &stats[o];
        if (!s->calls)
            continue;
        fprintf(f, "%s{\"collective\":\"%s\",\"algorithm\":\"library\",\"use\":\"application\",\"calls\":%llu,"
                   "\"bytes\":%llu,\"seconds\":%.9g,\"queue_seconds\":0,\"sizes\":[",
                first ? "" : ",", op_names[o], (unsigned long long)s->calls, (unsigned long long)s->bytes,
                s->seconds);
        first = 0;
        int fb = 1;
        for (int k = 0; k < NBINS; k++) {
            const bin *b = &s->bins[k];
            if (!b->n)
                continue;
            fprintf(f, "%s{\"max_bytes\":%llu,\"count\":%llu,\"avg_s\":%.9g,\"min_s\":%.9g,\"max_s\":%.9g}",
                    fb ? "" : ",", 1ull << k, (unsigned long long)b->n, b->sum / (double)b->n, b->min, b->max);
            fb = 0;
        }
        fputs("]}", f);
    }
    fputs("]}", f);
    fclose(f);
    return buf;
}

/* The text table: one line per call and message size, summed over ranks. */
static void write_text(const char *path, const char *json_path, int p)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    fprintf(f, "# libscaleout-prof: MPI calls of rank 0 (all ranks: %s), %d ranks\n", json_path, p);
    fprintf(f, "%-26s %12s %12s %12s %12s %12s %12s\n", "call", "size<=", "count", "avg_us", "min_us", "max_us",
            "total_ms");
    for (int o = 0; o < OP_COUNT; o++)
        for (int k = 0; k < NBINS; k++) {
            const bin *b = &stats[o].bins[k];
            if (b->n)
                fprintf(f, "%-26s %12llu %12llu %12.2f %12.2f %12.2f %12.3f\n", op_names[o], 1ull << k,
                        (unsigned long long)b->n, 1e6 * b->sum / (double)b->n, 1e6 * b->min, 1e6 * b->max,
                        1e3 * b->sum);
        }
    fclose(f);
}

/* Gathers every rank's JSON on rank 0 (PMPI only, so nothing is recorded)
 * and writes the profile and the text table there. */
static void write_all(void)
{
    int rank = 0, p = 1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &p);
    size_t len = 0;
    char *mine = rank_json(rank, &len);
    int n = mine ? (int)len : 0, *counts = rank == 0 ? calloc((size_t)p, sizeof *counts) : NULL;
    int *displs = rank == 0 ? calloc((size_t)p, sizeof *displs) : NULL;
    PMPI_Gather(&n, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
    size_t total = 0;
    for (int i = 0; rank == 0 && counts && displs && i < p; i++) {
        displs[i] = (int)total;
        total += (size_t)counts[i];
    }
    char *all = rank == 0 ? malloc(total + 1) : NULL;
    PMPI_Gatherv(mine, n, MPI_CHAR, all, counts, displs, MPI_CHAR, 0, MPI_COMM_WORLD);
    const char *path = getenv("SCALEOUT_PMPI_OUT");
    if (!path || !*path)
        path = "scaleout-pmpi.json";
    FILE *f = rank == 0 && all && counts ? fopen(path, "w") : NULL;
    if (f) {
        char host[256] = "?";
        gethostname(host, sizeof host - 1);
        fprintf(f, "{\"format\":\"scaleout-profile\",\"version\":1,\"source\":\"libscaleout-prof (PMPI)\",\n"
                   "\"config\":{\"model\":\"MPI program\"},\n\"environment\":{\"host\":\"%s\",\"world_size\":%d},\n"
                   "\"ranks\":[\n",
                host, p);
        for (int i = 0; i < p; i++)
            fprintf(f, "%s%.*s", i ? ",\n" : "", counts[i], all + displs[i]);
        fputs("\n]}\n", f);
        fclose(f);
        char txt[4096];
        snprintf(txt, sizeof txt, "%s.txt", path);
        write_text(txt, path, p);
    } else if (rank == 0) {
        fprintf(stderr, "libscaleout-prof: cannot write '%s'\n", path);
    }
    free(mine);
    free(all);
    free(counts);
    free(displs);
}

int MPI_Finalize(void)
{
    write_all();
    return PMPI_Finalize();
}
