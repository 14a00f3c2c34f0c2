/* Levelled logging to stderr with an optional rank prefix.
 * Results go to stdout through plain printf in the CLI; this is for diagnostics. */
#ifndef SCALEOUT_LOG_H
#define SCALEOUT_LOG_H

typedef enum { SO_LOG_DEBUG, SO_LOG_INFO, SO_LOG_WARN, SO_LOG_ERROR } so_log_level;

void so_log_set_level(so_log_level min_level);
/* rank < 0 disables the "[rank N]" prefix (single-process runs). */
void so_log_set_rank(int rank);
void so_log(so_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
