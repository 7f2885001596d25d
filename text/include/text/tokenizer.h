/* tokenizer: byte-level BPE loaded from a Hugging Face tokenizer.json (Qwen2/Qwen3 family).
 *
 * Encode pipeline (matches @lenml/tokenizers / transformers.js on the same text):
 *   1. invalid UTF-8 is repaired first, exactly as a WHATWG TextDecoder (fatal=false,
 * ignoreBOM=true) does it: each maximal invalid subpart becomes U+FFFD (bytes EF BF BD); a BOM is
 * kept;
 *   2. added tokens (tokenizer.json "added_tokens", special or not) are matched on the raw text,
 *      longest match first, left to right, honouring their lstrip/rstrip flags ("normalized" and
 *      "single_word" are ignored, as the JS reference does; "special" only matters for decode);
 *   3. each text section between added tokens is NFC-normalized (utf8proc), split by the file's
 *      Split regex (PCRE2, UTF+UCP, JIT when available; "\s" means the JavaScript whitespace set
 *      and "(?i:...)" folds ASCII letters only, as in the JS reference), each piece mapped
 *      byte -> unicode (ByteLevel) and merged by BPE rank.
 * Decode concatenates token bytes (added tokens as their content) and repairs invalid UTF-8 the
 * same way. All functions are thread-safe on one tokenizer (the BPE cache is sharded behind
 * mutexes).
 */
#ifndef TEXT_TOKENIZER_H
#define TEXT_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tokenizer;

/* Load tokenizer.json. Returns NULL on failure and writes a one-line reason into err (errlen bytes,
 * may be NULL/0). The file must describe a BPE model with a ByteLevel pre-tokenizer or decoder. */
struct tokenizer *tokenizer_create_from_file(const char *path, char *err, size_t errlen);
/* Same from an in-memory JSON document (len bytes, need not be NUL-terminated). */
struct tokenizer *tokenizer_create_from_json(const char *json, size_t len, char *err,
                                             size_t errlen);
void tokenizer_destroy(struct tokenizer *tok);

/* Encode len bytes of text (any bytes; see the header comment for invalid UTF-8). No special
 * tokens are added. On success *ids is a malloc'd array (free() it; NULL when *n == 0) and 0 is
 * returned; otherwise ERR_NOMEM, or ERR_INVAL if PCRE2 gave up (match limit; not seen in practice:
 * 2 MB runs of one character encode fine). */
int tokenizer_encode(struct tokenizer *tok, const char *text, size_t len, int32_t **ids, size_t *n);

enum tokenizer_encode_flags {
    /* added tokens marked "special" (<|im_start|>, <|im_end|>, ...) are not recognised in the text
     * and are encoded as plain text (HF split_special_tokens); non-special added tokens such as
     * <think> still are. For untrusted text that must not inject control tokens. */
    TOKENIZER_ENCODE_SPLIT_SPECIAL = 1,
};
/* tokenizer_encode with flags (TOKENIZER_ENCODE_*); flags 0 is tokenizer_encode. */
int tokenizer_encode_flags(struct tokenizer *tok, const char *text, size_t len, int flags,
                           int32_t **ids, size_t *n);

enum tokenizer_decode_flags {
    TOKENIZER_DECODE_SKIP_SPECIAL = 1, /* drop added tokens marked "special" */
};
/* Decode n ids to UTF-8 text. On success *out is a malloc'd NUL-terminated string (free() it),
 * *out_len its length without the NUL; invalid UTF-8 from byte tokens becomes U+FFFD.
 * Returns ERR_RANGE for an id outside the vocabulary, ERR_NOMEM. */
int tokenizer_decode(const struct tokenizer *tok, const int32_t *ids, size_t n, int flags,
                     char **out, size_t *out_len);

/* Number of ids (max id + 1), added tokens included. */
size_t tokenizer_vocab_size(const struct tokenizer *tok);
/* Id of a vocabulary entry written as in tokenizer.json (byte-level form, e.g. "Ġthe", or an added
 * token's content such as "<|im_end|>"); -1 when absent. */
int32_t tokenizer_token_to_id(const struct tokenizer *tok, const char *token);
/* Vocabulary form of an id (static storage owned by tok), NULL when out of range or unused. */
const char *tokenizer_id_to_token(const struct tokenizer *tok, int32_t id);
/* Raw bytes an id decodes to (added tokens: their content). *len receives the length. The bytes are
 * owned by tok and may be an incomplete UTF-8 sequence. NULL when out of range or unused. */
const char *tokenizer_id_to_bytes(const struct tokenizer *tok, int32_t id, size_t *len);
/* True for added tokens (special or not): they decode as their literal content. */
bool tokenizer_is_added(const struct tokenizer *tok, int32_t id);
/* True for added tokens with "special": true (skipped by TOKENIZER_DECODE_SKIP_SPECIAL). */
bool tokenizer_is_special(const struct tokenizer *tok, int32_t id);

/* Well-known ids; -1 when the vocabulary lacks them. */
int32_t tokenizer_eos_id(const struct tokenizer *tok);       /* "<|im_end|>" */
int32_t tokenizer_endoftext_id(const struct tokenizer *tok); /* "<|endoftext|>" */
int32_t tokenizer_im_start_id(const struct tokenizer *tok);  /* "<|im_start|>" */

/* WHATWG UTF-8 repair of in[0..len). Writes to out (capacity >= 3 * len) and returns the bytes
 * written. With final=false a trailing sequence that is still incomplete (but valid so far) is not
 * consumed; *consumed (may be NULL) receives how many input bytes were used. With final=true all
 * input is consumed and a dangling partial sequence becomes one U+FFFD. out may be NULL to only
 * compute the output length. */
size_t tokenizer_utf8_repair(const char *in, size_t len, bool final, char *out, size_t *consumed);

#endif
