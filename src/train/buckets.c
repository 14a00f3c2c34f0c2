/* Bucket planning (see buckets.h). */
#include "buckets.h"

#include <stdlib.h>

#include "scaleout/err.h"

int so_bucket_plan_build(const so_graph *g, size_t first_bytes, size_t bucket_bytes, so_bucket_plan *p)
{
    int nodes = so_graph_size(g);
    p->n = 0;
    p->b = calloc((size_t)nodes, sizeof *p->b);
    p->closes = malloc((size_t)nodes * sizeof *p->closes);
    if (!p->b || !p->closes) {
        so_bucket_plan_free(p);
        return so_err(SO_ENOMEM, "out of memory planning gradient buckets");
    }
    size_t limit = first_bytes / sizeof(float), open_hi = 0;
    int open = 0, last_param_node = -1;
    for (int i = nodes - 1; i >= 0; i--) {
        p->closes[i] = -1;
        const so_node *nd = so_graph_node(g, i);
        if (!nd->nparam)
            continue;
        if (!open) {
            open_hi = nd->param_off + nd->nparam;
            open = 1;
        }
        last_param_node = i;
        if (open_hi - nd->param_off >= limit) {
            p->b[p->n] = (so_bucket){nd->param_off, open_hi};
            p->closes[i] = p->n++;
            open = 0;
            limit = bucket_bytes / sizeof(float);
        }
    }
    if (open) { /* the remainder closes at the lowest parameterised node */
        p->b[p->n] = (so_bucket){so_graph_node(g, last_param_node)->param_off, open_hi};
        p->closes[last_param_node] = p->n++;
    }
    return 0;
}

void so_bucket_plan_free(so_bucket_plan *p)
{
    free(p->b);
    free(p->closes);
    p->b = NULL;
    p->closes = NULL;
    p->n = 0;
}
