/* Helper of tests/ckpt_torch.sh: loads a .safetensors file into zoo model
 * MODEL (scaleout's --init-from path), runs N samples of a fixed input in
 * evaluation mode and prints the logits, one sample per line, so a PyTorch
 * twin can be compared on the same input.  x[i] = ((i * 7919) % 1000) / 500 - 1
 * (exact in float32 in both languages). */
#include <stdio.h>
#include <stdlib.h>

#include "scaleout/ckpt.h"
#include "scaleout/err.h"
#include "scaleout/zoo.h"

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: ckpt_logits MODEL FILE.safetensors N\n");
        return 2;
    }
    const so_zoo_entry *z = so_zoo_find(argv[1]);
    int n = atoi(argv[3]);
    so_graph *g;
    so_model *m;
    if (!z || n < 1 || so_zoo_build(argv[1], z->c, z->h, z->w, z->classes, &g) ||
        so_model_create(g, "ref", n, 1, &m) || so_ckpt_safetensors_load(argv[2], m)) {
        fprintf(stderr, "ckpt_logits: %s\n", so_errmsg());
        return 2;
    }
    size_t len = (size_t)n * z->c * z->h * z->w;
    float *x = malloc(len * sizeof *x), *y = malloc((size_t)n * z->classes * sizeof *y);
    for (size_t i = 0; i < len; i++)
        x[i] = (float)((i * 7919) % 1000) / 500.0f - 1.0f;
    if (so_model_forward(m, x, NULL, n, 0) || so_model_logits(m, y)) {
        fprintf(stderr, "ckpt_logits: %s\n", so_errmsg());
        return 1;
    }
    for (int s = 0; s < n; s++)
        for (int k = 0; k < z->classes; k++)
            printf("%.9g%c", y[s * z->classes + k], k + 1 == z->classes ? '\n' : ' ');
    free(x);
    free(y);
    so_model_destroy(m);
    return 0;
}
