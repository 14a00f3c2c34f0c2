/* libFuzzer target for the JSON reader of the benchmark records
 * (src/cli/jread.c): any bytes must either parse into a tree that can be
 * walked and freed, or fail with a message; never crash or leak. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/jread.h"

static double walk(const jv *v, int depth)
{
    double s = 0;
    for (; v; v = v->next) {
        if (v->t == JV_STR && strlen(v->str) > 1u << 30)
            abort();
        s += v->num + (v->key ? (double)strlen(v->key) : 0) + walk(v->kid, depth + 1);
    }
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[160];
    jv *v = jv_parse((const char *)data, size, err, sizeof err);
    if (!v) {
        if (!memchr(err, 0, sizeof err))
            abort(); /* the message must be terminated */
        return 0;
    }
    volatile double sink = walk(v, 0);
    sink += jv_num(v, "results.step_seconds.median", 0);
    (void)jv_str(v, "kind", NULL);
    (void)jv_at(jv_path(v, "points"), 1);
    (void)sink;
    jv_free(v);
    return 0;
}
