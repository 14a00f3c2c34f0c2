/* The bytes of scaleout's TCP transports (tcp_wire.h): the set-up handshake
 * and both framings, encoded and checked field by field. Nothing here reads
 * a socket, allocates, or knows MPI: the transports and the fuzz targets call
 * the same functions. */
#include "tcp_wire.h"

#include "core/sha256.h"

#include <string.h>

/* Message magics: ASCII "soTH" (hello), "soTC" (challenge), "soTP" (proof),
 * "soTM" (mesh message). */
#define MAGIC_HELLO 0x736f5448u
#define MAGIC_CHALLENGE 0x736f5443u
#define MAGIC_PROOF 0x736f5450u
#define MAGIC_MSG 0x736f544du

/* Fixed-length role labels, so no two MAC inputs of different roles can be equal. */
static const uint8_t ROLE_ANSWER[16] = "scaleout answer";
static const uint8_t ROLE_CALL[16] = "scaleout call";

static void put16(uint8_t *p, uint16_t x) { p[0] = (uint8_t)(x >> 8), p[1] = (uint8_t)x; }
static void put32(uint8_t *p, uint32_t x)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(x >> (24 - 8 * i));
}
static void put64(uint8_t *p, uint64_t x)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(x >> (56 - 8 * i));
}
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t get32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) << 32 | get32(p + 4); }

const char *tcp_verdict_str(tcp_verdict v)
{
    switch (v) {
    case TCP_OK: return "no error";
    case TCP_BAD_MAGIC: return "bytes of another protocol (bad magic)";
    case TCP_BAD_VERSION: return "another protocol version";
    case TCP_BAD_KIND: return "a hello for the other kind of connection";
    case TCP_BAD_MEMBER: return "a hello from no expected member";
    case TCP_MISDIRECTED: return "a hello meant for another member";
    case TCP_BAD_MAC: return "a MAC that does not prove the job's secret";
    case TCP_BAD_TAG: return "a message tag out of range";
    case TCP_BAD_SIZE: return "a length the receiver does not allow";
    }
    return "an unknown error";
}

/* ---- the handshake ------------------------------------------------------------------ */

static void hello_encode(const tcp_hello *h, uint8_t out[TCP_HELLO_BYTES])
{
    put32(out, MAGIC_HELLO);
    put16(out + 4, TCP_WIRE_VERSION);
    put16(out + 6, h->kind);
    put32(out + 8, h->n);
    put32(out + 12, h->from);
    put32(out + 16, h->to);
    memcpy(out + 20, h->nonce, TCP_NONCE_BYTES);
}

/* MAC(role) = HMAC(key, role label || the hello as sent || the answerer's nonce):
 * the hello carries the kind, the group size, from, to and the caller's nonce. */
static void handshake_mac(const tcp_auth *a, const uint8_t role[16], const tcp_hello *h,
                          const uint8_t nonce[TCP_NONCE_BYTES], uint8_t out[TCP_MAC_BYTES])
{
    uint8_t hb[TCP_HELLO_BYTES];
    so_hmac_sha256_ctx m;
    hello_encode(h, hb);
    so_hmac_sha256_init(&m, a->key, TCP_KEY_BYTES);
    so_hmac_sha256_update(&m, role, 16);
    so_hmac_sha256_update(&m, hb, sizeof hb);
    so_hmac_sha256_update(&m, nonce, TCP_NONCE_BYTES);
    so_hmac_sha256_final(&m, out);
}

void tcp_hello_make(const tcp_auth *a, uint32_t to, const uint8_t nonce[TCP_NONCE_BYTES], tcp_hello *h,
                    uint8_t out[TCP_HELLO_BYTES])
{
    h->kind = a->kind, h->n = a->n, h->from = a->me, h->to = to;
    memcpy(h->nonce, nonce, TCP_NONCE_BYTES);
    hello_encode(h, out);
}

