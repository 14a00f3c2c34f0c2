/* Softmax cross-entropy: mean over the n valid samples of the batch. The
 * logits (usually a dense layer's plain (N,K) output, but any (K,1,1) node)
 * are reordered to plain rows first; the gradient (softmax - onehot)/n for
 * valid rows, 0 for padded ones, is reordered back (adding when the logits
 * have another consumer). The node's own output is the per-sample loss. */
#include <math.h>
#include <stdlib.h>

#include "backend/onednn/onednn_internal.h"
#include "scaleout/err.h"

typedef struct {
    od_prim to_plain, from_plain;
    float *z, *dz;               /* (N, K): logits then probabilities; their diff */
    dnnl_memory_t z_mem, dz_mem;
} od_loss;

static int loss_create(od_state *s, int node)
{
    od_loss *l = calloc(1, sizeof *l);
    if (!l)
        return so_err(SO_ENOMEM, "out of memory for node %s", od_node(s, node)->name);
    s->t[node].priv = l;
    int lg = od_node(s, node)->inputs[0];
    dnnl_memory_desc_t plain, out;
    od_md_plain(s, lg, &plain);
    od_md_plain(s, node, &out);
    int rc = od_tensor_alloc(s, node, &out);
    if (!rc)
        rc = od_mem_alloc(s, node, &plain, &l->z, &l->z_mem);
    if (!rc)
        rc = od_mem_alloc(s, node, &plain, &l->dz, &l->dz_mem);
    if (!rc)
        rc = od_reorder_init(s, node, "logits reorder", &s->t[lg].md, &plain, 0, &l->to_plain);
    if (!rc && so_graph_needs_diff(s->g, node, 0))
        rc = od_reorder_init(s, node, "logits diff reorder", &plain, &s->t[lg].md,
                             so_graph_diff_accumulate(s->g, node, 0), &l->from_plain);
    return rc;
}

/* Row -> softmax in place; returns -log p[y]. */
static double softmax_row(float *z, int k, int y)
{
    float mx = z[0];
    for (int c = 1; c < k; c++)
        mx = z[c] > mx ? z[c] : mx;
    double sum = 0;
    for (int c = 0; c < k; c++)
        sum += exp((double)(z[c] - mx));
    double lse = log(sum) + mx, ly = z[y];
    for (int c = 0; c < k; c++)
        z[c] = (float)exp((double)z[c] - lse);
    return lse - ly;
}

static int loss_forward(od_state *s, int node, int training)
{
    (void)training;
    od_loss *l = s->t[node].priv;
    int rc = od_reorder_exec(s, node, "logits reorder", &l->to_plain, od_in(s, node, 0)->mem, l->z_mem);
    if (rc)
        return rc;
    int k = so_graph_classes(s->g), n = s->nvalid;
    float *per = s->t[node].buf;
    double total = 0;
    for (int i = 0; i < s->m->batch; i++) {
        per[i] = 0.0f;
        if (i < n && s->has_labels) {
            double li = softmax_row(l->z + (size_t)i * k, k, s->labels[i]);
            per[i] = (float)li;
            total += li;
        }
    }
    s->m->loss = (float)(total / n);
    return 0;
}

static int loss_backward(od_state *s, int node)
{
    od_loss *l = s->t[node].priv;
    if (!l->from_plain.p)
        return 0;
    int k = so_graph_classes(s->g), n = s->nvalid;
    float inv = 1.0f / (float)n;
    for (int i = 0; i < s->m->batch; i++) {
        float *dz = l->dz + (size_t)i * k;
        const float *p = l->z + (size_t)i * k;
        for (int c = 0; c < k; c++)
            dz[c] = i < n ? (p[c] - (c == s->labels[i] ? 1.0f : 0.0f)) * inv : 0.0f;
    }
    return od_reorder_exec(s, node, "logits diff reorder", &l->from_plain, l->dz_mem, od_in(s, node, 0)->dmem);
}

static void loss_destroy(void *priv)
{
    od_loss *l = priv;
    od_prim_fini(&l->to_plain);
    od_prim_fini(&l->from_plain);
    od_mem_free(&l->z_mem, &l->z);
    od_mem_free(&l->dz_mem, &l->dz);
    free(l);
}

const od_op od_op_loss = {loss_create, loss_forward, loss_backward, loss_destroy, NULL};
