/* scaleout/llmc.h: llm.c's GPT-2 model file (train_gpt2.c's
 * gpt2_build_from_checkpoint, train_gpt2.py's write_model), read and written.
 *
 * Layout (little-endian): a header of 256 int32 -- [0] magic 20240326,
 * [1] version (3: FP32 tensors; 5: BF16, as llm.c's GPU trainer writes; read
 * only, widened to FP32), [2] max_seq_len (maxT), [3] vocab_size (V),
 * [4] num_layers (L), [5] num_heads (NH), [6] channels (C),
 * [7] padded_vocab_size (Vp), the rest 0 -- then the 16 parameter tensors
 * back to back in this order, each layer-stacked (one tensor holds all L
 * layers), weights (out, in) as torch.nn.Linear stores them:
 *
 *   wte (Vp, C)        token embedding; rows V..Vp-1 are padding (zeros)
 *   wpe (maxT, C)      position embedding
 *   ln1w, ln1b (L, C)  LayerNorm before attention
 *   qkvw (L, 3C, C), qkvb (L, 3C)         attention's Q, K, V projection
 *   attprojw (L, C, C), attprojb (L, C)   attention's output projection
 *   ln2w, ln2b (L, C)  LayerNorm before the MLP
 *   fcw (L, 4C, C), fcb (L, 4C)           MLP up
 *   fcprojw (L, C, 4C), fcprojb (L, C)    MLP down
 *   lnfw, lnfb (C)     the final LayerNorm
 *
 * The LM head is wte (weight tying). GPT-2 124M: 124,475,904 floats with
 * Vp = 50304 (docs/FORMATS.md). Hugging Face names each tensor per layer
 * (transformer.h.N.attn.c_attn.weight, ...) and stores the four matrices of
 * a block transposed (Conv1D: (in, out)); so_llmc_tensor says which.
 * Errors: 0 or SO_E* with so_errmsg() naming the file. */
#ifndef SCALEOUT_LLMC_H
#define SCALEOUT_LLMC_H
#include <stddef.h>
#include <stdint.h>

#define SO_LLMC_MAGIC 20240326
#define SO_LLMC_VERSION_FP32 3
#define SO_LLMC_VERSION_BF16 5
#define SO_LLMC_HEADER_BYTES 1024

enum {
    SO_LLMC_WTE, SO_LLMC_WPE, SO_LLMC_LN1W, SO_LLMC_LN1B, SO_LLMC_QKVW, SO_LLMC_QKVB, SO_LLMC_ATTPROJW,
    SO_LLMC_ATTPROJB, SO_LLMC_LN2W, SO_LLMC_LN2B, SO_LLMC_FCW, SO_LLMC_FCB, SO_LLMC_FCPROJW, SO_LLMC_FCPROJB,
    SO_LLMC_LNFW, SO_LLMC_LNFB, SO_LLMC_NTENSORS
};

typedef struct {
    int max_seq_len;        /* maxT: the context, rows of wpe */
    int vocab_size;         /* V: real tokens (GPT-2: 50257) */
    int padded_vocab_size;  /* Vp >= V: rows of wte (llm.c pads to a multiple of 128: 50304) */
    int num_layers;         /* L */
    int num_heads;          /* NH; channels % num_heads == 0 */
    int channels;           /* C */
} so_llmc_config;

/* One tensor of the file: where it is in the flat parameter buffer and its
 * shape with the layer dimension first (ndim counts it; lnfw/wte have none). */
typedef struct {
    const char *name;       /* llm.c's: "wte", "qkvw", ... */
    const char *hf_name;    /* Hugging Face GPT2LMHeadModel's, %d = layer: "transformer.h.%d.attn.c_attn.weight" */
    int per_layer;          /* shape[0] is L: one slice per layer */
    int hf_transposed;      /* Hugging Face stores each layer's slice (in, out): a Conv1D weight */
    int ndim;
    int64_t shape[3];
    size_t offset, count;   /* floats into the flat buffer, and how many */
} so_llmc_tensor;

/* The 16 tensors' shapes and offsets in llm.c's order, and the total of
 * floats. SO_EINVAL when a field is absurd (not positive, V > Vp, C not a
 * multiple of NH, beyond 2^24 tokens / 2^20 positions / 2^16 channels /
 * 4096 layers) or the total overflows. */
int so_llmc_layout(const so_llmc_config *c, so_llmc_tensor t[SO_LLMC_NTENSORS], size_t *total);

typedef struct {
    so_llmc_config cfg;
    int version;                          /* of the file read (3 or 5) */
    const float *params;                  /* nparams floats in llm.c's order */
    size_t nparams;
    so_llmc_tensor t[SO_LLMC_NTENSORS];
    void *map;                            /* private: the mapping or buffer params live in */
    size_t map_len;
    int mapped;
} so_llmc_model;

/* Reads a model file: FP32 files are mapped read-only (params points into
 * the mapping, nothing copied: GPT-2 XL is 6 GB), BF16 ones widened into a
 * buffer. SO_EIO when it cannot be opened (regular files only), SO_EFORMAT
 * naming the file for a bad magic or version, absurd fields, or a size
 * that disagrees with the header ("header says N parameters (X bytes) but
 * the file has Y"). Free with so_llmc_free. */
int so_llmc_read(const char *path, so_llmc_model **out);
/* The same checks on a file in memory (the fuzz target); params points into buf. */
int so_llmc_parse(const uint8_t *buf, size_t len, const char *what, so_llmc_model *out);
void so_llmc_free(so_llmc_model *m); /* accepts NULL */
/* Tensor k's slice for layer l (l = 0 for tensors without layers): its first
 * float and count. */
const float *so_llmc_slice(const so_llmc_model *m, int k, int layer, size_t *count);
/* Drops the mapped file's pages before `upto` (a pointer into params) from
 * the resident set: a loader copying the tensors out in file order holds the
 * model plus a tensor, not the model plus the whole file (GPT-2 124M: 0.5 GB
 * of peak RSS). The data stays readable (faulted in from the file again).
 * Nothing for a widened BF16 model. */
void so_llmc_release(const so_llmc_model *m, const float *upto);
/* Writes an FP32 (version 3) file: the header from c, then nparams floats of
 * params in llm.c's order (nparams must equal so_llmc_layout's total). */
int so_llmc_write(const char *path, const so_llmc_config *c, const float *params, size_t nparams);

#endif