tcp_verdict tcp_hello_check(const tcp_auth *a, int want, const uint8_t *in, size_t len, tcp_hello *h)
{
    if (len >= 4 && get32(in) != MAGIC_HELLO)
        return TCP_BAD_MAGIC;
    if (len < TCP_HELLO_BYTES)
        return TCP_OK; /* so far so good: the caller reads on */
    tcp_hello got = {get16(in + 6), get32(in + 8), get32(in + 12), get32(in + 16), {0}};
    memcpy(got.nonce, in + 20, TCP_NONCE_BYTES);
    if (get16(in + 4) != TCP_WIRE_VERSION)
        return TCP_BAD_VERSION;
    if (got.kind != a->kind)
        return TCP_BAD_KIND;
    if (got.n != a->n || got.from >= a->n || got.from == a->me || (want >= 0 && got.from != (uint32_t)want))
        return TCP_BAD_MEMBER;
    if (got.to != a->me)
        return TCP_MISDIRECTED;
    *h = got;
    return TCP_OK;
}

void tcp_challenge_make(const tcp_auth *a, const tcp_hello *h, const uint8_t nonce[TCP_NONCE_BYTES],
                        uint8_t out[TCP_CHALLENGE_BYTES])
{
    put32(out, MAGIC_CHALLENGE);
    memcpy(out + 4, nonce, TCP_NONCE_BYTES);
    handshake_mac(a, ROLE_ANSWER, h, nonce, out + 4 + TCP_NONCE_BYTES);
}

tcp_verdict tcp_challenge_check(const tcp_auth *a, const tcp_hello *h, const uint8_t in[TCP_CHALLENGE_BYTES],
                                uint8_t nonce_out[TCP_NONCE_BYTES])
{
    uint8_t want[TCP_MAC_BYTES];
    if (get32(in) != MAGIC_CHALLENGE)
        return TCP_BAD_MAGIC;
    handshake_mac(a, ROLE_ANSWER, h, in + 4, want);
    int ok = so_ct_equal(want, in + 4 + TCP_NONCE_BYTES, TCP_MAC_BYTES);
    so_wipe(want, sizeof want);
    if (!ok)
        return TCP_BAD_MAC;
    memcpy(nonce_out, in + 4, TCP_NONCE_BYTES);
    return TCP_OK;
}

void tcp_proof_make(const tcp_auth *a, const tcp_hello *h, const uint8_t nonce[TCP_NONCE_BYTES],
                    uint8_t out[TCP_PROOF_BYTES])
{
    put32(out, MAGIC_PROOF);
    handshake_mac(a, ROLE_CALL, h, nonce, out + 4);
}

tcp_verdict tcp_proof_check(const tcp_auth *a, const tcp_hello *h, const uint8_t nonce[TCP_NONCE_BYTES],
                            const uint8_t in[TCP_PROOF_BYTES])
{
    uint8_t want[TCP_MAC_BYTES];
    if (get32(in) != MAGIC_PROOF)
        return TCP_BAD_MAGIC;
    handshake_mac(a, ROLE_CALL, h, nonce, want);
    int ok = so_ct_equal(want, in + 4, TCP_MAC_BYTES);
    so_wipe(want, sizeof want);
    return ok ? TCP_OK : TCP_BAD_MAC;
}

/* ---- the mesh's framing ------------------------------------------------------------------ */

void tcp_msg_head_make(uint32_t tag, uint64_t bytes, uint8_t out[TCP_HEAD_BYTES])
{
    put32(out, MAGIC_MSG);
    put32(out + 4, tag);
    put64(out + 8, bytes);
}

tcp_verdict tcp_msg_head_parse(const uint8_t in[TCP_HEAD_BYTES], tcp_msg_head *h)
{
    h->tag = get32(in + 4);
    h->bytes = get64(in + 8);
    if (get32(in) != MAGIC_MSG)
        return TCP_BAD_MAGIC;
    return h->tag > TCP_TAG_MAX ? TCP_BAD_TAG : TCP_OK;
}

tcp_verdict tcp_msg_admit(const tcp_msg_head *h, int64_t posted, uint64_t early_room, tcp_rx_action *act)
{
    if (posted >= 0) {
        *act = TCP_RX_RECEIVE;
        return h->bytes == (uint64_t)posted ? TCP_OK : TCP_BAD_SIZE;
    }
    *act = h->bytes <= early_room ? TCP_RX_BUFFER : TCP_RX_WAIT;
    return TCP_OK;
}
