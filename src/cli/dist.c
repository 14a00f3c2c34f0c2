/* Single-process implementation of dist.h (used when MPI is not built in or
 * the process was not started by an MPI launcher). */
#include "dist.h"

#include <stdio.h>

#include "cli.h"

struct dist_handle {
    int unused;
};

static dist_handle single;

int dist_open(dist_handle **out)
{
    *out = &single;
    return 0;
}

const so_dist *dist_get(dist_handle *h)
{
    (void)h;
    return NULL;
}

int dist_agree(dist_handle *h, const char *cmd, int code, const char *msg)
{
    (void)h;
    return code ? cli_error(cmd, code, "%s", msg) : 0;
}

int dist_check_config(dist_handle *h, const char *cmd, const char *config)
{
    (void)h;
    (void)cmd;
    (void)config;
    return 0;
}

int dist_fail(dist_handle *h, const char *cmd, int code, const char *msg)
{
    (void)h;
    return cli_error(cmd, code, "%s", msg);
}

void dist_close(dist_handle *h) { (void)h; }
