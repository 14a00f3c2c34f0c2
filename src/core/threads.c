/* Thread count and pinning for the OpenMP team that oneDNN and our loops share.
 * PyTorch here runs 2 threads slower than 1 unless OMP_PROC_BIND is set; we
 * pin by default from inside the team, since libgomp reads OMP_PROC_BIND at
 * load time and setting it later has no effect. */

#include "scaleout/threads.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include "scaleout/err.h"

static int nthreads = 1;

static void pin_team(int n)
{
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < n)
        return;
    int cpus[CPU_SETSIZE], ncpu = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &allowed))
            cpus[ncpu++] = c;
#pragma omp parallel num_threads(n)
    {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus[omp_get_thread_num() % ncpu], &one);
        pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    }
}

int so_threads_set(int n, int pin)
{
    if (n < 1 || n > 1024)
        return so_err(SO_EINVAL, "--threads: %d is not between 1 and 1024", n);
    nthreads = n;
    omp_set_num_threads(n);
    if (pin && n > 1)
        pin_team(n);
    return 0;
}

int so_threads_get(void) { return nthreads; }
