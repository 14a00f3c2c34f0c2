/* Private: recycled, mapped node-local shard files (slot.c). */
#ifndef SCALEOUT_CKPT_SLOT_H
#define SCALEOUT_CKPT_SLOT_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int fd;
    uint8_t *map;
} ck_slot;

typedef struct {
    char dir[4096]; /* <node dir>/.slots */
    char tag[32];   /* file names <tag>.<i>: "r3-own", "r3-partner" */
    size_t len;     /* every slot's size: one shard file */
    ck_slot *s;
    int n, max;     /* slots made, and the most there may be */
    int cur;        /* taken for the checkpoint in flight (-1: none) */
} ck_slots;

/* Removes, in every <local_dir>/node<N>/.slots, the names a killed run left
 * that no live rank of this job can own: this rank's own (in any node
 * directory: ranks per node may have changed) and those of ranks >= world
 * (the job restarted with fewer ranks). Called before ck_slots_init. */
void ck_slots_sweep(const char *local_dir, int rank, int world);
/* Makes <node_dir>/.slots; no slot is made yet. max bounds the pool (keep + 3 covers the kept
 * checkpoints, the one in flight, one held by a flush and a failed one). */
int ck_slots_init(ck_slots *p, const char *node_dir, const char *tag, size_t len, int max);
/* Makes a slot if none is free (and max allows); quiet when it cannot
 * (take reports that error when a checkpoint needs the slot). */
void ck_slots_reserve(ck_slots *p);
/* Takes a slot that no checkpoint holds (making one if needed) for the
 * checkpoint in flight: its mapping, or NULL with err filled. */
uint8_t *ck_slots_take(ck_slots *p, char *err, size_t cap);
/* The taken slot becomes dir/name, crash-safe like ck_write_atomic: a second
 * name dir/name.tmp, CRC32C of the mapping (crc NULL: none), fsync, rename,
 * fsync of dir. delay_ms > 0 sleeps before the CRC (test hook). */
int ck_slots_commit(ck_slots *p, const char *dir, const char *name, int delay_ms, uint32_t *crc, char *err,
                    size_t cap);
/* Number of slots no checkpoint holds (take will not have to make one). */
int ck_slots_free_count(const ck_slots *p);
/* Unmaps and removes every slot name (a checkpoint holding a slot keeps it). */
void ck_slots_destroy(ck_slots *p);

#endif
