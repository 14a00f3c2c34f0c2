/* Aligned, zeroed allocation and peak-memory reporting. */
#include "scaleout/mem.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

void *so_alloc(size_t bytes)
{
    size_t rounded = (bytes + SO_ALIGN - 1) / SO_ALIGN * SO_ALIGN;
    if (rounded == 0)
        rounded = SO_ALIGN;
    void *p = aligned_alloc(SO_ALIGN, rounded);
    if (p)
        memset(p, 0, rounded);
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
