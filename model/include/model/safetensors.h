/* safetensors: read-only access to one .safetensors file or a sharded set
 * (model.safetensors.index.json). Files are mmapped read-only; every header is validated
 * (length, JSON, dtypes, shape*dtype == byte span, offsets inside the file, no overlaps, index
 * entries resolve). Header-only mode also works when the shards are missing (names from the
 * index only) or truncated to their header (shapes known, data NULL). */
#ifndef MODEL_SAFETENSORS_H
#define MODEL_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ST_MAX_DIMS 8

enum st_dtype {
    ST_UNKNOWN = 0, // header-only, shard absent: only the name is known
    ST_BOOL,
    ST_U8,
    ST_I8,
    ST_I16,
    ST_U16,
    ST_I32,
    ST_U32,
    ST_I64,
    ST_U64,
    ST_F16,
    ST_BF16,
    ST_F32,
    ST_F64,
    ST_F8_E4M3,
    ST_F8_E5M2,
    ST_F8_E8M0,
    ST_F4,
};

struct st_tensor {
    const char *name; // owned by the set
    enum st_dtype dtype;
    int ndim; // -1 when unknown (index-only)
    int64_t shape[ST_MAX_DIMS];
    int64_t nelem;    // product of shape (1 for a scalar)
    int64_t nbytes;   // end - begin in the file
    int64_t offset;   // absolute byte offset of the data in its file
    const void *data; // NULL in header-only mode
    const char *file; // shard base name, owned by the set
};

enum st_open_flags {
    ST_OPEN_HEADER_ONLY = 1, // no data needed: data pointers stay NULL, shards may be absent
};

struct st_set;

/* Open path: a directory (model.safetensors.index.json, else model.safetensors, else every
 * *.safetensors in it) or one .safetensors file. NULL on failure with one line in err naming
 * the file and the tensor. Free with st_close(). */
struct st_set *st_open(const char *path, int flags, char *err, size_t errlen);
void st_close(struct st_set *set);
/* Does directory dir hold tensors for st_open: model.safetensors.index.json or a *.safetensors
 * file? false also when dir cannot be read. */
bool st_dir_has_tensors(const char *dir);

/* Lookup by exact name; NULL when absent. The pointer lives as long as the set. */
const struct st_tensor *st_find(const struct st_set *set, const char *name);
/* Iteration in name order: i in [0, st_count). */
int64_t st_count(const struct st_set *set);
const struct st_tensor *st_at(const struct st_set *set, int64_t i);
/* Number of distinct files (shards) of the set and whether tensor data is mapped. */
int st_n_files(const struct st_set *set);
bool st_has_data(const struct st_set *set);

/* "BF16", "F8_E4M3", ... as in the safetensors header; "?" for ST_UNKNOWN. */
const char *st_dtype_name(enum st_dtype dt);
/* Bits per element (4 for F4, 8 for U8, 16 for BF16 ...); 0 for ST_UNKNOWN. */
int st_dtype_bits(enum st_dtype dt);
/* Parse a header dtype string; ST_UNKNOWN when not recognized. */
enum st_dtype st_dtype_parse(const char *s);
/* Writes "[a, b, c]" into buf. */
const char *st_shape_str(const struct st_tensor *t, char *buf, size_t len);

#endif
