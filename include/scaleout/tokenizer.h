/* scaleout/tokenizer.h: text <-> token ids for the language models.
 *
 * Three vocabularies behind one object:
 *  - bytes: 256 tokens, id = byte value (no merges, no end-of-text token);
 *  - GPT-2's byte-pair encoder from its encoder.json + vocab.bpe: text is
 *    split by GPT-2's pre-tokenizer regex
 *      's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *    (implemented in C over a table of Unicode letters, numbers and spaces
 *    generated from python3-regex), each piece's UTF-8 bytes mapped to
 *    GPT-2's printable byte alphabet and merged by rank exactly as GPT-2's
 *    encoder.py does; ids are the same as encoder.py's and tiktoken's
 *    encode_ordinary;
 *  - a byte-pair encoder trained here on the user's text (so_tokenizer_train),
 *    written in GPT-2's two files, so it loads back through the GPT-2 path.
 * Decoding is the concatenation of the tokens' bytes (valid UTF-8 when the
 * text was). Formats: docs/FORMATS.md. Errors: 0 or SO_E* with so_errmsg(). */
#ifndef SCALEOUT_TOKENIZER_H
#define SCALEOUT_TOKENIZER_H
#include <stddef.h>
#include <stdint.h>

typedef struct so_tokenizer so_tokenizer;

/* The byte-level vocabulary (256 tokens). */
int so_tokenizer_bytes(so_tokenizer **out);
/* GPT-2's encoder files. Errors name the file and line or offset:
 * SO_EIO for files that cannot be read (regular files only), SO_EFORMAT for
 * JSON that is not one object of "string": id pairs, ids that are not
 * 0..n-1 each once, a token with a character outside GPT-2's byte alphabet,
 * a byte without its single-byte token, a merge line that is not two known
 * tokens, or a merge whose result is not in encoder.json. */
int so_tokenizer_load_gpt2(const char *encoder_json, const char *vocab_bpe, so_tokenizer **out);
/* The same from memory (the fuzz target); enc_name / bpe_name name them. */
int so_tokenizer_parse_gpt2(const char *enc, size_t enc_len, const char *enc_name, const char *bpe, size_t bpe_len,
                            const char *bpe_name, so_tokenizer **out);
/* llm.c's gpt2_tokenizer.bin (magic 20240328): the tokens' bytes only, so
 * it decodes (generate) but cannot encode (so_tokenizer_encode: SO_EUNSUP). */
int so_tokenizer_load_llmc(const char *path, so_tokenizer **out);
int so_tokenizer_parse_llmc(const uint8_t *buf, size_t len, const char *what, so_tokenizer **out);
/* Trains a byte-pair encoder on text: GPT-2's pre-tokenizer, then merges of
 * the most frequent adjacent pair (ties: the pair of smaller ids) until the
 * vocabulary holds `vocab` tokens: 256 bytes, vocab-257 merges and
 * <|endoftext|> last (vocab >= 257). Stops early, with fewer tokens, when no
 * pair occurs twice. Deterministic. */
int so_tokenizer_train(const char *text, size_t len, int vocab, so_tokenizer **out);
/* Writes encoder.json and vocab.bpe in GPT-2's format ("#version: 0.2" and
 * one merge per line by rank). The byte vocabulary is written as its 256
 * tokens and no merges (loaded back, it encodes and decodes the same ids).
 * SO_EUNSUP for llm.c's vocabulary. */
int so_tokenizer_save_gpt2(const so_tokenizer *t, const char *encoder_json, const char *vocab_bpe);
void so_tokenizer_destroy(so_tokenizer *t); /* accepts NULL */

int so_tokenizer_vocab(const so_tokenizer *t);  /* number of token ids */
int so_tokenizer_merges(const so_tokenizer *t); /* merge rules (0 for bytes) */
int so_tokenizer_eot(const so_tokenizer *t);    /* id of <|endoftext|>, -1 if none */
const char *so_tokenizer_kind(const so_tokenizer *t); /* "bytes", "bpe", "llmc" */

/* Appends the ids of text[0..len) (any bytes; invalid UTF-8 bytes are
 * pieces of their own and encode byte by byte) to *ids, growing it with
 * realloc (*cap its capacity; start with NULL, 0, 0). <|endoftext|> in the
 * text is ordinary text (tiktoken's encode_ordinary). The caller frees *ids. */
int so_tokenizer_encode(const so_tokenizer *t, const char *text, size_t len, uint32_t **ids, size_t *n, size_t *cap);
/* The bytes of token id (NULL for an id outside the vocabulary). */
const uint8_t *so_tokenizer_token(const so_tokenizer *t, uint32_t id, size_t *len);
/* Decodes ids into a new NUL-terminated buffer (*len without the NUL); the
 * caller frees *text. SO_EINVAL names the first id outside the vocabulary. */
int so_tokenizer_decode(const so_tokenizer *t, const uint32_t *ids, size_t n, char **text, size_t *len);

#endif
