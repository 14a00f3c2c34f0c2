/* Each group's tuning table: the one `auto` uses, SCALEOUT_TUNING loaded on
 * first use, and auto's choice for a message size. The model itself is
 * cost_model.c (no MPI), the text format tune_text.c, the measurements
 * measure.c; documented in docs/COLLECTIVES.md. */
#include "comm_env.h"
#include "coll_internal.h"
#include "tune_internal.h"

#include "scaleout/err.h"
#include "scaleout/log.h"
#include "scaleout/timer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- each group's table ------------------------------------------------------------- */

int so_comm_set_tuning(so_comm *c, const so_comm_tuning *t)
{
    int rc = so_comm_check_idle(c); /* an async engine of c may be reading the table */
    if (rc)
        return rc;
    if (t)
        c->tuning = *t;
    else
        so_comm_tuning_default(&c->tuning);
    c->tuning_state = t ? 1 : 2;
    return 0;
}

/* Loads SCALEOUT_TUNING into c's table the first time. Only one thread runs
 * so_comm_* calls, and so_async_create loads it before its engine can read
 * it, so the lazy load does not race. */
const so_comm_tuning *so_comm_get_tuning(so_comm *c)
{
    if (c->tuning_state == 0) {
        const char *path = so_comm_env_get()->tuning_path;
        if (path && *path && so_comm_tuning_load(path, &c->tuning) == 0) {
            c->tuning_state = 1;
        } else {
            if (path && *path)
                so_log(SO_LOG_WARN, "ignoring SCALEOUT_TUNING=%s: %s", path, so_errmsg());
            so_comm_tuning_default(&c->tuning);
            c->tuning_state = 2;
        }
    }
    return &c->tuning;
}

so_allreduce_algo so_comm_auto_algo(so_comm *c, size_t bytes)
{
    return so_comm_select(bytes, c->size, c->topo.ranks_per_node, so_comm_get_tuning(c));
}
