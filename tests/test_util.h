/* Helpers the file-reading unit tests share: the one-line error check every
 * parser's refusals must pass, and removal of a test's temporary directory. */
#ifndef SO_TESTS_TEST_UTIL_H
#define SO_TESTS_TEST_UTIL_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"

/* rc equals code, and so_errmsg() is one line mentioning needle. */
#define expect_err(rc, code, needle)                                                                         \
    do {                                                                                                     \
        int rc_ = (rc);                                                                                      \
        if (rc_ != (code))                                                                                   \
            fail_msg("rc %d, expected %d (message: %s)", rc_, (code), so_errmsg());                          \
        if (!strstr(so_errmsg(), (needle)))                                                                  \
            fail_msg("message '%s' does not mention '%s'", so_errmsg(), (needle));                           \
        if (strchr(so_errmsg(), '\n'))                                                                       \
            fail_msg("message '%s' is not one line", so_errmsg());                                           \
    } while (0)

/* Removes dir and everything under it: 0, or -1 when rm failed. */
static inline int so_test_rmtree(const char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

#endif
