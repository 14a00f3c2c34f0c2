/* The send/recv pair that `scaleout bench <collective>` and `scaleout tune`
 * time collectives on: registered memory (so_comm_buf_alloc, where the
 * trainer's gradients live and hier runs zero-copy) or plain memory. */
#ifndef SCALEOUT_CLI_COLL_BUFS_H
#define SCALEOUT_CLI_COLL_BUFS_H
#include <stddef.h>

#include "scaleout/comm.h"

/* bytes each; registered allocation is collective (every rank, same order). */
int coll_bufs_alloc(so_comm *c, size_t bytes, int registered, float **send, float **recv);
void coll_bufs_free(so_comm *c, int registered, float *send, float *recv);

#endif
