/* libFuzzer target for the tuning-table parser (src/comm/tune_text.c): any
 * bytes either fail with SO_EFORMAT or give a table whose bands are physical
 * (alpha >= 0, beta > 0, ascending, last one unlimited), in the whole job's
 * fits and in each level of a v3 table (`level node|link p=N`, what `tune
 * --levels` writes and `predict --tune` composes), and saving that table and
 * parsing it again gives the same bands, levels and rules. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/tune_internal.h"
#include "scaleout/err.h"

static void check_bands(const so_comm_fit *fits)
{
    for (int a = 0; a < SO_ALLREDUCE_AUTO; a++) {
        const so_comm_fit *f = &fits[a];
        for (int k = 0; k < f->nbands; k++)
            if (!(f->band[k].alpha >= 0 && f->band[k].beta > 0) ||
                (k && f->band[k].max_bytes <= f->band[k - 1].max_bytes))
                abort();
        if (f->nbands && f->band[f->nbands - 1].max_bytes != UINT64_MAX)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    so_comm_tuning t, u;
    int rc = so_comm_tuning_parse((const char *)data, size, "fuzz", &t);
    if (rc == 0) {
        check_bands(t.fit);
        for (int l = 0; l < SO_LEVELS; l++)
            if (t.level[l].valid) {
                if (t.version < 3 || t.level[l].p < 1)
                    abort();
                check_bands(t.level[l].fit);
            }
        char path[64];
        snprintf(path, sizeof path, "/tmp/fuzz_tuning_%d.tune", (int)getpid());
        if (so_comm_tuning_save(&t, path) == 0) {
            if (so_comm_tuning_load(path, &u) != 0 || u.nrules != t.nrules ||
                memcmp(u.rule, t.rule, sizeof t.rule[0] * (size_t)t.nrules) != 0)
                abort();
            for (int a = 0; a < SO_ALLREDUCE_AUTO; a++)
                if (t.fit[a].valid && (u.fit[a].nbands != t.fit[a].nbands))
                    abort();
            for (int l = 0; l < SO_LEVELS; l++) {
                if (u.level[l].valid != t.level[l].valid || (t.level[l].valid && u.level[l].p != t.level[l].p))
                    abort();
                for (int a = 0; t.level[l].valid && a < SO_ALLREDUCE_AUTO; a++)
                    if (u.level[l].fit[a].valid != t.level[l].fit[a].valid ||
                        u.level[l].fit[a].nbands != t.level[l].fit[a].nbands)
                        abort();
            }
        }
        remove(path);
    } else if (rc != SO_EFORMAT) {
        abort();
    }
    return 0;
}
