/* Where the ranks of a pipelined job sit (pipeline.h, "ranks"): the options
 * checked against the world, each rank's stage and replica under the
 * placement and back, and a stage's rank within its replica's pipeline. */
#include <string.h>

#include "scaleout/err.h"
#include "scaleout/pipeline.h"

int so_pipe_options_check(const so_pipe_options *o, int world)
{
    int P = o->stages, M = o->microbatches > 0 ? o->microbatches : 1;
    int v = o->virtual_stages > 0 ? o->virtual_stages : 1;
    if (v > 1 && (!o->schedule || strcmp(o->schedule, "interleaved")))
        return so_err(SO_EINVAL, "--virtual-stages %d: only with --schedule interleaved", v);
    if (P <= 1)
        return v > 1 ? so_err(SO_EINVAL, "--virtual-stages %d: needs --pipeline-stages", v) : 0;
    if (world < P)
        return so_err(SO_EINVAL, "--pipeline-stages %d: needs at least %d ranks, this job has %d (mpirun -np N)", P, P,
                      world);
    if (world % P)
        return so_err(SO_EINVAL, "--pipeline-stages %d: %d ranks do not split into %d stages x replicas", P, world, P);
    if (o->batch % M)
        return so_err(SO_EINVAL, "--microbatches %d does not divide --batch-size %d", M, o->batch);
    if (o->accumulate > 1)
        return so_err(SO_EINVAL, "--accumulate with --pipeline-stages: use --microbatches");
    if (so_pipe_schedule_parse(o->schedule ? o->schedule : "1f1b") < 0)
        return so_err(SO_EINVAL, "--schedule: unknown schedule '%s' (gpipe, 1f1b, interleaved)", o->schedule);
    if (so_pipe_placement_parse(o->placement) < 0)
        return so_err(SO_EINVAL, "--placement: unknown placement '%s' (stage-major, replica-major)", o->placement);
    return 0;
}

int so_pipe_placement_parse(const char *name)
{
    if (!name || !strcmp(name, "stage-major"))
        return SO_PIPE_STAGE_MAJOR;
    return !strcmp(name, "replica-major") ? SO_PIPE_REPLICA_MAJOR : -1;
}

int so_pipe_group_rank(int stage, int stages) { return stages - 1 - stage; }

void so_pipe_ranks_of(int rank, int world, int stages, so_pipe_placement pl, so_pipe_ranks *out)
{
    int D = world / stages, q = pl == SO_PIPE_REPLICA_MAJOR ? rank / D : rank % stages;
    *out = (so_pipe_ranks){.stage = so_pipe_group_rank(q, stages), .stages = stages,
                           .replica = pl == SO_PIPE_REPLICA_MAJOR ? rank % D : rank / stages, .replicas = D};
}

int so_pipe_world_rank(const so_pipe_ranks *r, so_pipe_placement pl, int stage, int replica)
{
    int q = so_pipe_group_rank(stage, r->stages);
    return pl == SO_PIPE_REPLICA_MAJOR ? q * r->replicas + replica : replica * r->stages + q;
}
