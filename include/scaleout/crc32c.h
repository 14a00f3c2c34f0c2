/* CRC32C (Castagnoli polynomial, iSCSI / RFC 3720): the checksum of every
 * checkpoint shard (scaleout/ckpt.h) and of TFRecord framing (scaleout/data.h).
 * crc = so_crc32c(0, buf, n) for a whole buffer; chained calls continue it:
 * so_crc32c(so_crc32c(0, a, na), b, nb) == CRC of a followed by b. */
#ifndef SCALEOUT_CRC32C_H
#define SCALEOUT_CRC32C_H
#include <stddef.h>
#include <stdint.h>

/* Uses the SSE4.2 crc32 instruction when the CPU has it, a table otherwise. */
uint32_t so_crc32c(uint32_t crc, const void *buf, size_t n);
/* The portable table version (tests compare the two). */
uint32_t so_crc32c_sw(uint32_t crc, const void *buf, size_t n);

#endif
