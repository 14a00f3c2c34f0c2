/* Whole-file reads with transparent gzip: the IDX files are distributed as
 * .gz, and decoding in memory lets the parsers work on one flat buffer.
 * Detection is by the gzip magic (1f 8b), not by the file name. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "data_internal.h"
#include "scaleout/data.h"
#include "scaleout/err.h"
#include "scaleout/file.h"

/* Grows *buf to at least `need` bytes (doubling, capped at `cap`). */
static int grow(uint8_t **buf, size_t *size, size_t cap, const char *what)
{
    if (*size >= cap)
        return so_err(SO_EFORMAT, "%s: decompressed data exceeds %zu bytes", what, cap);
    size_t nsize = *size * 2 < cap ? *size * 2 : cap;
    uint8_t *nbuf = realloc(*buf, nsize);
    if (!nbuf)
        return so_err(SO_ENOMEM, "%s: cannot allocate %zu bytes to decompress", what, nsize);
    *buf = nbuf;
    *size = nsize;
    return 0;
}

/* First guess at the output size: the gzip trailer stores it modulo 2^32. */
static size_t initial_size(const uint8_t *in, size_t len, size_t cap)
{
    size_t guess = 4096;
    if (len >= 18) {
        const uint8_t *t = in + len - 4;
        size_t isize = (size_t)t[0] | (size_t)t[1] << 8 | (size_t)t[2] << 16 | (size_t)t[3] << 24;
        if (isize > guess)
            guess = isize + 1; /* +1 so a correct guess never triggers a needless grow */
    }
    return guess < cap ? guess : cap;
}

/* One inflate step's result, mapped to continue (1), done (0) or an error. */
static int inflate_step(z_stream *s, const char *what)
{
    int ret = inflate(s, Z_NO_FLUSH);
    if (ret == Z_OK || (ret == Z_BUF_ERROR && s->avail_out == 0))
        return 1;
    if (ret == Z_STREAM_END) {
        if (s->avail_in == 0)
            return 0;
        /* Another member (as `cat a.gz b.gz` makes) or trailing garbage. */
        if (s->avail_in >= 2 && s->next_in[0] == 0x1f && s->next_in[1] == 0x8b) {
            inflateReset(s);
            return 1;
        }
        return so_err(SO_EFORMAT, "%s: %u trailing bytes after the gzip stream", what, s->avail_in);
    }
    if (ret == Z_BUF_ERROR)
        return so_err(SO_EFORMAT, "%s: gzip stream is truncated", what);
    return so_err(SO_EFORMAT, "%s: corrupt gzip data (%s)", what, s->msg ? s->msg : zError(ret));
}

int so_gunzip(const uint8_t *in, size_t len, const char *what, size_t cap, uint8_t **out, size_t *outlen)
{
    z_stream s;
    memset(&s, 0, sizeof s);
    size_t size = initial_size(in, len, cap), used = 0;
    uint8_t *buf = NULL;
    int rc = 0;
    if (len > UINT_MAX) {
        rc = so_err(SO_EFORMAT, "%s: compressed file larger than 4 GiB", what);
        goto out;
    }
    buf = malloc(size ? size : 1);
    if (!buf) {
        rc = so_err(SO_ENOMEM, "%s: cannot allocate %zu bytes to decompress", what, size);
        goto out;
    }
    if (inflateInit2(&s, 16 + MAX_WBITS) != Z_OK) { /* 16+: gzip wrapper only */
        rc = so_err(SO_ENOMEM, "%s: cannot initialise zlib", what);
        goto out;
    }
    s.next_in = (Bytef *)in;
    s.avail_in = (uInt)len;
    for (;;) {
        if (used == size && (rc = grow(&buf, &size, cap, what)) != 0)
            break;
        s.next_out = buf + used;
        s.avail_out = (uInt)(size - used);
        rc = inflate_step(&s, what);
        used = size - s.avail_out;
        if (rc <= 0)
            break;
    }
    inflateEnd(&s);
out:
    if (rc == 0) {
        *out = buf;
        *outlen = used;
    } else {
        free(buf);
    }
    return rc;
}

