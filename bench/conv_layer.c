/* Time of one 3x3 stride-1 convolution layer on the onednn backend, forward
 * and backward (data + weights), per call: the per-layer figures behind the
 * convolution rules (docs/PERFORMANCE.md, "Convolution algorithm per layer"). */

/* Usage: conv_layer CIN COUT H W BATCH auto|direct|winograd REPS
 * The layer reads the output of a 3 -> CIN convolution (so its input has the
 * layout oneDNN picks, nChw8c under the AVX2 cap) and has a fused ReLU.
 * Prints the minimum and median thread CPU time of REPS calls (CPU time: the
 * 2-vCPU VMs are shared, and a preempted call says nothing about the kernel)
 * and the kernels each propagation ran. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "scaleout/err.h"
#include "scaleout/graph.h"
#include "scaleout/model.h"

#define MAXREPS 200

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static so_model *open_layer(int cin, int cout, int h, int w, int batch, so_conv_algo algo, int *node)
{
    so_graph *g = so_graph_create(3, h, w);
    int a = so_g_conv(g, 0, "c0", cin, 3, 1, 1, 1);
    *node = so_g_relu(g, so_g_conv(g, a, "layer", cout, 3, 1, 1, 1));
    so_g_loss(g, so_g_dense(g, so_g_gap(g, *node), "head", 10));
    so_model *m = NULL;
    so_model_opts o = {.backend = "onednn", .batch = batch, .seed = 1, .conv_algo = algo};
    if (so_graph_fuse(g) || so_graph_finalize(g) || so_model_create_opts(g, &o, &m))
        return NULL;
    for (int i = 0; i < so_graph_size(m->g); i++)
        if (!strcmp(so_graph_node(m->g, i)->name, "layer"))
            *node = i;
    return m;
}

int main(int argc, char **argv)
{
    so_conv_algo algo;
    if (argc != 8 || so_conv_algo_parse(argv[6], &algo)) {
        fprintf(stderr, "usage: conv_layer CIN COUT H W BATCH auto|direct|winograd REPS\n");
        return 2;
    }
    int cin = atoi(argv[1]), cout = atoi(argv[2]), h = atoi(argv[3]), w = atoi(argv[4]);
    int batch = atoi(argv[5]), reps = atoi(argv[7]), node;
    reps = reps < 1 ? 1 : reps > MAXREPS ? MAXREPS : reps;
    so_model *m = open_layer(cin, cout, h, w, batch, algo, &node);
    if (!m) {
        fprintf(stderr, "conv_layer: %s\n", so_errmsg());
        return 1;
    }
    size_t len = (size_t)batch * 3 * h * w;
    float *x = malloc(len * sizeof *x);
    int32_t *y = calloc((size_t)batch, sizeof *y);
    if (!x || !y)
        return 1;
    for (size_t i = 0; i < len; i++)
        x[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    if (so_model_forward(m, x, y, batch, 1) || so_model_backward(m)) {
        fprintf(stderr, "conv_layer: %s\n", so_errmsg());
        return 1;
    }
    double tf[MAXREPS], tb[MAXREPS];
    for (int r = 0; r < reps; r++) {
        double t0 = cpu_now();
        so_model_params_changed(m); /* as after an optimizer step: weights transformed again */
        so_model_forward_nodes(m, node, node + 1, 1);
        tf[r] = cpu_now() - t0;
        t0 = cpu_now();
        so_model_backward_nodes(m, node, node + 1);
        tb[r] = cpu_now() - t0;
    }
    qsort(tf, (size_t)reps, sizeof *tf, by_value);
    qsort(tb, (size_t)reps, sizeof *tb, by_value);
    so_conv_kernels k;
    so_model_conv_kernels(m, node, &k);
    printf("%d->%d %dx%d b%d %s: forward %.3f ms (median %.3f), backward %.3f ms (median %.3f); "
           "kernels %s/%s, %s/%s, %s/%s\n",
           cin, cout, h, w, batch, argv[6], tf[0] * 1e3, tf[reps / 2] * 1e3, tb[0] * 1e3, tb[reps / 2] * 1e3,
           k.algo[0], k.impl[0], k.algo[1], k.impl[1], k.algo[2], k.impl[2]);
    so_model_destroy(m);
    free(x);
    free(y);
    return 0;
}
