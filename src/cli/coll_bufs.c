/* Registered or plain send/recv buffers for the collective benchmarks and
 * `scaleout tune` (coll_bufs.h). Registered buffers are allocated and freed
 * collectively, in the same order on every rank. */
#include "coll_bufs.h"

#include <stdlib.h>

#include "scaleout/err.h"

#ifdef SCALEOUT_HAVE_MPI
int coll_bufs_alloc(so_comm *c, size_t bytes, int registered, float **send, float **recv)
{
    *send = *recv = NULL;
    if (registered) {
        int rc = so_comm_buf_alloc(c, bytes, (void **)send);
        return rc ? rc : so_comm_buf_alloc(c, bytes, (void **)recv);
    }
    *send = calloc(1, bytes);
    *recv = calloc(1, bytes);
    return *send && *recv ? 0 : so_err(SO_ENOMEM, "out of memory for two buffers of %zu bytes", bytes);
}

void coll_bufs_free(so_comm *c, int registered, float *send, float *recv)
{
    if (registered) { /* collective, in allocation order */
        so_comm_buf_free(c, send);
        so_comm_buf_free(c, recv);
    } else {
        free(send);
        free(recv);
    }
}
#endif
