/* Training steps of a GPT-2 on the engine alone (no data loader, no job):
 * forward, backward and AdamW on random tokens or an llm.c token file, with
 * the time of every step and where it went per operator kind. The
 * per-operator profile behind docs/TRANSFORMERS.md's kernel table.
 *
 *   gpt2_step SPEC B T STEPS [MODEL.bin [TOKENS.bin]]
 *
 * Threads: OMP_NUM_THREADS (or so_threads_set's default); precision:
 * SCALEOUT_PRECISION (fp32, bf16 or auto; fp32 unset). Prints one line
 * per step (ms) and, over the steps after the first, the median and each
 * op kind's share of forward and backward. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "scaleout/gpt2.h"
#include "scaleout/model.h"
#include "scaleout/optim.h"
#include "scaleout/rng.h"
#include "scaleout/threads.h"
#include "scaleout/timer.h"
#include "scaleout/zoo.h"

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* llm.c's token file, or NULL. */
static uint16_t *read_tokens(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    int32_t h[256];
    uint16_t *t = NULL;
    if (f && fread(h, 4, 256, f) == 256 && h[0] == 20240520 && h[2] > 0 && (t = malloc((size_t)h[2] * 2)) &&
        fread(t, 2, (size_t)h[2], f) == (size_t)h[2])
        *n = (size_t)h[2];
    else {
        free(t);
        t = NULL;
    }
    if (f)
        fclose(f);
    return t;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: gpt2_step SPEC B T STEPS [MODEL.bin [TOKENS.bin]]\n");
        return 2;
    }
    int B = atoi(argv[2]), T = atoi(argv[3]), steps = atoi(argv[4]);
    const char *threads = getenv("OMP_NUM_THREADS");
    so_threads_set(threads ? atoi(threads) : 1, 1);
    so_zoo_entry z;
    so_graph *g;
    so_model *m;
    const char *prec = getenv("SCALEOUT_PRECISION");
    so_model_opts o = {.backend = "onednn", .batch = B, .seed = 1};
    if (so_precision_resolve(prec ? prec : "fp32", &o.precision) || so_zoo_resolve(argv[1], &z) ||
        so_zoo_build(argv[1], 1, T, 1, z.classes, &g) || so_model_create_opts(g, &o, &m) || (argc > 5 && so_gpt2_load_llmc(m, argv[5], 0))) {
        fprintf(stderr, "gpt2_step: %s\n", so_errmsg());
        return 1;
    }
    size_t ntok = 0;
    uint16_t *tok = argc > 6 ? read_tokens(argv[6], &ntok) : NULL;
    float *x = malloc((size_t)B * T * sizeof *x);
    int32_t *y = malloc((size_t)B * T * sizeof *y);
    so_rng r;
    so_rng_seed(&r, 7);
    so_optim_config oc;
    so_optim_defaults(&oc, SO_OPT_ADAMW);
    so_optim *opt;
    if (!x || !y || so_optim_create(&oc, m->nparams, &opt))
        return 1;
    int n = so_graph_size(m->g);
    double *ms = calloc((size_t)steps, sizeof *ms), fwd[SO_OP_COUNT] = {0}, bwd[SO_OP_COUNT] = {0}, opt_s = 0;
    for (int s = 0; s < steps; s++) {
        for (size_t i = 0; i < (size_t)B * T; i++) {
            size_t at = tok ? ((size_t)s * B * T + i) % (ntok - 1) : 0;
            x[i] = tok ? tok[at] : (float)so_rng_below(&r, (uint64_t)z.classes);
            y[i] = tok ? tok[at + 1] : (int32_t)so_rng_below(&r, (uint64_t)z.classes);
        }
        memset(m->t_fwd, 0, (size_t)n * sizeof *m->t_fwd);
        memset(m->t_bwd, 0, (size_t)n * sizeof *m->t_bwd);
        m->timing = s > 0;
        double t0 = so_now();
        if (so_model_forward(m, x, y, B, 1) || so_model_backward(m)) {
            fprintf(stderr, "gpt2_step: %s\n", so_errmsg());
            return 1;
        }
        double t1 = so_now();
        so_optim_step(opt, m->params, m->grads, 1e-4f);
        so_model_params_changed(m);
        double t2 = so_now();
        ms[s] = (t2 - t0) * 1e3;
        printf("step %d: loss %.4f, %.1f ms (optimizer %.1f ms)\n", s, (double)m->loss, ms[s], (t2 - t1) * 1e3);
        if (s > 0) {
            opt_s += t2 - t1;
            for (int i = 1; i < n; i++) {
                fwd[so_graph_node(m->g, i)->op] += m->t_fwd[i];
                bwd[so_graph_node(m->g, i)->op] += m->t_bwd[i];
            }
        }
    }
    if (steps > 1) {
        qsort(ms + 1, (size_t)steps - 1, sizeof *ms, cmp);
        printf("median of steps 1..%d: %.1f ms; per step by op (forward, backward ms):\n", steps - 1, ms[steps / 2]);
        for (int op = 0; op < SO_OP_COUNT; op++)
            if (fwd[op] + bwd[op] > 0)
                printf("  %-12s %9.1f %9.1f\n", so_op_name((so_op)op), fwd[op] * 1e3 / (steps - 1),
                       bwd[op] * 1e3 / (steps - 1));
        printf("  %-12s %9.1f\n", "adamw", opt_s * 1e3 / (steps - 1));
    }
    so_optim_destroy(opt);
    so_model_destroy(m);
    free(x);
    free(y);
    free(ms);
    free(tok);
    return 0;
}
