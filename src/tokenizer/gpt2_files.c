/* GPT-2's tokenizer files, read and written: encoder.json (one JSON object,
 * token string -> id, the strings in GPT-2's printable byte alphabet) and
 * vocab.bpe ("#version: 0.2", then one merge "A B" per line, by rank); and
 * llm.c's gpt2_tokenizer.bin (tokens' bytes only). Both readers take
 * untrusted input (fuzzed): every error is one line naming the file and
 * where, never a crash. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "scaleout/err.h"
#include "scaleout/file.h"
#include "tokenizer_internal.h"

#define MAX_FILE_BYTES ((size_t)1 << 30)
#define MAX_VOCAB (1 << 24)
#define LLMC_TOKENIZER_MAGIC 20240328

/* ---- reading files ---------------------------------------------------------- */

/* A whole regular file (so_file_read_all: never blocks on a FIFO), NUL-terminated. */
static int slurp(const char *path, char **out, size_t *len)
{
    void *buf;
    int rc = so_file_read_all(path, MAX_FILE_BYTES, &buf, len);
    *out = rc ? NULL : buf;
    return rc;
}

/* ---- encoder.json ------------------------------------------------------------- */

typedef struct {
    const char *s, *what;
    size_t len, i;
} json_in;

static int json_fail(const json_in *j, const char *msg)
{
    return so_err(SO_EFORMAT, "%s: offset %zu: %s", j->what, j->i, msg);
}

static void skip_ws(json_in *j)
{
    while (j->i < j->len && (j->s[j->i] == ' ' || j->s[j->i] == '\t' || j->s[j->i] == '\n' || j->s[j->i] == '\r'))
        j->i++;
}

static int hex4(json_in *j, uint32_t *v)
{
    *v = 0;
    for (int k = 0; k < 4; k++, j->i++) {
        char c = j->i < j->len ? j->s[j->i] : 0;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return json_fail(j, "bad \\u escape");
        *v = *v << 4 | (uint32_t)d;
    }
    return 0;
}

/* One escape after the backslash: its code point. */
static int json_escape(json_in *j, uint32_t *cp)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    char c = j->i < j->len ? j->s[j->i++] : 0;
    const char *k = c ? strchr(from, c) : NULL;
    if (k) {
        *cp = (uint8_t)to[k - from];
        return 0;
    }
    if (c != 'u')
        return json_fail(j, "bad escape");
    int rc = hex4(j, cp);
    if (rc || *cp < 0xd800 || *cp > 0xdfff)
        return rc;
    uint32_t lo;
    if (*cp > 0xdbff || j->i + 2 > j->len || j->s[j->i] != '\\' || j->s[j->i + 1] != 'u')
        return json_fail(j, "unpaired surrogate in a \\u escape");
    j->i += 2;
    if ((rc = hex4(j, &lo)))
        return rc;
    if (lo < 0xdc00 || lo > 0xdfff)
        return json_fail(j, "unpaired surrogate in a \\u escape");
    *cp = 0x10000 + ((*cp - 0xd800) << 10) + (lo - 0xdc00);
    return 0;
}

/* One UTF-8 code point of the raw string (JSON text is UTF-8). */
static int json_utf8(json_in *j, uint32_t *cp)
{
    const uint8_t *p = (const uint8_t *)j->s + j->i;
    size_t n = j->len - j->i, len = p[0] < 0x80 ? 1 : p[0] >= 0xc2 && p[0] <= 0xdf ? 2 : p[0] >= 0xe0 && p[0] <= 0xef ? 3
                                                  : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : 0;
    if (!len || len > n)
        return json_fail(j, "invalid UTF-8");
    *cp = len == 1 ? p[0] : (uint32_t)(p[0] & (0x7f >> len));
    for (size_t k = 1; k < len; k++) {
        if ((p[k] & 0xc0) != 0x80)
            return json_fail(j, "invalid UTF-8");
        *cp = *cp << 6 | (p[k] & 0x3f);
    }
    if ((len == 3 && *cp < 0x800) || (len == 4 && (*cp < 0x10000 || *cp > 0x10ffff)))
        return json_fail(j, "invalid UTF-8 (an overlong form)");
    j->i += len;
    return 0;
}

/* A JSON string of GPT-2 alphabet characters, as the bytes they stand for,
 * appended to out (room for `room` bytes: a string is never longer in
 * bytes than its JSON text). */
