/* Test-only environment hooks (slow a checkpoint write, skew a rank's clock,
 * make steps slow): read only in builds configured with
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

#endif
