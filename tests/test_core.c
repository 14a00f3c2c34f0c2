/* Tests of the core module's memory helpers: so_alloc's alignment and
 * zeroing, and that so_mem_populate really maps pages in ahead of use (a
 * page fault costs ~14 us on a VM that traps them; see docs/CHECKPOINT.md). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>

#include "scaleout/mem.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static long minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

/* Minor faults taken while writing one byte per page of p. */
static long faults_touching(uint8_t *p, size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    long f0 = minor_faults();
    for (size_t i = 0; i < n; i += page)
        ((volatile uint8_t *)p)[i] = 1;
    return minor_faults() - f0;
}

static void test_alloc_aligned_zeroed(void **state)
{
    (void)state;
    size_t sizes[] = {0, 1, 63, 65, 4096, 3u << 20};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        uint8_t *p = so_alloc(sizes[k]);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % SO_ALIGN, 0);
        for (size_t i = 0; i < sizes[k]; i++)
            assert_int_equal(p[i], 0);
        so_free(p);
    }
}

static void test_populate_maps_pages(void **state)
{
    (void)state;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), n = 8u << 20;
    uint8_t *probe = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(probe != MAP_FAILED);
    int supported = madvise(probe, page, MADV_POPULATE_WRITE) == 0;
    munmap(probe, page);
    if (!supported)
        skip(); /* kernel < 5.14: so_mem_populate is documented as a no-op there */

    uint8_t *cold = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint8_t *warm = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(cold != MAP_FAILED && warm != MAP_FAILED);
    madvise(cold, n, MADV_NOHUGEPAGE); /* one fault per 4 KiB page, whatever THP is set to */
    madvise(warm, n, MADV_NOHUGEPAGE);
    so_mem_populate(warm + 100, n - 100); /* unaligned start: the interior pages are mapped */
    long f_cold = faults_touching(cold, n), f_warm = faults_touching(warm, n);
    print_message("  faults touching 8 MiB: %ld fresh, %ld populated\n", f_cold, f_warm);
    assert_true(f_cold > (long)(n / page) / 2);
    assert_true(f_warm < (long)(n / page) / 4); /* the partial first page and ASan shadow (1 per 8) may fault */
    munmap(cold, n);
    munmap(warm, n);
}

static void test_populate_odd_ranges(void **state)
{
    (void)state;
    uint8_t buf[100];
    so_mem_populate(NULL, 0);
    so_mem_populate(buf, sizeof buf); /* less than a page: nothing to map, must not fail */
    so_mem_populate(buf + 1, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_aligned_zeroed),
        cmocka_unit_test(test_populate_maps_pages),
        cmocka_unit_test(test_populate_odd_ranges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
