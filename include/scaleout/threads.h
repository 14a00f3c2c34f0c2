/* Compute threads: one OpenMP team shared by oneDNN and scaleout's own loops. */
#ifndef SCALEOUT_THREADS_H
#define SCALEOUT_THREADS_H

/* Sets the number of compute threads (n >= 1). With pin != 0 each thread is
 * bound to one CPU of the process's allowed set (first-touch locality, no
 * migration), which is why 2 threads beat 1 here without OMP_PROC_BIND.
 * When the allowed set has fewer CPUs than threads, pinning is skipped. */
int so_threads_set(int n, int pin);
int so_threads_get(void);

#endif
