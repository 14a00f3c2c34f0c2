/* Names: collective kinds, their algorithms (the allreduce ones live with
 * the tuning file's text, tune_text.c), transports, and the even block
 * partition every collective shares. The bottom of the module: no MPI call,
 * so every layer above may name things. */
#include "reduce.h"

#include "scaleout/err.h"

#include <string.h>

/* Allreduce names live with the tuning-file text (tune_text.c), which needs no MPI. */
static const char *const rs_names[SO_RS_COUNT] = {[SO_RS_MPI] = "mpi", [SO_RS_RING] = "ring", [SO_RS_HIER] = "hier"};
static const char *const ag_names[SO_AG_COUNT] = {[SO_AG_MPI] = "mpi", [SO_AG_RING] = "ring", [SO_AG_HIER] = "hier"};
static const char *const bc_names[SO_BCAST_COUNT] = {[SO_BCAST_MPI] = "mpi", [SO_BCAST_BINOMIAL] = "binomial",
                                                     [SO_BCAST_PIPELINE] = "pipeline"};
static const char *const kind_names[SO_COLL_KINDS] = {"allreduce", "reduce-scatter", "allgather", "bcast"};
static const char *const ref_names[SO_COLL_KINDS] = {"MPI_Allreduce", "MPI_Reduce_scatter",
                                                     "MPI_Allgatherv", "MPI_Bcast"};

void so_comm_block(size_t count, int p, int i, size_t *off, size_t *len) { so_blk(count, p, i, off, len); }

const char *so_coll_kind_name(so_coll_kind kind)
{
    return (unsigned)kind < SO_COLL_KINDS ? kind_names[kind] : NULL;
}

int so_coll_algo_count(so_coll_kind kind)
{
    static const int n[SO_COLL_KINDS] = {SO_ALLREDUCE_COUNT, SO_RS_COUNT, SO_AG_COUNT, SO_BCAST_COUNT};
    return (unsigned)kind < SO_COLL_KINDS ? n[kind] : 0;
}

const char *so_coll_algo_name(so_coll_kind kind, int algo)
{
    if ((unsigned)kind >= SO_COLL_KINDS)
        return NULL;
    if (algo == SO_COLL_REFERENCE)
        return ref_names[kind];
    if (algo < 0 || algo >= so_coll_algo_count(kind))
        return NULL;
    switch (kind) {
    case SO_COLL_ALLREDUCE: return so_allreduce_algo_name((so_allreduce_algo)algo);
    case SO_COLL_REDUCE_SCATTER: return rs_names[algo];
    case SO_COLL_ALLGATHER: return ag_names[algo];
    default: return bc_names[algo];
    }
}

int so_coll_algo_parse(so_coll_kind kind, const char *name, int *out)
{
    for (int i = SO_COLL_REFERENCE; i < so_coll_algo_count(kind); i++) {
        const char *n = so_coll_algo_name(kind, i);
        if (name && n && strcmp(name, n) == 0) {
            *out = i;
            return 0;
        }
    }
    return so_err(SO_EINVAL, "unknown %s algorithm '%s'", so_coll_kind_name(kind) ? so_coll_kind_name(kind) : "?",
                  name ? name : "");
}

static const char *const tp_names[SO_TRANSPORT_COUNT] = {"auto", "mpi", "shm", "tcp"};

const char *so_transport_name(so_transport t) { return (unsigned)t < SO_TRANSPORT_COUNT ? tp_names[t] : NULL; }

int so_transport_parse(const char *name, so_transport *out)
{
    for (int i = 0; name && i < SO_TRANSPORT_COUNT; i++)
        if (!strcmp(name, tp_names[i])) {
            *out = (so_transport)i;
            return 0;
        }
    return so_err(SO_EINVAL, "unknown transport '%s' (auto, mpi, shm, tcp)", name ? name : "");
}
