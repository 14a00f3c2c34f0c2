/* llm.c's model file, read and written (llmc_format.h). Sizes in the header
 * are checked before any allocation: the body must be exactly the floats
 * those sizes imply, so a truncated or padded file is an error, not a crash. */
#include "models/llmc_format.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"

#define LLMC_MAGIC 20240326
#define LLMC_VERSION 3
#define LLMC_HEADER 256

/* Floats llm.c's fill_in_parameter_sizes gives for a configuration. */
static size_t llmc_count(const so_gpt2_config *c)
{
    size_t C = (size_t)c->channels, L = (size_t)c->layers;
    return (size_t)c->padded_vocab * C + (size_t)c->context * C + L * (12 * C * C + 13 * C) + 2 * C;
}

int llmc_model_read(const char *path, so_gpt2_config *c, float **params, size_t *n)
{
    *params = NULL;
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return so_err(SO_EIO, "cannot open llm.c model file '%s'", path);
    int32_t h[LLMC_HEADER];
    int rc = fread(h, sizeof h[0], LLMC_HEADER, f) == LLMC_HEADER ? 0
             : so_err(SO_EFORMAT, "%s: shorter than llm.c's 1024-byte header", path);
    if (!rc && h[0] != LLMC_MAGIC)
        rc = so_err(SO_EFORMAT, "%s: magic %d is not llm.c's model file (%d)", path, (int)h[0], LLMC_MAGIC);
    if (!rc && h[1] != LLMC_VERSION)
        rc = so_err(SO_EFORMAT, "%s: version %d (only 3, FP32 with a padded vocabulary, is read)", path, (int)h[1]);
    for (int k = 2; !rc && k < 8; k++)
        if (h[k] < 1 || h[k] > (1 << 24))
            rc = so_err(SO_EFORMAT, "%s: header field %d is %d, not a size", path, k, (int)h[k]);
    if (!rc) {
        *c = (so_gpt2_config){.context = h[2], .vocab = h[3], .layers = h[4], .heads = h[5], .channels = h[6],
                              .padded_vocab = h[7]};
        if (c->padded_vocab < c->vocab || c->channels % c->heads || c->layers > 1024 || c->channels > 65536)
            rc = so_err(SO_EFORMAT, "%s: header sizes V %d, Vp %d, C %d, NH %d, L %d do not form a GPT-2", path,
                        c->vocab, c->padded_vocab, c->channels, c->heads, c->layers);
    }
    long end = -1;
    if (!rc && (fseek(f, 0, SEEK_END) != 0 || (end = ftell(f)) < 0 || fseek(f, LLMC_HEADER * 4, SEEK_SET) != 0))
        rc = so_err(SO_EIO, "%s: cannot seek", path);
    size_t want = rc ? 0 : llmc_count(c);
    if (!rc && (size_t)end - LLMC_HEADER * 4 != want * sizeof(float))
        rc = so_err(SO_EFORMAT, "%s: %ld bytes of parameters, the header's sizes need %zu", path,
                    end - LLMC_HEADER * 4, want * sizeof(float));
    if (!rc && !(*params = malloc(want * sizeof(float))))
        rc = so_err(SO_ENOMEM, "%s: out of memory for %zu parameters", path, want);
    if (!rc && fread(*params, sizeof(float), want, f) != want)
        rc = so_err(SO_EIO, "%s: read error", path);
    fclose(f);
    if (rc) {
        free(*params);
        *params = NULL;
        return rc;
    }
    *n = want;
    return 0;
}

int llmc_model_write(const char *path, const so_gpt2_config *c, const float *params, size_t n)
{
    if (n != llmc_count(c))
        return so_err(SO_EINVAL, "%s: %zu parameters for a configuration of %zu", path, n, llmc_count(c));
    int32_t h[LLMC_HEADER] = {LLMC_MAGIC, LLMC_VERSION, c->context, c->vocab, c->layers, c->heads, c->channels,
                              c->padded_vocab};
    FILE *f = fopen(path, "wb");
    if (!f)
        return so_err(SO_EIO, "cannot create '%s'", path);
    int ok = fwrite(h, sizeof h[0], LLMC_HEADER, f) == LLMC_HEADER && fwrite(params, sizeof *params, n, f) == n;
    if (fclose(f) != 0 || !ok)
        return so_err(SO_EIO, "error writing '%s'", path);
    return 0;
}
