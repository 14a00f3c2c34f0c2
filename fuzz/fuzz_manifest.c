/* libFuzzer target for the checkpoint manifest parser: any bytes either fail
 * with SO_EFORMAT or give a manifest whose shard table tiles the state, and
 * formatting that manifest again parses to the same table. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/ckpt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    so_ckpt_manifest m, again;
    if (so_ckpt_manifest_parse((const char *)data, size, "fuzz", &m) != 0)
        return 0;
    uint64_t rep = 0;
    int ranks = 0;
    for (int i = 0; i < m.nshards; i++) {
        rep += m.shards[i].rep_len;
        ranks += m.shards[i].rank_count;
    }
    if (rep != m.rep_bytes || ranks != m.world)
        abort();
    char *text;
    size_t len;
    if (so_ckpt_manifest_format(&m, &text, &len) == 0) {
        if (so_ckpt_manifest_parse(text, len, "again", &again) != 0 || again.nshards != m.nshards ||
            memcmp(again.shards, m.shards, (size_t)m.nshards * sizeof *m.shards) != 0)
            abort();
        so_ckpt_manifest_free(&again);
        free(text);
    }
    so_ckpt_manifest_free(&m);
    return 0;
}
