/* Private pieces of the checkpoint module shared by its files: file helpers
 * (atomic write, read, directory listing) and the state (un)flattening. */
#ifndef SCALEOUT_CKPT_INTERNAL_H
#define SCALEOUT_CKPT_INTERNAL_H
#include <stddef.h>
#include <stdint.h>

#include "scaleout/ckpt.h"

/* snprintf for paths and messages: truncation is tolerated (paths are
 * bounded by 4096 like PATH_MAX); returns what vsnprintf returns. No format
 * attribute, so GCC does not warn about buffers it cannot size. */
int ck_fmt(char *out, size_t cap, const char *fmt, ...);
/* mkdir -p; SO_EIO naming the path. */
int ck_mkdirs(const char *path);
/* Writes buf to dir/name through dir/name.tmp: write, fsync, rename, fsync
 * dir. *crc = CRC32C of buf (computed while writing). delay_ms > 0 sleeps half
 * way (test hook that widens the kill window). On failure the .tmp is removed
 * and errbuf holds a one-line message; returns SO_EIO. direct: bypass the
 * page cache where the file system can (O_DIRECT; buf 4096-aligned). */
int ck_write_atomic(const char *dir, const char *name, const void *buf, size_t len, int direct, int delay_ms, uint32_t *crc,
                    char *errbuf, size_t errlen);
/* The end of every atomic write: fsync fd (and close it when close_fd),
 * rename tmp to dir/name, fsync dir; on failure removes tmp and fills errbuf
 * naming the step. */
int ck_commit_tmp(int fd, int close_fd, const char *tmp, const char *dir, const char *name, char *errbuf,
                  size_t errlen);
/* Copies src to dir/name atomically (same steps), computing the CRC. */
/* Copies src to dir/name through buf (CK_COPY_BUF bytes from ck_copy_buffer,
 * kept by the caller: fresh memory per copy is slow on the VM), bypassing the
 * destination's page cache where it can (O_DIRECT). */
#define CK_COPY_BUF (8u << 20)
void *ck_copy_buffer(void);
int ck_copy_atomic(const char *src, const char *dir, const char *name, void *buf, int delay_ms, uint32_t *crc,
                   uint64_t *bytes, char *errbuf, size_t errlen);
/* Reads a whole file of exactly `len` bytes (len = (size_t)-1: any size, *got). */
int ck_read(const char *path, void **buf, size_t *len);
/* Removes a checkpoint directory: MANIFEST first, so a half-removed one never counts. */
void ck_remove_dir(const char *dir);
/* Names of entries in dir matching prefix, sorted; caller frees each and the array. */
int ck_list(const char *dir, const char *prefix, char ***names, int *n);
void ck_list_free(char **names, int n);
/* Deletes checkpoints under base beyond the newest `keep` complete ones (and
 * debris older than the newest complete one), never the one of step `protect`. */
void ck_prune(const char *base, int keep, long protect);
/* Reads and parses dir/MANIFEST. */
int ck_read_manifest(const char *dir, so_ckpt_manifest *m);
/* The test hook SCALEOUT_CKPT_TEST_DELAY_MS (0 when unset). */
int ck_test_delay_ms(void);
int ck_test_flush_delay_ms(void); /* SCALEOUT_CKPT_TEST_FLUSH_DELAY_MS: only the flush copy waits */
/* nanosleep through signals. */
void ck_sleep_ms(int ms);

#endif
