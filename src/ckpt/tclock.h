/* The calling thread's clocks, to tell the time a checkpoint piece took on
 * the training thread apart into its own work and waits, and what the
 * scheduler took: on an oversubscribed node (4 ranks on 2 cores) a piece
 * of 50 us is sometimes preempted for a whole time slice, and on a VM the
 * host sometimes stops the virtual CPU; neither is checkpoint work. */
#ifndef SCALEOUT_CKPT_TCLOCK_H
#define SCALEOUT_CKPT_TCLOCK_H

typedef struct {
    double cpu;  /* seconds on a CPU */
    double runq; /* seconds runnable but waiting for a CPU (0 without schedstat) */
    long vcsw;   /* voluntary context switches: slept on a lock, a condition, a timer */
    long ivcsw;  /* involuntary ones: preempted */
} ck_tclock;

/* A descriptor of /proc/thread-self/schedstat for the calling thread, or -1
 * when there is none (then runq stays 0). */
int ck_tclock_open(void);
void ck_tclock_read(int fd, ck_tclock *c);

/* Of `wall` seconds between readings a and b, those the scheduler took:
 * *runq, the runqueue wait (preempted, or woken and waiting for a CPU), and
 * *stolen, when the thread never slept, the time it was neither running nor
 * waiting (its virtual CPU stopped by the host, or interrupts). Waits the
 * thread chose (voluntary switches) are never counted. */
void ck_tclock_taken(const ck_tclock *a, const ck_tclock *b, double wall, double *runq, double *stolen);

#endif
