/* `scaleout generate`: text from a GPT-2, a scaleout checkpoint (--ckpt) or
 * llm.c's model file (--init-from), through so_gpt2_generate's key/value
 * cache: the prompt is fed once, then each new token costs one position's
 * forward, where llm.c's train_gpt2.c recomputes the whole sequence. The
 * vocabulary is `scaleout tokenize`'s (--tokenizer DIR) or GPT-2's files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "scaleout/ckpt.h"
#include "scaleout/err.h"
#include "scaleout/gpt2.h"
#include "scaleout/llmc.h"
#include "scaleout/model.h"
#include "scaleout/threads.h"
#include "scaleout/timer.h"
#include "scaleout/tokenizer.h"
#include "scaleout/zoo.h"

#define SUMMARY                                                                                                  \
    "Generates text with a GPT-2 (usage: scaleout generate --ckpt DIR | --init-from FILE [--model SPEC]\n"       \
    "--tokenizer DIR | --encoder FILE --bpe FILE [--prompt TEXT] [options]). The prompt follows\n"              \
    "<|endoftext|> when the vocabulary has it; generation stops at the next one, after --tokens\n"             \
    "tokens or at the context's end. Prints the prompt and the new text on stdout, the rate on stderr."

typedef struct {
    const char *ckpt, *init_from, *model, *tokenizer, *encoder, *bpe, *prompt, *backend;
    int tokens, top_k, threads;
    float temperature;
    long seed;
} gen_args;

/* ---- the model ------------------------------------------------------------------- */

/* The GPT-2 spec an llm.c model file describes (its header). */
static int llmc_spec(const char *path, char *spec, size_t len)
{
    so_llmc_model *f = NULL;
    int rc = so_llmc_read(path, &f);
    if (rc)
        return rc;
    so_gpt2_config c = {.layers = f->cfg.num_layers, .heads = f->cfg.num_heads, .channels = f->cfg.channels,
                        .context = f->cfg.max_seq_len, .vocab = f->cfg.vocab_size,
                        .padded_vocab = f->cfg.padded_vocab_size};
    so_gpt2_spec(&c, spec, len);
    so_llmc_free(f);
    return 0;
}

/* 1 when the file starts with llm.c's model-file magic. */
static int has_llmc_magic(const char *path)
{
    unsigned char b[4] = {0};
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(b, 1, 4, f) : 0;
    if (f)
        fclose(f);
    return got == 4 && (b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24) == SO_LLMC_MAGIC;
}

/* --init-from: llm.c's model file (its header gives the spec unless --model
 * does) or safetensors (--model needed), into a decoding model. */
static int model_from_file(const gen_args *a, so_model **m)
{
    struct stat st;
    char spec[160];
    if (stat(a->init_from, &st) != 0 || !S_ISREG(st.st_mode))
        return cli_error("generate", CLI_USAGE, "--init-from %s: not a regular file", a->init_from);
    int llmc = has_llmc_magic(a->init_from), rc = 0;
    if (!llmc && !a->model)
        return cli_error("generate", CLI_USAGE, "--init-from %s: a safetensors file needs --model SPEC", a->init_from);
    if (a->model)
        snprintf(spec, sizeof spec, "%s", a->model);
    else if ((rc = llmc_spec(a->init_from, spec, sizeof spec)))
        return cli_error("generate", cli_exit_code(rc), "--init-from: %s", so_errmsg());
    so_gpt2_config c;
    if ((rc = so_gpt2_parse(spec, &c)) != 1)
        return cli_error("generate", CLI_USAGE, "--model %s: %s", spec,
                         rc < 0 ? so_errmsg() : "not a GPT-2 (generate needs a token model)");
    so_graph *g = NULL;
    if ((rc = so_zoo_build(spec, 1, 1, 1, 0, &g)) || (rc = so_model_create(g, a->backend, 1, 0, m)))
        return cli_error("generate", cli_exit_code(rc), "--model %s: %s", spec, so_errmsg());
    rc = llmc ? so_gpt2_load_llmc(*m, a->init_from, 0) : so_ckpt_safetensors_load(a->init_from, *m);
    if (rc)
        return cli_error("generate", cli_exit_code(rc), "--init-from: %s", so_errmsg());
    return CLI_OK;
}

/* The model from --ckpt or --init-from, built for one token per step. */
static int load_model(const gen_args *a, so_model **m)
{
    *m = NULL;
    if (a->init_from)
        return model_from_file(a, m);
    cli_ckpt ck;
    int rc = cli_ckpt_load("generate", a->ckpt, a->backend, 1, &ck);
    if (rc)
        return rc;
    so_gpt2_config c;
    if (so_gpt2_parse(ck.name, &c) != 1) {
        cli_ckpt_free(&ck);
        return cli_error("generate", CLI_USAGE, "--ckpt %s: model '%s' is not a GPT-2", a->ckpt, ck.name);
    }
    *m = ck.model;
    return CLI_OK;
}

