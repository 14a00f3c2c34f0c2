/* `scaleout tokenize TEXT... -o DIR`: text files to llm.c's token shards
 * DIR/NAME_train.bin and DIR/NAME_val.bin, with GPT-2's byte-pair encoder
 * (--encoder/--bpe), one trained here on the training text (--vocab N), or
 * bytes; the vocabulary is written to DIR as encoder.json + vocab.bpe. Every document
 * (a file, or the text between --doc-sep lines) follows <|endoftext|> when
 * the vocabulary has it, as llm.c's dev/data scripts prepare theirs; the
 * last --val-fraction of the text, at a document boundary, is validation. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "scaleout/data.h"
#include "scaleout/err.h"
#include "scaleout/file.h"
#include "scaleout/timer.h"
#include "scaleout/tokenizer.h"

#define SUMMARY                                                                                                  \
    "Tokenizes text files into llm.c's token shards DIR/NAME_train.bin and DIR/NAME_val.bin\n"                  \
    "(usage: scaleout tokenize TEXT... -o DIR [options]). Vocabulary: GPT-2's (--encoder, --bpe),\n"            \
    "a byte-pair encoder trained on the training text (--vocab N), or the 256 bytes (default);\n"            \
    "it is written to DIR/encoder.json and DIR/vocab.bpe (for generate --tokenizer DIR). Each\n"             \
    "document follows <|endoftext|> when the vocabulary has it; the last --val-fraction of the text\n"         \
    "(at a document boundary) is validation."

typedef struct {
    const char *out, *encoder, *bpe, *name, *doc_sep;
    int vocab;
    float val_fraction;
} tok_args;

/* One document: a slice of one input file's text. */
typedef struct {
    const char *text;
    size_t len;
} doc;

typedef struct {
    uint8_t **files;       /* the inputs' bytes */
    int nfiles;
    doc *docs;
    size_t ndocs, cap, bytes;
    size_t first_val;      /* docs[first_val..] are validation */
} corpus;

static void corpus_free(corpus *c)
{
    for (int i = 0; i < c->nfiles; i++)
        free(c->files[i]);
    free(c->files);
    free(c->docs);
}

/* Room for one more document. */
static int reserve_doc(corpus *c)
{
    if (c->ndocs < c->cap)
        return 0;
    size_t cap = c->cap ? 2 * c->cap : 256;
    doc *d = realloc(c->docs, cap * sizeof *d);
    if (!d)
        return so_err(SO_ENOMEM, "out of memory for %zu documents", cap);
    c->docs = d, c->cap = cap;
    return 0;
}

static int add_doc(corpus *c, const char *text, size_t len)
{
    if (!len)
        return 0;
    int rc = reserve_doc(c);
    if (rc)
        return rc;
    c->docs[c->ndocs++] = (doc){text, len};
    c->bytes += len;
    return 0;
}

/* The documents of one file: split at lines (ended by \n) equal to sep. */
static int split_docs(corpus *c, const char *text, size_t len, const char *sep)
{
    if (!sep)
        return add_doc(c, text, len);
    size_t seplen = strlen(sep), start = 0;
    for (size_t i = 0; i <= len;) {
        const char *nl = memchr(text + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - text) : len;
        if (end - i == seplen && memcmp(text + i, sep, seplen) == 0) {
            int rc = add_doc(c, text + start, i - start);
            if (rc)
                return rc;
            start = nl ? end + 1 : len;
        }
        if (!nl)
            break;
        i = end + 1;
    }
    return add_doc(c, text + start, len - start);
}

static int read_inputs(corpus *c, char **paths, int n, const char *sep)
{
    if (!(c->files = calloc((size_t)n, sizeof *c->files)))
        return so_err(SO_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        size_t len;
        int fd, rc = so_file_open_read(paths[i], &fd, NULL); /* so_read_file's open() would wait on a FIFO */
        if (rc)
            return rc;
        close(fd);
        if ((rc = so_read_file(paths[i], &c->files[i], &len)))
            return rc;
        c->nfiles = i + 1;
        if ((rc = split_docs(c, (const char *)c->files[i], len, sep)))
            return rc;
    }
    if (!c->bytes)
        return so_err(SO_EINVAL, "%s%s: no text", paths[0], n > 1 ? " ..." : "");
    return 0;
}

