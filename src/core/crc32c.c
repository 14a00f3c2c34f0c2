/* CRC32C (Castagnoli polynomial 0x1EDC6F41, reflected 0x82F63B78), the
 * checksum of iSCSI (RFC 3720), of every checkpoint shard and of TFRecord
 * framing. The x86 crc32 instruction (SSE4.2) does 8 bytes per instruction;
 * a byte table is the fallback on other CPUs. Both give identical results (tested). */
#include "scaleout/crc32c.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

#define POLY 0x82F63B78u

static uint32_t table[256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_table(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (POLY & (0u - (c & 1u)));
        table[i] = c;
    }
}

uint32_t so_crc32c_sw(uint32_t crc, const void *buf, size_t n)
{
    pthread_once(&table_once, build_table);
    const uint8_t *p = buf;
    uint32_t c = ~crc;
    for (size_t i = 0; i < n; i++)
        c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return ~c;
}

#if defined(__x86_64__)
/* 8 bytes per crc32 instruction; the unaligned head and tail byte by byte. */
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    uint64_t c = ~crc;
    for (; n && ((uintptr_t)p & 7); n--)
        c = _mm_crc32_u8((uint32_t)c, *p++);
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
    }
    for (; n; n--)
        c = _mm_crc32_u8((uint32_t)c, *p++);
    return ~(uint32_t)c;
}
#endif

uint32_t so_crc32c(uint32_t crc, const void *buf, size_t n)
{
#if defined(__x86_64__)
    if (__builtin_cpu_supports("sse4.2"))
        return crc_hw(crc, buf, n);
#endif
    return so_crc32c_sw(crc, buf, n);
}
