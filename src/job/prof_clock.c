/* Clock alignment of the profiler's ranks (prof_clock.h): ping-pong offset
 * measurements with rank 0, the linear offset + drift model built from the
 * measurements at the start and the end of a run, and the test hook that
 * skews one rank's clock by a known offset and rate. */
#include "core/test_hooks.h"
#include "prof_clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/timer.h"

#define CLOCK_ROUNDS 8

void prof_clock_test_init(prof_clock_test *t, double start)
{
    const char *s = so_test_hook("SCALEOUT_PROF_TEST_CLOCK");
    char mode[16] = "drift";
    *t = (prof_clock_test){-1, 0, 0, start, PROF_CLOCK_DRIFT};
    if (!s || sscanf(s, "%d:%lf:%lf:%15s", &t->rank, &t->offset, &t->rate, mode) < 3 || t->rate <= -0.5) {
        t->rank = -1;
        return;
    }
    t->mode = !strcmp(mode, "none") ? PROF_CLOCK_NONE : !strcmp(mode, "offset") ? PROF_CLOCK_OFFSET : PROF_CLOCK_DRIFT;
}

double prof_clock_skew(const prof_clock_test *t, int rank, double time)
{
    return t && rank == t->rank ? time + t->offset + t->rate * (time - t->start) : time;
}

#ifdef SCALEOUT_HAVE_MPI
/* One round of rank r with rank 0: r sends, 0 answers with its time. */
static int ping(so_comm *c, const prof_clock_test *t, int rank, int r, double *offset, double *at, double *rtt)
{
    double buf[2] = {0, 0};
    if (rank == 0) {
        int rc = so_comm_recv_bytes(c, buf, sizeof buf, r, 1);
        buf[0] = prof_clock_skew(t, 0, so_now());
        return rc ? rc : so_comm_send_bytes(c, buf, sizeof buf, r, 2);
    }
    double ta = prof_clock_skew(t, rank, so_now());
    int rc = so_comm_send_bytes(c, buf, sizeof buf, 0, 1);
    if (!rc)
        rc = so_comm_recv_bytes(c, buf, sizeof buf, 0, 2);
    double tb = prof_clock_skew(t, rank, so_now());
    if (!rc && tb - ta < *rtt) {
        *rtt = tb - ta;
        *at = (ta + tb) / 2;
        *offset = buf[0] - *at;
    }
    return rc;
}
#endif

int prof_clock_measure(dist_handle *dh, const prof_clock_test *t, int rank, int world, double *offset, double *at)
{
    *offset = 0;
    *at = prof_clock_skew(t, rank, so_now());
    int rc = 0;
#ifdef SCALEOUT_HAVE_MPI
    so_comm *c = dist_comm(dh);
    double rtt = 1e30;
    for (int r = 1; c && !rc && r < world; r++)
        for (int k = 0; !rc && k < CLOCK_ROUNDS && (rank == 0 || rank == r); k++)
            rc = ping(c, t, rank, r, offset, at, &rtt);
#else
    (void)dh;
    (void)world;
#endif
    return rc;
}

so_prof_clock prof_clock_model(double o1, double a1, double o2, double a2, prof_clock_mode mode)
{
    so_prof_clock m = {o1, 0, a1};
    if (mode == PROF_CLOCK_NONE)
        m.offset = 0;
    else if (mode == PROF_CLOCK_DRIFT && a2 > a1)
        m.drift = (o2 - o1) / (a2 - a1);
    return m;
}