/* Validation is the documents from the first boundary at or after
 * (1 - fraction) of the bytes; with no such boundary the document holding
 * that point is cut at the next line (or character) and its tail becomes
 * the validation document. */
static int split_val(corpus *c, double fraction)
{
    c->first_val = c->ndocs;
    if (fraction <= 0)
        return 0;
    size_t target = (size_t)((1.0 - fraction) * (double)c->bytes), at = 0, k = 0;
    while (k < c->ndocs && at + c->docs[k].len <= target)
        at += c->docs[k++].len;
    if (k < c->ndocs && at < target) { /* cut docs[k] inside */
        doc d = c->docs[k];
        size_t cut = target - at;
        const char *nl = memchr(d.text + cut, '\n', d.len - cut);
        cut = nl ? (size_t)(nl - d.text) + 1 : cut;
        while (cut < d.len && ((uint8_t)d.text[cut] & 0xc0) == 0x80) /* not inside a UTF-8 character */
            cut++;
        if (cut < d.len) {
            int rc = reserve_doc(c);
            if (rc)
                return rc;
            memmove(&c->docs[k + 2], &c->docs[k + 1], (c->ndocs - k - 1) * sizeof *c->docs);
            c->docs[k] = (doc){d.text, cut};
            c->docs[k + 1] = (doc){d.text + cut, d.len - cut};
            c->ndocs++;
        }
        k++;
    }
    c->first_val = k;
    if (k == 0 || k == c->ndocs)
        return so_err(SO_EINVAL, "--val-fraction %g leaves %s split empty", fraction, k == 0 ? "the training" : "the validation");
    return 0;
}

/* ---- the vocabulary --------------------------------------------------------------- */

/* The training documents in one buffer (the BPE learns from them only). */
static char *train_text(const corpus *c, size_t *len)
{
    size_t n = 0;
    for (size_t k = 0; k < c->first_val; k++)
        n += c->docs[k].len;
    char *s = malloc(n + 1);
    if (!s)
        return NULL;
    *len = 0;
    for (size_t k = 0; k < c->first_val; k++) {
        memcpy(s + *len, c->docs[k].text, c->docs[k].len);
        *len += c->docs[k].len;
    }
    return s;
}

static int make_tokenizer(const tok_args *a, const corpus *c, so_tokenizer **t)
{
    if (a->encoder)
        return so_tokenizer_load_gpt2(a->encoder, a->bpe, t);
    if (!a->vocab)
        return so_tokenizer_bytes(t);
    size_t len;
    char *text = train_text(c, &len);
    if (!text)
        return so_err(SO_ENOMEM, "out of memory");
    int rc = so_tokenizer_train(text, len, a->vocab, t);
    free(text);
    return rc;
}

/* ---- encoding and writing ------------------------------------------------------------ */

typedef struct {
    uint32_t *ids;
    size_t n, cap;
} id_list;

/* Documents [from, to) as one token stream, each after <|endoftext|> when the vocabulary has one. */
static int encode_docs(const so_tokenizer *t, const corpus *c, size_t from, size_t to, id_list *out)
{
    int eot = so_tokenizer_eot(t), rc = 0;
    for (size_t k = from; k < to && !rc; k++) {
        if (eot >= 0) {
            uint32_t e = (uint32_t)eot;
            if (out->n == out->cap) { /* one slot; encode grows the rest */
                size_t cap = out->cap ? 2 * out->cap : 1024;
                uint32_t *v = realloc(out->ids, cap * sizeof *v);
                if (!v)
                    return so_err(SO_ENOMEM, "out of memory for %zu tokens", cap);
                out->ids = v, out->cap = cap;
            }
            out->ids[out->n++] = e;
        }
        rc = so_tokenizer_encode(t, c->docs[k].text, c->docs[k].len, &out->ids, &out->n, &out->cap);
    }
    return rc;
}

