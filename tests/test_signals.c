/* so_job_watch_signals (src/job/signals.c): the watched signal is blocked in
 * the caller and in threads it creates later, a process-directed SIGTERM
 * neither kills the process nor runs a handler but stops a job after an
 * early step, and signals that cannot be watched are refused. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "scaleout/err.h"
#include "scaleout/job.h"

static int blocked_here(int sig)
{
    sigset_t cur;
    pthread_sigmask(SIG_BLOCK, NULL, &cur);
    return sigismember(&cur, sig);
}

static int is_pending(int sig)
{
    sigset_t p;
    sigpending(&p);
    return sigismember(&p, sig);
}

static void *report_blocked(void *arg)
{
    *(int *)arg = blocked_here(SIGTERM);
    return NULL;
}

static void test_refuses_unwatchable(void **state)
{
    (void)state;
    const int kill_sig[] = {SIGKILL}, bad[] = {100000};
    assert_int_equal(so_job_watch_signals(kill_sig, 1), SO_EINVAL);
    assert_int_equal(so_job_watch_signals(bad, 1), SO_EINVAL);
    assert_int_equal(so_job_watch_signals(kill_sig, 0), SO_EINVAL);
}

/* A job of 500 LeNet-5 steps on synthetic data; SIGTERM to the process
 * before training: it stops after the first agreement, long before 500. */
static void test_sigterm_stops_job(void **state)
{
    (void)state;
    const int term[] = {SIGTERM};
    assert_int_equal(so_job_watch_signals(term, 1), 0);
    assert_int_equal(so_job_watch_signals(term, 1), SO_EINVAL); /* once */
    assert_true(blocked_here(SIGTERM));
    pthread_t th;
    int child_blocked = 0;
    assert_int_equal(pthread_create(&th, NULL, report_blocked, &child_blocked), 0);
    pthread_join(th, NULL);
    assert_true(child_blocked);

    so_job_config c;
    so_job_defaults(&c);
    c.model = "lenet5";
    c.dataset = "synthetic";
    c.steps = 500;
    c.batch = 8;
    so_job *job = NULL;
    assert_int_equal(so_job_create(&c, &job), 0);
    assert_int_equal(kill(getpid(), SIGTERM), 0); /* process-directed, as Slurm sends it */
    for (int i = 0; i < 500 && is_pending(SIGTERM); i++) /* until the watching thread took it */
        usleep(10000);
    assert_false(is_pending(SIGTERM));
    so_train_result r;
    memset(&r, 0, sizeof r);
    int rc = so_job_train(job, NULL, NULL, &r);
    so_train_result_free(&r);
    assert_int_equal(rc, 0);
    long stopped = so_job_stopped_step(job);
    so_job_free(job);
    so_job_unwatch_signals();
    assert_true(stopped >= 0 && stopped < 500);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refuses_unwatchable),
        cmocka_unit_test(test_sigterm_stops_job),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
