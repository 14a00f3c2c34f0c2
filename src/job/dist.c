/* The bridge from the trainer's so_dist hooks to the comm module (dist.h). MPI starts only when a launcher started this process (mpirun,
 * mpiexec or srun set PMI/PMIx/Open MPI variables), so a plain `scaleout
 * train` never pays for MPI start-up and works where MPI is absent. */
#include "dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "scaleout/log.h"

#ifdef SCALEOUT_HAVE_MPI
#include "scaleout/comm.h"
#include "scaleout/comm_async.h"
#endif

struct dist_handle {
    so_dist d;
    int active;
    int elsewhere; /* the last agreed failure was another rank's */
    int in_group;  /* over a caller's group (dist_open_group): its comm is not ours to finalise */
#ifdef SCALEOUT_HAVE_MPI
    so_comm *comm;
    so_async *async;
    so_allreduce_algo algo;
    so_group *group; /* so_dist.group */
#endif
};

#ifdef SCALEOUT_HAVE_MPI
static int launched_by_mpi(void)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK", "SLURM_STEP_NUM_TASKS"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i]))
            return 1;
    return 0;
}

/* How many processes the launcher started, from its environment (0: not
 * said). An srun whose PMI this MPI library does not speak (--mpi=pmix with
 * an MPICH build) starts N singletons that would each train alone. */
static long launched_size(void)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (v && atol(v) > 0)
            return atol(v);
    }
    return 0;
}

static int check_size(so_comm *c)
{
    long want = launched_size();
    if (want <= 1 || so_comm_size(c) > 1)
        return 0;
    return so_err(SO_EINVAL, "started as one of %ld processes, but MPI sees this one only: the launcher's PMI "
                  "does not match this MPI library (srun: --mpi=pmix for Open MPI, --mpi=pmi2 for MPICH; "
                  "docs/SLURM.md)", want);
}

static int grad_submit(void *ctx, float *buf, size_t count, int bucket)
{
    dist_handle *h = ctx;
    return so_async_submit(h->async, buf, count, SO_REDUCE_AVG, bucket);
}

static int grad_wait(void *ctx, double *waited) { return so_async_wait_all(((dist_handle *)ctx)->async, 0, waited); }

static int grad_wait_bucket(void *ctx, int k, double *waited)
{
    return so_async_wait_one(((dist_handle *)ctx)->async, (size_t)k, waited);
}

/* The trainer's own reductions go through the collective vocabulary too:
 * the communication thread runs them behind whatever is queued (buckets,
 * shards), so they are legal at any moment. The MPI library's own
 * algorithm, in double precision, as before. */
static int reduce_doubles(dist_handle *h, double *v, size_t n, so_reduce_op op)
{
    so_coll_opts o = SO_COLL_OPTS_INIT;
    o.algo = SO_ALLREDUCE_MPI;
    so_handle *hd;
    int rc = so_comm_iallreduce(h->comm, v, v, n, SO_DTYPE_F64, op, &o, &hd);
    return rc ? rc : so_handle_wait(hd);
}

static int sum(void *ctx, double *v, int n) { return reduce_doubles(ctx, v, (size_t)n, SO_REDUCE_SUM); }
static int max(void *ctx, double *v, int n) { return reduce_doubles(ctx, v, (size_t)n, SO_REDUCE_MAX); }

static int bcast(void *ctx, float *buf, size_t count)
{
    so_coll_opts o = SO_COLL_OPTS_INIT;
    o.algo = SO_BCAST_MPI;
    so_handle *hd;
    int rc = so_comm_ibcast(((dist_handle *)ctx)->comm, buf, count, SO_DTYPE_F32, 0, &o, &hd);
    return rc ? rc : so_handle_wait(hd);
}

/* Synchronised batchnorm, between gradient buckets: queued behind the ones
 * already submitted, as the MPI thread level (SERIALIZED) requires. */
static int allsum(void *ctx, double *v, size_t count) { return reduce_doubles(ctx, v, count, SO_REDUCE_SUM); }

/* The fitted model of the gradient algorithm (auto: of the one auto picks for
 * this size), on the layout the job runs on. */