/* ---- the vocabulary ------------------------------------------------------------ */

/* --tokenizer DIR (tokenize's encoder.json + vocab.bpe) or FILE (llm.c's
 * gpt2_tokenizer.bin: decodes only), or --encoder + --bpe. */
static int load_tokenizer(const gen_args *a, so_tokenizer **t)
{
    char enc[4200], bpe[4200];
    struct stat st;
    int rc;
    if (a->encoder) {
        rc = so_tokenizer_load_gpt2(a->encoder, a->bpe, t);
    } else if (stat(a->tokenizer, &st) == 0 && S_ISREG(st.st_mode)) {
        rc = so_tokenizer_load_llmc(a->tokenizer, t);
    } else {
        snprintf(enc, sizeof enc, "%s/encoder.json", a->tokenizer);
        snprintf(bpe, sizeof bpe, "%s/vocab.bpe", a->tokenizer);
        if (stat(enc, &st) != 0)
            return cli_error("generate", CLI_USAGE, "--tokenizer %s: no encoder.json there (the directory `scaleout "
                             "tokenize -o DIR` wrote)", a->tokenizer);
        rc = so_tokenizer_load_gpt2(enc, bpe, t);
    }
    return rc ? cli_error("generate", cli_exit_code(rc), "%s", so_errmsg()) : CLI_OK;
}

/* The prompt's ids after <|endoftext|> (when the vocabulary has it, as
 * tokenize puts it before every document), each below the model's V. */
static int encode_prompt(const gen_args *a, const so_tokenizer *t, int V, int32_t **ids, int *n)
{
    uint32_t *u = NULL;
    size_t nu = 0, cap = 0;
    int eot = so_tokenizer_eot(t), rc = 0;
    if (eot >= 0) {
        if (!(u = malloc(16 * sizeof *u)))
            return cli_error("generate", CLI_FAIL, "out of memory");
        cap = 16;
        u[nu++] = (uint32_t)eot;
    }
    if (a->prompt && *a->prompt)
        rc = so_tokenizer_encode(t, a->prompt, strlen(a->prompt), &u, &nu, &cap);
    if (rc)
        rc = cli_error("generate", cli_exit_code(rc), "--prompt: %s", so_errmsg());
    else if (!nu)
        rc = cli_error("generate", CLI_USAGE, "--prompt: empty, and the vocabulary has no <|endoftext|> to start from");
    for (size_t i = 0; !rc && i < nu; i++)
        if (u[i] >= (uint32_t)V)
            rc = cli_error("generate", CLI_USAGE, "--prompt: token %u is outside the model's vocabulary of %d (not "
                           "the tokenizer of its training data?)", u[i], V);
    if (rc) {
        free(u);
        return rc;
    }
    *ids = (int32_t *)u; /* the same width; ids are below 2^24 */
    *n = (int)nu;
    return CLI_OK;
}

/* ---- generating ----------------------------------------------------------------- */

/* Prints each new token as it comes; stops at <|endoftext|>. */
typedef struct {
    const so_tokenizer *t;
    int eot;
    int drawn;      /* new tokens printed */
    int bad_id;     /* a token the vocabulary cannot decode (-1: none) */
} printer;

static int print_token(void *arg, int32_t id)
{
    printer *p = arg;
    size_t len;
    if (id == p->eot)
        return 1;
    const uint8_t *b = so_tokenizer_token(p->t, (uint32_t)id, &len);
    if (!b) {
        p->bad_id = id;
        return 1;
    }
    fwrite(b, 1, len, stdout);
    fflush(stdout);
    p->drawn++;
    return 0;
}

static int generate(const gen_args *a, so_model *m, const so_tokenizer *t, const int32_t *prompt, int n)
{
    int32_t *out = malloc(((size_t)n + (size_t)a->tokens) * sizeof *out);
    if (!out)
        return cli_error("generate", CLI_FAIL, "out of memory");
    printer p = {t, so_tokenizer_eot(t), 0, -1};
    so_gpt2_sampling c = {a->tokens, a->temperature, a->top_k, (uint64_t)a->seed, print_token, &p};
    if (a->prompt)
        fputs(a->prompt, stdout);
    fflush(stdout);
    int nout = 0;
    double t0 = so_now();
    int rc = so_gpt2_generate(m, prompt, n, &c, out, &nout);
    double dt = so_now() - t0;
    printf("\n");
    free(out);
    if (rc)
        return cli_error("generate", cli_exit_code(rc), "%s", so_errmsg());
    if (p.bad_id >= 0)
        return cli_error("generate", CLI_USAGE, "the model drew token %d, which the vocabulary (%d tokens) does not "
                         "have: not the tokenizer of its training data", p.bad_id, so_tokenizer_vocab(t));
    fprintf(stderr, "generate: %d prompt tokens, %d new in %.2f s (%.1f tokens/s, key/value cache, %d thread%s)\n", n,
            p.drawn, dt, dt > 0 ? (n + p.drawn) / dt : 0, so_threads_get(), so_threads_get() == 1 ? "" : "s");
    return CLI_OK;
}

