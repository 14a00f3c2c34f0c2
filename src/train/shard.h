/* What the sharded strategies (strategy_zero.c) share, private to the train
 * module: the units the flat buffers are cut into, which block of each unit
 * this rank keeps, the compact buffers that hold those blocks, and the
 * memory whose pages are mapped only while a unit is in use. */
#ifndef SCALEOUT_TRAIN_SHARD_H
#define SCALEOUT_TRAIN_SHARD_H
#include <stddef.h>

#include "scaleout/graph.h"
#include "scaleout/strategy.h"

/* How units are made (--shard-unit). */
typedef enum {
    SHARD_UNIT_BUCKETS, /* the gradient bucket plan (zero1/2's default) */
    SHARD_UNIT_LAYER,   /* every node with parameters */
    SHARD_UNIT_BLOCK,   /* nodes of one block: "layer1.0.conv1" and "layer1.0.bn1" are layer1.0 */
    SHARD_UNIT_SIZE,    /* consecutive layers of at least `bytes` */
    SHARD_UNIT_AUTO     /* zero3's default: consecutive blocks merged while the unit stays within
                           SHARD_AUTO_BYTES; a larger block is a unit alone */
} shard_unit_kind;

/* auto's merge limit: blocks this small cost a gather's latency and a
 * wake-up of the communication thread more than their memory is worth
 * (ResNet-20 at np 2: its 12 blocks 0.89 of dp, merged into units of up to
 * 1 MiB 0.98). Larger blocks stay units of their own: merging ResNet-50's
 * up to 4 MiB (layer1 and layer2 into two units) was no faster than its
 * blocks on the same VM. docs/PARALLELISM.md. */
#define SHARD_AUTO_BYTES (1u << 20)

/* Without --shard-unit, a dense layer of more weights than this is units of
 * row chunks of about this size (as --shard-unit 32 cuts it): VGG-16's
 * 411 MB fc6 whole took two gradient slots of it at zero2 and prefetch
 * slots at zero3, more memory per rank than zero1 at np 2 (DeepSpeed#1302's
 * complaint); in 32 MiB chunks zero2 and zero3 kept 1.01 and 0.93 of dp's
 * step (docs/PERFORMANCE.md, "What only sharding trains"). */
#define SHARD_CHUNK_BYTES (32u << 20)

typedef struct {
    shard_unit_kind kind;
    size_t bytes;                /* SIZE: the least; BUCKETS: the regular bucket */
    size_t first_bytes;          /* BUCKETS: the first and last buckets */
    size_t chunk_bytes;          /* > 0: dense layers above it are units of row chunks (so_graph_dense_chunks) */
} shard_units;

/* "auto", "layer", "block" or a size in MiB (a positive number) -> u;
 * SO_EINVAL naming --shard-unit otherwise. */
int shard_units_parse(const char *text, shard_units *u);

/* The units a stage's configuration asks for: --shard-unit, else zero3's
 * auto units and zero1/2's bucket plan (auto: its default sizes, until measured).
 * --shard-unit N (without it, SHARD_CHUNK_BYTES) also cuts a dense layer of
 * more than N MiB of weights into units of row chunks of about N MiB, which
 * the model computes one at a time (so_model_opts.chunk_bytes): a zero2/3 rank holds one chunk's
 * gathered parameters and gradients, not the layer's (zero1 the same
 * units, so the three stages add alike). */
int shard_units_for(const so_strategy_config *c, int stage, shard_units *u);

/* The units of a graph and this rank's block of each: units are runs of
 * consecutive nodes with parameters, so unit u is the flat range
 * [lo[u], lo[u+1]) of the parameter (and gradient) buffer, and the shard
 * group's rank k keeps block k of each (so_comm_block's rule) at cbase[u]
 * in the compact buffers. */
