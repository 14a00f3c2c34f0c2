/* Private to libscaleout_comm, engine layer: the communication thread behind
 * the vocabulary of comm_async.h, as the rest of the module calls it. */
#ifndef SCALEOUT_COMM_ENGINE_H
#define SCALEOUT_COMM_ENGINE_H

#include "dispatch.h"

/* Submits a collective on c (checked first: SO_EINVAL / SO_ENOMEM leave no
 * handle); tag is the caller's id for messages and the log. */
int so_engine_coll(so_comm *c, const so_coll_call *call, int tag, so_handle **out);

/* so_handle_wait that also copies the operation's record (the log's entry)
 * into *st before the handle is freed. */
int so_handle_wait_stat(so_handle *h, so_op_stat *st);
/* The same with a limit: timeout_s > 0 returns SO_ECOMM once it passed, the
 * handle still the caller's; <= 0 waits as long as it takes. */
int so_handle_wait_until(so_handle *h, double timeout_s, so_op_stat *st);

/* Blocks until no operation of the process is outstanding (group tear-down). */
void so_engine_drain(void);
/* Stops the communication thread after draining (so_comm_finalize of the
 * job's group, before MPI_Finalize). It starts again on the next submit. */
void so_engine_stop(void);

#endif
