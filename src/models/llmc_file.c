/* llm.c's GPT-2 model file (scaleout/llmc.h): the tensor table computed
 * from the header, reading (FP32 mapped in place, BF16 widened) with every
 * field and the file's size checked before a pointer is formed, and writing
 * an FP32 file field by field. Pure I/O: mapping these tensors onto a
 * model's parameters is the GPT-2 builder's business. */
#include "scaleout/llmc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "scaleout/err.h"
#include "scaleout/file.h"

#define MAX_VOCAB (1 << 24)
#define MAX_POSITIONS (1 << 20)
#define MAX_CHANNELS (1 << 16)
#define MAX_LAYERS 4096

/* name, Hugging Face name, per layer, transposed in HF, and the shape in
 * units: 'V' Vp, 'T' maxT, 'C' C, '3' 3C, '4' 4C (the layer dim implied). */
static const struct {
    const char *name, *hf;
    int per_layer, hf_transposed;
    const char *dims;
} TENSORS[SO_LLMC_NTENSORS] = {
    {"wte", "transformer.wte.weight", 0, 0, "VC"},
    {"wpe", "transformer.wpe.weight", 0, 0, "TC"},
    {"ln1w", "transformer.h.%d.ln_1.weight", 1, 0, "C"},
    {"ln1b", "transformer.h.%d.ln_1.bias", 1, 0, "C"},
    {"qkvw", "transformer.h.%d.attn.c_attn.weight", 1, 1, "3C"},
    {"qkvb", "transformer.h.%d.attn.c_attn.bias", 1, 0, "3"},
    {"attprojw", "transformer.h.%d.attn.c_proj.weight", 1, 1, "CC"},
    {"attprojb", "transformer.h.%d.attn.c_proj.bias", 1, 0, "C"},
    {"ln2w", "transformer.h.%d.ln_2.weight", 1, 0, "C"},
    {"ln2b", "transformer.h.%d.ln_2.bias", 1, 0, "C"},
    {"fcw", "transformer.h.%d.mlp.c_fc.weight", 1, 1, "4C"},
    {"fcb", "transformer.h.%d.mlp.c_fc.bias", 1, 0, "4"},
    {"fcprojw", "transformer.h.%d.mlp.c_proj.weight", 1, 1, "C4"},
    {"fcprojb", "transformer.h.%d.mlp.c_proj.bias", 1, 0, "C"},
    {"lnfw", "transformer.ln_f.weight", 0, 0, "C"},
    {"lnfb", "transformer.ln_f.bias", 0, 0, "C"},
};

static int check_config(const so_llmc_config *c)
{
    const struct {
        const char *name;
        int v, max;
    } f[] = {{"max_seq_len", c->max_seq_len, MAX_POSITIONS}, {"vocab_size", c->vocab_size, MAX_VOCAB},
             {"padded_vocab_size", c->padded_vocab_size, MAX_VOCAB}, {"num_layers", c->num_layers, MAX_LAYERS},
             {"num_heads", c->num_heads, MAX_CHANNELS}, {"channels", c->channels, MAX_CHANNELS}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].v < 1 || f[i].v > f[i].max)
            return so_err(SO_EINVAL, "%s %d is not in 1..%d", f[i].name, f[i].v, f[i].max);
    if (c->vocab_size > c->padded_vocab_size)
        return so_err(SO_EINVAL, "vocab_size %d is above padded_vocab_size %d", c->vocab_size, c->padded_vocab_size);
    if (c->channels % c->num_heads)
        return so_err(SO_EINVAL, "channels %d are not a multiple of num_heads %d", c->channels, c->num_heads);
    return 0;
}

static int64_t unit(const so_llmc_config *c, char d)
{
    switch (d) {
    case 'V': return c->padded_vocab_size;
    case 'T': return c->max_seq_len;
    case '3': return 3 * (int64_t)c->channels;
    case '4': return 4 * (int64_t)c->channels;
    default: return c->channels;
    }
}

