/* Opening the files a command reads (scaleout/file.h). open() with O_NONBLOCK
 * returns at once for a FIFO without a writer, and fstat then tells what the
 * path really is; only regular files are read. O_NONBLOCK has no effect on
 * regular files, and is cleared anyway so later reads behave as documented. */
#include "scaleout/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "scaleout/err.h"

/* "a FIFO", "a directory", ... for the refusal message. */
static const char *kind_of(mode_t m)
{
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISCHR(m) || S_ISBLK(m))
        return "a device";
    if (S_ISSOCK(m))
        return "a socket";
    return "not a file";
}

int so_file_open_read(const char *path, int *fd, uint64_t *size)
{
    *fd = -1;
    int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (f < 0)
        return so_err(SO_EIO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(f, &st) != 0) {
        int e = errno;
        close(f);
        return so_err(SO_EIO, "cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(f);
        return so_err(SO_EIO, "'%s' is not a regular file (%s)", path, kind_of(st.st_mode));
    }
    int flags = fcntl(f, F_GETFL);
    if (flags >= 0)
        fcntl(f, F_SETFL, flags & ~O_NONBLOCK);
    if (size)
        *size = (uint64_t)st.st_size;
    *fd = f;
    return 0;
}

int so_file_fopen_read(const char *path, FILE **out, uint64_t *size)
{
    *out = NULL;
    int fd;
    int rc = so_file_open_read(path, &fd, size);
    if (rc)
        return rc;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        return so_err(e == ENOMEM ? SO_ENOMEM : SO_EIO, "cannot open '%s': %s", path, strerror(e));
    }
    *out = f;
    return 0;
}

/* Reads fd to its end into a growing buffer (the size fstat gave is only the
 * first guess: /proc files say 0, a file may be growing). */
static int read_fd(int fd, const char *path, size_t guess, size_t max, char **out, size_t *len)
{
    size_t cap = (guess < max ? guess : max) + 1, n = 0;
    char *b = malloc(cap + 1);
    if (!b)
        return so_err(SO_ENOMEM, "out of memory reading '%s'", path);
    for (;;) {
        if (n == cap) {
            size_t grown = cap > max / 2 ? max + 1 : 2 * cap;
            char *g = grown > cap ? realloc(b, grown + 1) : NULL;
            if (!g) {
                free(b);
                return n > max ? so_err(SO_EFORMAT, "'%s' is larger than %zu bytes", path, max)
                               : so_err(SO_ENOMEM, "out of memory reading '%s'", path);
            }
            b = g;
            cap = grown;
        }
        ssize_t r = read(fd, b + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            free(b);
            return so_err(SO_EIO, "cannot read '%s': %s", path, strerror(e));
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n > max) {
            free(b);
            return so_err(SO_EFORMAT, "'%s' is larger than %zu bytes", path, max);
        }
    }
    b[n] = '\0';
    *out = b;
    *len = n;
    return 0;
}

int so_file_read_all(const char *path, size_t max, void **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    int fd;
    uint64_t size;
    int rc = so_file_open_read(path, &fd, &size);
    if (rc)
        return rc;
    if (size > max) {
        close(fd);
        return so_err(SO_EFORMAT, "'%s' has %llu bytes, more than the %zu this reader takes", path,
                      (unsigned long long)size, max);
    }
    char *b = NULL;
    rc = read_fd(fd, path, (size_t)size, max, &b, len);
    close(fd);
    *buf = b;
    return rc;
}
