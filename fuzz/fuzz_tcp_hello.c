/* libFuzzer target for the TCP transports' set-up handshake (src/comm/tcp_wire.c),
 * as both ends see a stranger's bytes. The input is, in order: what a caller
 * sends an answerer (a hello, 36 bytes), then a proof (36 bytes), then what
 * an answerer sends a caller (a challenge, 52 bytes); any of them may be
 * short. Properties: every prefix of a hello is judged without reading past
 * it; a hello that passes re-encodes to the same bytes and names a member
 * other than the answerer; no proof or challenge from the input passes (the
 * fuzzer does not know the secret); and the real proof for an accepted hello
 * does pass. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm/tcp_wire.h"

static const uint8_t KEY[TCP_KEY_BYTES] = "scaleout fuzz key, not secret!!";
static const uint8_t NONCE_A[TCP_NONCE_BYTES] = "answerer nonce!";

/* The answerer: member 2 of a ring of 4 (the seed's hello is from member 1). */
static void answerer(const uint8_t *data, size_t size)
{
    tcp_auth a = {KEY, TCP_KIND_RING, 4, 2};
    tcp_hello h;
    size_t n = size < TCP_HELLO_BYTES ? size : TCP_HELLO_BYTES;
    tcp_verdict v = TCP_OK;
    for (size_t len = 0; len <= n && v == TCP_OK; len++) { /* the bytes as they trickle in */
        uint8_t *copy = malloc(len ? len : 1);             /* exact size: ASan sees any over-read */
        memcpy(copy, data, len);
        v = tcp_hello_check(&a, -1, copy, len, &h);
        free(copy);
    }
    if (v != TCP_OK || n < TCP_HELLO_BYTES)
        return;
    if (h.from >= a.n || h.from == a.me || h.to != a.me || h.n != a.n || h.kind != a.kind)
        abort();
    uint8_t again[TCP_HELLO_BYTES];
    tcp_auth caller = {KEY, h.kind, h.n, h.from};
    tcp_hello h2;
    tcp_hello_make(&caller, h.to, h.nonce, &h2, again);
    if (memcmp(again, data, TCP_HELLO_BYTES) != 0)
        abort();
    if (size >= TCP_HELLO_BYTES + TCP_PROOF_BYTES && tcp_proof_check(&a, &h, NONCE_A, data + TCP_HELLO_BYTES) == TCP_OK)
        abort(); /* a forged proof */
    uint8_t chal[TCP_CHALLENGE_BYTES], nonce[TCP_NONCE_BYTES], proof[TCP_PROOF_BYTES];
    tcp_challenge_make(&a, &h, NONCE_A, chal);
    if (tcp_challenge_check(&caller, &h2, chal, nonce) != TCP_OK)
        abort();
    tcp_proof_make(&caller, &h2, nonce, proof);
    if (tcp_proof_check(&a, &h, NONCE_A, proof) != TCP_OK)
        abort();
}

/* The caller: member 1 calling member 2, reading a challenge from the input. */
static void caller(const uint8_t *data, size_t size)
{
    size_t off = TCP_HELLO_BYTES + TCP_PROOF_BYTES;
    if (size < off + TCP_CHALLENGE_BYTES)
        return;
    tcp_auth c = {KEY, TCP_KIND_RING, 4, 1};
    tcp_hello h;
    uint8_t hello[TCP_HELLO_BYTES], nonce[TCP_NONCE_BYTES];
    tcp_hello_make(&c, 2, NONCE_A, &h, hello);
    if (tcp_challenge_check(&c, &h, data + off, nonce) == TCP_OK)
        abort(); /* a forged challenge */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    answerer(data, size);
    caller(data, size);
    return 0;
}
