/* Per-thread CPU time, runqueue wait and context switches (tclock.h). */
#include "tclock.h"

#include <fcntl.h>
#include <stdio.h>
#include <time.h>
#include <sys/resource.h>
#include <unistd.h>

int ck_tclock_open(void)
{
    return open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
}

/* schedstat: "<ns on cpu> <ns waiting on a runqueue> <timeslices>". The
 * first field of a running thread is only brought up to date at the next
 * tick, so the CPU time comes from the clock instead; the wait is complete,
 * for the thread runs again. */
static double runq_seconds(int fd)
{
    char buf[96];
    ssize_t n = fd >= 0 ? pread(fd, buf, sizeof buf - 1, 0) : -1;
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    unsigned long long run, wait;
    return sscanf(buf, "%llu %llu", &run, &wait) == 2 ? (double)wait * 1e-9 : 0;
}

void ck_tclock_read(int fd, ck_tclock *c)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    c->cpu = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    c->runq = runq_seconds(fd);
    struct rusage ru;
    int ok = getrusage(RUSAGE_THREAD, &ru) == 0;
    c->vcsw = ok ? ru.ru_nvcsw : 0;
    c->ivcsw = ok ? ru.ru_nivcsw : 0;
}

void ck_tclock_taken(const ck_tclock *a, const ck_tclock *b, double wall, double *runq, double *stolen)
{
    double q = b->runq - a->runq, cpu = b->cpu - a->cpu;
    q = q < 0 ? 0 : q < wall ? q : wall;
    double rest = wall - cpu - q;
    *runq = q;
    *stolen = b->vcsw == a->vcsw && rest > 0 ? rest : 0;
}
