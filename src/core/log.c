/* Levelled diagnostics to stderr, prefixed with the MPI rank once one is set. */
#include "scaleout/log.h"

#include <stdarg.h>
#include <stdio.h>

static so_log_level min_level = SO_LOG_INFO;
static int log_rank = -1;

void so_log_set_level(so_log_level level) { min_level = level; }
void so_log_set_rank(int rank) { log_rank = rank; }

void so_log(so_log_level level, const char *fmt, ...)
{
    static const char *tags[] = {"debug", "info", "warning", "error"};
    if (level < min_level)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* One fprintf per line keeps lines from different ranks unmixed. */
    if (log_rank >= 0)
        fprintf(stderr, "[rank %d] %s: %s\n", log_rank, tags[level], line);
    else
        fprintf(stderr, "%s: %s\n", tags[level], line);
}
