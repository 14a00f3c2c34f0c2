/* Aligned, zeroed allocation (its pages mapped in one call, not faulted one
 * by one), peak-memory reporting, and byte counts printed for people. */
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