typedef struct {
    int nunits;
    size_t *lo;                  /* nunits + 1 boundaries, lo[0] = 0, lo[nunits] = nparams */
    int *node_lo, *node_hi;      /* unit u's nodes with parameters lie in [node_lo, node_hi) */
    int *unit_of;                /* per node: its (first) unit, -1 for a node without parameters */
    int *chunks;                 /* per node: the units of row chunks it is cut into, 1: whole */
    int shards, shard;           /* the shard group's size and this rank's place in it */
    size_t *counts;              /* nunits x shards block lengths (the collectives' counts) */
    size_t *mine_off, *mine_len; /* per unit: this rank's block, flat offset and length */
    size_t *cbase;               /* per unit: where that block starts in the compact buffers */
    size_t nmine;                /* floats this rank keeps: the compact buffers' length */
    size_t max_unit;             /* floats of the largest unit */
    /* The units in the order a forward pass reads them, repeats of one unit
     * in a row merged: a layer reads its own unit and, when it ties its
     * weight to another layer's table (GPT-2's LM head reads the token
     * embedding), that layer's unit too, so a tied table's unit comes again
     * where its user runs. Backward reads the same order reversed. */
    int *seq, nseq;
    int *use_lo, *use_hi;        /* per node: the positions in seq of the units it reads, -1 for none */
    size_t tied;                 /* floats of the units holding a table another unit's layer ties to */
    int widest;                  /* the most places one window call reads (a tied layer: 2; a chunk: 1) */
} shard_layout;

int shard_layout_build(const so_graph *g, const shard_units *u, int shards, int shard, shard_layout *l);
void shard_layout_free(shard_layout *l);

/* What a rank of stage 1-3 holds by the layout (so_strategy_memory): zero3's
 * `prefetch` units gathered (the largest window of that many places in the
 * read order, seq), zero2/3's two units of gradients (the one backward
 * writes, one being reduced: the largest run of two consecutive units; the
 * whole buffer when micro-batches are summed in place, accumulate > 1),
 * plus the tied tables' units, whose gradients live from the tied user's
 * backward to the owner's. */
void shard_memory(int stage, const shard_layout *l, size_t nparams, int nslots, int prefetch, int accumulate,
                  so_strategy_memory *out);
/* The communication thread's scratch for a unit on a 16-bit wire (the
 * largest unit at that width; 0 for F32): the accounted messages. */
double shard_wire_scratch(const shard_layout *l, so_dtype wire);

/* zero2/3's gradient slots with one micro-batch (strategy_zero.c): the
 * units backward writes once and whole (a row chunk of a cut layer is one)
 * alternate between two buffers in backward's order. slot_of (nunits) gets
 * each unit's slot (0, 1), or SHARD_SLOT_TIED for a tied table, which stays
 * mapped in the whole buffer (two layers write it, at both ends of
 * backward); len the floats of each slot. */
enum { SHARD_SLOT_TIED = -2 };

/* zero3's parameter slots: a gathered unit's parameters go into a free slot
 * that holds it (the smallest), placed there for the model
 * (so_model_place_params), and the slot is free again when the unit is;
 * a tied table's unit (gathered at both ends of the pass) has a slot of its
 * own, beside these (a row chunk of a cut layer is a unit like any other:
 * the layer addresses each chunk from its own offset). At most
 * max(prefetch, l->widest) units are gathered at once, so that many slots,
 * of the largest such units' sizes (len,
 * largest first), hold any window. Returns the number of slots (at most
 * `cap`, the length of len). Above SHARD_MAX_PSLOTS units gathered at once,
 * zero3 maps every unit in the whole buffer (no slots). */
#define SHARD_MAX_PSLOTS 64
/* 1 when unit u is read at more than one place of the read order (a tied table). */
int shard_unit_tied(const shard_layout *l, int u);
/* Floats of the largest tied table's unit (0: none). */
size_t shard_largest_tied(const shard_layout *l);
int shard_param_slots(const shard_layout *l, int prefetch, size_t *len, int cap);
void shard_slots(const shard_layout *l, signed char *slot_of, size_t len[2]);

/* Memory of whole-model size whose pages are mapped only where used:
 * reserved address space, zero until written; commit maps the pages that
 * floats [lo, hi) touch (one system call, not a fault per page), release
 * returns the pages wholly inside [lo, hi) to the kernel (they read as zero
 * again). The allocator pair fits so_model_opts. */
void *shard_reserve(void *ctx, size_t bytes);
void shard_unreserve(void *ctx, void *p);
void shard_commit(float *base, size_t lo, size_t hi);
void shard_release(float *base, size_t lo, size_t hi);

#endif
