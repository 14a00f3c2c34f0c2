/* Private: the flattened training state (state.c). */
#ifndef SCALEOUT_CKPT_STATE_H
#define SCALEOUT_CKPT_STATE_H
#include "ckpt_internal.h"

uint64_t ck_rep_bytes(const so_model *m, const so_optim *o);
/* The per-rank section: RNG, running statistics, then rs's bytes (rs may be NULL). */
uint64_t ck_rank_bytes(const so_model *m, const so_rank_state *rs);
/* Bytes [off, off+len) of the replicated vector, out of / into the model and optimizer. */
void ck_rep_get(so_model *m, so_optim *o, void *dst, uint64_t off, uint64_t len);
void ck_rep_set(so_model *m, so_optim *o, const void *src, uint64_t off, uint64_t len);
/* This rank's section (RNG + running statistics + rs's state), rank_bytes
 * long; set puts back the model's part (the caller decides about rs's). */
void ck_rank_get(const so_model *m, const so_rank_state *rs, void *dst);
void ck_rank_set(so_model *m, const void *src);
/* Block k of total bytes over n shards (the first total % n are one longer). */
void ck_block(uint64_t total, int n, int k, uint64_t *off, uint64_t *len);

/* ---- the strategy's state: which part of the replicated vector a shard holds ----
 * Without units (data parallelism: every rank holds it all) shard k is byte
 * block k. With a strategy's units (so_state_layout, recorded in the
 * manifest) shard i = replica x shards + k holds, segment after segment
 * (parameters, then each optimizer slot), the piece of every unit that is
 * block k of `shards` cut again into block `replica` of `replicas`. */
typedef struct {
    int nunits, shards, replicas;
    const uint64_t *units;       /* nunits + 1 element boundaries; NULL: byte blocks */
} ck_units;

/* Floats of one segment that shard i holds. */
uint64_t ck_units_floats(const ck_units *u, int i);
/* Shard i's bytes [*off, *off + *len) of the replicated vector's
 * nseg x nparams floats, in either layout (total bytes: rep_bytes). */
void ck_shard_span(const ck_units *u, int nseg, uint64_t rep_bytes, int world, int i, uint64_t *off, uint64_t *len);
/* Elements [lo, lo + n) of segment seg, met one piece at a time. */
typedef void (*ck_piece_fn)(void *ctx, int seg, uint64_t lo, uint64_t n, float *data);
/* The pieces of shard i, in its file's order, with data pointing into buf
 * (the shard's replicated bytes; write or read them). */
void ck_units_walk(const ck_units *u, int nseg, int i, uint8_t *buf, ck_piece_fn fn, void *ctx);
/* Sets canonical bytes [off, off + len) of the replicated vector from src
 * through fn, whole floats at a time: a float cut by a shard boundary waits
 * in carry (4 bytes, *ncarry of them) for the next shard's bytes. Shards
 * must come in order. nparams: floats per segment. */
void ck_canonical_feed(uint64_t nparams, uint64_t off, const uint8_t *src, uint64_t len, uint8_t carry[4],
                       int *ncarry, ck_piece_fn fn, void *ctx);
struct so_ckpt;
/* The session's shard i: bytes of the replicated vector (ck_shard_span on
 * its layout), and this rank's copied into dst (the writer's snapshot). */
void ck_span(const struct so_ckpt *ck, int i, uint64_t *off, uint64_t *len);
void ck_shard_get(struct so_ckpt *ck, void *dst);
/* Puts shard k of checkpoint m (its replicated bytes in buf) into this
 * session's state, whatever the layout m was written with; carry / ncarry
 * as ck_canonical_feed (shards in order, ncarry 0 at the first). */
void ck_shard_put(struct so_ckpt *ck, const so_ckpt_manifest *m, int k, uint8_t *buf, uint8_t carry[4], int *ncarry);
/* The layout of c.state into the session (owned copy of the boundaries). */
int ck_units_from_state(struct so_ckpt *ck);
/* The units are valid for nparams: 0 < units strictly increasing from 0 to
 * nparams, shards x replicas = world. */
int ck_units_check(const ck_units *u, uint64_t nparams, int world);

#endif
