/* Private parts of the tokenizer module (scaleout/tokenizer.h): the Unicode
 * class table, GPT-2's pre-tokenizer and byte alphabet, the two hash maps
 * (token bytes -> id, pair of ids -> merge) and the tokenizer's layout,
 * shared by tokenizer.c (encode/decode), gpt2_files.c (load/save) and
 * bpe_train.c (training). */
#ifndef SCALEOUT_TOKENIZER_INTERNAL_H
#define SCALEOUT_TOKENIZER_INTERNAL_H
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "scaleout/tokenizer.h"

/* ---- Unicode classes (unicode_classes.c, generated) ---- */
typedef enum { SO_UC_OTHER, SO_UC_LETTER, SO_UC_NUMBER, SO_UC_SPACE } so_uc_class;
typedef struct {
    uint32_t lo, hi; /* code points, inclusive */
    uint8_t cls;     /* so_uc_class */
} so_uc_range;
extern const so_uc_range so_uc_ranges[];
extern const int so_uc_nranges;
so_uc_class so_uc_class_of(uint32_t cp);

/* ---- GPT-2's pre-tokenizer (pretok.c) ----
 * Calls fn for each piece of text in order (pieces tile the text); stops
 * at and returns fn's first non-zero result. */
typedef int (*so_piece_fn)(void *arg, const uint8_t *piece, size_t len);
int so_pretok_gpt2(const uint8_t *text, size_t len, so_piece_fn fn, void *arg);

/* GPT-2's bytes_to_unicode: the printable code point standing for each byte
 * in encoder.json and vocab.bpe (printable Latin-1 bytes stand for
 * themselves, the other 68 for U+0100..U+0143). */
uint32_t so_gpt2_byte_char(uint8_t b);
/* The inverse: the byte code point cp stands for, or -1. */
int so_gpt2_char_byte(uint32_t cp);

/* ---- the piece cache (piece_cache.c): piece bytes -> ids, bounded ---- */
#define SO_PIECE_CACHE_MAX 64   /* longer pieces are not cached */
typedef struct so_piece_cache so_piece_cache;
so_piece_cache *so_piece_cache_create(void); /* NULL when out of memory */
void so_piece_cache_destroy(so_piece_cache *c);
/* The ids of the piece (pointer into the cache, valid until the next put), or NULL. */
const int32_t *so_piece_cache_get(const so_piece_cache *c, const uint8_t *p, size_t len, size_t *nids);
void so_piece_cache_put(so_piece_cache *c, const uint8_t *p, size_t len, const int32_t *ids, size_t nids);

/* ---- maps ---- */
/* Token bytes -> id over the tokenizer's own token table. */
typedef struct {
    int32_t *slot;          /* cap entries: id + 1, 0 = empty */
    size_t cap;
} so_bytes_map;
/* (left id, right id) -> (rank, merged id). */
typedef struct {
    uint64_t *key;          /* (left << 32 | right) + 1; 0 = empty */
    int32_t *rank, *merged;
    size_t cap, n;
} so_pair_map;

struct so_tokenizer {
    int kind;               /* TOK_BYTES, TOK_BPE, TOK_LLMC */
    int vocab;              /* ids 0..vocab-1 */
    int eot;                /* <|endoftext|>, or -1 */
    uint8_t *bytes;         /* every token's bytes, concatenated */
    size_t *off;            /* vocab + 1: token i is bytes[off[i] .. off[i+1]) */
    int32_t byte_id[256];   /* the single-byte token of each byte (-1: none, llm.c files) */
    so_bytes_map by_bytes;  /* bytes -> id (bpe only) */
    /* merges by rank, as vocab.bpe lists them; `pairs` maps each pair to
     * its rank (the last line's, as encoder.py's dict) and result */
    int nmerges, cap_merges;
    int32_t *merge_left, *merge_right;
    so_pair_map pairs;
    /* Pieces merged before: one encoding call at a time uses it (a second
     * thread's call, finding it taken, encodes without); created on first use. */
    so_piece_cache *cache;
    pthread_mutex_t cache_mu;
};
enum { TOK_BYTES, TOK_BPE, TOK_LLMC };

/* A tokenizer of `vocab` tokens with room for `bytes` token bytes (off[]
 * zeroed, byte_id[] = -1, eot = -1). NULL when out of memory. */
so_tokenizer *so_tok_alloc(int kind, int vocab, size_t bytes);
/* Builds by_bytes over tokens 0..vocab-1; SO_EFORMAT naming `what` when two
 * tokens have the same bytes. */
int so_tok_index(so_tokenizer *t, const char *what);
/* Adds token id (already in the table) to by_bytes, growing it as needed. */
int so_tok_index_add(so_tokenizer *t, int32_t id);
/* The id of these bytes, or -1. */
int32_t so_tok_find(const so_tokenizer *t, const uint8_t *b, size_t len);
/* Records merge rank nmerges: left + right -> merged (the pair's rank is
 * overwritten if it repeats). */
int so_tok_add_merge(so_tokenizer *t, int32_t left, int32_t right, int32_t merged);
/* The pair's (rank, merged id), or rank -1. */
int32_t so_tok_pair(const so_tokenizer *t, int32_t left, int32_t right, int32_t *merged);

#endif
