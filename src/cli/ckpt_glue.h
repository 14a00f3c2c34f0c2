/* The checkpoint feature of `scaleout train`: its flags, and the glue that
 * connects the checkpoint library (scaleout/ckpt.h) to the comm module and to
 * the trainer's step_end hook. cmd_train.c only calls these four functions. */
#ifndef SCALEOUT_CLI_CKPT_GLUE_H
#define SCALEOUT_CLI_CKPT_GLUE_H
#include "cli.h"
#include "dist.h"
#include "scaleout/ckpt.h"
#include "scaleout/train.h"

typedef struct {
    const char *every, *dir, *local, *resume, *mode, *on_error, *init_from;
    int keep, flush_every, ranks_per_node;
    float mtbf;
} ckpt_args;

extern const char *const ckpt_modes[];
extern const char *const ckpt_on_errors[];

/* Option-table lines for train (a is a train_args with a `ck` member). */
#define CKPT_GLUE_OPTIONS(a)                                                                                        \
    {"ckpt-every", OPT_STR, &(a)->ck.every, "N|Nepoch|auto", "checkpoint every N steps, N epochs, or auto (--mtbf)", 0, -1, NULL}, \
    {"ckpt-dir", OPT_STR, &(a)->ck.dir, "DIR", "shared checkpoint level", 0, -1, NULL},                              \
    {"ckpt-local", OPT_STR, &(a)->ck.local, "DIR", "node-local checkpoint level (node<id>/ under it)", 0, -1, NULL},  \
    {"ckpt-keep", OPT_INT, &(a)->ck.keep, "K", "complete checkpoints kept per level", 1, 1 << 20, NULL},              \
    {"ckpt-flush-every", OPT_INT, &(a)->ck.flush_every, "M", "flush every M-th checkpoint to --ckpt-dir", 1, 1 << 20, NULL}, \
    {"ckpt-mode", OPT_CHOICE, &(a)->ck.mode, "MODE", "scaleout (sharded, async) or naive (rank 0 writes)", 0, -1, ckpt_modes}, \
    {"ckpt-on-error", OPT_CHOICE, &(a)->ck.on_error, "WHAT", "when a checkpoint fails: continue or stop", 0, -1, ckpt_on_errors}, \
    {"mtbf", OPT_FLOAT, &(a)->ck.mtbf, "HOURS", "mean time between failures for --ckpt-every auto", 1e-6, 1e9, NULL}, \
    {"resume", OPT_STR, &(a)->ck.resume, "auto|PATH", "continue from the newest complete checkpoint", 0, -1, NULL},    \
    {"init-from", OPT_STR, &(a)->ck.init_from, "FILE", "initial parameters from a .safetensors file", 0, -1, NULL},  \
    {"ranks-per-node", OPT_INT, &(a)->ck.ranks_per_node, "K", "emulate nodes of K ranks (checkpoint partners, hier)", 0, 1 << 20, NULL}

void ckpt_args_defaults(ckpt_args *a);

typedef struct ckpt_glue ckpt_glue;

/* After the model is built and the configuration checked on every rank:
 * validates the flags, loads --init-from, restores --resume, and installs the
 * step_end hook in tc (chaining any hooks already there). Returns 0 or a CLI
 * exit code (message printed). *out is NULL when checkpointing is off. */
int ckpt_glue_open(const ckpt_args *a, dist_handle *dh, so_model *m, so_optim *opt, const char *model,
                   const char *optimizer, const char *config, so_train_config *tc, ckpt_glue **out);
/* After training: completes pending checkpoints, prints the summary (rank 0).
 * Returns 0 or a CLI exit code (--ckpt-on-error stop after a failure). */
int ckpt_glue_finish(ckpt_glue *g);
void ckpt_glue_close(ckpt_glue *g); /* accepts NULL */
/* A checkpoint at the next step end, due or not (stop on SIGTERM). No-op
 * when g is NULL or the run does not write checkpoints. */
void ckpt_glue_request(ckpt_glue *g);
/* Whether the run writes checkpoints (--ckpt-every). */
int ckpt_glue_writes(const ckpt_glue *g);
/* Passes the training thread's checkpoint stalls to fn (a timeline); g may be NULL. */
void ckpt_glue_set_span(ckpt_glue *g, so_ckpt_span_fn fn, void *arg);
/* Passes the writer and flush threads' I/O to fn (called on those threads); g may be NULL. */
void ckpt_glue_set_io(ckpt_glue *g, so_ckpt_io_fn fn, void *arg);

#endif
