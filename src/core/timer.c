/* Monotonic clock in seconds. */
#include "scaleout/timer.h"

#include <time.h>

double so_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