static int json_token(json_in *j, uint8_t *out, size_t *n)
{
    if (j->i >= j->len || j->s[j->i] != '"')
        return json_fail(j, "expected a string");
    j->i++;
    *n = 0;
    for (;;) {
        if (j->i >= j->len)
            return json_fail(j, "unterminated string");
        uint8_t c = (uint8_t)j->s[j->i];
        uint32_t cp;
        int rc;
        if (c == '"') {
            j->i++;
            return 0;
        }
        if (c < 0x20)
            return json_fail(j, "control character in a string");
        if (c == '\\') {
            j->i++;
            rc = json_escape(j, &cp);
        } else {
            rc = json_utf8(j, &cp);
        }
        if (rc)
            return rc;
        int b = so_gpt2_char_byte(cp);
        if (b < 0)
            return json_fail(j, "a token has a character outside GPT-2's byte alphabet");
        out[(*n)++] = (uint8_t)b;
    }
}

static int json_id(json_in *j, long *id)
{
    size_t start = j->i;
    *id = 0;
    while (j->i < j->len && j->s[j->i] >= '0' && j->s[j->i] <= '9' && j->i - start < 9)
        *id = *id * 10 + (j->s[j->i++] - '0');
    if (j->i == start || (j->i < j->len && j->s[j->i] >= '0' && j->s[j->i] <= '9'))
        return json_fail(j, "expected a token id (0..16777215)");
    if (*id >= MAX_VOCAB || (j->i - start > 1 && j->s[start] == '0'))
        return json_fail(j, "expected a token id (0..16777215)");
    return 0;
}

/* Counts the object's members to size the tables: commas + 1 is an upper
 * bound (commas inside strings only make it larger). */
static int count_members(const char *s, size_t len)
{
    size_t n = 1;
    for (size_t i = 0; i < len; i++)
        n += s[i] == ',';
    return n > MAX_VOCAB ? MAX_VOCAB : (int)n;
}

/* Parses the object into t: bytes of each id in a scratch table first (ids
 * arrive in any order), then packed by id. */
static int parse_encoder(json_in *j, so_tokenizer **out)
{
    int cap = count_members(j->s, j->len), rc = 0, count = 0;
    size_t *where = malloc((size_t)cap * sizeof *where), *len = malloc((size_t)cap * sizeof *len);
    uint8_t *scratch = malloc(j->len + 1);
    so_tokenizer *t = NULL;
    size_t used = 0;
    if (!where || !len || !scratch) {
        rc = so_err(SO_ENOMEM, "%s: out of memory", j->what);
        goto out;
    }
    for (int k = 0; k < cap; k++)
        where[k] = SIZE_MAX;
    skip_ws(j);
    if (j->i >= j->len || j->s[j->i++] != '{') {
        rc = json_fail(j, "expected '{'");
        goto out;
    }
    skip_ws(j);
    while (!rc && j->i < j->len && j->s[j->i] != '}') {
        size_t n = 0;
        long id;
        if (count) { /* members after the first follow a comma */
            if (j->s[j->i] != ',') {
                rc = json_fail(j, "expected ',' or '}'");
                break;
            }
            j->i++;
            skip_ws(j);
        }
        if ((rc = json_token(j, scratch + used, &n)))
            break;
        skip_ws(j);
        if (j->i >= j->len || j->s[j->i++] != ':') {
            rc = json_fail(j, "expected ':'");
            break;
        }
        skip_ws(j);
        if ((rc = json_id(j, &id)))
            break;
        if (id >= cap || where[id] != SIZE_MAX) {
            rc = so_err(SO_EFORMAT, "%s: token id %ld is %s", j->what, id,
                        id >= cap ? "not below the number of tokens: ids must be 0..n-1" : "given twice");
            break;
        }
        where[id] = used, len[id] = n, used += n, count++;
        skip_ws(j);
    }
    if (!rc && (j->i >= j->len || j->s[j->i++] != '}'))
        rc = json_fail(j, "expected '}'");
    skip_ws(j);
    if (!rc && j->i != j->len)
        rc = json_fail(j, "trailing data after the object");
    for (int k = 0; !rc && k < count; k++)
        if (where[k] == SIZE_MAX)
            rc = so_err(SO_EFORMAT, "%s: no token has id %d: ids must be 0..%d", j->what, k, count - 1);
    if (!rc && count == 0)
        rc = so_err(SO_EFORMAT, "%s: no tokens", j->what);
    if (!rc && !(t = so_tok_alloc(TOK_BPE, count, used)))
        rc = so_err(SO_ENOMEM, "%s: out of memory", j->what);
    for (int k = 0; !rc && k < count; k++) {
        memcpy(t->bytes + t->off[k], scratch + where[k], len[k]);
        t->off[k + 1] = t->off[k] + len[k];
    }
out:
    free(where);
    free(len);
    free(scratch);
    if (rc)
        so_tokenizer_destroy(t);
    else
        *out = t;
    return rc;
}

