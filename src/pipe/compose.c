/* A pipeline device composed from the whole model (pipeline.h, "composing a
 * device"): its slices of the whole model's initial values, the memory its
 * messages take, and the whole model's parameters put back together from
 * the devices' for an export. */
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "scaleout/pipeline.h"

/* Copies the chunks' slices of params / bufs into m, in the device's order. */
static int copy_slices(const so_pipe_stage_edges *e, const float *params, const float *bufs, so_model *m)
{
    size_t ap = 0, ab = 0;
    for (int c = 0; c < e->nchunks; c++) {
        const so_pipe_chunk *ch = &e->chunks[c];
        size_t cp = ch->param_hi - ch->param_lo, cb = ch->buf_hi - ch->buf_lo;
        if (ap + cp > m->nparams || ab + cb > m->nbufs)
            return so_err(SO_EINVAL, "stage %d: %zu parameters, fewer than its slices of the model", ch->stage,
                          m->nparams);
        memcpy(m->params + ap, params + ch->param_lo, cp * sizeof *params);
        memcpy(m->bufs + ab, bufs + ch->buf_lo, cb * sizeof *bufs);
        ap += cp;
        ab += cb;
    }
    if (e->tie_n && e->tie_copy && ap + e->tie_n <= m->nparams) { /* a tied table's copy: its last parameters */
        memcpy(m->params + ap, params + e->tie_whole, e->tie_n * sizeof *params);
        ap += e->tie_n;
    }
    if (ap != m->nparams || ab != m->nbufs)
        return so_err(SO_EINVAL, "device %d: %zu parameters, but its slices of the model have %zu", e->stage,
                      m->nparams, ap);
    return 0;
}

int so_pipe_init_params(const so_graph *whole, const so_pipe_stage_edges *e, uint64_t seed, so_model *m)
{
    size_t np = so_graph_nparams(whole), nb = so_graph_nbufs(whole);
    float *params = malloc((np ? np : 1) * sizeof *params), *bufs = malloc((nb ? nb : 1) * sizeof *bufs);
    int rc = params && bufs ? 0 : so_err(SO_ENOMEM, "out of memory for the whole model's initial values");
    if (!rc) {
        so_graph_init_params_with(whole, m->init, seed, params, bufs); /* the stage model's scheme */
        rc = copy_slices(e, params, bufs, m);
    }
    if (!rc)
        so_model_params_changed(m);
    free(params);
    free(bufs);
    return rc;
}

double so_pipe_message_bytes(const so_pipe_stage_edges *e, int microbatches, so_model *m, int wire_bf16)
{
    double total = 0, send_factor = wire_bf16 ? 2.5 : 2.0; /* a BF16 wire stages what it sends */
    for (int i = 0; i < e->nrecv; i++)
        total += 2.0 * microbatches * (double)so_model_edge_bytes(m, e->recv[i].node);
    for (int i = 0; i < e->nsend; i++)
        total += send_factor * microbatches * (double)so_model_edge_bytes(m, e->send[i].node);
    return total;
}

int so_pipe_model_from_group(const so_pipe_plan *p, int devices, const void *gathered, const size_t *sizes,
                             float **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    size_t total = 0, at;
    for (int q = 0; q < devices; q++)
        total += sizes[q];
    char *by_device = malloc(total ? total : 1);
    float *whole = malloc(total ? total : 1);
    int rc = by_device && whole ? 0 : so_err(SO_ENOMEM, "out of memory for the whole model's parameters");
    const char *src = gathered;
    at = total; /* group rank q holds device P - 1 - q: the last device's bytes come first */
    for (int q = 0; !rc && q < devices; q++) {
        at -= sizes[q];
        memcpy(by_device + at, src, sizes[q]);
        src += sizes[q];
    }
    if (!rc)
        rc = so_pipe_model_order(p, devices, 0, (float *)by_device, total / sizeof(float), whole);
    if (!rc) {
        *out = whole;
        *n = total / sizeof(float);
    } else {
        free(whole);
    }
    free(by_device);
    return rc;
}
