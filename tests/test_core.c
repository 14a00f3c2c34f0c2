/* Tests of the core module's helpers: so_alloc's alignment and zeroing,
 * that so_mem_populate really maps pages in ahead of use (a page fault costs
 * ~14 us on a VM that traps them; see docs/CHECKPOINT.md), an error message
 * that wraps the previous one, the regular-file check of files a command
 * reads (a FIFO must not block), and byte counts printed for people. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>

#include "scaleout/err.h"
#include "scaleout/file.h"
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

/* so_err(rc, "prefix: %s", so_errmsg()) reads the buffer it writes: the
 * pattern of every "--flag: <library message>" in the CLI. */
static void test_err_wraps_own_message(void **state)
{
    (void)state;
    assert_int_equal(so_err(SO_EINVAL, "'99' is neither a node index (0..8) nor a node name"), SO_EINVAL);
    assert_int_equal(so_err(SO_EINVAL, "--partition: %s", so_errmsg()), SO_EINVAL);
    assert_string_equal(so_errmsg(), "--partition: '99' is neither a node index (0..8) nor a node name");
    char longer[600];
    memset(longer, 'x', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    so_err(SO_EIO, "%s", longer);
    so_err(SO_EIO, "a: %s", so_errmsg());
    assert_int_equal(strncmp(so_errmsg(), "a: xxxx", 7), 0);
    assert_int_equal(strlen(so_errmsg()), 511); /* truncated, still terminated */
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A FIFO without a writer, a directory and a device are refused at once with
 * the file's name; a regular file opens and reads whole. */
static void test_file_regular_only(void **state)
{
    (void)state;
    char dir[] = "/tmp/so_test_core.XXXXXX", path[128];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/fifo", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    int fd = -1;
    double t0 = now_s();
    assert_int_equal(so_file_open_read(path, &fd, NULL), SO_EIO);
    assert_true(now_s() - t0 < 1.0);
    assert_int_equal(fd, -1);
    assert_non_null(strstr(so_errmsg(), path));
    assert_non_null(strstr(so_errmsg(), "not a regular file (a FIFO)"));
    void *buf = NULL;
    size_t len = 0;
    assert_int_equal(so_file_read_all(path, 1 << 20, &buf, &len), SO_EIO);
    assert_null(buf);
    FILE *f = NULL;
    assert_int_equal(so_file_fopen_read(path, &f, NULL), SO_EIO);
    assert_null(f);
    assert_int_equal(so_file_open_read(dir, &fd, NULL), SO_EIO);
    assert_non_null(strstr(so_errmsg(), "a directory"));
    assert_int_equal(so_file_open_read("/dev/null", &fd, NULL), SO_EIO);
    assert_non_null(strstr(so_errmsg(), "a device"));
    unlink(path);
    assert_int_equal(so_file_open_read(path, &fd, NULL), SO_EIO);
    assert_non_null(strstr(so_errmsg(), "No such file"));

    snprintf(path, sizeof path, "%s/plain", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("hello", f);
    fclose(f);
    uint64_t size = 0;
    assert_int_equal(so_file_open_read(path, &fd, &size), 0);
    assert_int_equal(size, 5);
    assert_int_equal(fcntl(fd, F_GETFL) & O_NONBLOCK, 0); /* reads block as usual */
    close(fd);
    assert_int_equal(so_file_read_all(path, 1 << 20, &buf, &len), 0);
    assert_int_equal(len, 5);
    assert_memory_equal(buf, "hello", 5);
    free(buf);
    assert_int_equal(so_file_read_all(path, 4, &buf, &len), SO_EFORMAT); /* over the limit */
    assert_int_equal(so_file_fopen_read(path, &f, &size), 0);
    char line[8] = "";
    assert_non_null(fgets(line, sizeof line, f));
    assert_string_equal(line, "hello");
    fclose(f);
    unlink(path);
    rmdir(dir);
}

static void test_bytes_label(void **state)
{
    (void)state;
    char b[32];
    assert_string_equal(so_mem_label(1, b, sizeof b), "1 B");
    assert_string_equal(so_mem_label(1023, b, sizeof b), "1023 B");
    assert_string_equal(so_mem_label(1536, b, sizeof b), "1.50 KiB");
    assert_string_equal(so_mem_label(512.0 * 1048576, b, sizeof b), "512 MiB");
    assert_string_equal(so_mem_label(51.25 * 1048576, b, sizeof b), "51.2 MiB");
    assert_string_equal(so_mem_label(1023.0 * 1024, b, sizeof b), "1023 KiB");
    assert_string_equal(so_mem_label(2.0 * 1073741824, b, sizeof b), "2.00 GiB");
    assert_string_equal(so_mem_label(3.0 * 1099511627776.0, b, sizeof b), "3.00 TiB");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_aligned_zeroed),
        cmocka_unit_test(test_populate_maps_pages),
        cmocka_unit_test(test_populate_odd_ranges),
        cmocka_unit_test(test_err_wraps_own_message),
        cmocka_unit_test(test_file_regular_only),
        cmocka_unit_test(test_bytes_label),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
