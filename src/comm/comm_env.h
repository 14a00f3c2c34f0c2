/* Private to libscaleout_comm: every environment variable the comm layer
 * reads, parsed once per process in one place (comm_env.c), so a value
 * means the same in every group and no lazy static can race. */
#ifndef SCALEOUT_COMM_ENV_H
#define SCALEOUT_COMM_ENV_H
#include <stddef.h>

#include "scaleout/comm.h"

typedef struct {
    double stall_warning_s;   /* SCALEOUT_STALL_WARNING (s, default 60) */
    double timeout_s;         /* SCALEOUT_COMM_TIMEOUT (s, default 300) */
    int allreduce_set;        /* SCALEOUT_ALLREDUCE named a valid algorithm */
    so_allreduce_algo allreduce;
    size_t p2p_chunk;         /* SCALEOUT_P2P_CHUNK: bytes per isend/irecv message (test hook; default 1 GiB) */
    size_t coll_seg_floats;   /* SCALEOUT_COLL_SEG: ring/pipeline segment (bytes in, floats out; default 256 KiB) */
    double coll_spin_s;       /* SCALEOUT_COLL_SPIN_US: spin before backing off (default 2 ms) */
    int coll_yield;           /* SCALEOUT_COLL_YIELD: 1 always, 0 never, -1 auto */
    int coll_tcp;             /* SCALEOUT_COLL_TCP: hier across nodes on scaleout's tcp ring: 1 always, 0 never, -1 auto */
    int shm_nt;               /* SCALEOUT_SHM_NT=0 turns hier's streaming stores off */
    int shm_zc_nt;            /* SCALEOUT_SHM_ZC_NT=1 streams zero-copy stores */
    size_t shm_chunk;         /* SCALEOUT_SHM_CHUNK: hier's pipeline chunk (bytes, multiple of 64) */
    size_t shm_small;         /* SCALEOUT_SHM_SMALL: hier's one-barrier size (bytes, multiple of 64) */
    const char *tuning_path;  /* SCALEOUT_TUNING (NULL: none) */
    so_transport transport;   /* SCALEOUT_COLL_TRANSPORT: the groups' transport (default auto) */
    long local_ranks;         /* the launcher's ranks on this host (0: not said) */
    int oversubscribed;       /* more of them than online CPUs */
} so_comm_env;

/* The values, read on the first call (thread-safe); malformed ones are
 * reported once (so_log) and replaced by the default. */
const so_comm_env *so_comm_env_get(void);

#endif