static double cost(void *ctx, size_t bytes)
{
    dist_handle *h = ctx;
    so_comm_node nd;
    so_comm_node_info(h->comm, &nd);
    return so_comm_predict(h->algo, bytes, so_comm_size(h->comm), nd.ranks_per_node,
                           so_comm_get_tuning(h->comm));
}

/* Registered memory (so_comm_buf_alloc) for the gradient buffer, so hier
 * reduces the buckets in place without copies. Collective, like model creation. */
static void *buf_alloc(void *ctx, size_t bytes)
{
    void *p = NULL;
    return so_comm_buf_alloc(((dist_handle *)ctx)->comm, bytes, &p) ? NULL : p;
}

static void buf_free(void *ctx, void *p) { so_comm_buf_free(((dist_handle *)ctx)->comm, p); }

/* Gradients in registered memory: only hier (or auto, which picks it on one
 * node) can use it; SCALEOUT_REGISTERED_GRADS=0 turns it off (A/B runs). */
static int registered_grads(so_allreduce_algo algo)
{
    const char *e = getenv("SCALEOUT_REGISTERED_GRADS");
    return !(e && !strcmp(e, "0")) && (algo == SO_ALLREDUCE_HIER || algo == SO_ALLREDUCE_AUTO);
}

so_comm *dist_comm(dist_handle *h) { return h && h->active ? h->comm : NULL; }
so_async *dist_async(dist_handle *h) { return h && h->active ? h->async : NULL; }

/* The algorithm name is checked together with the registered-memory
 * decision, so a bad name on one rank stops every rank before any
 * collective allocation. */
static int agree_start(dist_handle *h, const dist_options *o, so_allreduce_algo *algo, int64_t *reg)
{
    int64_t v[2] = {0, 1}; /* registered gradients, name valid */
    const char *name = o && o->allreduce ? o->allreduce : "auto";
    if (so_allreduce_algo_parse(name, algo))
        v[1] = 0;
    /* Every rank must take the same decision (the allocation is collective),
     * even with different flags or environments: those are only reported by
     * the configuration check after the model exists. */
    v[0] = v[1] && registered_grads(*algo);
    int rc = so_comm_allreduce_i64(h->comm, v, 2, SO_REDUCE_MIN);
    if (rc)
        return rc;
    *reg = v[0];
    if (v[1])
        return 0;
    if (!so_allreduce_algo_parse(name, algo)) {
        h->elsewhere = 1;
        return so_err(SO_EINVAL, "--allreduce: unknown algorithm on another rank (see its message)");
    }
    return so_err(SO_EINVAL, "--allreduce: unknown algorithm '%s' (mpi, ring, rd, rabenseifner, tree, hier, auto)",
                  name);
}

static int open_mpi(const dist_options *o, dist_handle *h)
{
    int rc = so_comm_init(NULL, NULL, &h->comm);
    if (rc || (rc = check_size(h->comm)))
        return rc;
    if (o)
        so_comm_set_timeouts(h->comm, o->stall_warning, o->comm_timeout);
    if (o && o->ranks_per_node > 0 && (rc = so_comm_set_ranks_per_node(h->comm, o->ranks_per_node)))
        return rc;
    so_allreduce_algo algo = SO_ALLREDUCE_AUTO;
    int64_t reg = 0;
    if ((rc = agree_start(h, o, &algo, &reg)))
        return rc;
    h->d = (so_dist){.rank = so_comm_rank(h->comm), .world = so_comm_size(h->comm), .ctx = h,
                     .grad_submit = grad_submit, .grad_wait = grad_wait, .sum = sum, .max = max, .bcast = bcast,
                     .allsum = allsum, .cost = cost, .buf_alloc = reg ? buf_alloc : NULL,
                     .buf_free = reg ? buf_free : NULL, .grad_wait_bucket = grad_wait_bucket};
    h->algo = algo;
    so_log_set_rank(h->d.rank);
    if ((rc = so_async_create(h->comm, algo, &h->async)) || (rc = dist_group_new(h->comm, &h->group)))
        return rc;
    so_comm_set_allreduce_algo(h->comm, algo); /* the group's default for the vocabulary too */
    h->d.group = h->group;
    h->active = 1;
    return 0;
}
#endif

