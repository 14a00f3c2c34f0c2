/* Test-only environment hooks (slow a checkpoint write, skew a rank's clock,
 * make steps slow, slow one rank): read only in builds configured with
 * -DSCALEOUT_TEST_HOOKS=ON (what `make test` builds), so a release binary
 * never changes its behaviour because of a stray variable. */
#ifndef SCALEOUT_CORE_TEST_HOOKS_H
#define SCALEOUT_CORE_TEST_HOOKS_H
#include <stdlib.h>

static inline const char *so_test_hook(const char *name)
{
#ifdef SCALEOUT_TEST_HOOKS
    return getenv(name);
#else
    (void)name;
    return NULL;
#endif
}

/* SCALEOUT_TEST_SLOW_RANK=R:F makes rank R's steps slower by the fraction F
 * of its own compute (the relaxed-consistency measurements: one straggler).
 * The fraction for `rank`, or 0. */
static inline double so_test_slow_rank(int rank)
{
    const char *s = so_test_hook("SCALEOUT_TEST_SLOW_RANK");
    char *end;
    if (!s || strtol(s, &end, 10) != rank || *end != ':')
        return 0;
    double f = strtod(end + 1, &end);
    return !*end && f > 0 && f < 100 ? f : 0;
}

#endif