int so_llmc_layout(const so_llmc_config *c, so_llmc_tensor t[SO_LLMC_NTENSORS], size_t *total)
{
    int rc = check_config(c);
    if (rc)
        return rc;
    size_t off = 0; /* every factor is below 2^26 and the layers 2^12: products stay far below 2^63 */
    for (int k = 0; k < SO_LLMC_NTENSORS; k++) {
        so_llmc_tensor *x = &t[k];
        *x = (so_llmc_tensor){TENSORS[k].name, TENSORS[k].hf, TENSORS[k].per_layer, TENSORS[k].hf_transposed, 0,
                              {0, 0, 0}, off, 1};
        if (x->per_layer)
            x->shape[x->ndim++] = c->num_layers;
        for (const char *d = TENSORS[k].dims; *d; d++)
            x->shape[x->ndim++] = unit(c, *d);
        for (int i = 0; i < x->ndim; i++)
            x->count *= (size_t)x->shape[i];
        off += x->count;
    }
    *total = off;
    return 0;
}

/* ---- reading ------------------------------------------------------------------ */

static int32_t le32(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

/* Header fields and the tensor table; the body's size checked against them. */
static int parse_header(const uint8_t *buf, size_t len, const char *what, so_llmc_model *m)
{
    if (len < SO_LLMC_HEADER_BYTES)
        return so_err(SO_EFORMAT, "%s: %zu bytes is too short for llm.c's model header (%d bytes)", what, len,
                      SO_LLMC_HEADER_BYTES);
    int32_t magic = le32(buf), version = le32(buf + 4);
    if (magic != SO_LLMC_MAGIC)
        return so_err(SO_EFORMAT, "%s: bad magic %d, expected %d (llm.c GPT-2 model)", what, magic, SO_LLMC_MAGIC);
    if (version != SO_LLMC_VERSION_FP32 && version != SO_LLMC_VERSION_BF16)
        return so_err(SO_EFORMAT, "%s: version %d, expected %d (FP32) or %d (BF16)", what, version,
                      SO_LLMC_VERSION_FP32, SO_LLMC_VERSION_BF16);
    m->version = version;
    m->cfg = (so_llmc_config){le32(buf + 8), le32(buf + 12), le32(buf + 28), le32(buf + 16), le32(buf + 20),
                              le32(buf + 24)};
    if (so_llmc_layout(&m->cfg, m->t, &m->nparams))
        return so_err(SO_EFORMAT, "%s: %s", what, so_errmsg());
    size_t width = version == SO_LLMC_VERSION_FP32 ? 4 : 2, have = len - SO_LLMC_HEADER_BYTES;
    if (have / width != m->nparams || have % width)
        return so_err(SO_EFORMAT, "%s: header says %zu parameters (%zu bytes) but the file has %zu bytes after it%s",
                      what, m->nparams, m->nparams * width, have, have < m->nparams * width ? " (truncated)" : "");
    return 0;
}

/* BF16 to FP32: the upper half of the float's bits. */
static void widen_bf16(const uint8_t *src, float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t bits = ((uint32_t)src[2 * i] | (uint32_t)src[2 * i + 1] << 8) << 16;
        memcpy(&dst[i], &bits, 4);
    }
}

int so_llmc_parse(const uint8_t *buf, size_t len, const char *what, so_llmc_model *out)
{
    memset(out, 0, sizeof *out);
    int rc = parse_header(buf, len, what, out);
    if (rc || out->version != SO_LLMC_VERSION_FP32)
        return rc ? rc : so_err(SO_EUNSUP, "%s: a BF16 file in memory: use so_llmc_read", what);
    out->params = (const float *)(const void *)(buf + SO_LLMC_HEADER_BYTES);
    return 0;
}

