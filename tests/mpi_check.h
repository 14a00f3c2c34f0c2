/* Check-and-continue assertions for the MPI tests. Not cmocka: a failed cmocka
 * assert stops the test on one rank only and the other ranks then hang in the
 * next collective, so every rank runs every check, records failures and goes
 * on; the test sums g_pass/g_fail over ranks at the end. One test file each. */
#ifndef SCALEOUT_TESTS_MPI_CHECK_H
#define SCALEOUT_TESTS_MPI_CHECK_H
#include <stdarg.h>
#include <stdio.h>

#include "scaleout/comm.h"
#include "scaleout/err.h"

static int g_rank, g_size, g_pass, g_fail;

/* Records one check; on failure prints rank, place and the formatted detail. */
static void check(int ok, const char *file, int line, const char *fmt, ...)
{
    if (ok) {
        g_pass++;
        return;
    }
    g_fail++;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[rank %d] FAIL %s:%d: %s\n", g_rank, file, line, msg);
}
#define CHECK(cond, ...) check(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define CHECK_RC(call)                                                                    \
    do {                                                                                  \
        int rc_ = (call);                                                                 \
        CHECK(rc_ == 0, "%s returned %d: %s", #call, rc_, so_errmsg());                   \
    } while (0)

/* Rank r's element i of the reduction tests: small integers, so every sum is
 * exact in any order and results can be compared bit for bit. */
static inline float input(int r, size_t i, so_reduce_op op)
{
    if (op == SO_REDUCE_MAX || op == SO_REDUCE_MIN)
        return (float)((int)((r * 7 + i * 3) % 11) - 5);
    return (float)((r + 1) * (int)(i % 13 + 1));
}

/* The exact result of element i over g_size ranks, computed as the library does. */
static inline float expected(size_t i, so_reduce_op op)
{
    float acc = input(0, i, op);
    for (int r = 1; r < g_size; r++) {
        float v = input(r, i, op);
        if (op == SO_REDUCE_MAX)
            acc = v > acc ? v : acc;
        else if (op == SO_REDUCE_MIN)
            acc = v < acc ? v : acc;
        else
            acc += v;
    }
    return op == SO_REDUCE_AVG ? acc * (1.0f / (float)g_size) : acc;
}

#endif
