/* so_job_watch_signals (src/job/signals.c): the watched signal is blocked in
 * the caller and in threads it creates later, a process-directed SIGTERM
 * neither kills the process nor runs a handler but stops a job after an
 * early step, and signals that cannot be watched are refused. In child
 * processes (forked before this process has any thread): a signal before any
 * job exists, a second signal, or any signal without stop_jobs ends the
 * process by that signal after the caller's line; an ignored signal stays
 * ignored. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
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

/* The child's on_end writes `when` into this pipe. */
static int line_pipe[2];

static void on_end(void *arg, int sig, const char *when)
{
    (void)arg;
    char buf[64];
    int n = snprintf(buf, sizeof buf, "%d%s", sig, when);
    if (write(line_pipe[1], buf, (size_t)n) < 0)
        _exit(99);
}

static so_job *small_job(int steps)
{
    so_job_config c;
    so_job_defaults(&c);
    c.model = "lenet5";
    c.dataset = "synthetic";
    c.steps = steps;
    c.batch = 8;
    so_job *job = NULL;
    return so_job_create(&c, &job) ? NULL : job;
}

/* Runs child() in a forked process; returns its wait status, and in line what
 * its on_end wrote ("" if nothing). */
static int in_child(void (*child)(void), char *line, size_t len)
{
    assert_int_equal(pipe(line_pipe), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(line_pipe[0]);
        child();
        _exit(0);
    }
    close(line_pipe[1]);
    ssize_t n = read(line_pipe[0], line, len - 1);
    line[n > 0 ? n : 0] = '\0';
    close(line_pipe[0]);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return st;
}

static void sleep_ms(long ms) { nanosleep(&(struct timespec){ms / 1000, ms % 1000 * 1000000L}, NULL); }

static void term_during_setup(void)
{
    const int term[] = {SIGTERM};
    const so_job_signal_opts o = {1, on_end, NULL};
    if (so_job_watch_signals_opts(term, 1, &o))
        _exit(2);
    kill(getpid(), SIGTERM); /* no job yet: set-up */
    sleep_ms(5000);
    _exit(3);
}

static void term_without_stop(void)
{
    const int term[] = {SIGTERM, SIGINT};
    const so_job_signal_opts o = {0, on_end, NULL};
    if (so_job_watch_signals_opts(term, 2, &o))
        _exit(2);
    kill(getpid(), SIGINT);
    sleep_ms(5000);
    _exit(3);
}

static void term_twice_in_job(void)
{
    const int term[] = {SIGTERM};
    const so_job_signal_opts o = {1, on_end, NULL};
    if (so_job_watch_signals_opts(term, 1, &o))
        _exit(2);
    so_job *job = small_job(500);
    if (!job)
        _exit(4);
    kill(getpid(), SIGTERM); /* a job exists: asks it to stop */
    sleep_ms(300);
    if (so_job_stop_signal() != SIGTERM)
        _exit(5);
    kill(getpid(), SIGTERM); /* the second ends the process */
    sleep_ms(5000);
    _exit(3);
}

static void ignored_int(void)
{
    signal(SIGINT, SIG_IGN); /* as a shell starts a background job */
    const int sigs[] = {SIGINT};
    const so_job_signal_opts o = {0, on_end, NULL};
    if (so_job_watch_signals_opts(sigs, 1, &o))
        _exit(2);
    kill(getpid(), SIGINT);
    sleep_ms(200);
    _exit(7);
}

static void test_signal_ends_setup(void **state)
{
    (void)state;
    char line[64];
    int st = in_child(term_during_setup, line, sizeof line);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    char want[64];
    snprintf(want, sizeof want, "%d during set-up", SIGTERM);
    assert_string_equal(line, want);
    st = in_child(term_without_stop, line, sizeof line);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGINT);
    snprintf(want, sizeof want, "%d", SIGINT);
    assert_string_equal(line, want);
    st = in_child(ignored_int, line, sizeof line);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 7);
    assert_string_equal(line, "");
}

static void test_second_signal_ends_job(void **state)
{
    (void)state;
    char line[64], want[64];
    int st = in_child(term_twice_in_job, line, sizeof line);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    snprintf(want, sizeof want, "%d a second time", SIGTERM);
    assert_string_equal(line, want);
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

    so_job *job = small_job(500);
    assert_non_null(job);
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
        /* forks first, while this process has no thread */
        cmocka_unit_test(test_signal_ends_setup),
        cmocka_unit_test(test_second_signal_ends_job),
        cmocka_unit_test(test_refuses_unwatchable),
        cmocka_unit_test(test_sigterm_stops_job),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
