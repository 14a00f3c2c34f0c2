/* Tests of the TCP transports' crypto and wire checks: SHA-256 against the
 * FIPS 180-4 examples, HMAC-SHA256 against RFC 4231's seven cases, and the
 * pure functions of src/comm/tcp_wire.c: a handshake goes through only with
 * the secret, and a recorded, reflected or redirected one does not; a
 * header's length is admitted only as the receive allows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "comm/tcp_wire.h"
#include "core/sha256.h"

/* hex -> bytes; returns the byte count. */
static size_t unhex(const char *hex, uint8_t *out)
{
    size_t n = strlen(hex) / 2;
    for (size_t i = 0; i < n; i++) {
        unsigned b;
        sscanf(hex + 2 * i, "%2x", &b);
        out[i] = (uint8_t)b;
    }
    return n;
}

static void assert_digest(const uint8_t *got, const char *want_hex, size_t n)
{
    uint8_t want[64];
    assert_int_equal(unhex(want_hex, want), n);
    assert_memory_equal(got, want, n);
}

/* ---- SHA-256 ---------------------------------------------------------------------------- */

static void test_sha256_fips(void **state)
{
    (void)state;
    static const struct {
        const char *msg, *digest;
    } v[] = {
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    };
    uint8_t d[SO_SHA256_BYTES];
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        so_sha256(v[i].msg, strlen(v[i].msg), d);
        assert_digest(d, v[i].digest, sizeof d);
    }
}

/* One million 'a' (FIPS 180-4's long example), fed in uneven pieces, and the
 * padding boundaries (55, 56 and 64 bytes) in one call and byte by byte. */
