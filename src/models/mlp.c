/* The multilayer perceptron of the Fashion-MNIST demo: 784-1024-1024-10 with
 * ReLU (PyTorch twin: bench/torch_models.py MLP, modules fc1..fc3). Dense
 * layers read their input flattened, so no flatten node is needed. */
#include <stdio.h>

#include "models/zoo_internal.h"

/* Hidden widths, in order; the output layer follows with `classes` units. */
static const int hidden[] = {1024, 1024};

int so_zoo_build_mlp(so_graph *g, const char *model, int classes)
{
    (void)model;
    char name[SO_NAME_LEN];
    int x = 0, n = (int)(sizeof hidden / sizeof hidden[0]);
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "fc%d", i + 1);
        x = so_g_relu(g, so_g_dense(g, x, name, hidden[i]));
    }
    snprintf(name, sizeof name, "fc%d", n + 1);
    return so_g_dense(g, x, name, classes);
}
