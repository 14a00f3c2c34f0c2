/* The comm layer's environment (comm_env.h): one table of variables, each
 * with its default and range, parsed once under pthread_once. */
#include "comm_env.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scaleout/err.h"
#include "scaleout/log.h"

/* MPI counts are int: one message carries at most 1 GiB (SO_MPI_CHUNK). */
#define P2P_CHUNK_MAX ((double)(1 << 30))

static so_comm_env env;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static const char *value(const char *name)
{
    const char *s = getenv(name);
    return s && *s ? s : NULL;
}

/* A number in [lo, hi], else def (a malformed value is reported). */
static double number(const char *name, double def, double lo, double hi)
{
    const char *s = value(name);
    if (!s)
        return def;
    char *end;
    double v = strtod(s, &end);
    if (*end || !(v >= lo && v <= hi)) {
        so_log(SO_LOG_WARN, "ignoring %s=%s (want a number in [%g, %g])", name, s, lo, hi);
        return def;
    }
    return v;
}

/* "0" / "1" as 0 / 1, else def. */
static int flag(const char *name, int def)
{
    const char *s = value(name);
    return !s ? def : !strcmp(s, "1") ? 1 : !strcmp(s, "0") ? 0 : def;
}

static long local_ranks(void)
{
    /* Open MPI, MPICH/Hydra, PMI: the job's count on this host, not a
     * group's: every process here competes for its cores. */
    static const char *const names[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMI_LOCAL_SIZE"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const char *s = value(names[i]);
        long v = s ? strtol(s, NULL, 10) : 0;
        if (v > 0)
            return v;
    }
    return 0;
}

static void read_all(void)
{
    env.stall_warning_s = number("SCALEOUT_STALL_WARNING", 60, 0, 1e9);
    env.timeout_s = number("SCALEOUT_COMM_TIMEOUT", 300, 0, 1e9);
    const char *algo = value("SCALEOUT_ALLREDUCE");
    if (algo && !so_allreduce_algo_parse(algo, &env.allreduce))
        env.allreduce_set = 1;
    else if (algo)
        so_log(SO_LOG_WARN, "ignoring SCALEOUT_ALLREDUCE=%s: %s", algo, so_errmsg());
    env.p2p_chunk = (size_t)number("SCALEOUT_P2P_CHUNK", P2P_CHUNK_MAX, 1, P2P_CHUNK_MAX);
    /* 256 KiB: big enough that per-segment MPI overhead (~1 us) is small,
     * small enough that two segments and their block stay in a 2 MiB L2. */
    env.coll_seg_floats = (size_t)number("SCALEOUT_COLL_SEG", 256 << 10, 64, (double)(1 << 30)) / sizeof(float);
    env.coll_spin_s = number("SCALEOUT_COLL_SPIN_US", 2000, 0, 1e7) * 1e-6;
    env.coll_yield = flag("SCALEOUT_COLL_YIELD", -1);
    env.coll_tcp = flag("SCALEOUT_COLL_TCP", -1);
    env.shm_nt = flag("SCALEOUT_SHM_NT", 1);
    env.shm_zc_nt = flag("SCALEOUT_SHM_ZC_NT", 0);
    /* hier: 64 KiB and below in one barrier, every rank reducing everything;
     * 128 KiB pipeline chunks (the fastest with streaming stores, np 2). */
    env.shm_small = (size_t)number("SCALEOUT_SHM_SMALL", 64 << 10, 64, (double)(1 << 30)) & ~(size_t)63;
    env.shm_chunk = (size_t)number("SCALEOUT_SHM_CHUNK", 128 << 10, 64, (double)(1 << 30)) & ~(size_t)63;
    env.tuning_path = value("SCALEOUT_TUNING");
    const char *tp = value("SCALEOUT_COLL_TRANSPORT");
    if (tp && so_transport_parse(tp, &env.transport))
        so_log(SO_LOG_WARN, "ignoring SCALEOUT_COLL_TRANSPORT=%s: %s", tp, so_errmsg());
    env.local_ranks = local_ranks();
    long cpus = sysconf(_SC_NPROCESSORS_ONLN); /* reads /sys: once, not per wait */
    env.oversubscribed = env.local_ranks > 0 && cpus > 0 && env.local_ranks > cpus;
}

const so_comm_env *so_comm_env_get(void)
{
    pthread_once(&env_once, read_all);
    return &env;
}