/* Every byte needs its one-byte token, and <|endoftext|> is the end token. */
static int find_specials(so_tokenizer *t, const char *what)
{
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        if ((t->byte_id[b] = so_tok_find(t, &c, 1)) < 0)
            return so_err(SO_EFORMAT, "%s: no token for byte 0x%02x (GPT-2 character U+%04X)", what, b,
                          so_gpt2_byte_char(c));
    }
    t->eot = so_tok_find(t, (const uint8_t *)"<|endoftext|>", 13);
    return 0;
}

/* ---- vocab.bpe ------------------------------------------------------------------ */

/* A space-free field of a merge line, as bytes. */
static int bpe_field(const char *s, size_t n, uint8_t *out, size_t *len, const char *what, long line)
{
    json_in j = {s, what, n, 0};
    *len = 0;
    while (j.i < n) {
        uint32_t cp = 0;
        if (json_utf8(&j, &cp))
            return so_err(SO_EFORMAT, "%s: line %ld: invalid UTF-8", what, line);
        int b = so_gpt2_char_byte(cp);
        if (b < 0)
            return so_err(SO_EFORMAT, "%s: line %ld: a character outside GPT-2's byte alphabet", what, line);
        out[(*len)++] = (uint8_t)b;
    }
    return 0;
}

/* One merge line "A B": both tokens and their concatenation must be known. */
static int bpe_line(so_tokenizer *t, const char *s, size_t n, uint8_t *buf, const char *what, long line)
{
    const char *sp = memchr(s, ' ', n);
    if (!sp || sp == s || sp == s + n - 1 || memchr(sp + 1, ' ', (size_t)(s + n - sp - 1)))
        return so_err(SO_EFORMAT, "%s: line %ld: a merge is two tokens separated by one space", what, line);
    size_t la, lb;
    int rc = bpe_field(s, (size_t)(sp - s), buf, &la, what, line);
    if (!rc)
        rc = bpe_field(sp + 1, (size_t)(s + n - sp - 1), buf + la, &lb, what, line);
    if (rc)
        return rc;
    int32_t a = so_tok_find(t, buf, la), b = so_tok_find(t, buf + la, lb), m = so_tok_find(t, buf, la + lb);
    if (a < 0 || b < 0)
        return so_err(SO_EFORMAT, "%s: line %ld: token '%.*s' is not in the encoder", what, line,
                      (int)(a < 0 ? sp - s : s + n - sp - 1), a < 0 ? s : sp + 1);
    if (m < 0)
        return so_err(SO_EFORMAT, "%s: line %ld: the merge of '%.*s' makes a token the encoder does not have", what,
                      line, (int)n, s);
    return so_tok_add_merge(t, a, b, m);
}

static int parse_bpe(so_tokenizer *t, const char *s, size_t len, const char *what)
{
    uint8_t *buf = malloc(len + 1);
    if (!buf)
        return so_err(SO_ENOMEM, "%s: out of memory", what);
    int rc = 0;
    long line = 0;
    for (size_t i = 0; !rc && i < len; line++) {
        const char *nl = memchr(s + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - s) : len, n = end - i;
        if (n && s[i + n - 1] == '\r')
            n--;
        /* "#version: 0.2" heads GPT-2's file; empty lines (the last) carry nothing */
        if (n && !(line == 0 && n >= 8 && memcmp(s + i, "#version", 8) == 0))
            rc = bpe_line(t, s + i, n, buf, what, line + 1);
        i = end + 1;
    }
    free(buf);
    return rc;
}

int so_tokenizer_parse_gpt2(const char *enc, size_t enc_len, const char *enc_name, const char *bpe, size_t bpe_len,
                            const char *bpe_name, so_tokenizer **out)
{
    json_in j = {enc, enc_name, enc_len, 0};
    so_tokenizer *t = NULL;
    *out = NULL;
    int rc = parse_encoder(&j, &t);
    if (!rc)
        rc = so_tok_index(t, enc_name);
    if (!rc)
        rc = find_specials(t, enc_name);
    if (!rc)
        rc = parse_bpe(t, bpe, bpe_len, bpe_name);
    if (rc)
        so_tokenizer_destroy(t);
    else
        *out = t;
    return rc;
}

int so_tokenizer_load_gpt2(const char *encoder_json, const char *vocab_bpe, so_tokenizer **out)
{
    char *enc = NULL, *bpe = NULL;
    size_t el, bl;
    *out = NULL;
    int rc = slurp(encoder_json, &enc, &el);
    if (!rc)
        rc = slurp(vocab_bpe, &bpe, &bl);
    if (!rc)
        rc = so_tokenizer_parse_gpt2(enc, el, encoder_json, bpe, bl, vocab_bpe, out);
    free(enc);
    free(bpe);
    return rc;
}

/* ---- writing ------------------------------------------------------------------- */

/* The bytes as a JSON string body of GPT-2 alphabet characters (UTF-8, with
 * " and \ escaped: the only alphabet characters JSON needs escaped). */
