/* File helpers of the checkpoint module. Every shard and manifest is written
 * the same crash-safe way: to NAME.tmp, fsync, rename to NAME, fsync the
 * directory, so after a crash a file is either absent, a stray .tmp, or
 * complete. Messages go to a caller buffer because writes run on background
 * threads. */
#include "core/test_hooks.h"
#include "ckpt_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "scaleout/err.h"
#include "scaleout/file.h"
#include "scaleout/mem.h"

#define CHUNK (8u << 20)
/* O_DIRECT wants the buffer, length and offset aligned to the device's block;
 * 4096 covers every common one (a file system that wants more says EINVAL and
 * gets buffered writes). */
#define DIO_ALIGN 4096u

int ck_fmt(char *out, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, cap, fmt, ap);
    va_end(ap);
    return n;
}

int ck_test_delay_ms(void)
{
    const char *s = so_test_hook("SCALEOUT_CKPT_TEST_DELAY_MS");
    return s ? atoi(s) : 0;
}

int ck_test_flush_delay_ms(void)
{
    const char *s = so_test_hook("SCALEOUT_CKPT_TEST_FLUSH_DELAY_MS");
    return s ? atoi(s) : 0;
}

void ck_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int ck_mkdirs(const char *path)
{
    char p[4096];
    if (ck_fmt(p, sizeof p, "%s", path) >= (int)sizeof p)
        return so_err(SO_EINVAL, "path too long: %s", path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            return so_err(SO_EIO, "cannot create directory '%s': %s", p, strerror(errno));
        *s = '/';
    }
    if (mkdir(p, 0777) != 0 && errno != EEXIST)
        return so_err(SO_EIO, "cannot create directory '%s': %s", p, strerror(errno));
    struct stat st;
    if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode))
        return so_err(SO_EIO, "'%s' is not a directory", p);
    return 0;
}

static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* Writes n bytes of p: 0, or -1 with errno. *done (if given) counts the
 * bytes written, so a caller can go on after a refused write. */
static int write_all(int fd, const uint8_t *p, size_t n, size_t *done)
{
    size_t k = 0;
    int rc = 0;
    while (k < n) {
        ssize_t w = write(fd, p + k, n - k);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = ENOSPC;
            rc = -1;
            break;
        }
        k += (size_t)w;
    }
    if (done)
        *done = k;
    return rc;
}

/* Opens dir/name.tmp for writing (direct: O_DIRECT where the file system
 * has it); fills tmp. */
static int open_tmp(const char *dir, const char *name, int direct, char *tmp, size_t cap)
{
    ck_fmt(tmp, cap, "%s/%s.tmp", dir, name);
    int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
    int fd = direct ? open(tmp, flags | O_DIRECT, 0666) : -1;
    return fd >= 0 ? fd : open(tmp, flags, 0666);
}

static int clear_direct(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 || !(fl & O_DIRECT) ? 0 : fcntl(fd, F_SETFL, fl & ~O_DIRECT);
}

/* write_all to a file that may be open with O_DIRECT: the aligned head of p
 * goes straight to the device; an unaligned tail (the file's last bytes), or
 * all of it if the file system refuses the alignment, through the page cache,
 * and the file stays buffered from then on. Why bypass the page cache: a VM
 * guest that hands freed memory back to its host (free page reporting) gets
 * page-cache pages for a large shard as fresh memory the host backs on
 * first touch, far more CPU per buffered write than a direct one (figures
 * and machine in docs/CHECKPOINT.md). */
static int write_bulk(int fd, const uint8_t *p, size_t n)
{
    int fl = fcntl(fd, F_GETFL);
    size_t head = fl >= 0 && (fl & O_DIRECT) && (uintptr_t)p % DIO_ALIGN == 0 ? n - n % DIO_ALIGN : 0, done = 0;
    if (head && write_all(fd, p, head, &done) != 0 && errno != EINVAL)
        return -1;
    /* after EINVAL or a short direct write (p no longer aligned): buffered */
    if (n > done && clear_direct(fd) != 0)
        return -1;
    return write_all(fd, p + done, n - done, NULL);
}

