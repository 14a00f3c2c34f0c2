/* The registry of strategies by name (scaleout/strategy.h): one entry per
 * strategy file, looked up by --strategy; creation in two steps so the
 * caller can build the model with the buffers the strategy asks for in
 * between; and what every strategy answers for memory accounting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "scaleout/train.h"
#include "strategy_internal.h"

static const so_strategy_kind *const kinds[] = {&so_strategy_kind_dp, &so_strategy_kind_zero1, &so_strategy_kind_zero2,
                                                &so_strategy_kind_zero3, &so_strategy_kind_ps};
#define NKINDS ((int)(sizeof kinds / sizeof kinds[0]))

const so_strategy_kind *so_strategy_kind_at(int i) { return i >= 0 && i < NKINDS ? kinds[i] : NULL; }

int so_strategy_lookup(const char *name, const so_strategy_kind **out)
{
    *out = NULL;
    if (name && !strcmp(name, "data")) /* the name of the version that had only data parallelism */
        name = "dp";
    for (int i = 0; name && i < NKINDS; i++)
        if (!strcmp(name, kinds[i]->name)) {
            *out = kinds[i];
            return 0;
        }
    char choices[128] = "";
    for (int i = 0; i < NKINDS; i++) {
        size_t n = strlen(choices);
        snprintf(choices + n, sizeof choices - n, "%s%s", i ? ", " : "", kinds[i]->name);
    }
    return so_err(SO_EINVAL, "--strategy: unknown strategy '%s' (choose %s)", name ? name : "", choices);
}

/* The relaxed-consistency strategies, found by --sync's method rather than
 * by --strategy (they need the method's parameters). */
static const struct {
    so_sync_method method;
    const so_strategy_kind *kind;
} sync_kinds[] = {{SO_SYNC_LOCAL, &so_strategy_kind_local},
                  {SO_SYNC_DILOCO, &so_strategy_kind_diloco},
                  {SO_SYNC_GOSSIP, &so_strategy_kind_gossip}};

int so_strategy_sync_lookup(so_sync_method m, const so_strategy_kind **out)
{
    *out = NULL;
    for (size_t i = 0; i < sizeof sync_kinds / sizeof sync_kinds[0]; i++)
        if (sync_kinds[i].method == m) {
            *out = sync_kinds[i].kind;
            return 0;
        }
    return so_err(SO_EINVAL, "--sync %s: no strategy in this build runs it", so_sync_method_name(m));
}

int so_strategy_create(const so_strategy_kind *k, const so_strategy_config *c, so_model *m, so_strategy **out)
{
    *out = NULL;
    return k->create(c, m, out);
}

void so_strategy_memory_use(const so_strategy *s, const so_model *m, so_strategy_memory *out)
{
    if (s && s->ops->memory) {
        s->ops->memory(s->self, out);
        return;
    }
    double p = (double)m->nparams * sizeof(float);
    const so_optim *o = s ? s->opt : NULL;
    *out = (so_strategy_memory){.params = p, .grads = p,
                                .optimizer = o ? (double)so_optim_size(o) * so_optim_nslots(o) * sizeof(float) : 0};
}

void so_strategy_free(so_strategy *s)
{
    if (!s)
        return;
    if (s->ops && s->ops->destroy)
        s->ops->destroy(s->self);
    else
        free(s->self);
    so_optim_destroy(s->opt);
    free(s);
}
