/* libFuzzer target for the checkpoint manifest parser: any bytes either fail
 * with SO_EFORMAT or give a manifest whose shard table tiles the state, and
 * formatting that manifest again parses to the same table.
 * The manifest's last line is the CRC32C of the rest, so nearly every mutated
 * input used to fail that check and the parser behind it was barely reached
 * (83 edges). The first byte picks the mode: odd, the rest is a body and the
 * harness appends its correct "end" line, so mutations reach the key, shard
 * and layout checks; even, the rest goes to the parser as it is (the
 * checksum line itself under test). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/ckpt.h"
#include "scaleout/err.h"

/* The input as the parser gets it (malloc'ed; *len set). */
static char *manifest_text(const uint8_t *data, size_t size, size_t *len)
{
    const uint8_t *body = data + 1;
    size_t n = size - 1, extra = (data[0] & 1) ? 13 : 0; /* "end XXXXXXXX\n" */
    char *text = malloc(n + extra + 1);
    if (!text)
        return NULL;
    memcpy(text, body, n);
    if (extra)
        snprintf(text + n, extra + 1, "end %08x\n", (unsigned)so_crc32c(0, body, n));
    *len = n + extra;
    return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t len;
    char *in = manifest_text(data, size, &len);
    so_ckpt_manifest m, again;
    int rc = in ? so_ckpt_manifest_parse(in, len, "fuzz", &m) : SO_EFORMAT;
    free(in);
    if (rc == SO_ENOMEM)
        return 0;
    if (rc != 0) {
        if (rc != SO_EFORMAT)
            abort();
        return 0;
    }
    uint64_t rep = 0;
    int ranks = 0;
    for (int i = 0; i < m.nshards; i++) {
        rep += m.shards[i].rep_len;
        ranks += m.shards[i].rank_count;
    }
    if (rep != m.rep_bytes || ranks != m.world)
        abort();
    char *text;
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
