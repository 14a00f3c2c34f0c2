/* libFuzzer target for the profiles `scaleout predict --compute-from` reads
 * (src/cli/predict_profile.c over the JSON reader src/cli/jread.c), on
 * LeNet-5's graph at batch 64: any bytes are refused with SO_EFORMAT or
 * SO_EINVAL, or give per-layer times a prediction can use: finite and not
 * negative, and the rest of a step likewise. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/predict_profile.h"
#include "scaleout/err.h"
#include "scaleout/zoo.h"

static so_graph *graph(void)
{
    static so_graph *g;
    if (!g && so_zoo_build("lenet5", 1, 28, 28, 10, &g))
        abort();
    return g;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const so_graph *g = graph();
    int n = so_graph_size(g);
    double *t = calloc(2 * (size_t)n, sizeof *t), other = -1;
    if (!t)
        return 0;
    int rc = predict_profile_times((const char *)data, size, "fuzz", g, "lenet5", 64, t, &other);
    if (rc && rc != SO_EFORMAT && rc != SO_EINVAL)
        abort();
    for (int i = 0; !rc && i < 2 * n; i++)
        if (!isfinite(t[i]) || t[i] < 0)
            abort();
    if (!rc && (!isfinite(other) || other < 0))
        abort();
    free(t);
    return 0;
}
