/* libFuzzer target for the profile JSON reader (`scaleout report` input):
 * any bytes must parse or fail cleanly, and a parsed tree must be walkable
 * to its leaves (ASan sees any overrun or use after free). */
#include <stdint.h>
#include <stdlib.h>

#include "scaleout/prof.h"

static double walk(const so_prof_jv *v, int depth)
{
    double s = so_prof_jv_num(v, 0) + (so_prof_jv_str(v, NULL) ? 1 : 0) + (so_prof_jv_key(v) ? 1 : 0);
    if (depth > SO_PROF_JSON_DEPTH + 1)
        abort(); /* the reader promised to limit nesting */
    for (int i = 0; i < so_prof_jv_len(v); i++)
        s += walk(so_prof_jv_at(v, i), depth + 1);
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    so_prof_jv *v = NULL;
    if (so_prof_json_parse((const char *)data, size, &v) == 0) {
        volatile double sink = walk(v, 0);
        (void)sink;
        so_prof_jv_get(v, "ranks");
    }
    so_prof_json_free(v);
    return 0;
}