static int write_split(const char *dir, const char *name, const char *split, const id_list *ids, int width,
                       char *path, size_t size)
{
    if ((size_t)snprintf(path, size, "%s/%s_%s.bin", dir, name, split) >= size)
        return so_err(SO_EINVAL, "-o: path too long");
    return so_tokens_write(path, ids->ids, ids->n, width);
}

static int make_dir(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) == 0)
        return S_ISDIR(st.st_mode) ? 0 : so_err(SO_EIO, "%s: not a directory", dir);
    if (mkdir(dir, 0777) != 0)
        return so_err(SO_EIO, "%s: %s", dir, strerror(errno));
    return 0;
}

/* NAME from the first input: its file name without directory and extension. */
static void default_name(const char *path, char *name, size_t size)
{
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    snprintf(name, size, "%s", *base ? base : "text");
    char *dot = strrchr(name, '.');
    if (dot && dot != name)
        *dot = 0;
}

/* The vocabulary beside the shards, whichever it is, so `scaleout generate
 * --tokenizer DIR` decodes what a model trained on them draws. */
static int save_vocab(const tok_args *a, const so_tokenizer *t)
{
    char enc[PATH_MAX], bpe[PATH_MAX];
    if ((size_t)snprintf(enc, sizeof enc, "%s/encoder.json", a->out) >= sizeof enc ||
        (size_t)snprintf(bpe, sizeof bpe, "%s/vocab.bpe", a->out) >= sizeof bpe)
        return so_err(SO_EINVAL, "-o: path too long");
    return so_tokenizer_save_gpt2(t, enc, bpe);
}

/* Seconds spent reading, making the vocabulary (loading or training) and encoding. */
typedef struct {
    double read, vocab, encode;
} phases;

static void report(const tok_args *a, const corpus *c, const so_tokenizer *t, const id_list *tr, const id_list *va,
                   const char *name, const phases *ph)
{
    printf("tokenize: %d file%s, %zu document%s, %zu bytes: read %.3f s, vocabulary %.3f s, encoded in %.3f s "
           "(%.1f MB/s)\n",
           c->nfiles, c->nfiles == 1 ? "" : "s", c->ndocs, c->ndocs == 1 ? "" : "s", c->bytes, ph->read, ph->vocab,
           ph->encode, ph->encode > 0 ? (double)c->bytes / ph->encode / 1e6 : 0);
    printf("vocabulary: %d tokens (%s%s%s), <|endoftext|> %s\n", so_tokenizer_vocab(t), so_tokenizer_kind(t),
           a->vocab ? ", trained" : "", a->encoder ? ", GPT-2 files" : "",
           so_tokenizer_eot(t) >= 0 ? "before every document" : "absent (documents are concatenated)");
    printf("vocabulary written to %s/encoder.json and %s/vocab.bpe (generate --tokenizer %s)\n", a->out, a->out,
           a->out);
    printf("train: %zu tokens -> %s/%s_train.bin\n", tr->n, a->out, name);
    if (va->n)
        printf("val:   %zu tokens -> %s/%s_val.bin (the last %g of the text)\n", va->n, a->out, name,
               a->val_fraction);
}

