/* `scaleout predict --compute-from PROFILE`: the per-layer times of a
 * profile.json (predict_profile.h). The file comes from anywhere, so every
 * field is checked before it is used; fuzzed by fuzz/fuzz_predict_profile.c. */
#include "predict_profile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jread.h"
#include "scaleout/err.h"

/* The node of g named `name`, or -1. */
static int node_named(const so_graph *g, const char *name)
{
    for (int i = 1; i < so_graph_size(g); i++)
        if (!strcmp(so_graph_node(g, i)->name, name))
            return i;
    return -1;
}

/* One rank's layers of a profile added into t (forward, then backward, per
 * node, seconds per step); *useful += its compute seconds per step. */
/* A duration of the profile: finite and not negative (a prediction built on
 * -1 s or on infinity is no prediction). */
static int duration(double v) { return isfinite(v) && v >= 0; }

static int add_rank(const jv *rank, const so_graph *g, const char *path, double *t, double *useful)
{
    int n = so_graph_size(g);
    double steps = jv_num(rank, "totals.steps", 0), use = jv_num(rank, "totals.useful_s", 0);
    const jv *layers = jv_path(rank, "layers");
    if (!(steps > 0) || !isfinite(steps) || !layers || layers->t != JV_ARR || layers->len == 0)
        return so_err(SO_EFORMAT, "--compute-from: %s has no per-layer times (train --profile DIR "
                      "--profile-detail layer writes them)", path);
    if (!duration(use))
        return so_err(SO_EFORMAT, "--compute-from: %s: a rank's useful_s is %g, not a duration", path, use);
    for (int k = 0; k < layers->len; k++) {
        const jv *l = jv_at(layers, k);
        const char *name = jv_str(l, "name", "");
        int i = node_named(g, name);
        if (i < 0)
            return so_err(SO_EINVAL, "--compute-from: %s has a layer '%s' that the model has not", path, name);
        double f = jv_num(l, "forward_s", 0), b = jv_num(l, "backward_s", 0);
        if (!duration(f) || !duration(b))
            return so_err(SO_EFORMAT, "--compute-from: %s: layer '%s' has forward_s %g and backward_s %g, not "
                          "durations", path, name, f, b);
        t[i] += f / steps;
        t[n + i] += b / steps;
        if (!duration(t[i]) || !duration(t[n + i]))
            return so_err(SO_EFORMAT, "--compute-from: %s: the times of layer '%s' add up past any duration",
                          path, name);
    }
    *useful += use / steps;
    return duration(*useful) ? 0 : so_err(SO_EFORMAT, "--compute-from: %s: useful_s adds up past any duration",
                                           path);
}

int predict_profile_times(const char *text, size_t len, const char *path, const so_graph *g, const char *model_want,
                          int batch_want, double *t, double *t_other)
{
    char err[200];
    jv *doc = jv_parse(text, len, err, sizeof err);
    if (!doc)
        return so_err(SO_EFORMAT, "--compute-from: %s: not valid JSON (%s)", path, err);
    const char *model = jv_str(doc, "config.model", ""), *batch = jv_str(doc, "config.batch", "");
    const jv *ranks = jv_path(doc, "ranks");
    int rc = 0, nr = ranks && ranks->t == JV_ARR ? ranks->len : 0, n = so_graph_size(g);
    if (!*model || !*batch)
        rc = so_err(SO_EFORMAT, "--compute-from: %s is not a profile of `train --profile` (it names %s)", path,
                    !*model && !*batch ? "no model and no batch" : !*model ? "no model" : "no batch");
    else if (strcmp(model, model_want) || atoi(batch) != batch_want)
        rc = so_err(SO_EINVAL, "--compute-from: %s was measured with model %s at batch %s, not %s at --batch-size %d",
                    path, model, batch, model_want, batch_want);
    else if (nr < 1)
        rc = so_err(SO_EFORMAT, "--compute-from: %s has no ranks", path);
    double useful = 0;
    for (int r = 0; !rc && r < nr; r++)
        rc = add_rank(jv_at(ranks, r), g, path, t, &useful);
    double layers = 0;
    for (int i = 0; !rc && i < 2 * n; i++)
        layers += t[i] /= nr;
    if (!rc && !duration(layers))
        rc = so_err(SO_EFORMAT, "--compute-from: %s: the layers' times add up past any duration", path);
    *t_other = !rc && useful / nr > layers ? useful / nr - layers : 0;
    jv_free(doc);
    return rc;
}
