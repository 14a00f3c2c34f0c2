/* Stop signals taken by a thread of their own (sigwait), never by a handler.
 * oneDNN 2.6's generated GEMM kernels point RSP into the heap while they run
 * (oneDNN issue 4845, fixed in 3.11); a handler that runs on a compute thread
 * then pushes its signal frame there and corrupts the heap. Blocked in every
 * thread, the signals run no handler anywhere; this thread asks for the stop. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/prctl.h>

#include "scaleout/err.h"
#include "scaleout/job.h"

static sigset_t watched;
static pthread_t watcher;
static int watching, first_signal;
static atomic_int quitting;

static void *watch(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, "so-signals", 0, 0, 0);
    for (;;) {
        int sig;
        if (sigwait(&watched, &sig) != 0)
            continue;
        if (atomic_load(&quitting))
            return NULL;
        so_job_request_stop();
    }
}

int so_job_watch_signals(const int *signals, int count)
{
    if (watching)
        return so_err(SO_EINVAL, "stop signals are already watched");
    if (count < 1)
        return so_err(SO_EINVAL, "no stop signal to watch");
    sigemptyset(&watched);
    for (int i = 0; i < count; i++)
        if (signals[i] == SIGKILL || signals[i] == SIGSTOP || sigaddset(&watched, signals[i]) != 0)
            return so_err(SO_EINVAL, "signal %d cannot be watched", signals[i]);
    sigset_t before;
    int e = pthread_sigmask(SIG_BLOCK, &watched, &before);
    if (!e && (e = pthread_create(&watcher, NULL, watch, NULL)))
        pthread_sigmask(SIG_SETMASK, &before, NULL); /* no thread to take them: a blocked SIGTERM would be lost */
    if (e)
        return so_err(SO_ENOMEM, "cannot watch stop signals: %s", strerror(e));
    atomic_store(&quitting, 0);
    first_signal = signals[0];
    watching = 1;
    return 0;
}

/* The signals stay blocked: one arriving now (the run is over) is left
 * pending and ends nothing half-way, such as the final report. */
void so_job_unwatch_signals(void)
{
    if (!watching)
        return;
    atomic_store(&quitting, 1);
    pthread_kill(watcher, first_signal);
    pthread_join(watcher, NULL);
    watching = 0;
}