int so_llmc_read(const char *path, so_llmc_model **out)
{
    *out = NULL;
    int fd;
    uint64_t size;
    int rc = so_file_open_read(path, &fd, &size);
    if (rc)
        return rc;
    so_llmc_model *m = calloc(1, sizeof *m);
    void *map = size ? mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    close(fd);
    if (!m || map == MAP_FAILED) {
        rc = !m ? so_err(SO_ENOMEM, "%s: out of memory", path)
                : size ? so_err(SO_EIO, "%s: cannot map it: %s", path, strerror(errno))
                       : so_err(SO_EFORMAT, "%s: empty file", path);
        if (map != MAP_FAILED)
            munmap(map, (size_t)size);
        free(m);
        return rc;
    }
    m->map = map, m->map_len = (size_t)size, m->mapped = 1;
    if ((rc = parse_header(map, (size_t)size, path, m)))
        goto out;
    if (m->version == SO_LLMC_VERSION_FP32) {
        m->params = (const float *)((const uint8_t *)map + SO_LLMC_HEADER_BYTES);
        madvise(map, (size_t)size, MADV_SEQUENTIAL); /* read once, front to back, into the model */
        goto out;
    }
    float *wide = malloc(m->nparams * sizeof *wide);
    if (!wide) {
        rc = so_err(SO_ENOMEM, "%s: out of memory widening %zu BF16 parameters", path, m->nparams);
        goto out;
    }
    widen_bf16((const uint8_t *)map + SO_LLMC_HEADER_BYTES, wide, m->nparams);
    munmap(map, (size_t)size);
    m->map = wide, m->map_len = 0, m->mapped = 0;
    m->params = wide;
out:
    if (rc)
        so_llmc_free(m);
    else
        *out = m;
    return rc;
}

void so_llmc_free(so_llmc_model *m)
{
    if (!m)
        return;
    if (m->mapped)
        munmap(m->map, m->map_len);
    else
        free(m->map);
    free(m);
}

void so_llmc_release(const so_llmc_model *m, const float *upto)
{
    if (!m || !m->mapped)
        return;
    uintptr_t start = (uintptr_t)m->map, page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t end = (uintptr_t)upto & ~(page - 1);
    if (end > start + m->map_len)
        end = (start + m->map_len) & ~(page - 1);
    if (end > start) /* a private read-only file mapping: a later read faults the page in again */
        madvise(m->map, end - start, MADV_DONTNEED);
}

const float *so_llmc_slice(const so_llmc_model *m, int k, int layer, size_t *count)
{
    const so_llmc_tensor *t = &m->t[k];
    size_t per = t->per_layer ? t->count / (size_t)m->cfg.num_layers : t->count;
    *count = per;
    return m->params + t->offset + (t->per_layer ? (size_t)layer * per : 0);
}

/* ---- writing ------------------------------------------------------------------ */

static int write_all(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len > (1u << 30) ? 1u << 30 : len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int so_llmc_write(const char *path, const so_llmc_config *c, const float *params, size_t nparams)
{
    so_llmc_tensor t[SO_LLMC_NTENSORS];
    size_t total;
    if (so_llmc_layout(c, t, &total))
        return so_err(SO_EINVAL, "%s: %s", path, so_errmsg());
    if (total != nparams)
        return so_err(SO_EINVAL, "%s: %zu parameters given, the configuration has %zu", path, nparams, total);
    int32_t hdr[SO_LLMC_HEADER_BYTES / 4] = {SO_LLMC_MAGIC, SO_LLMC_VERSION_FP32, c->max_seq_len, c->vocab_size,
                                             c->num_layers, c->num_heads, c->channels, c->padded_vocab_size};
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return so_err(SO_EIO, "%s: %s", path, strerror(errno));
    int bad = write_all(fd, hdr, sizeof hdr) || write_all(fd, params, nparams * sizeof *params);
    int err = errno;
    if (close(fd) != 0 && !bad)
        bad = 1, err = errno;
    if (bad) {
        unlink(path);
        return so_err(SO_EIO, "%s: write failed: %s", path, strerror(err));
    }
    return 0;
}