static void test_sha256_pieces(void **state)
{
    (void)state;
    char chunk[997];
    memset(chunk, 'a', sizeof chunk);
    so_sha256_ctx s;
    so_sha256_init(&s);
    for (size_t left = 1000000; left;) {
        size_t k = left < sizeof chunk ? left : sizeof chunk;
        so_sha256_update(&s, chunk, k);
        left -= k;
    }
    uint8_t d[SO_SHA256_BYTES], e[SO_SHA256_BYTES];
    so_sha256_final(&s, d);
    assert_digest(d, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0", sizeof d);

    static const struct {
        size_t n;
        const char *digest;
    } b[] = {{55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
             {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
             {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"}};
    for (size_t i = 0; i < 3; i++) {
        so_sha256(chunk, b[i].n, d);
        assert_digest(d, b[i].digest, sizeof d);
        so_sha256_init(&s);
        for (size_t k = 0; k < b[i].n; k++)
            so_sha256_update(&s, "a", 1);
        so_sha256_final(&s, e);
        assert_memory_equal(d, e, sizeof d);
    }
}

/* ---- HMAC-SHA256: RFC 4231, section 4 -------------------------------------------------- */

static void test_hmac_rfc4231(void **state)
{
    (void)state;
    static const struct {
        const char *key, *data, *mac; /* key and data in hex */
    } v[] = {
        {"0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "4869205468657265",
         "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
        {"4a656665", "7768617420646f2079612077616e7420666f72206e6f7468696e673f",
         "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
        {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
         "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd",
         "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
        {"0102030405060708090a0b0c0d0e0f10111213141516171819",
         "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd",
         "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
        {"0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c", "546573742057697468205472756e636174696f6e",
         "a3b6167473100ee06e0c796c2955552b"}, /* case 5: the first 128 bits */
    };
    uint8_t key[200], data[200], mac[SO_SHA256_BYTES];
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        size_t kn = unhex(v[i].key, key), dn = unhex(v[i].data, data);
        so_hmac_sha256(key, kn, data, dn, mac);
        assert_digest(mac, v[i].mac, strlen(v[i].mac) / 2);
    }
    /* Cases 6 and 7: a 131-byte key (longer than a block: hashed first). */
    memset(key, 0xaa, 131);
    const char *d6 = "Test Using Larger Than Block-Size Key - Hash Key First";
    so_hmac_sha256(key, 131, d6, strlen(d6), mac);
    assert_digest(mac, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54", sizeof mac);
    const char *d7 = "This is a test using a larger than block-size key and a larger than block-size data. "
                     "The key needs to be hashed before being used by the HMAC algorithm.";
    so_hmac_sha256_ctx m;
    so_hmac_sha256_init(&m, key, 131);
    so_hmac_sha256_update(&m, d7, 20);
    so_hmac_sha256_update(&m, d7 + 20, strlen(d7) - 20);
    so_hmac_sha256_final(&m, mac);
    assert_digest(mac, "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2", sizeof mac);
}

static void test_ct_equal(void **state)
{
    (void)state;
    uint8_t a[32], b[32];
    memset(a, 7, sizeof a);
    memcpy(b, a, sizeof b);
    assert_true(so_ct_equal(a, b, sizeof a));
    b[0] ^= 1;
    assert_false(so_ct_equal(a, b, sizeof a));
    b[0] ^= 1, b[31] ^= 0x80;
    assert_false(so_ct_equal(a, b, sizeof a));
    assert_true(so_ct_equal(a, b, 0));
    so_wipe(a, sizeof a);
    for (size_t i = 0; i < sizeof a; i++)
        assert_int_equal(a[i], 0);
}

/* ---- the handshake --------------------------------------------------------------------------- */

static uint8_t KEY[TCP_KEY_BYTES], OTHER_KEY[TCP_KEY_BYTES];
static const uint8_t NC[TCP_NONCE_BYTES] = "caller nonce 01", NA[TCP_NONCE_BYTES] = "answer nonce 01";

/* Member 1 of 4 calls member 2 of a ring's set-up. */
static tcp_auth caller_of(const uint8_t *key) { return (tcp_auth){key, TCP_KIND_RING, 4, 1}; }
static tcp_auth answerer_of(const uint8_t *key) { return (tcp_auth){key, TCP_KIND_RING, 4, 2}; }

static int setup_keys(void **state)
{
    (void)state;
    for (int i = 0; i < TCP_KEY_BYTES; i++)
        KEY[i] = (uint8_t)(i * 37 + 1), OTHER_KEY[i] = (uint8_t)(i * 37 + 2);
    return 0;
}

static void test_handshake_ok(void **state)
{
    (void)state;
    tcp_auth c = caller_of(KEY), a = answerer_of(KEY);
    tcp_hello h, got;
    uint8_t hello[TCP_HELLO_BYTES], chal[TCP_CHALLENGE_BYTES], proof[TCP_PROOF_BYTES], na[TCP_NONCE_BYTES];
    tcp_hello_make(&c, 2, NC, &h, hello);
    for (size_t len = 0; len < TCP_HELLO_BYTES; len++) /* a partial hello is not refused */
        assert_int_equal(tcp_hello_check(&a, -1, hello, len, &got), TCP_OK);
    assert_int_equal(tcp_hello_check(&a, 1, hello, sizeof hello, &got), TCP_OK);
    assert_int_equal(got.from, 1);
    assert_int_equal(got.to, 2);
    tcp_challenge_make(&a, &got, NA, chal);
    assert_int_equal(tcp_challenge_check(&c, &h, chal, na), TCP_OK);
    assert_memory_equal(na, NA, sizeof na);
    tcp_proof_make(&c, &h, na, proof);
    assert_int_equal(tcp_proof_check(&a, &got, NA, proof), TCP_OK);
}

/* Without the secret neither side proves anything. */
static void test_handshake_wrong_key(void **state)
{
    (void)state;
    tcp_auth c = caller_of(KEY), a = answerer_of(KEY), impostor_c = caller_of(OTHER_KEY),
             impostor_a = answerer_of(OTHER_KEY);
    tcp_hello h, got;
    uint8_t hello[TCP_HELLO_BYTES], chal[TCP_CHALLENGE_BYTES], proof[TCP_PROOF_BYTES], na[TCP_NONCE_BYTES];
    tcp_hello_make(&impostor_c, 2, NC, &h, hello); /* a hello is public: it passes */
    assert_int_equal(tcp_hello_check(&a, -1, hello, sizeof hello, &got), TCP_OK);
    tcp_challenge_make(&a, &got, NA, chal);
    assert_int_equal(tcp_challenge_check(&impostor_c, &h, chal, na), TCP_BAD_MAC);
    tcp_proof_make(&impostor_c, &h, NA, proof);
    assert_int_equal(tcp_proof_check(&a, &got, NA, proof), TCP_BAD_MAC);
    /* An impostor listening where a member was expected fails the caller's check. */
    tcp_hello_make(&c, 2, NC, &h, hello);
    tcp_challenge_make(&impostor_a, &h, NA, chal);
    assert_int_equal(tcp_challenge_check(&c, &h, chal, na), TCP_BAD_MAC);
    /* Random bytes where the proof goes, and a flipped bit in a real one. */
    for (int i = 0; i < TCP_PROOF_BYTES; i++)
        proof[i] = (uint8_t)rand();
    assert_int_not_equal(tcp_proof_check(&a, &h, NA, proof), TCP_OK);
    tcp_proof_make(&c, &h, NA, proof);
    proof[TCP_PROOF_BYTES - 1] ^= 1;
    assert_int_equal(tcp_proof_check(&a, &h, NA, proof), TCP_BAD_MAC);
}

/* A recorded hello and proof, sent again: the answerer's nonce is new, so the
 * proof is not; the answerer's own MAC sent back as a proof (reflection) fails
 * too, since the roles are inside the MAC. */
static void test_handshake_replay_reflection(void **state)
{
    (void)state;
    tcp_auth c = caller_of(KEY), a = answerer_of(KEY);
    tcp_hello h, got;
    uint8_t hello[TCP_HELLO_BYTES], chal[TCP_CHALLENGE_BYTES], proof[TCP_PROOF_BYTES], na[TCP_NONCE_BYTES];
    tcp_hello_make(&c, 2, NC, &h, hello);
    tcp_challenge_make(&a, &h, NA, chal);
    assert_int_equal(tcp_challenge_check(&c, &h, chal, na), TCP_OK);
    tcp_proof_make(&c, &h, na, proof); /* recorded: hello + proof */

    const uint8_t NA2[TCP_NONCE_BYTES] = "answer nonce 02";
    assert_int_equal(tcp_hello_check(&a, -1, hello, sizeof hello, &got), TCP_OK);
    assert_int_equal(tcp_proof_check(&a, &got, NA2, proof), TCP_BAD_MAC);

    uint8_t reflected[TCP_PROOF_BYTES];
    tcp_challenge_make(&a, &got, NA2, chal);
    memcpy(reflected, proof, 4); /* the proof's magic, the answerer's MAC */
    memcpy(reflected + 4, chal + 4 + TCP_NONCE_BYTES, TCP_MAC_BYTES);
    assert_int_equal(tcp_proof_check(&a, &got, NA2, reflected), TCP_BAD_MAC);
}

/* A hello for member 2 taken to member 3 is refused; rewritten to say 3, its
 * challenge no longer matches the caller's hello. */
static void test_handshake_redirect(void **state)
{
    (void)state;
    tcp_auth c = caller_of(KEY), m3 = {KEY, TCP_KIND_RING, 4, 3};
    tcp_hello h, got;
    uint8_t hello[TCP_HELLO_BYTES], chal[TCP_CHALLENGE_BYTES], na[TCP_NONCE_BYTES];
    tcp_hello_make(&c, 2, NC, &h, hello);
    assert_int_equal(tcp_hello_check(&m3, -1, hello, sizeof hello, &got), TCP_MISDIRECTED);
    hello[19] = 3; /* "to", big-endian at bytes 16..19 */
    assert_int_equal(tcp_hello_check(&m3, -1, hello, sizeof hello, &got), TCP_OK);
    tcp_challenge_make(&m3, &got, NA, chal);
    assert_int_equal(tcp_challenge_check(&c, &h, chal, na), TCP_BAD_MAC);
}

/* Hellos of other protocols, versions, transports, groups and callers. */
static void test_hello_refusals(void **state)
{
    (void)state;
    tcp_auth c = caller_of(KEY), a = answerer_of(KEY);
    tcp_hello h, got;
    uint8_t hello[TCP_HELLO_BYTES], bad[TCP_HELLO_BYTES];
    tcp_hello_make(&c, 2, NC, &h, hello);
    /* The old protocol's hello: magic 0x5c7c9a11 (little-endian), caller, 64-bit token. */
    const uint8_t old[16] = {0x11, 0x9a, 0x7c, 0x5c, 1, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
    assert_int_equal(tcp_hello_check(&a, -1, old, 4, &got), TCP_BAD_MAGIC);
    assert_int_equal(tcp_hello_check(&a, -1, old, sizeof old, &got), TCP_BAD_MAGIC);
    memcpy(bad, hello, sizeof bad);
    bad[5] = 2; /* version */
    assert_int_equal(tcp_hello_check(&a, -1, bad, sizeof bad, &got), TCP_BAD_VERSION);
    tcp_auth mesh = {KEY, TCP_KIND_MESH, 4, 2};
    assert_int_equal(tcp_hello_check(&mesh, -1, hello, sizeof hello, &got), TCP_BAD_KIND);
    tcp_auth five = {KEY, TCP_KIND_RING, 5, 2};
    assert_int_equal(tcp_hello_check(&five, -1, hello, sizeof hello, &got), TCP_BAD_MEMBER);
    assert_int_equal(tcp_hello_check(&a, 3, hello, sizeof hello, &got), TCP_BAD_MEMBER); /* not the one expected */
    tcp_auth self = {KEY, TCP_KIND_RING, 4, 1};
    hello[19] = 1; /* from 1 to 1 */
    assert_int_equal(tcp_hello_check(&self, -1, hello, sizeof hello, &got), TCP_BAD_MEMBER);
    memcpy(bad, hello, sizeof bad);
    bad[15] = 9; /* from 9 of 4 */
    assert_int_equal(tcp_hello_check(&a, -1, bad, sizeof bad, &got), TCP_BAD_MEMBER);
}

/* ---- framing ------------------------------------------------------------------------------------ */

static void test_msg_head(void **state)
{
    (void)state;
    uint8_t b[TCP_HEAD_BYTES];
    tcp_msg_head h;
    tcp_msg_head_make(7, 4096, b);
    assert_int_equal(tcp_msg_head_parse(b, &h), TCP_OK);
    assert_int_equal(h.tag, 7);
    assert_int_equal(h.bytes, 4096);
    tcp_msg_head_make(TCP_TAG_MAX + 1, 4, b);
    assert_int_equal(tcp_msg_head_parse(b, &h), TCP_BAD_TAG);
    b[0] ^= 0xff;
    assert_int_equal(tcp_msg_head_parse(b, &h), TCP_BAD_MAGIC);
    /* The old header (tag, pad, bytes with no magic) is refused. */
    const uint8_t old[16] = {7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0, 0, 0, 0};
    assert_int_equal(tcp_msg_head_parse(old, &h), TCP_BAD_MAGIC);
}

/* The length decides an allocation only within the room, a copy only into a
 * receive of exactly that size. */
static void test_msg_admit(void **state)
{
    (void)state;
    tcp_rx_action act;
    tcp_msg_head big = {3, (uint64_t)1 << 31}, small = {3, 4096}, empty = {3, 0};
    assert_int_equal(tcp_msg_admit(&small, 4096, 0, &act), TCP_OK);
    assert_int_equal(act, TCP_RX_RECEIVE);
    assert_int_equal(tcp_msg_admit(&big, 4096, UINT64_MAX, &act), TCP_BAD_SIZE);
    assert_int_equal(tcp_msg_admit(&small, 4095, 1 << 20, &act), TCP_BAD_SIZE);
    assert_int_equal(tcp_msg_admit(&small, -1, 1 << 20, &act), TCP_OK);
    assert_int_equal(act, TCP_RX_BUFFER);
    assert_int_equal(tcp_msg_admit(&big, -1, 64 << 20, &act), TCP_OK);
    assert_int_equal(act, TCP_RX_WAIT);
    assert_int_equal(tcp_msg_admit(&small, -1, 4095, &act), TCP_OK);
    assert_int_equal(act, TCP_RX_WAIT);
    assert_int_equal(tcp_msg_admit(&empty, -1, 0, &act), TCP_OK);
    assert_int_equal(act, TCP_RX_BUFFER);
}

static void test_verdict_names(void **state)
{
    (void)state;
    for (int v = TCP_OK; v <= TCP_BAD_SIZE; v++)
        assert_non_null(tcp_verdict_str((tcp_verdict)v));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_fips),
        cmocka_unit_test(test_sha256_pieces),
        cmocka_unit_test(test_hmac_rfc4231),
        cmocka_unit_test(test_ct_equal),
        cmocka_unit_test_setup(test_handshake_ok, setup_keys),
        cmocka_unit_test_setup(test_handshake_wrong_key, setup_keys),
        cmocka_unit_test_setup(test_handshake_replay_reflection, setup_keys),
        cmocka_unit_test_setup(test_handshake_redirect, setup_keys),
        cmocka_unit_test_setup(test_hello_refusals, setup_keys),
        cmocka_unit_test(test_msg_head),
        cmocka_unit_test(test_msg_admit),
        cmocka_unit_test(test_verdict_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
