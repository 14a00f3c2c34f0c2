/* How `predict` and `plan` word a measurement of per-layer times
 * (so_job_measure_model): its progress on stderr and the line that states
 * the linear-scaling assumption with the check's figure. */
#include <stdio.h>

#include "cli.h"
#include "scaleout/job.h"

void cli_measure_progress(void *cmd, const char *line)
{
    fprintf(stderr, "%s: %s\n", (const char *)cmd, line);
}

void cli_print_linearity(const so_job_layer_times *lt)
{
    if (!lt->check_batch || !(lt->linearity > 0))
        return;
    double dev = lt->linearity - 1;
    printf("layer times scaled from batch %d assume a layer's time is linear in its batch: per sample, batch %d "
           "took %.2fx the time of batch %d%s\n", lt->measured_batch, lt->check_batch, lt->linearity,
           lt->measured_batch,
           dev > 0.15 ? " (larger batches run faster per sample here: the prediction errs on the slow side)"
           : dev < -0.15 ? " (NOT linear: larger batches ran slower per sample; the prediction may be optimistic)"
           : " (linear within 15%)");
}
