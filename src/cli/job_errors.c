/* How the commands that run a so_job (train, bench train, bench accuracy)
 * report its errors: once per job, not once per rank, with the exit status
 * from the error's kind (cli.h). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "scaleout/err.h"
#include "scaleout/job.h"

int cli_job_setup_error(const char *cmd, so_job *j, int rc)
{
    /* The rank that failed says why; rank 0 also says that the job stops
     * when the failure was another rank's. */
    if (!so_job_failed_elsewhere(j) || so_job_rank(j) == 0)
        cli_error(cmd, cli_exit_code(rc), "%s", so_errmsg());
    return cli_exit_code(rc);
}

int cli_job_train_error(const char *cmd, so_job *j, int rc)
{
    char line[1200];
    snprintf(line, sizeof line, "%s: %s", cmd, so_errmsg());
    so_job_abort(j, cli_exit_code(rc), line); /* returns on one rank only */
    return cli_error(cmd, cli_exit_code(rc), "%s", so_errmsg());
}
