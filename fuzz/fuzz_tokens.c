/* libFuzzer target for llm.c's token shards: so_tokens_parse on the bytes,
 * and for a valid shard every token read, the same tokens as an in-memory
 * set, and the vocabulary check against a bound taken from the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int width;
    int64_t n;
    if (so_tokens_parse(data, size, "fuzz.bin", &width, &n) != 0)
        return 0;
    if ((width != 2 && width != 4) || n < 1 || (uint64_t)n * (uint64_t)width + SO_TOKENS_HEADER_BYTES != size)
        abort(); /* the contract: exactly the promised bytes */
    uint32_t *ids = malloc((size_t)n * sizeof *ids), max = 0;
    if (!ids)
        return 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t v = 0;
        memcpy(&v, data + SO_TOKENS_HEADER_BYTES + (size_t)i * (size_t)width, (size_t)width);
        ids[i] = v;
        max = v > max ? v : max;
    }
    so_tokens *t = NULL;
    if (so_tokens_from_ids(ids, n, width, "fuzz", &t) == 0) {
        if (so_tokens_total(t) != n || so_tokens_at(t, 0, n - 1) != ids[n - 1])
            abort();
        int vocab = 1 + (int)(data[SO_TOKENS_HEADER_BYTES] % 255) * 300; /* sometimes above the max, sometimes not */
        int rc = so_tokens_check_vocab(t, vocab);
        if ((rc == 0) != (max < (uint32_t)vocab))
            abort();
        so_tokens_close(t);
    }
    free(ids);
    return 0;
}
