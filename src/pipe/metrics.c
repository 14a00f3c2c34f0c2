/* What a trained pipeline measured (pipeline.h, "measured pipeline
 * metrics"): the step its devices' busy times imply, and the bubble of
 * that step, beside the schedule's formula (so_pipe_bubble). */
#include "scaleout/pipeline.h"

double so_pipe_step_of_devices(const double *busy, int P, int M)
{
    double sum = 0, slowest = 0;
    for (int s = 0; s < P; s++) {
        sum += busy[s] / M;
        slowest = busy[s] / M > slowest ? busy[s] / M : slowest;
    }
    return sum + (M - 1) * slowest;
}

double so_pipe_bubble_of_devices(const double *busy, int P, int M)
{
    double sum = 0, step = so_pipe_step_of_devices(busy, P, M);
    for (int s = 0; s < P; s++)
        sum += busy[s];
    return step > 0 ? 1 - sum / (P * step) : 0;
}