static int run(const tok_args *a, char **inputs, int nin)
{
    corpus c = {0};
    so_tokenizer *t = NULL;
    id_list tr = {0}, va = {0};
    char name[256], path[PATH_MAX];
    default_name(inputs[0], name, sizeof name);
    phases ph;
    double t0 = so_now();
    int rc = read_inputs(&c, inputs, nin, a->doc_sep);
    if (!rc)
        rc = split_val(&c, a->val_fraction);
    double t1 = so_now();
    if (!rc)
        rc = make_tokenizer(a, &c, &t);
    double t2 = so_now();
    if (!rc)
        rc = encode_docs(t, &c, 0, c.first_val, &tr);
    if (!rc)
        rc = encode_docs(t, &c, c.first_val, c.ndocs, &va);
    ph = (phases){t1 - t0, t2 - t1, so_now() - t2};
    int width = t && so_tokenizer_vocab(t) > 65536 ? 4 : 2;
    if (!rc)
        rc = make_dir(a->out);
    if (!rc)
        rc = write_split(a->out, a->name ? a->name : name, "train", &tr, width, path, sizeof path);
    if (!rc && va.n)
        rc = write_split(a->out, a->name ? a->name : name, "val", &va, width, path, sizeof path);
    if (!rc)
        rc = save_vocab(a, t);
    if (!rc)
        report(a, &c, t, &tr, &va, a->name ? a->name : name, &ph);
    else
        cli_error("tokenize", cli_exit_code(rc), "%s", so_errmsg());
    free(tr.ids);
    free(va.ids);
    so_tokenizer_destroy(t);
    corpus_free(&c);
    return rc ? cli_exit_code(rc) : CLI_OK;
}

static int check_args(const tok_args *a, int nin)
{
    if (nin == 0)
        return cli_error("tokenize", CLI_USAGE, "no text given (scaleout tokenize TEXT... -o DIR)");
    if (!a->out)
        return cli_error("tokenize", CLI_USAGE, "say where the shards go: -o DIR");
    if (!a->encoder != !a->bpe)
        return cli_error("tokenize", CLI_USAGE, "--encoder and --bpe come together (GPT-2's encoder.json and vocab.bpe)");
    if (a->encoder && a->vocab)
        return cli_error("tokenize", CLI_USAGE, "--vocab trains a vocabulary: not with --encoder/--bpe");
    if (a->vocab && a->vocab < 257)
        return cli_error("tokenize", CLI_USAGE, "--vocab %d: at least 257 (256 bytes and <|endoftext|>)", a->vocab);
    if (a->name && (strchr(a->name, '/') || !*a->name))
        return cli_error("tokenize", CLI_USAGE, "--name '%s' is not a file name", a->name);
    return 0;
}

int cmd_tokenize(int argc, char **argv)
{
    tok_args a = {.val_fraction = 0.1f};
    const cli_opt opts[] = {
        {"output", OPT_STR, &a.out, "DIR", "directory for NAME_train.bin, NAME_val.bin (-o)", 0, -1, NULL},
        {"name", OPT_STR, &a.name, "NAME", "shard name (default: the first file's name without extension)", 0, -1, NULL},
        {"encoder", OPT_STR, &a.encoder, "FILE", "GPT-2's encoder.json (with --bpe)", 0, -1, NULL},
        {"bpe", OPT_STR, &a.bpe, "FILE", "GPT-2's vocab.bpe (with --encoder)", 0, -1, NULL},
        {"vocab", OPT_INT, &a.vocab, "N", "train a byte-pair encoder of N tokens on the training text (0: bytes)", 0, 1 << 24, NULL},
        {"val-fraction", OPT_FLOAT, &a.val_fraction, "F", "the last F of the text is validation (0: none)", 0, 0.9, NULL},
        {"doc-sep", OPT_STR, &a.doc_sep, "LINE", "lines equal to LINE separate documents (fortunes: %)", 0, -1, NULL},
        {NULL, 0, NULL, NULL, NULL, 0, 0, NULL}};
    static const char *const aliases[][2] = {{"-o", "--output"}, {NULL, NULL}};
    char **inputs = malloc((size_t)(argc > 0 ? argc : 1) * sizeof *inputs);
    if (!inputs)
        return cli_error("tokenize", CLI_FAIL, "out of memory");
    int nin = 0, nopt = cli_split_args(argc, argv, opts, inputs, &nin);
    cli_short_aliases(nopt, argv, aliases);
    int rc = cli_parse("tokenize", SUMMARY, opts, nopt, argv);
    if (!rc)
        rc = check_args(&a, nin);
    if (!rc)
        rc = run(&a, inputs, nin);
    free(inputs);
    return rc == CLI_HELP ? CLI_OK : rc;
}
