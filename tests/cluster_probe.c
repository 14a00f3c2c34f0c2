/* Probe for tests/cluster.sh, run under scripts/cluster.sh mpirun: prints what
 * scaleout sees of the emulated nodes (hostname, node id and count), and with
 * `bytes COUNT` the bytes this rank's eth0 sent and received during one ring
 * allreduce of COUNT floats, next to what the ring algorithm sends. */
#include "scaleout/comm.h"
#include "scaleout/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One counter of /sys/class/net/eth0/statistics (the namespace's own /sys:
 * `ip netns exec` mounts it); -1 when absent (not on an emulated node). */
static long long link_counter(const char *name)
{
    char path[128];
    snprintf(path, sizeof path, "/sys/class/net/eth0/statistics/%s", name);
    FILE *f = fopen(path, "r");
    long long v = -1;
    if (f) {
        if (fscanf(f, "%lld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

/* A tiny allreduce as a barrier: after it every rank has finished what came before. */
static int sync_all(so_comm *c)
{
    int64_t one = 1;
    return so_comm_allreduce_i64(c, &one, 1, SO_REDUCE_SUM);
}

static int bytes_probe(so_comm *c, size_t count)
{
    float *v = calloc(count ? count : 1, sizeof *v);
    if (!v)
        return so_err(SO_ENOMEM, "out of memory");
    int rc = so_comm_set_allreduce_algo(c, SO_ALLREDUCE_RING);
    if (!rc)
        rc = sync_all(c);
    long long tx0 = link_counter("tx_bytes"), rx0 = link_counter("rx_bytes");
    if (!rc)
        rc = so_comm_allreduce(c, v, v, count, SO_REDUCE_SUM);
    if (!rc)
        rc = sync_all(c);
    long long tx1 = link_counter("tx_bytes"), rx1 = link_counter("rx_bytes");
    free(v);
    if (rc)
        return rc;
    int p = so_comm_size(c);
    /* Ring: reduce-scatter and allgather each send (p-1) of p blocks. */
    long long algo = (long long)(2.0 * (p - 1) / p * (double)(count * sizeof(float)));
    printf("bytes rank %d: algorithm %lld tx %lld rx %lld\n", so_comm_rank(c), algo, tx1 - tx0, rx1 - rx0);
    return 0;
}

int main(int argc, char **argv)
{
    so_comm *c;
    if (so_comm_init(&argc, &argv, &c)) {
        fprintf(stderr, "cluster_probe: %s\n", so_errmsg());
        so_comm_abort(NULL, 1, so_errmsg());
    }
    char host[64] = "?";
    gethostname(host, sizeof host - 1);
    so_comm_node nd;
    so_comm_node_info(c, &nd);
    printf("rank %d host %s node %d of %d nodes, node rank %d of %d\n", so_comm_rank(c), host,
           nd.node_id, nd.num_nodes, nd.node_rank, nd.node_size);
    fflush(stdout);
    int rc = 0;
    if (argc > 2 && strcmp(argv[1], "bytes") == 0)
        rc = bytes_probe(c, strtoull(argv[2], NULL, 10));
    if (rc)
        so_comm_abort(c, 1, so_errmsg());
    return so_comm_finalize(c) ? 1 : 0;
}