static void put_token(FILE *f, const uint8_t *b, size_t n, int json)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = so_gpt2_byte_char(b[i]);
        if (json && (cp == '"' || cp == '\\'))
            fputc('\\', f);
        if (cp < 0x80) {
            fputc((int)cp, f);
        } else { /* the alphabet stays below U+0800: two bytes */
            fputc((int)(0xc0 | cp >> 6), f);
            fputc((int)(0x80 | (cp & 0x3f)), f);
        }
    }
}

static int close_checked(FILE *f, const char *path)
{
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return so_err(SO_EIO, "%s: write failed", path);
    return 0;
}

int so_tokenizer_save_gpt2(const so_tokenizer *t, const char *encoder_json, const char *vocab_bpe)
{
    if (t->kind == TOK_LLMC) /* bytes: the 256 one-byte tokens and no merges, which encode alike */
        return so_err(SO_EUNSUP, "tokenizer: a %s vocabulary has no GPT-2 files", so_tokenizer_kind(t));
    FILE *f = fopen(encoder_json, "w");
    if (!f)
        return so_err(SO_EIO, "%s: %s", encoder_json, strerror(errno));
    fputc('{', f);
    for (int id = 0; id < t->vocab; id++) {
        fputs(id ? ", \"" : "\"", f);
        put_token(f, t->bytes + t->off[id], t->off[id + 1] - t->off[id], 1);
        fprintf(f, "\": %d", id);
    }
    fputs("}", f);
    int rc = close_checked(f, encoder_json);
    if (rc)
        return rc;
    if (!(f = fopen(vocab_bpe, "w")))
        return so_err(SO_EIO, "%s: %s", vocab_bpe, strerror(errno));
    fputs("#version: 0.2\n", f);
    for (int r = 0; r < t->nmerges; r++) {
        int32_t a = t->merge_left[r], b = t->merge_right[r];
        put_token(f, t->bytes + t->off[a], t->off[a + 1] - t->off[a], 0);
        fputc(' ', f);
        put_token(f, t->bytes + t->off[b], t->off[b + 1] - t->off[b], 0);
        fputc('\n', f);
    }
    return close_checked(f, vocab_bpe);
}

/* ---- llm.c's gpt2_tokenizer.bin --------------------------------------------------- */

static int32_t le32(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

int so_tokenizer_parse_llmc(const uint8_t *buf, size_t len, const char *what, so_tokenizer **out)
{
    *out = NULL;
    if (len < 1024)
        return so_err(SO_EFORMAT, "%s: %zu bytes is too short for llm.c's tokenizer header (1024 bytes)", what, len);
    int32_t magic = le32(buf), version = le32(buf + 4), n = le32(buf + 8), eot = le32(buf + 12);
    if (magic != LLMC_TOKENIZER_MAGIC)
        return so_err(SO_EFORMAT, "%s: bad magic %d, expected %d (llm.c tokenizer)", what, magic, LLMC_TOKENIZER_MAGIC);
    if (version != 1 && version != 2)
        return so_err(SO_EFORMAT, "%s: version %d, expected 1 or 2", what, version);
    if (n < 1 || n > MAX_VOCAB || (size_t)n > len - 1024)
        return so_err(SO_EFORMAT, "%s: %d tokens does not fit the file's %zu bytes", what, n, len);
    size_t bytes = 0;
    for (size_t i = 1024, k = 0; k < (size_t)n; k++) { /* sizes first: uint8 length, then the bytes */
        if (i >= len || buf[i] == 0 || len - i - 1 < buf[i])
            return so_err(SO_EFORMAT, "%s: token %zu: %s", what, k, i >= len ? "the file ends" : "bad length");
        bytes += buf[i];
        i += 1 + (size_t)buf[i];
        if (k + 1 == (size_t)n && i != len)
            return so_err(SO_EFORMAT, "%s: %zu trailing bytes after %d tokens", what, len - i, n);
    }
    so_tokenizer *t = so_tok_alloc(TOK_LLMC, n, bytes);
    if (!t)
        return so_err(SO_ENOMEM, "%s: out of memory", what);
    for (size_t i = 1024, k = 0; k < (size_t)n; k++) {
        memcpy(t->bytes + t->off[k], buf + i + 1, buf[i]);
        t->off[k + 1] = t->off[k] + buf[i];
        i += 1 + (size_t)buf[i];
    }
    t->eot = version == 2 && eot >= 0 && eot < n ? eot : -1;
    *out = t;
    return 0;
}

int so_tokenizer_load_llmc(const char *path, so_tokenizer **out)
{
    char *buf = NULL;
    size_t len;
    *out = NULL;
    int rc = slurp(path, &buf, &len);
    if (!rc)
        rc = so_tokenizer_parse_llmc((const uint8_t *)buf, len, path, out);
    free(buf);
    return rc;
}
