/* Checkpointing inside a job, private to src/job: fills the checkpoint
 * library's transport (scaleout/ckpt.h) from the comm module, turns the
 * so_job_ckpt_config into a so_ckpt_config, restores before training, and
 * runs the checkpoint at the trainer's step ends. */
#ifndef SCALEOUT_JOB_CKPT_GLUE_H
#define SCALEOUT_JOB_CKPT_GLUE_H
#include "dist.h"
#include "scaleout/ckpt.h"
#include "scaleout/job.h"

typedef struct ckpt_glue ckpt_glue;

/* Whose state a checkpoint holds. The whole job's by default; a pipeline
 * stage's: its replicas' group (a so_comm) and the stage, whose files go to
 * stage<s>/ under each level. */
typedef struct {
    void *group;                 /* so_comm of the ranks holding this state; NULL: the job */
    int stage;                   /* >= 0: a pipeline stage */
    const so_state_layout *state; /* the part a sharded strategy keeps on this rank; NULL: all */
    const so_rank_state *rank_state; /* the strategy's own per-rank state (compression); NULL: none */
} ckpt_scope;

/* --resume PATH of a pipeline: PATH is the checkpoints' root (holding
 * stage<s>/ and the partition), one stage's directory ROOT/stage<k>, or a
 * checkpoint in it, ROOT/stage<k>/ckpt-N. Writes ROOT to root and what
 * stage s resumes from (ROOT/stage<s>[/ckpt-N]) to path (NULL: not
 * wanted). SO_EINVAL naming PATH when ROOT holds no stage0/. */
int ckpt_glue_stage_resume(const char *resume, int stage, char *root, size_t root_len, char *path, size_t path_len);

/* After the model is built and the configuration checked on every rank:
 * validates the options, restores resume (setting tc->start_step and
 * no_initial_bcast; a checkpoint found replaces the values --init-from
 * loaded when the model was built, parts_build). Collective; the ranks agree on any
 * failure (every stage must resume from the same step). *out is NULL when
 * checkpointing is off. */
int ckpt_glue_open(const so_job_ckpt_config *a, dist_handle *dh, const ckpt_scope *scope, so_model *m,
                   so_optim *opt, const char *model, const char *optimizer, const char *config,
                   so_train_config *tc, ckpt_glue **out);
/* The trainer's observer calls (g may be NULL). A checkpoint's own failure
 * is logged and ignored, or turned into SO_STOP (on_error "stop"). */
int ckpt_glue_step_end(ckpt_glue *g, const so_train_state *s);
int ckpt_glue_before_update(ckpt_glue *g);
/* After training: completes pending checkpoints and fills the summary
 * (collective). Failures of the checkpoints themselves are counted there
 * (stopped_by_failure under on_error "stop"); the return is for others. */
int ckpt_glue_finish(ckpt_glue *g, so_job_ckpt_summary *out);
void ckpt_glue_close(ckpt_glue *g); /* accepts NULL */
/* A checkpoint at the next step end, due or not (a stop request). No-op
 * when g is NULL or the run does not write checkpoints. */
void ckpt_glue_request(ckpt_glue *g);
/* Whether the run writes checkpoints; the resume outcome (-1: not asked). */
int ckpt_glue_writes(const ckpt_glue *g);
int ckpt_glue_resumed(const ckpt_glue *g, long *step, int *found);
/* Passes the training thread's checkpoint stalls / the writer and flush
 * threads' I/O to fn (a timeline); g may be NULL. */
void ckpt_glue_set_span(ckpt_glue *g, so_ckpt_span_fn fn, void *arg);
void ckpt_glue_set_io(ckpt_glue *g, so_ckpt_io_fn fn, void *arg);

#endif
