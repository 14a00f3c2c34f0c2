/* Private: the flattened training state (state.c). */
#ifndef SCALEOUT_CKPT_STATE_H
#define SCALEOUT_CKPT_STATE_H
#include "ckpt_internal.h"

uint64_t ck_rep_bytes(const so_model *m, const so_optim *o);
uint64_t ck_rank_bytes(const so_model *m);
/* Bytes [off, off+len) of the replicated vector, out of / into the model and optimizer. */
void ck_rep_get(so_model *m, so_optim *o, void *dst, uint64_t off, uint64_t len);
void ck_rep_set(so_model *m, so_optim *o, const void *src, uint64_t off, uint64_t len);
/* This rank's section (RNG + running statistics), rank_bytes long. */
void ck_rank_get(const so_model *m, void *dst);
void ck_rank_set(so_model *m, const void *src);
/* Block k of total bytes over n shards (the first total % n are one longer). */
void ck_block(uint64_t total, int n, int k, uint64_t *off, uint64_t *len);

#endif
