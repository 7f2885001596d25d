/* Helpers shared by the tokenizer tests: locating tokenizer.json and the corpus, reading files. */
#ifndef TOK_TEST_UTIL_H
#define TOK_TEST_UTIL_H

#include <stddef.h>

/* Fill the tokenizer.json path and the corpus directory (from TERN_SOURCE_DIR, else cwd).
 * Returns -1 when tokenizer.json does not exist. */
int tt_paths(char *tj, size_t tj_len, char *dir, size_t dir_len);
struct tokenizer;
/* The tokenizer of tt_paths, loaded, and the corpus directory in dir (dir_len bytes, dir may be
 * NULL): exits 77 (the test skipped) when tokenizer.json is missing; NULL after one line on
 * stderr when it does not load. */
struct tokenizer *tt_load(char *dir, size_t dir_len);
/* Read a whole file (dir/name, or name when dir is NULL); malloc'd, NUL-terminated; NULL on error.
 */
char *tt_read_corpus(const char *dir, const char *name, size_t *len);

#endif
