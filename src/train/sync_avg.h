/* What the relaxed-consistency strategies (strategy_local.c: local SGD and
 * DiLoCo; strategy_gossip.c: D-PSGD) share: averaging buffers in place over
 * the group, evaluating on the ranks' averaged model while their own models
 * differ, and counting the bytes each rank sends. Private to src/train. */
#ifndef SCALEOUT_TRAIN_SYNC_AVG_H
#define SCALEOUT_TRAIN_SYNC_AVG_H
#include <stddef.h>

#include "scaleout/group.h"
#include "scaleout/model.h"
#include "scaleout/strategy.h"

struct so_loader;
struct so_train_result;

/* Up to this many buffers averaged in one go (parameters, batchnorm
 * statistics, optimizer slots). */
enum { SYNC_AVG_MAX = 8 };

typedef struct {
    float *buf[SYNC_AVG_MAX];
    size_t n[SYNC_AVG_MAX];
    int count;
} sync_avg_set;

/* Adds buf[0..n) to the set (n == 0 or buf == NULL: nothing). */
void sync_avg_add(sync_avg_set *s, float *buf, size_t n);
/* Averages every buffer of s in place over g (one non-blocking allreduce
 * each, then waits for all). *bytes += the payload this rank contributed.
 * tag: the operation log's (SO_STRATEGY_TAG + ...). */
int sync_avg_run(so_group *g, const sync_avg_set *s, int tag, double *bytes);

/* The model every rank would hold if the ranks averaged now, and its
 * evaluation (so_strategy_ops.evaluate's contract; average 0: the ranks
 * hold the same model already, evaluated as it is): parameters and
 * batchnorm statistics are saved to `scratch` (nparams + nbufs floats),
 * averaged over g, this rank's share of `test` evaluated into sums, and
 * the rank's own values put back, so training continues unchanged. */
int sync_eval_averaged(so_group *g, so_model *m, float *scratch, struct so_loader *test, double sums[3],
                       int average);

/* --json and the report: what the strategy sent (payload bytes this rank
 * contributed to averages and messages) and how often the ranks averaged. */
void sync_report(struct so_train_result *r, double bytes, long rounds, int period);

/* The ranks and their group, which every relaxed-consistency strategy
 * needs; what = the --sync text for the message. */
int sync_strategy_check(const so_strategy_config *c, const char *what);

#endif
