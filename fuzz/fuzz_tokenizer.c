/* libFuzzer target for the tokenizer's parsers and encoder. The first byte
 * picks: GPT-2 files (encoder.json and vocab.bpe, split at the bytes ff fe),
 * llm.c's tokenizer file, or a vocabulary trained on the input. Whatever
 * loads must encode text (a fixed multilingual line and the input itself)
 * and decode it back byte for byte; the pre-tokenizer's pieces must tile
 * the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/tokenizer.h"
#include "tokenizer/tokenizer_internal.h"

static int add_len(void *arg, const uint8_t *p, size_t n)
{
    (void)p;
    if (n == 0)
        abort();
    *(size_t *)arg += n;
    return 0;
}

static void round_trip(const so_tokenizer *t, const char *text, size_t len)
{
    uint32_t *ids = NULL;
    size_t n = 0, cap = 0, back_len;
    char *back;
    if (so_tokenizer_encode(t, text, len, &ids, &n, &cap) == 0) {
        if (so_tokenizer_decode(t, ids, n, &back, &back_len) != 0 || back_len != len || memcmp(back, text, len))
            abort();
        free(back);
    }
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char line[] = "Hello, I'm 42 \xc3\xa9l\xc3\xa8ves  \xe4\xbd\xa0\xe5\xa5\xbd\t\n\xf0\x9f\x98\x80!";
    if (size < 1)
        return 0;
    const uint8_t *body = data + 1;
    size_t len = size - 1, tiled = 0;
    so_pretok_gpt2(body, len, add_len, &tiled);
    if (tiled != len)
        abort();
    so_tokenizer *t = NULL;
    if (data[0] % 3 == 0) {
        const uint8_t *sep = NULL;
        for (size_t i = 0; i + 1 < len && !sep; i++)
            if (body[i] == 0xff && body[i + 1] == 0xfe)
                sep = body + i;
        size_t elen = sep ? (size_t)(sep - body) : len;
        const char *bpe = sep ? (const char *)sep + 2 : "";
        size_t blen = sep ? len - elen - 2 : 0;
        so_tokenizer_parse_gpt2((const char *)body, elen, "fuzz.json", bpe, blen, "fuzz.bpe", &t);
    } else if (data[0] % 3 == 1) {
        so_tokenizer_parse_llmc(body, len, "fuzz.bin", &t);
    } else if (len < 1024) { /* training is the costly mode: small inputs, small vocabularies */
        so_tokenizer_train((const char *)body, len, 257 + data[0] % 64, &t);
    }
    if (t) {
        round_trip(t, line, sizeof line - 1);
        round_trip(t, (const char *)body, len);
        so_tokenizer_destroy(t);
    }
    return 0;
}
