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

/* ---- checkpoints (docs/CHECKPOINT.md, "Relaxed consistency") ----
 * The ranks' models and optimizer states differ between averages, so each
 * rank saves its own as the strategy's rank_state: a header (whether the
 * ranks hold one model), then its parameters, each optimizer slot, and the
 * strategy's extra buffers (DiLoCo's anchor and outer momentum), nparams
 * floats apiece. The replicated part of the checkpoint (so_state_layout:
 * rank r writes block r) holds the ranks' AVERAGE parameters, the model
 * evaluation and `ckpt export` see, taken with one allreduce at the save
 * (none when the ranks hold one model), and each rank's own optimizer
 * slots' block. A resume puts back each rank's own state, so it continues
 * bit for bit; it needs the checkpoint's method and number of ranks. */
enum { SYNC_CKPT_EXTRA = 2 };

typedef struct {
    so_group *g;
    so_model *m;
    so_optim *opt;
    int *same;                         /* the strategy's "every rank holds the same model" */
    float *extra[SYNC_CKPT_EXTRA];     /* nparams floats each, saved after the slots */
    int nextra;
    float *avg;                        /* the replicated part's parameters at the last save */
    size_t units[2];
    so_state_layout layout;
    so_rank_state rs;
    int restored;                      /* this rank's own state came back from a checkpoint */
} sync_ckpt;

/* Sets up k for model m and optimizer opt over g (spec: the --sync text,
 * in the rank_state's tag); set k->extra / nextra first. Call from create:
 * the job hands the layout and rank_state to the checkpoint, and a resume
 * restores into them, before start. */
int sync_ckpt_init(sync_ckpt *k, so_group *g, so_model *m, so_optim *opt, int *same, const char *spec);
void sync_ckpt_deinit(sync_ckpt *k); /* accepts a zeroed k */
/* Start of a resumed run (start_step > 0): SO_EINVAL unless this rank's
 * own state came back (what: the --sync text for the message). */
int sync_ckpt_check_resume(const sync_ckpt *k, long start_step, const char *what);

#endif