#ifdef SCALEOUT_HAVE_MPI
int dist_open_group(so_comm *group, const char *allreduce, dist_handle **out)
{
    dist_handle *h = calloc(1, sizeof *h);
    *out = h;
    if (!h)
        return so_err(SO_ENOMEM, "out of memory");
    so_allreduce_algo algo = SO_ALLREDUCE_AUTO;
    if (allreduce && so_allreduce_algo_parse(allreduce, &algo))
        algo = SO_ALLREDUCE_AUTO; /* the name was checked when the job started */
    h->comm = group;
    h->in_group = 1;
    h->algo = algo;
    h->d = (so_dist){.rank = so_comm_rank(group), .world = so_comm_size(group), .ctx = h,
                     .grad_submit = grad_submit, .grad_wait = grad_wait, .sum = sum, .max = max, .bcast = bcast,
                     .allsum = allsum, .cost = cost, .grad_wait_bucket = grad_wait_bucket};
    int rc = so_async_create(group, algo, &h->async);
    if (!rc)
        rc = dist_group_new(group, &h->group);
    h->d.group = h->group;
    h->active = !rc;
    return rc;
}
#endif

int dist_open(const dist_options *o, dist_handle **out)
{
    dist_handle *h = calloc(1, sizeof *h);
    *out = h;
    if (!h)
        return so_err(SO_ENOMEM, "out of memory");
#ifdef SCALEOUT_HAVE_MPI
    if (launched_by_mpi())
        return open_mpi(o, h);
#endif
    (void)o;
    return 0;
}

const so_dist *dist_get(dist_handle *h) { return h && h->active ? &h->d : NULL; }

int dist_failed_elsewhere(const dist_handle *h) { return h && h->elsewhere; }

void dist_mark_elsewhere(dist_handle *h) { h->elsewhere = 1; }

/* Input errors (2) outrank other failures (1), as the CLI's exit codes do. */
static int severity(int rc) { return !rc ? 0 : rc == SO_EINVAL || rc == SO_EIO || rc == SO_EFORMAT ? 2 : 1; }

int dist_agree(dist_handle *h, int rc)
{
    h->elsewhere = 0;
    if (!h->active)
        return rc;
    double worst = severity(rc);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", rc ? so_errmsg() : "");
    int crc = h->d.max(h->d.ctx, &worst, 1);
    if (crc)
        return crc;
    if (rc)
        return so_err(rc, "%s", msg);
    if (worst == 0)
        return 0;
    h->elsewhere = 1;
    return so_err(worst > 1 ? SO_EINVAL : SO_ECOMM, "stopping: set-up failed on another rank (see its message)");
}

int dist_check_config(dist_handle *h, const char *config)
{
    h->elsewhere = 0;
    if (!h->active)
        return 0;
#ifdef SCALEOUT_HAVE_MPI
    char msg[512];
    int rc = so_comm_check_config(h->comm, config, msg, sizeof msg);
    if (rc == SO_EINVAL) {
        h->elsewhere = h->d.rank != 0; /* the same message everywhere: one rank says it */
        return so_err(SO_EINVAL, "%s", msg);
    }
    return rc;
#else
    (void)config;
    return 0;
#endif
}

void dist_abort(dist_handle *h, int code, const char *line)
{
#ifdef SCALEOUT_HAVE_MPI
    if (h && h->active && h->d.world > 1)
        so_comm_abort(h->comm, code, line);
#endif
    (void)h, (void)code, (void)line;
}

double dist_comm_seconds(dist_handle *h)
{
#ifdef SCALEOUT_HAVE_MPI
    if (h && h->active) {
        so_async_totals t;
        so_async_get_totals(h->async, &t);
        return t.comm_s;
    }
#endif
    (void)h;
    return 0;
}

void dist_close(dist_handle *h)
{
    if (!h)
        return;
#ifdef SCALEOUT_HAVE_MPI
    so_async_destroy(h->async);
    dist_group_free(h->group);
    if (!h->in_group)
        so_comm_finalize(h->comm);
#endif
    free(h);
}
