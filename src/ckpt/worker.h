/* Private: the checkpoint module's background file thread (worker.c). */
#ifndef SCALEOUT_CKPT_WORKER_H
#define SCALEOUT_CKPT_WORKER_H
#include <pthread.h>
#include <stdatomic.h>

#include "ckpt_internal.h"
#include "slot.h"

enum { CK_TASK_WRITE, CK_TASK_COPY, CK_TASK_MANIFEST, CK_TASK_PREPARE };
enum { CK_IDLE, CK_QUEUED, CK_DONE };
#define CK_QUEUE 4

typedef struct ck_task {
    int kind;            /* CK_TASK_WRITE: buf -> dir/name; CK_TASK_COPY: src -> dir/name;
                            CK_TASK_MANIFEST: buf -> dir/name, then ck_prune(src, keep, protect);
                            CK_TASK_PREPARE: only the prepare step */
    /* Optional first step on the worker (e.g. the snapshot a WRITE then
     * writes): non-zero ends the task with that rc and err. Once it returned,
     * the task is "prepared" (ck_task_prepared). */
    int (*prepare)(void *arg, struct ck_task *t);
    void *prep_arg;
    /* state and prepared are atomic so the training thread can poll them
     * without the worker's lock: the worker runs at low priority (SCHED_BATCH)
     * and, preempted while holding the lock, would stall training by a whole
     * time slice (seen: 4.8 ms on a leader rank at np 4). */
    _Atomic int prepared;
    int keep, reported;
    long protect;
    char dir[4096], name[64], src[4096];
    const void *buf;
    size_t len;
    ck_slots *slots;     /* WRITE: commit the slot taken from these instead of writing buf */
    int no_crc;          /* ... without a CRC (a partner copy: restore checks it against the owner's) */
    int delay_ms;
    /* What the I/O observer hears of this task: CK_IO(so_ckpt_io_kind) of
     * the prepare step (prep_io) and of the rest (io), 0 = nothing; step is
     * the checkpoint's. */
    int io, prep_io;
    long step;
    double t_start, t_prep, t_end; /* the task's start, its prepare step's end, its end (worker thread) */
    int prep_rc;
    _Atomic int state;   /* CK_IDLE / CK_QUEUED / CK_DONE; results below are published by the store of CK_DONE */
    int rc;              /* results, valid once CK_DONE */
    uint32_t crc;
    uint64_t bytes;
    double seconds;
    char err[512];
} ck_task;

typedef struct {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ck_task *q[CK_QUEUE];
    int head, n, stop, started;
    double cpu_seconds;  /* thread CPU time spent in tasks (under mu) */
    so_ckpt_io_fn io_fn; /* I/O observer (under mu; called with mu held) */
    void *io_arg;
    char name[16];       /* thread name (perf, top): "so-ckpt-write" */
    void *copy_buf;      /* CK_TASK_COPY's buffer, made at the first copy, kept until stop */
} ck_worker;

#define CK_IO(kind) ((int)(kind) + 1)

int ck_worker_start(ck_worker *w, const char *name);
void ck_worker_stop(ck_worker *w);   /* runs the queued tasks, then joins */
void ck_worker_submit(ck_worker *w, ck_task *t); /* blocks while the queue is full */
/* 1 once t has run (wait = 1: blocks until then). */
int ck_task_done(ck_worker *w, ck_task *t, int wait);
/* 1 once t's prepare step has run (wait = 1: blocks until then). */
int ck_task_prepared(ck_worker *w, ck_task *t, int wait);
double ck_worker_cpu_seconds(ck_worker *w);
/* Installs the I/O observer; once this returns no call of the old one is in progress. */
void ck_worker_set_io(ck_worker *w, so_ckpt_io_fn fn, void *arg);

#endif