/* Reads the raw bytes of a regular file into a malloc'd buffer. */
int so_read_file_raw(const char *path, uint8_t **out, size_t *outlen)
{
    uint8_t *buf = NULL;
    int rc = 0;
    int fd;
    uint64_t size;
    if ((rc = so_file_open_read(path, &fd, &size)))
        return rc;
    if (size > SO_DATA_MAX_BYTES) {
        rc = so_err(SO_EIO, "%s: %llu bytes is larger than the %zu-byte limit", path, (unsigned long long)size,
                    SO_DATA_MAX_BYTES);
        goto out;
    }
    size_t len = (size_t)size, got = 0;
    buf = malloc(len ? len : 1);
    if (!buf) {
        rc = so_err(SO_ENOMEM, "%s: cannot allocate %zu bytes", path, len);
        goto out;
    }
    while (got < len) {
        ssize_t r = read(fd, buf + got, len - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = so_err(SO_EIO, "%s: read failed after %zu of %zu bytes: %s", path, got, len,
                        r < 0 ? strerror(errno) : "file shrank");
            goto out;
        }
        got += (size_t)r;
    }
    *out = buf;
    *outlen = len;
    buf = NULL;
out:
    free(buf);
    close(fd);
    return rc;
}

int so_read_file(const char *path, uint8_t **buf, size_t *len)
{
    uint8_t *raw = NULL;
    size_t rawlen = 0;
    int rc = so_read_file_raw(path, &raw, &rawlen);
    if (rc)
        return rc;
    if (rawlen >= 2 && raw[0] == 0x1f && raw[1] == 0x8b) {
        rc = so_gunzip(raw, rawlen, path, SO_DATA_MAX_BYTES, buf, len);
        free(raw);
    } else {
        *buf = raw;
        *len = rawlen;
    }
    return rc;
}

int image_read_file(const char *path, uint8_t **buf, size_t *cap, size_t *len, size_t max)
{
    int fd, rc;
    uint64_t size;
    if ((rc = so_file_open_read(path, &fd, &size)))
        return rc;
    if (size > max) {
        rc = so_err(SO_EFORMAT, "%s: %llu bytes is larger than the %zu-byte limit for one image", path,
                    (unsigned long long)size, max);
        goto out;
    }
    size_t n = (size_t)size, got = 0;
    if (n > *cap) {
        uint8_t *p = realloc(*buf, n);
        if (!p) {
            rc = so_err(SO_ENOMEM, "%s: cannot allocate %zu bytes", path, n);
            goto out;
        }
        *buf = p;
        *cap = n;
    }
    while (got < n) {
        ssize_t r = read(fd, *buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = r < 0 ? so_err(SO_EIO, "%s: %s", path, strerror(errno))
                       : so_err(SO_EFORMAT, "%s: file shrank while reading", path);
            goto out;
        }
        got += (size_t)r;
    }
    *len = n;
out:
    close(fd);
    return rc;
}

int so_write_file_atomic(const char *path, const void *buf, size_t len)
{
    char tmp[PATH_MAX];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid()) >= sizeof tmp)
        return so_err(SO_EIO, "%s: path too long", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return so_err(SO_EIO, "%s: %s", tmp, strerror(errno));
    const uint8_t *p = buf;
    size_t done = 0;
    int rc = 0;
    while (!rc && done < len) {
        ssize_t w = write(fd, p + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            rc = so_err(SO_EIO, "%s: %s", tmp, w < 0 ? strerror(errno) : "short write");
        else
            done += (size_t)w;
    }
    if (close(fd) != 0 && !rc)
        rc = so_err(SO_EIO, "%s: %s", tmp, strerror(errno));
    if (!rc && rename(tmp, path) != 0)
        rc = so_err(SO_EIO, "%s: %s", path, strerror(errno));
    if (rc)
        unlink(tmp);
    return rc;
}
