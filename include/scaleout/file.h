/* Files a command reads (checkpoint shards and manifests, weights, data sets,
 * tuning tables, profiles): opened only when they are regular files. A FIFO
 * where one is expected blocks open() until a writer comes, and a read
 * forever after; a directory or a device reads nonsense. These helpers open
 * without blocking, check with fstat, and refuse anything else with one
 * message naming the file (SO_EIO, which the CLI reports with exit 2). */
#ifndef SCALEOUT_FILE_H
#define SCALEOUT_FILE_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Opens `path` for reading when it is a regular file: *fd (O_CLOEXEC, reads
 * block as usual) and, when size is not NULL, its size in bytes. 0, or SO_EIO
 * with "cannot open 'path': reason" or "'path' is not a regular file (a
 * FIFO)"; *fd is -1 then. The caller closes *fd. */
int so_file_open_read(const char *path, int *fd, uint64_t *size);
/* The same as a stdio stream ("rb"); the caller fcloses *f. */
int so_file_fopen_read(const char *path, FILE **f, uint64_t *size);
/* The whole of a regular file in a malloc'ed buffer (*buf, *len; one byte
 * more is allocated and set to 0, so text can be read as a string). SO_EIO as
 * above or when reading fails, SO_EFORMAT when it holds more than max bytes,
 * SO_ENOMEM. On error *buf is NULL. */
int so_file_read_all(const char *path, size_t max, void **buf, size_t *len);

#endif