static int check_args(const gen_args *a)
{
    if (!a->ckpt == !a->init_from)
        return cli_error("generate", CLI_USAGE, "give the weights: --ckpt DIR or --init-from FILE (one of them)");
    if (a->ckpt && a->model)
        return cli_error("generate", CLI_USAGE, "--model: the checkpoint names its model (use it with --init-from)");
    if (!a->encoder != !a->bpe)
        return cli_error("generate", CLI_USAGE, "--encoder and --bpe come together (GPT-2's encoder.json and vocab.bpe)");
    if (!a->tokenizer == !a->encoder)
        return cli_error("generate", CLI_USAGE, "give the vocabulary: --tokenizer DIR (tokenize's -o) or --encoder "
                         "FILE --bpe FILE (one of them)");
    return CLI_OK;
}

static int run(const gen_args *a)
{
    so_model *m = NULL;
    so_tokenizer *t = NULL;
    int32_t *prompt = NULL;
    int n = 0;
    int rc = so_threads_set(a->threads, 1) ? cli_error("generate", CLI_FAIL, "%s", so_errmsg()) : CLI_OK;
    if (!rc)
        rc = load_tokenizer(a, &t);
    if (!rc)
        rc = load_model(a, &m);
    if (!rc && so_tokenizer_vocab(t) < so_graph_classes(m->g))
        rc = cli_error("generate", CLI_USAGE, "the vocabulary has %d tokens, the model draws from %d: not the "
                       "tokenizer of its training data", so_tokenizer_vocab(t), so_graph_classes(m->g));
    if (!rc)
        rc = encode_prompt(a, t, so_graph_classes(m->g), &prompt, &n);
    if (!rc && n > so_graph_context(m->g))
        rc = cli_error("generate", CLI_USAGE, "--prompt: %d tokens, the model's context is %d", n,
                       so_graph_context(m->g));
    if (!rc)
        rc = generate(a, m, t, prompt, n);
    free(prompt);
    so_tokenizer_destroy(t);
    so_model_destroy(m);
    return rc;
}

int cmd_generate(int argc, char **argv)
{
    gen_args a = {.tokens = 64, .temperature = 1.0f, .threads = 1, .seed = 1337, .backend = "onednn"};
    static const char *const backends[] = {"onednn", "ref", NULL};
    const cli_opt opts[] = {
        {"ckpt", OPT_STR, &a.ckpt, "DIR", "a scaleout checkpoint of a GPT-2 (a checkpoint, a level: its newest, or a pipeline's)", 0, -1, NULL},
        {"init-from", OPT_STR, &a.init_from, "FILE", "llm.c's model file (gpt2_124M.bin), or safetensors with --model", 0, -1, NULL},
        {"model", OPT_STR, &a.model, "SPEC", "with --init-from: the GPT-2 spec (default: llm.c's header)", 0, -1, NULL},
        {"tokenizer", OPT_STR, &a.tokenizer, "DIR", "the vocabulary `scaleout tokenize -o DIR` saved, or llm.c's gpt2_tokenizer.bin (decodes only)", 0, -1, NULL},
        {"encoder", OPT_STR, &a.encoder, "FILE", "GPT-2's encoder.json (with --bpe)", 0, -1, NULL},
        {"bpe", OPT_STR, &a.bpe, "FILE", "GPT-2's vocab.bpe (with --encoder; also --vocab-bpe)", 0, -1, NULL},
        {"prompt", OPT_STR, &a.prompt, "TEXT", "text to continue (default: a new document)", 0, -1, NULL},
        {"tokens", OPT_INT, &a.tokens, "N", "new tokens to draw at most", 0, 1 << 24, NULL},
        {"temperature", OPT_FLOAT, &a.temperature, "X", "logits / X before the softmax (0: always the most likely token)", 0, 100, NULL},
        {"top-k", OPT_INT, &a.top_k, "K", "draw among the K most likely tokens (0: all)", 0, 1 << 24, NULL},
        {"seed", OPT_LONG, &a.seed, "S", "random seed of the draws", 0, 9.2e18, NULL},
        {"threads", OPT_INT, &a.threads, "N", "compute threads", 1, 1024, NULL},
        {"backend", OPT_CHOICE, &a.backend, "B", "onednn or ref", 0, -1, backends},
        {NULL, 0, NULL, NULL, NULL, 0, 0, NULL}};
    static const char *const aliases[][2] = {{"--vocab-bpe", "--bpe"}, {NULL, NULL}};
    cli_short_aliases(argc, argv, aliases);
    int rc = cli_parse("generate", SUMMARY, opts, argc, argv);
    if (!rc)
        rc = check_args(&a);
    if (!rc)
        rc = run(&a);
    return rc == CLI_HELP ? CLI_OK : rc;
}
