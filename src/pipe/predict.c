/* A pipeline's step predicted from its plan (pipeline.h): the stages' measured
 * times, what crossing each cut costs and the replicas' gradient average.
 * `scaleout predict --pipeline-stages` sets it beside data parallelism. */
#include "scaleout/err.h"
#include "scaleout/pipeline.h"

int so_pipe_predict(const so_pipe_plan *p, int microbatch, const so_pipe_predict_config *c, so_pipe_prediction *out)
{
    *out = (so_pipe_prediction){0};
    int P = p->nstages, M = c->microbatches;
    if (M < 1 || microbatch < 1 || !c->cut_seconds)
        return so_err(SO_EINVAL, "so_pipe_predict: bad arguments");
    double sum = 0, fill = 0;
    size_t most_params = 0, all_params = 0;
    for (int s = 0; s < P; s++) {
        const so_pipe_stage *st = &p->stages[s];
        if (!(st->seconds > 0))
            return so_err(SO_EINVAL, "so_pipe_predict: stage %d has no measured time", s);
        sum += st->seconds;
        out->slowest_stage_seconds = st->seconds > out->slowest_stage_seconds ? st->seconds : out->slowest_stage_seconds;
        most_params = st->params > most_params ? st->params : most_params;
        all_params += st->params;
    }
    for (int cut = 0; cut + 1 < P; cut++) {
        size_t bytes;
        so_pipe_cut_tensors(p, cut, &bytes);
        double x = c->cut_seconds(c->ctx, cut, bytes * (size_t)microbatch);
        fill += 2 * x; /* the first micro-batch's activations forward, its diffs back */
        out->slowest_cut_seconds = x > out->slowest_cut_seconds ? x : out->slowest_cut_seconds;
    }
    double pace = out->slowest_stage_seconds > out->slowest_cut_seconds ? out->slowest_stage_seconds
                                                                        : out->slowest_cut_seconds;
    if (c->replicas > 1 && c->replica_seconds)
        out->replica_seconds = c->replica_seconds(c->ctx, most_params * sizeof(float));
    double optimizer = all_params ? c->optimizer_seconds * (double)most_params / (double)all_params : 0;
    out->step_seconds = sum + fill + (M - 1) * pace + out->replica_seconds + optimizer;
    out->bubble = 1 - (M * sum + P * optimizer) / (P * out->step_seconds);
    return 0;
}
