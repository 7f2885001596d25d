/* fuzz: shared declarations of the libFuzzer targets (tests/fuzz/fuzz_<name>.c). Each target
 * defines LLVMFuzzerTestOneInput; fuzz_util.c has a small reader that carves a fuzz input into
 * flags, lengths and pieces, so one input can drive split points and several fields. */
#ifndef TERN_FUZZ_H
#define TERN_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* libFuzzer entry points (the prototypes -Wmissing-prototypes wants). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* A cursor over the input. Reads past the end yield zeros / empty pieces. */
struct fz {
    const uint8_t *p;
    size_t n;
};

uint8_t fz_u8(struct fz *f);
uint32_t fz_u32(struct fz *f);
/* Up to max bytes; the count is one input byte (two, big-endian, when max > 255), capped at max
 * and at what is left. *len gets the count. */
const uint8_t *fz_take(struct fz *f, size_t max, size_t *len);
/* The bytes up to (not including) the first 0xFF separator, or the rest; the separator is
 * consumed. */
const uint8_t *fz_piece(struct fz *f, size_t *len);
/* A malloc'd NUL-terminated copy of p[0..n) (caller frees). */
char *fz_strndup(const uint8_t *p, size_t n);
/* Path of a file under the source tree: $TERN_SOURCE_DIR, else the directory two levels above
 * the fuzzer binary's source (compiled in as TERN_FUZZ_SOURCE_DIR). Caller frees. */
char *fz_source_path(const char *rel);

#endif
