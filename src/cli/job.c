/* Builds a training job from a job_spec (see job.h): data set, zoo model,
 * optimizer, and the train / test loaders sharded for this rank. Shared by
 * `scaleout train` and `scaleout bench train|accuracy`. */
#include "job.h"

#include <stdio.h>
#include <string.h>

#include "scaleout/backend.h"
#include "scaleout/cpu.h"
#include "scaleout/err.h"
#include "scaleout/zoo.h"

void job_free(job *j)
{
    so_loader_destroy(j->ltrain);
    so_loader_destroy(j->ltest);
    so_optim_destroy(j->opt);
    so_model_destroy(j->m);
    so_graph_destroy(j->g);
    so_dataset_destroy(j->train);
    so_dataset_destroy(j->test);
}

static int load_data(const job_spec *a, job *j)
{
    if (strcmp(a->dataset, "synthetic") != 0) {
        int rc = so_dataset_load(a->dataset, a->data_dir, 1, &j->train);
        return rc ? rc : so_dataset_load(a->dataset, a->data_dir, 0, &j->test);
    }
    const so_zoo_entry *z = so_zoo_find(a->model);
    if (!z)
        return so_err(SO_EINVAL, "--model: unknown model '%s' (see `scaleout models`)", a->model);
    int n = a->synthetic_n ? a->synthetic_n : 32 * a->batch;
    return so_dataset_synthetic(n, z->c, z->h, z->w, z->classes, (uint64_t)a->seed, &j->train);
}

const char *const job_backends[] = {"onednn", "ref", NULL};
const char *const job_conv_algos[] = {"auto", "direct", "winograd", NULL};

int job_load(const job_spec *a, job *j)
{
    /* What so_model_create_opts checks before its (collective) gradient
     * allocation is checked here, so the ranks agree on it first. */
    so_conv_algo ca;
    int rc = so_conv_algo_parse(a->conv_algo ? a->conv_algo : "auto", &ca);
    if (!rc && !so_backend_find(a->backend))
        rc = so_err(SO_EINVAL, "--backend: unknown backend '%s' (use onednn or ref)", a->backend);
    if (!rc && a->batch < 1)
        rc = so_err(SO_EINVAL, "batch size %d must be >= 1", a->batch);
    if (!rc)
        rc = load_data(a, j);
    if (rc)
        return rc;
    const so_dataset *ds = j->train;
    return so_zoo_build(a->model, ds->c, ds->h, ds->w, ds->classes, &j->g);
}

/* The gradient buffer comes from the dist hooks when they offer registered
 * memory: a collective allocation, so set-up failures are agreed on before
 * (job_load) and after (the caller's dist_agree) this call. A rank that ran
 * out of memory inside so_model_create_opts after it would free the buffer
 * alone and block; its peers' dist_agree then times out (watched) and aborts. */
int job_build(const job_spec *a, const so_dist *d, job *j)
{
    const so_dataset *ds = j->train;
    so_graph *g = j->g;
    j->g = NULL; /* the model owns it from here */
    so_model_opts mo = {.backend = a->backend, .batch = a->batch, .seed = (uint64_t)a->seed};
    if (d && d->buf_alloc) {
        mo.grads_alloc = d->buf_alloc;
        mo.grads_free = d->buf_free;
        mo.grads_ctx = d->ctx;
    }
    int rc = so_conv_algo_parse(a->conv_algo ? a->conv_algo : "auto", &mo.conv_algo);
    if (rc)
        so_graph_destroy(g);
    else
        rc = so_model_create_opts(g, &mo, &j->m);
    so_optim_config oc;
    so_optim_kind kind;
    if (!rc && !(rc = so_optim_parse(a->optimizer, &kind))) {
        so_optim_defaults(&oc, kind);
        oc.momentum = a->momentum;
        oc.weight_decay = a->weight_decay;
        rc = so_optim_create(&oc, j->m->nparams, &j->opt);
    }
    int rank = d ? d->rank : 0, world = d ? d->world : 1;
    so_loader_config lc = {.batch = a->batch, .shuffle = 1, .drop_last = 1, .augment = a->augment,
                           .pad = 4, .prefetch = a->prefetch, .seed = (uint64_t)a->seed, .rank = rank, .world = world};
    if (!rc)
        rc = so_loader_create(ds, &lc, &j->ltrain);
    lc.shuffle = lc.drop_last = lc.augment = 0;
    if (!rc && j->test)
        rc = so_loader_create(j->test, &lc, &j->ltest);
    return rc;
}

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

void job_conv_summary(so_model *m, char *buf, size_t len)
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

void job_conv_json(so_json *js, so_model *m, const char *requested)
{
    int counts[SO_NPROPS][NALGOS];
    conv_counts(m, counts);
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
