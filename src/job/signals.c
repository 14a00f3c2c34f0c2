/* Stop signals taken by a thread of their own (sigwait), never by a handler.
 * oneDNN 2.6's generated GEMM kernels point RSP into the heap while they run
 * (oneDNN issue 4845, fixed in 3.11); a handler that runs on a compute thread
 * then pushes its signal frame there and corrupts the heap. Blocked in every
 * thread, the signals run no handler anywhere; this thread decides: while a
 * job exists the first signal asks it to stop after a step; during set-up
 * (nothing to stop at yet, and a read or a collective may block for long),
 * for commands that do not train, and on a second signal, the process ends
 * at once by the signal's own default action, so its status is the usual
 * 128 + signo and a launcher (mpirun, srun) ends the other ranks. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "scaleout/err.h"
#include "scaleout/job.h"
#include "stop.h"

static sigset_t watched;
static pthread_t watcher;
static int watching, first_signal;
static atomic_int quitting;
static so_job_signal_opts opts;
/* Where the process is: no job yet (set-up), a job exists, or it was freed. */
enum { PHASE_SETUP, PHASE_JOB, PHASE_DONE };
static atomic_int phase;
static int stop_asked; /* the watcher thread's own: a stop was requested before */
static atomic_int stop_sig; /* the signal that asked for it */

int so_job_stop_signal(void) { return atomic_load(&stop_sig); }

void signals_job_phase(int live) { atomic_store(&phase, live ? PHASE_JOB : PHASE_DONE); }

/* What the line says about when the signal came. */
static const char *when(int ph)
{
    if (!opts.stop_jobs)
        return "";
    if (stop_asked)
        return " a second time";
    return ph == PHASE_SETUP ? " during set-up" : " at the end of the run";
}

/* Started by a launcher (mpirun, srun): its daemon is our parent. */
static int launched(void)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK", "SLURM_STEP_ID"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i]))
            return 1;
    return 0;
}

/* The signal's default action, from this thread: the process ends as if
 * nothing had watched it (a core dump only for signals that dump). No line
 * when the launcher sent it: mpirun ends the other ranks with SIGTERM once
 * one has failed, and says so itself; a line from each would bury the
 * failing rank's own. */
static void end_now(int sig, pid_t from)
{
    if (opts.on_end && !(from == getppid() && launched()))
        opts.on_end(opts.arg, sig, when(atomic_load(&phase)));
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, NULL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    raise(sig);
}

static void *watch(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, "so-signals", 0, 0, 0);
    for (;;) {
        siginfo_t info;
        int sig = sigwaitinfo(&watched, &info);
        if (sig < 0)
            continue;
        if (atomic_load(&quitting))
            return NULL;
        if (!opts.stop_jobs || stop_asked || atomic_load(&phase) != PHASE_JOB) {
            end_now(sig, info.si_code == SI_USER ? info.si_pid : 0); /* returns only if its default is to ignore */
            continue;
        }
        atomic_store(&stop_sig, sig);
        so_job_request_stop();
        stop_asked = 1;
    }
}

/* A signal the process ignored when it started (SIGINT in a background job
 * of a shell without job control, nohup's SIGHUP) stays ignored. */
static int ignored(int sig)
{
    struct sigaction cur;
    return sigaction(sig, NULL, &cur) == 0 && cur.sa_handler == SIG_IGN;
}

int so_job_watch_signals_opts(const int *signals, int count, const so_job_signal_opts *o)
{
    if (watching)
        return so_err(SO_EINVAL, "stop signals are already watched");
    if (count < 1)
        return so_err(SO_EINVAL, "no stop signal to watch");
    sigemptyset(&watched);
    int n = 0;
    for (int i = 0; i < count; i++) {
        if (signals[i] == SIGKILL || signals[i] == SIGSTOP || sigaddset(&watched, signals[i]) != 0)
            return so_err(SO_EINVAL, "signal %d cannot be watched", signals[i]);
        if (ignored(signals[i]))
            sigdelset(&watched, signals[i]);
        else if (!n++)
            first_signal = signals[i];
    }
    if (!n)
        return 0; /* every one is ignored: nothing to take */
    opts = *o;
    stop_asked = 0;
    sigset_t before;
    int e = pthread_sigmask(SIG_BLOCK, &watched, &before);
    if (!e && (e = pthread_create(&watcher, NULL, watch, NULL)))
        pthread_sigmask(SIG_SETMASK, &before, NULL); /* no thread to take them: a blocked SIGTERM would be lost */
    if (e)
        return so_err(SO_ENOMEM, "cannot watch stop signals: %s", strerror(e));
    atomic_store(&quitting, 0);
    watching = 1;
    return 0;
}

int so_job_watch_signals(const int *signals, int count)
{
    const so_job_signal_opts stop = {1, NULL, NULL};
    return so_job_watch_signals_opts(signals, count, &stop);
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
