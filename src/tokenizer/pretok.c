/* GPT-2's pre-tokenizer in C: the pieces its regex
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * finds, scanning UTF-8 once with one character of look-ahead. Every code
 * point falls in exactly one of four classes (letter, number, space, other),
 * so at each position at most one alternative can start; the only subtle one
 * is \s+(?!\S): a run of spaces followed by a non-space gives all of it but
 * its last character (which then leads the next piece, " word"), unless
 * the run is one character long (then \s+ takes it alone). Also GPT-2's
 * byte alphabet (bytes_to_unicode). */
#include "tokenizer_internal.h"

/* ASCII's classes, by table: most text is ASCII. */
#define L SO_UC_LETTER
#define N SO_UC_NUMBER
#define S SO_UC_SPACE
#define O SO_UC_OTHER
static const uint8_t ASCII[128] = {
    O, O, O, O, O, O, O, O, O, S, S, S, S, S, O, O, O, O, O, O, O, O, O, O, O, O, O, O, O, O, O, O,
    S, O, O, O, O, O, O, O, O, O, O, O, O, O, O, O, N, N, N, N, N, N, N, N, N, N, O, O, O, O, O, O,
    O, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, O, O, O, O, O,
    O, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, O, O, O, O, O,
};
#undef L
#undef N
#undef S
#undef O

so_uc_class so_uc_class_of(uint32_t cp)
{
    if (cp < 128)
        return (so_uc_class)ASCII[cp];
    int lo = 0, hi = so_uc_nranges - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < so_uc_ranges[mid].lo)
            hi = mid - 1;
        else if (cp > so_uc_ranges[mid].hi)
            lo = mid + 1;
        else
            return (so_uc_class)so_uc_ranges[mid].cls;
    }
    return SO_UC_OTHER;
}

/* One character at p (n bytes left): its length in bytes and class. Bytes
 * that do not start a well-formed UTF-8 sequence (stray continuation bytes,
 * overlong forms, surrogates, past U+10FFFF, cut short) count as one
 * character of class other each, so any input is split and nothing lost. */
static size_t char_at(const uint8_t *p, size_t n, so_uc_class *cls)
{
    uint8_t b = p[0];
    uint32_t cp;
    size_t len;
    if (b < 0x80) {
        *cls = so_uc_class_of(b);
        return 1;
    }
    if (b >= 0xc2 && b <= 0xdf)
        len = 2, cp = b & 0x1f;
    else if (b >= 0xe0 && b <= 0xef)
        len = 3, cp = b & 0x0f;
    else if (b >= 0xf0 && b <= 0xf4)
        len = 4, cp = b & 0x07;
    else
        goto invalid;
    if (len > n)
        goto invalid;
    for (size_t k = 1; k < len; k++) {
        if ((p[k] & 0xc0) != 0x80)
            goto invalid;
        cp = cp << 6 | (p[k] & 0x3f);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        goto invalid;
    *cls = so_uc_class_of(cp);
    return len;
invalid:
    *cls = SO_UC_OTHER;
    return 1;
}

/* End of the run of class `cls` starting at i; *last is its last character's start. */
static size_t run_end(const uint8_t *t, size_t len, size_t i, so_uc_class cls, size_t *last)
{
    *last = i;
    while (i < len) {
        so_uc_class k;
        size_t cl = char_at(t + i, len - i, &k);
        if (k != cls)
            break;
        *last = i;
        i += cl;
    }
    return i;
}

/* Length of the contraction 's 't 're 've 'm 'll 'd at t (t[0] is '), or 0. */
static size_t contraction(const uint8_t *t, size_t n)
{
    static const char *const forms[] = {"s", "t", "re", "ve", "m", "ll", "d"};
    for (int f = 0; f < 7; f++) {
        size_t k = forms[f][1] ? 2 : 1;
        if (n >= 1 + k && t[1] == (uint8_t)forms[f][0] && (k == 1 || t[2] == (uint8_t)forms[f][1]))
            return 1 + k;
    }
    return 0;
}

/* The piece starting at i. */
static size_t piece_end(const uint8_t *t, size_t len, size_t i)
{
    size_t last, c;
    if (t[i] == '\'' && (c = contraction(t + i, len - i)))
        return i + c;
    so_uc_class k0, k1;
    size_t l0 = char_at(t + i, len - i, &k0);
    /* " ?X+" for X letter, number or other: an optional leading space */
    if (t[i] == ' ' && i + 1 < len) {
        char_at(t + i + 1, len - i - 1, &k1);
        if (k1 != SO_UC_SPACE)
            return run_end(t, len, i + 1, k1, &last);
    }
    if (k0 != SO_UC_SPACE)
        return run_end(t, len, i, k0, &last);
    /* \s+(?!\S) then \s+ */
    size_t j = run_end(t, len, i, SO_UC_SPACE, &last);
    if (j == len || last == i)
        return j == len ? j : i + l0;
    return last;
}

int so_pretok_gpt2(const uint8_t *text, size_t len, so_piece_fn fn, void *arg)
{
    for (size_t i = 0; i < len;) {
        size_t j = piece_end(text, len, i);
        int rc = fn(arg, text + i, j - i);
        if (rc)
            return rc;
        i = j;
    }
    return 0;
}

/* bytes_to_unicode: bytes '!'..'~', 0xa1..0xac and 0xae..0xff stand for
 * themselves; the others, in byte order, for 256, 257, ... */
uint32_t so_gpt2_byte_char(uint8_t b)
{
    if ((b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae)
        return b;
    /* rank of b among the bytes that do not stand for themselves */
    uint32_t n = b <= ' ' ? b : b <= 0xa0 ? 33u + (b - 0x7f) : 33u + 34u;
    return 256 + n;
}

int so_gpt2_char_byte(uint32_t cp)
{
    if (cp < 256)
        return (cp >= '!' && cp <= '~') || (cp >= 0xa1 && cp <= 0xac) || cp >= 0xae ? (int)cp : -1;
    if (cp >= 256 + 68)
        return -1;
    uint32_t n = cp - 256;
    return n <= 32 ? (int)n : n <= 33 + 33 ? (int)(0x7f + n - 33) : 0xad;
}
