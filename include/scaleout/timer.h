/* Monotonic wall-clock time for step timing. */
#ifndef SCALEOUT_TIMER_H
#define SCALEOUT_TIMER_H

/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC). */
double so_now(void);

#endif
