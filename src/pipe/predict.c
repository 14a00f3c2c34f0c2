/* A pipeline's step predicted from its plan (pipeline.h): the stages' measured
 * times, what crossing each cut costs and the replicas' gradient average.
 * `scaleout predict --pipeline-stages` sets it beside data parallelism. */
#include "scaleout/err.h"
#include "scaleout/pipeline.h"

int so_pipe_predict(const so_pipe_plan *p, int microbatch, const so_pipe_predict_config *c, so_pipe_prediction *out)
{
    *out = (so_pipe_prediction){0};
    int S = p->nstages, P = c->devices > 0 ? c->devices : S, M = c->microbatches;
    if (M < 1 || microbatch < 1 || !c->cut_seconds || S % P)
        return so_err(SO_EINVAL, "so_pipe_predict: bad arguments");
    int v = S / P;
    double device[4096] = {0}, sends[4096] = {0}, sum = 0, fill = 0, slowest = 0, slowest_sends = 0;
    if (P > 4096)
        return so_err(SO_EINVAL, "so_pipe_predict: %d devices", P);
    size_t dev_params[4096] = {0}, most_params = 0, all_params = 0;
    for (int s = 0; s < S; s++) {
        const so_pipe_stage *st = &p->stages[s];
        if (!(st->seconds > 0))
            return so_err(SO_EINVAL, "so_pipe_predict: stage %d has no measured time", s);
        device[s % P] += st->seconds;
        dev_params[s % P] += st->params;
        sum += st->seconds;
        all_params += st->params;
        out->slowest_stage_seconds = st->seconds > out->slowest_stage_seconds ? st->seconds : out->slowest_stage_seconds;
    }
    for (int cut = 0; cut + 1 < S; cut++) {
        size_t bytes;
        so_pipe_cut_tensors(p, cut, &bytes);
        double x = c->cut_seconds(c->ctx, cut, bytes * (size_t)microbatch);
        fill += 2 * x; /* the first micro-batch's activations forward, its diffs back */
        sends[cut % P] += x;
        out->slowest_cut_seconds = x > out->slowest_cut_seconds ? x : out->slowest_cut_seconds;
    }
    for (int d = 0; d < P; d++) {
        slowest = device[d] > slowest ? device[d] : slowest;
        slowest_sends = sends[d] > slowest_sends ? sends[d] : slowest_sends;
        most_params = dev_params[d] > most_params ? dev_params[d] : most_params;
    }
    /* Equal devices of v chunks u each: (M v + P - 1) u; the fill is (sum - slowest) / v. */
    double pace = slowest > slowest_sends ? slowest : slowest_sends;
    if (c->replicas > 1 && c->replica_seconds)
        out->replica_seconds = c->replica_seconds(c->ctx, most_params * sizeof(float));
    double optimizer = all_params ? c->optimizer_seconds * (double)most_params / (double)all_params : 0;
    out->step_seconds = (sum - slowest + fill) / v + M * pace + out->replica_seconds + optimizer;
    out->bubble = 1 - (M * sum + P * optimizer) / (P * out->step_seconds);
    return 0;
}
