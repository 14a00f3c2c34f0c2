/* What the convolutions of a built model run, for `train`'s banner and the
 * --json records of `train` and `bench train`: the algorithm and
 * implementation of every layer and propagation (so_model_conv_kernels). */
#include "kernels.h"

#include <stdio.h>
#include <string.h>

#include "scaleout/backend.h"
#include "scaleout/cpu.h"

const char *const cli_backends[] = {"onednn", "ref", NULL};
const char *const cli_conv_algos[] = {"auto", "direct", "winograd", NULL};
const char *const cli_precisions[] = {"fp32", "bf16", "auto", NULL};

static const char *const prop_names[SO_NPROPS] = {"forward", "backward_data", "backward_weights"};
static const char *const algo_names[] = {"winograd", "direct", "gemm", "ref"};
enum { NALGOS = sizeof algo_names / sizeof *algo_names };

/* counts[prop][algo]: how many convolutions run each algorithm. */
static int conv_counts(so_model *m, int counts[SO_NPROPS][NALGOS])
{
    int nconv = 0;
    memset(counts, 0, sizeof(int) * SO_NPROPS * NALGOS);
    for (int i = 1; i < so_graph_size(m->g); i++) {
        so_conv_kernels k;
        if (so_graph_node(m->g, i)->op != SO_OP_CONV || so_model_conv_kernels(m, i, &k))
            continue;
        nconv++;
        for (int p = 0; p < SO_NPROPS; p++)
            for (int a = 0; a < NALGOS; a++)
                counts[p][a] += !strcmp(k.algo[p], algo_names[a]);
    }
    return nconv;
}

void kernels_conv_summary(so_model *m, char *buf, size_t len)
{
    int counts[SO_NPROPS][NALGOS];
    size_t at = 0;
    buf[0] = 0;
    if (!conv_counts(m, counts))
        return;
    for (int p = 0; p < SO_NPROPS && at < len; p++) {
        at += (size_t)snprintf(buf + at, len - at, "%s%s:", p ? " | " : "", prop_names[p]);
        for (int a = 0, first = 1; a < NALGOS && at < len; a++)
            if (counts[p][a]) {
                at += (size_t)snprintf(buf + at, len - at, "%s %s %d", first ? "" : ",", algo_names[a], counts[p][a]);
                first = 0;
            }
    }
}

void kernels_conv_json(so_json *js, so_model *m, const char *requested)
{
    int counts[SO_NPROPS][NALGOS];
    conv_counts(m, counts);
    so_json_str(js, "precision", so_precision_name(m->precision));
    so_json_obj_begin(js, "conv_algo_used");
    so_json_str(js, "requested", requested ? requested : "auto");
    so_json_str(js, "isa", so_isa_name(so_cpu_isa()));
    for (int p = 0; p < SO_NPROPS; p++) {
        so_json_obj_begin(js, prop_names[p]);
        for (int a = 0; a < NALGOS; a++)
            so_json_int(js, algo_names[a], counts[p][a]);
        so_json_obj_end(js);
    }
    so_json_arr_begin(js, "layers");
    for (int i = 1; i < so_graph_size(m->g); i++) {
        so_conv_kernels k;
        if (so_graph_node(m->g, i)->op != SO_OP_CONV || so_model_conv_kernels(m, i, &k))
            continue;
        so_json_obj_begin(js, NULL);
        so_json_str(js, "node", so_graph_node(m->g, i)->name);
        for (int p = 0; p < SO_NPROPS; p++) {
            char key[40];
            so_json_str(js, prop_names[p], k.algo[p]);
            snprintf(key, sizeof key, "%s_impl", prop_names[p]);
            so_json_str(js, key, k.impl[p]);
        }
        so_json_obj_end(js);
    }
    so_json_arr_end(js);
    so_json_obj_end(js);
}
