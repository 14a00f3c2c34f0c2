/* Aligned, zeroed allocation (its pages mapped in one call, not faulted one
 * by one), peak-memory reporting, byte counts printed for people, and the
 * memory still available here. */
#include "scaleout/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels say EINVAL */
#endif

/* Below this, populating costs more system call than it saves faults. */
#define POPULATE_MIN (64u << 10)

void so_mem_populate(void *p, size_t n)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)p + page - 1) & ~(page - 1), hi = ((uintptr_t)p + n) & ~(page - 1);
    if (n >= POPULATE_MIN && hi > lo)
        madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
}

void *so_alloc(size_t bytes)
{
    size_t rounded = (bytes + SO_ALIGN - 1) / SO_ALIGN * SO_ALIGN;
    if (rounded == 0)
        rounded = SO_ALIGN;
    void *p = aligned_alloc(SO_ALIGN, rounded);
    if (p) {
        so_mem_populate(p, rounded);
        memset(p, 0, rounded);
    }
    return p;
}

void so_free(void *p) { free(p); }

size_t so_peak_rss(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (size_t)ru.ru_maxrss * 1024; /* Linux reports KiB */
}

/* One "Key: N kB" line of /proc/meminfo in bytes, 0 if absent. */
static size_t meminfo_bytes(const char *key)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    size_t len = strlen(key), kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, len) && line[len] == ':') {
            kib = strtoull(line + len + 1, NULL, 10);
            break;
        }
    if (f)
        fclose(f);
    return kib * 1024;
}

/* A number from a cgroup file seen by this process (absent or "max": SIZE_MAX). */
static size_t cgroup_bytes(const char *name)
{
    char path[128], buf[64] = "";
    snprintf(path, sizeof path, "/sys/fs/cgroup/%s", name);
    FILE *f = fopen(path, "r");
    if (!f)
        return SIZE_MAX;
    if (!fgets(buf, sizeof buf, f))
        buf[0] = 0;
    fclose(f);
    return buf[0] >= '0' && buf[0] <= '9' ? (size_t)strtoull(buf, NULL, 10) : SIZE_MAX;
}

size_t so_mem_available(void)
{
    size_t avail = meminfo_bytes("MemAvailable");
    size_t limit = cgroup_bytes("memory.max"), used = cgroup_bytes("memory.current"); /* cgroup v2 */
    if (limit == SIZE_MAX) { /* v1 */
        limit = cgroup_bytes("memory/memory.limit_in_bytes");
        used = cgroup_bytes("memory/memory.usage_in_bytes");
    }
    if (limit != SIZE_MAX && used != SIZE_MAX) {
        size_t room = limit > used ? limit - used : 0;
        avail = avail && avail < room ? avail : room;
    }
    return avail;
}

char *so_mem_label(double bytes, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (bytes >= 1024 && u < 5) {
        bytes /= 1024;
        u++;
    }
    const char *fmt = u == 0 || bytes >= 100 ? "%.0f %s" : bytes >= 10 ? "%.1f %s" : "%.2f %s";
    snprintf(buf, len, fmt, bytes, units[u]);
    return buf;
}
