/* How often ranks agree on the model (`train --sync`): every step (sync,
 * today's data parallelism) or less strictly, the relaxed-consistency
 * methods of docs/COMPRESSION.md. Parsing only: the strategies that run each
 * method live in src/train, behind the strategy seam. */
#ifndef SCALEOUT_SYNC_H
#define SCALEOUT_SYNC_H

#include <stddef.h>

typedef enum {
    SO_SYNC_SYNC,   /* gradients averaged every step (the default) */
    SO_SYNC_LOCAL,  /* local SGD: models averaged every H steps */
    SO_SYNC_DILOCO, /* DiLoCo: every H steps an outer Nesterov step on the averaged model delta */
    SO_SYNC_SSP,    /* stale-synchronous parameter server: a worker runs at most S steps ahead */
    SO_SYNC_ASYNC,  /* asynchronous parameter server: no bound on staleness */
    SO_SYNC_GOSSIP, /* D-PSGD: after each step, average with the neighbours of a ring or torus */
    SO_SYNC_METHODS
} so_sync_method;

typedef enum { SO_GOSSIP_RING, SO_GOSSIP_TORUS } so_gossip_topology;

/* A method with its parameter, as `--sync` spells it. */
typedef struct {
    so_sync_method method;
    int period;                  /* local, diloco: H >= 1 steps between averages */
    int staleness;               /* ssp: S >= 0 steps a worker may run ahead of the slowest */
    so_gossip_topology topology; /* gossip */
} so_sync_spec;

/* Parses "sync", "local:H", "diloco:H", "ssp:S", "async", "gossip:ring",
 * "gossip:torus". SO_EINVAL with a message naming --sync and the problem. */
int so_sync_parse(const char *text, so_sync_spec *out);
/* The spec as so_sync_parse reads it ("local:8"); returns snprintf's count. */
int so_sync_format(const so_sync_spec *s, char *buf, size_t size);
/* "sync", "local", "diloco", "ssp", "async", "gossip". */
const char *so_sync_method_name(so_sync_method m);
/* Whether the method runs a parameter server (ssp, async: --ps-ranks). */
int so_sync_uses_ps(const so_sync_spec *s);

#endif
