/* Private to libscaleout_comm: the bytes scaleout's TCP transports put on the
 * wire and the checks on what comes back, as pure functions (bytes in,
 * verdict out) with no sockets and no MPI, so the fuzz targets
 * (fuzz/fuzz_tcp_hello.c, fuzz/fuzz_tcp_frame.c) and the unit test
 * (tests/test_tcp_wire.c) drive exactly the code the transports run.
 *
 * Set-up handshake, on every connection (docs/COLLECTIVES.md, "Threat model"):
 *   caller -> answerer  hello      magic, version, kind, members, from, to, caller's nonce
 *   answerer -> caller  challenge  magic, answerer's nonce, MAC("answer", hello, nonce)
 *   caller -> answerer  proof      magic, MAC("call", hello, nonce)
 * MAC = HMAC-SHA256 under the set-up's secret (a fresh 256-bit key from the
 * group's rank 0, sent over MPI only). Both MACs cover both nonces, the roles,
 * the transport kind, the group size and who calls whom, so a recorded
 * handshake cannot be replayed (fresh nonces), reflected (the roles differ)
 * or redirected to another member (from and to are inside the MAC).
 * All integers are big-endian, written field by field. */
#ifndef SCALEOUT_TCP_WIRE_H
#define SCALEOUT_TCP_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define TCP_WIRE_VERSION 1
#define TCP_KEY_BYTES 32   /* the set-up's secret */
#define TCP_NONCE_BYTES 16
#define TCP_MAC_BYTES 32
#define TCP_HELLO_BYTES 36     /* magic 4, version 2, kind 2, members 4, from 4, to 4, nonce 16 */
#define TCP_CHALLENGE_BYTES 52 /* magic 4, nonce 16, MAC 32 */
#define TCP_PROOF_BYTES 36     /* magic 4, MAC 32 */
#define TCP_HEAD_BYTES 16      /* a mesh message's header */
#define TCP_TAG_MAX 32767      /* so_comm_isend / irecv tags */

/* Which transport a connection belongs to: the collectives' tcp transport
 * (tp_tcp.c; hier's ring across nodes runs over it) or the pipeline's
 * point-to-point mesh (tcp_p2p.c's threaded one). */
enum { TCP_KIND_RING = 1, TCP_KIND_MESH = 2 };

typedef enum {
    TCP_OK = 0,
    TCP_BAD_MAGIC,   /* not this message of this protocol */
    TCP_BAD_VERSION, /* this protocol, another version */
    TCP_BAD_KIND,    /* a hello for the other transport */
    TCP_BAD_MEMBER,  /* the group size, or a caller this listener does not expect */
    TCP_MISDIRECTED, /* a hello for another member */
    TCP_BAD_MAC,     /* no proof of the set-up's secret */
    TCP_BAD_TAG,     /* a message tag outside 0..TCP_TAG_MAX */
    TCP_BAD_SIZE,    /* a length the receiving side does not allow */
} tcp_verdict;

/* A short phrase for messages: "a malformed hello", "a wrong MAC", ... */
const char *tcp_verdict_str(tcp_verdict v);

/* One side of one set-up: the secret, the transport kind, the group's size
 * and my position in it. */
typedef struct {
    const uint8_t *key; /* TCP_KEY_BYTES, owned by the caller */
    uint16_t kind;
    uint32_t n, me;
} tcp_auth;

typedef struct {
    uint16_t kind;
    uint32_t n, from, to;
    uint8_t nonce[TCP_NONCE_BYTES]; /* the caller's */
} tcp_hello;

/* ---- the handshake ------------------------------------------------------------------ */

/* Caller: the hello to member to, with a fresh nonce (given). */
void tcp_hello_make(const tcp_auth *a, uint32_t to, const uint8_t nonce[TCP_NONCE_BYTES], tcp_hello *h,
                    uint8_t out[TCP_HELLO_BYTES]);
/* Answerer: parses a hello and checks it is for this set-up and for me, from
 * a member (want >= 0: that member only; never myself). Only the first 4
 * bytes are needed to refuse a stranger's bytes (len >= 4: the magic is
 * checked; len == TCP_HELLO_BYTES: everything). TCP_OK with *h filled only
 * for a whole, valid hello. */
tcp_verdict tcp_hello_check(const tcp_auth *a, int want, const uint8_t *in, size_t len, tcp_hello *h);
/* Answerer: the challenge to hello h, with the answerer's fresh nonce. */
void tcp_challenge_make(const tcp_auth *a, const tcp_hello *h, const uint8_t nonce[TCP_NONCE_BYTES],
                        uint8_t out[TCP_CHALLENGE_BYTES]);
/* Caller: checks the answerer's challenge to my hello h (it proves the secret)
 * and gives the answerer's nonce. */
tcp_verdict tcp_challenge_check(const tcp_auth *a, const tcp_hello *h, const uint8_t in[TCP_CHALLENGE_BYTES],
                                uint8_t nonce_out[TCP_NONCE_BYTES]);
/* Caller: the proof for hello h and the answerer's nonce. */
void tcp_proof_make(const tcp_auth *a, const tcp_hello *h, const uint8_t nonce[TCP_NONCE_BYTES],
                    uint8_t out[TCP_PROOF_BYTES]);
/* Answerer: checks the caller's proof (constant-time MAC comparison). */
tcp_verdict tcp_proof_check(const tcp_auth *a, const tcp_hello *h, const uint8_t nonce[TCP_NONCE_BYTES],
                            const uint8_t in[TCP_PROOF_BYTES]);

/* ---- the point-to-point mesh's framing ------------------------------------------------
 * Before every message: magic, tag, payload bytes. */
typedef struct {
    uint32_t tag;
    uint64_t bytes;
} tcp_msg_head;

void tcp_msg_head_make(uint32_t tag, uint64_t bytes, uint8_t out[TCP_HEAD_BYTES]);
tcp_verdict tcp_msg_head_parse(const uint8_t in[TCP_HEAD_BYTES], tcp_msg_head *h);

/* Where a message whose header was parsed goes. */
typedef enum {
    TCP_RX_RECEIVE, /* straight into the posted receive of its tag */
    TCP_RX_BUFFER,  /* no receive yet: into a buffer of h->bytes (<= early_room) */
    TCP_RX_WAIT,    /* no receive yet and too large to buffer: leave the payload
                     * in the socket until a receive of its tag is posted, then ask again */
} tcp_rx_action;

/* The only place a length from the wire decides an allocation or a copy.
 * posted: the size of the receive posted for h->tag, or -1 when none is;
 * early_room: bytes of unexpected messages from this peer that may still be
 * buffered. TCP_BAD_SIZE when a receive is posted and the sizes differ (the
 * so_comm_isend contract: sizes match), else TCP_OK with *act. */
tcp_verdict tcp_msg_admit(const tcp_msg_head *h, int64_t posted, uint64_t early_room, tcp_rx_action *act);

#endif
