/* Aligned allocation: every tensor buffer in scaleout is 64-byte aligned so
 * AVX-512 loads never split cache lines. */
#ifndef SCALEOUT_MEM_H
#define SCALEOUT_MEM_H
#include <stddef.h>

#define SO_ALIGN 64

/* Zero-filled, SO_ALIGN-aligned block of `bytes` (0 gives a valid 64-byte block); NULL on failure. */
void *so_alloc(size_t bytes);
void so_free(void *p);
/* Maps every page of [p, p + n) now, in one system call (MADV_POPULATE_WRITE),
 * instead of one page fault per 4 KiB page at first use; a no-op where the
 * kernel lacks it (< 5.14). A page fault costs ~14 us on a VM whose
 * hypervisor traps them (seen: 200 MB by memset 0.85 s, populated 0.03 s). */
void so_mem_populate(void *p, size_t n);
/* Peak resident set size of this process in bytes (from getrusage), 0 if unknown. */
size_t so_peak_rss(void);
/* Bytes a new allocation can still get without swapping or the OOM killer:
 * the kernel's MemAvailable, lowered to the room left under the cgroup's
 * memory limit (v2 memory.max or v1 limit_in_bytes) when it has one; 0 if unknown. */
size_t so_mem_available(void);
/* bytes for people, in binary units with three significant digits: "1 B",
 * "1023 B", "1.50 KiB", "51.2 MiB", "512 MiB", "2.00 GiB". Returns buf. */
char *so_mem_label(double bytes, char *buf, size_t len);

#endif