int ck_commit_tmp(int fd, int close_fd, const char *tmp, const char *dir, const char *name, char *errbuf,
                  size_t errlen)
{
    char final[4096];
    ck_fmt(final, sizeof final, "%s/%s", dir, name);
    const char *step = "fsync";
    int ok = fsync(fd) == 0;
    if (close_fd && close(fd) != 0 && ok) {
        ok = 0;
        step = "close";
    }
    if (ok && rename(tmp, final) != 0) {
        ok = 0;
        step = "rename";
    }
    if (ok && fsync_dir(dir) != 0) {
        ok = 0;
        step = "fsync of the directory";
    }
    if (ok)
        return 0;
    ck_fmt(errbuf, errlen, "%s of '%s' failed: %s", step, final, strerror(errno));
    unlink(tmp);
    return SO_EIO;
}

int ck_write_atomic(const char *dir, const char *name, const void *buf, size_t len, int direct, int delay_ms,
                    uint32_t *crc, char *errbuf, size_t errlen)
{
    char tmp[4096];
    int fd = open_tmp(dir, name, direct, tmp, sizeof tmp);
    if (fd < 0) {
        ck_fmt(errbuf, errlen, "cannot create '%s': %s", tmp, strerror(errno));
        return SO_EIO;
    }
    const uint8_t *p = buf;
    uint32_t c = 0;
    for (size_t off = 0; off < len; off += CHUNK) {
        size_t n = len - off < CHUNK ? len - off : CHUNK;
        c = so_crc32c(c, p + off, n);
        if (write_bulk(fd, p + off, n) != 0) {
            ck_fmt(errbuf, errlen, "writing '%s' failed: %s", tmp, strerror(errno));
            close(fd);
            unlink(tmp);
            return SO_EIO;
        }
        if (delay_ms > 0 && off == 0)
            ck_sleep_ms(delay_ms);
    }
    if (len == 0 && delay_ms > 0)
        ck_sleep_ms(delay_ms);
    *crc = c;
    return ck_commit_tmp(fd, 1, tmp, dir, name, errbuf, errlen);
}

void *ck_copy_buffer(void)
{
    void *b = NULL;
    if (posix_memalign(&b, DIO_ALIGN, CK_COPY_BUF) != 0)
        return NULL;
    so_mem_populate(b, CK_COPY_BUF);
    return b;
}

int ck_copy_atomic(const char *src, const char *dir, const char *name, void *buf, int delay_ms, uint32_t *crc,
                   uint64_t *bytes, char *errbuf, size_t errlen)
{
    int in;
    if (so_file_open_read(src, &in, NULL)) {
        ck_fmt(errbuf, errlen, "%s", so_errmsg());
        return SO_EIO;
    }
    char tmp[4096];
    int fd = open_tmp(dir, name, 1, tmp, sizeof tmp);
    uint8_t *b = buf;
    int rc = 0, first = 1;
    uint32_t c = 0;
    uint64_t total = 0;
    if (fd < 0) {
        ck_fmt(errbuf, errlen, "cannot create '%s': %s", tmp, strerror(errno));
        rc = SO_EIO;
    }
    for (ssize_t r; !rc && (r = read(in, b, CK_COPY_BUF)) != 0; first = 0) {
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 || write_bulk(fd, b, (size_t)r) != 0) {
            ck_fmt(errbuf, errlen, "copying '%s' to '%s' failed: %s", src, tmp, strerror(errno));
            rc = SO_EIO;
            break;
        }
        c = so_crc32c(c, b, (size_t)r);
        total += (uint64_t)r;
        if (first && delay_ms > 0)
            ck_sleep_ms(delay_ms);
    }
    close(in);
    if (rc) {
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        return rc;
    }
    *crc = c;
    *bytes = total;
    return ck_commit_tmp(fd, 1, tmp, dir, name, errbuf, errlen);
}

