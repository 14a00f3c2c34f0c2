/* libFuzzer target for the message framing of scaleout's TCP transports
 * (src/comm/tcp_wire.c), fed from a buffer as a connection would feed it.
 * Bytes 0..7 are the sizes of the receives posted for tags 0..3 (16 bits
 * each, 0xffff: none), the rest is the stream of headers and payloads. Each
 * header goes where tcp_msg_admit says, as tcp_p2p.c does it: into a receive
 * buffer of exactly the posted size, into a buffer of ours allocated to the
 * header's length (within ROOM bytes of such buffers), or it waits until a
 * receive of its tag is posted (its size from the next 2 bytes). Buffers have
 * exactly the size the protocol allows, so ASan sees any length that got past
 * the checks, and libFuzzer's malloc limit any allocation sized by the wire
 * beyond the room. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm/tcp_wire.h"

#define ROOM ((uint64_t)1 << 20) /* the harness's room for early messages (tcp_p2p.c: 64 MiB) */
#define NONE 0xffff

typedef struct {
    const uint8_t *p;
    size_t left;
} stream;

/* Up to n bytes of the stream into dst (which holds n); how many there were. */
static size_t take(stream *s, uint8_t *dst, size_t n)
{
    size_t k = n < s->left ? n : s->left;
    if (dst && k)
        memcpy(dst, s->p, k);
    s->p += k, s->left -= k;
    return k;
}

static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

/* The payload of an admitted message (bytes long) into a buffer of room bytes,
 * as the transport would: a posted receive's size, or the header's length for
 * a buffer of ours. */
static void payload(stream *s, uint64_t room, uint64_t bytes)
{
    uint8_t *b = malloc(room ? (size_t)room : 1);
    if (!b)
        abort();
    take(s, b, (size_t)bytes);
    free(b);
}

static void mesh(stream *s)
{
    uint8_t head[TCP_HEAD_BYTES], sizes[8];
    uint32_t posted[4];
    uint64_t room = ROOM;
    if (take(s, sizes, 8) < 8)
        return;
    for (int t = 0; t < 4; t++)
        posted[t] = get16(sizes + 2 * t);
    while (take(s, head, TCP_HEAD_BYTES) == TCP_HEAD_BYTES) {
        tcp_msg_head h;
        tcp_rx_action act;
        if (tcp_msg_head_parse(head, &h) != TCP_OK)
            return; /* a violation: the mesh ends */
        uint32_t *slot = h.tag < 4 && posted[h.tag] != NONE ? &posted[h.tag] : NULL;
        int64_t want = slot ? (int64_t)*slot : -1; /* the posted receive's size */
        if (tcp_msg_admit(&h, want, room, &act) != TCP_OK)
            return;
        if (act == TCP_RX_WAIT) { /* its receive is posted later, with a size from the stream */
            uint8_t z[2];
            if (take(s, z, 2) < 2 || tcp_msg_admit(&h, want = get16(z), room, &act) != TCP_OK)
                return;
            if (act != TCP_RX_RECEIVE)
                abort();
            slot = NULL;
        }
        uint64_t size = act == TCP_RX_BUFFER ? h.bytes : (uint64_t)want;
        payload(s, size, h.bytes);
        if (act == TCP_RX_BUFFER) {
            if (h.bytes > room) /* allocated beyond the room */
                abort();
            room -= h.bytes;
        } else if (slot) {
            *slot = NONE; /* that receive is consumed */
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    stream s = {data, size};
    mesh(&s);
    return 0;
}
