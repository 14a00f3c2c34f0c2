/* Test-only window into the reference backend: the diff buffers it keeps per
 * node. The public API never exposes d loss / d input (the executor skips the
 * graph input's diff), so gradient checks with respect to inputs read the diff
 * of an identity node placed right after the input. */
#ifndef SCALEOUT_TESTS_REF_PROBE_H
#define SCALEOUT_TESTS_REF_PROBE_H
#include "backend/ref/ref_internal.h"

/* d loss / d output of `node` after the last backward, (batch,C,H,W). */
static inline const float *ref_probe_diff(const so_model *m, int node)
{
    return ((const ref_state *)m->bs)->diff[node];
}

#endif