int ck_read(const char *path, void **buf, size_t *len)
{
    *buf = NULL;
    FILE *f;
    uint64_t size;
    int rc = so_file_fopen_read(path, &f, &size);
    if (rc)
        return rc;
    size_t want = *len;
    if (want != (size_t)-1 && size != want)
        rc = so_err(SO_EFORMAT, "'%s' has %llu bytes, the manifest says %zu (truncated?)", path,
                    (unsigned long long)size, want);
    size_t n = rc ? 0 : (size_t)size;
    if (!rc && !(*buf = malloc(n ? n : 1)))
        rc = so_err(SO_ENOMEM, "out of memory reading '%s'", path);
    if (!rc && fread(*buf, 1, n, f) != n)
        rc = so_err(SO_EIO, "cannot read '%s'", path);
    fclose(f);
    if (rc) {
        free(*buf);
        *buf = NULL;
        return rc;
    }
    *len = n;
    return 0;
}

void ck_remove_dir(const char *dir)
{
    char p[4096];
    ck_fmt(p, sizeof p, "%s/MANIFEST", dir);
    unlink(p);
    fsync_dir(dir);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            ck_fmt(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    closedir(d);
    rmdir(dir);
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int ck_list(const char *dir, const char *prefix, char ***names, int *n)
{
    *names = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *e;
    int cap = 0, rc = 0;
    size_t pl = strlen(prefix);
    while (!rc && (e = readdir(d))) {
        if (strncmp(e->d_name, prefix, pl) != 0)
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            char **g = realloc(*names, (size_t)cap * sizeof *g);
            if (!g) {
                rc = so_err(SO_ENOMEM, "out of memory listing '%s'", dir);
                break;
            }
            *names = g;
        }
        if (!((*names)[*n] = strdup(e->d_name)))
            rc = so_err(SO_ENOMEM, "out of memory listing '%s'", dir);
        else
            (*n)++;
    }
    closedir(d);
    if (rc) {
        ck_list_free(*names, *n);
        *names = NULL;
        *n = 0;
        return rc;
    }
    if (*n)
        qsort(*names, (size_t)*n, sizeof **names, cmp_names);
    return 0;
}

void ck_list_free(char **names, int n)
{
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

int ck_read_manifest(const char *dir, so_ckpt_manifest *m)
{
    char p[4096];
    ck_fmt(p, sizeof p, "%s/MANIFEST", dir);
    void *buf;
    size_t len = (size_t)-1;
    memset(m, 0, sizeof *m);
    int rc = ck_read(p, &buf, &len);
    if (rc)
        return rc;
    rc = len > (64u << 20) ? so_err(SO_EFORMAT, "%s: manifest too large", p) : so_ckpt_manifest_parse(buf, len, p, m);
    free(buf);
    return rc;
}

/* Deletes checkpoints under base beyond the newest `keep` complete ones (and
 * debris older than the newest complete one), never `protect`. */
void ck_prune(const char *base, int keep, long protect)
{
    char **names;
    int n;
    if (ck_list(base, "ckpt-", &names, &n))
        return;
    int complete = 0;
    for (int i = n - 1; i >= 0; i--) {
        char dir[4096];
        ck_fmt(dir, sizeof dir, "%s/%s", base, names[i]);
        long step = strtol(names[i] + 5, NULL, 10);
        so_ckpt_manifest m;
        int ok = ck_read_manifest(dir, &m) == 0;
        so_ckpt_manifest_free(&m);
        if (ok)
            complete++;
        if (step != protect && complete > 0 && ((ok && complete > keep) || (!ok && complete >= 1)))
            ck_remove_dir(dir);
    }
    ck_list_free(names, n);
}
