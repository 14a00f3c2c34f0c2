/* A background thread that runs file tasks (write a buffer, copy a file) in
 * order, so shard writes, fsyncs and flushes never run on the training
 * thread. The submitter owns each task and polls task->state. */
#include "worker.h"

#include <sched.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "scaleout/err.h"
#include "scaleout/timer.h"

/* The prepare step, then "prepared" is published to waiters. */
static int prepare(ck_worker *w, ck_task *t)
{
    int rc = t->prepare ? t->prepare(t->prep_arg, t) : 0;
    pthread_mutex_lock(&w->mu);
    atomic_store_explicit(&t->prepared, 1, memory_order_release);
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return rc;
}

static void run(ck_worker *w, ck_task *t)
{
    t->t_start = so_now();
    t->rc = t->prep_rc = prepare(w, t);
    t->t_prep = so_now();
    if (!t->rc && t->kind == CK_TASK_WRITE && t->slots) {
        t->rc = ck_slots_commit(t->slots, t->dir, t->name, t->delay_ms, t->no_crc ? NULL : &t->crc, t->err,
                                sizeof t->err);
        t->bytes = t->len;
    } else if (!t->rc && (t->kind == CK_TASK_WRITE || t->kind == CK_TASK_MANIFEST)) {
        t->rc = ck_write_atomic(t->dir, t->name, t->buf, t->len, t->kind == CK_TASK_WRITE, t->delay_ms, &t->crc,
                                t->err, sizeof t->err);
        t->bytes = t->len;
        if (t->kind == CK_TASK_MANIFEST && !t->rc)
            ck_prune(t->src, t->keep, t->protect);
    } else if (!t->rc && t->kind == CK_TASK_COPY) {
        if (!w->copy_buf)
            w->copy_buf = ck_copy_buffer();
        if (w->copy_buf) {
            t->rc = ck_copy_atomic(t->src, t->dir, t->name, w->copy_buf, t->delay_ms, &t->crc, &t->bytes, t->err,
                                   sizeof t->err);
        } else {
            t->rc = SO_ENOMEM;
            ck_fmt(t->err, sizeof t->err, "out of memory for the copy to '%s'", t->dir);
        }
    }
    t->t_end = so_now();
    t->seconds = t->t_end - t->t_start;
}

/* Tells the observer what t did, with w->mu held (so ck_worker_set_io can
 * switch it off safely): the prepare step and the rest as two events when
 * the task says so, else one event over the whole task. */
static void report(ck_worker *w, const ck_task *t)
{
    if (!w->io_fn)
        return;
    double from = t->t_start;
    if (t->prep_io && t->kind == CK_TASK_PREPARE && t->len == 0)
        return; /* a prepare-only task that had nothing to do (a reserve) */
    if (t->prep_io) {
        so_ckpt_io_event e = {(so_ckpt_io_kind)(t->prep_io - 1), t->step, t->len, t->t_start, t->t_prep, t->prep_rc};
        w->io_fn(w->io_arg, &e);
        if (t->prep_rc)
            return; /* the rest did not run */
        from = t->t_prep;
    }
    if (t->io) {
        so_ckpt_io_event e = {(so_ckpt_io_kind)(t->io - 1), t->step, t->bytes, from, t->t_end, t->rc};
        w->io_fn(w->io_arg, &e);
    }
}

/* This thread's CPU time: what checkpointing costs a node whose cores are all busy. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *loop(void *arg)
{
    ck_worker *w = arg;
    prctl(PR_SET_NAME, w->name, 0, 0, 0);
#ifdef SCHED_BATCH
    /* Checkpoint copies and writes only use CPU time that training leaves
     * idle: a woken writer must not preempt a rank's compute thread. */
    struct sched_param sp = {0};
    pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
#endif
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->stop && w->n == 0)
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->n == 0)
            break;
        ck_task *t = w->q[w->head];
        pthread_mutex_unlock(&w->mu);
        double c0 = cpu_now();
        run(w, t);
        double dc = cpu_now() - c0;
        pthread_mutex_lock(&w->mu);
        w->cpu_seconds += dc;
        report(w, t); /* before CK_DONE: once a task is done, its events are recorded */
        w->head = (w->head + 1) % CK_QUEUE;
        w->n--;
        atomic_store_explicit(&t->state, CK_DONE, memory_order_release);
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int ck_worker_start(ck_worker *w, const char *name)
{
    memset(w, 0, sizeof *w);
    snprintf(w->name, sizeof w->name, "%s", name);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (pthread_create(&w->th, NULL, loop, w) != 0)
        return so_err(SO_ENOMEM, "cannot start a checkpoint writer thread");
    w->started = 1;
    return 0;
}

void ck_worker_stop(ck_worker *w)
{
    if (!w->started)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->th, NULL);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w->copy_buf);
    w->copy_buf = NULL;
    w->started = 0;
}

void ck_worker_submit(ck_worker *w, ck_task *t)
{
    pthread_mutex_lock(&w->mu);
    while (w->n == CK_QUEUE)
        pthread_cond_wait(&w->cv, &w->mu);
    t->state = CK_QUEUED;
    t->prepared = 0;
    t->rc = 0;
    t->err[0] = '\0';
    w->q[(w->head + w->n) % CK_QUEUE] = t;
    w->n++;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* Polls (wait = 0) never take the lock: see ck_task.state. */
int ck_task_done(ck_worker *w, ck_task *t, int wait)
{
    if (!wait)
        return atomic_load_explicit(&t->state, memory_order_acquire) != CK_QUEUED;
    pthread_mutex_lock(&w->mu);
    while (wait && t->state == CK_QUEUED)
        pthread_cond_wait(&w->cv, &w->mu);
    int done = t->state != CK_QUEUED;
    pthread_mutex_unlock(&w->mu);
    return done;
}

int ck_task_prepared(ck_worker *w, ck_task *t, int wait)
{
    if (!wait)
        return atomic_load_explicit(&t->state, memory_order_acquire) != CK_QUEUED ||
               atomic_load_explicit(&t->prepared, memory_order_acquire);
    pthread_mutex_lock(&w->mu);
    while (wait && t->state == CK_QUEUED && !t->prepared)
        pthread_cond_wait(&w->cv, &w->mu);
    int done = t->state != CK_QUEUED || t->prepared;
    pthread_mutex_unlock(&w->mu);
    return done;
}

double ck_worker_cpu_seconds(ck_worker *w)
{
    if (!w->started)
        return 0;
    pthread_mutex_lock(&w->mu);
    double c = w->cpu_seconds;
    pthread_mutex_unlock(&w->mu);
    return c;
}

void ck_worker_set_io(ck_worker *w, so_ckpt_io_fn fn, void *arg)
{
    if (!w->started)
        return;
    pthread_mutex_lock(&w->mu);
    w->io_fn = fn;
    w->io_arg = arg;
    pthread_mutex_unlock(&w->mu);
}
