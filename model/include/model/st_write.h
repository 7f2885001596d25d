/* st_write: a safetensors writer. Collects named tensors (copies of their bytes), then writes
 * them as one `model.safetensors` or as shards `model-0000i-of-0000N.safetensors` plus
 * `model.safetensors.index.json`. Header keys are sorted by name, `__metadata__` is
 * {"format":"pt"}, the header is space-padded so the data section starts 8-byte aligned, and
 * tensor data is laid out contiguously by (element size descending, name) so every tensor starts
 * aligned to its element size (safetensors readers require contiguous offsets). */
#ifndef MODEL_ST_WRITE_H
#define MODEL_ST_WRITE_H

#include <stddef.h>
#include <stdint.h>

#define ST_WRITE_MAX_DIMS 4

struct st_write;

/* A new, empty writer. Never NULL (aborts on OOM). Free with st_write_destroy(). */
struct st_write *st_write_create(void);
void st_write_destroy(struct st_write *w);

/* Add tensor `name` of safetensors dtype `dtype` ("F32", "BF16", "F16", "U8", "F8_E4M3", "I64",
 * ...) and shape[ndim] (ndim 0 = scalar). nbytes must equal prod(shape) * element size; the bytes
 * are copied. Returns 0, ERR_INVAL (bad dtype/shape/size, ndim > ST_WRITE_MAX_DIMS) or
 * ERR_STATE (duplicate name). */
int st_write_add(struct st_write *w, const char *name, const char *dtype, int ndim,
                 const int64_t *shape, const void *data, size_t nbytes);
/* Convenience: add fp32 data converted to `dtype` ("F32", "BF16" or "F16"). */
int st_write_add_f32(struct st_write *w, const char *name, const char *dtype, int ndim,
                     const int64_t *shape, const float *data);

/* Number of tensors added and their total data bytes. */
int st_write_count(const struct st_write *w);
int64_t st_write_bytes(const struct st_write *w);

/* Write everything into directory `dir` (must exist). shard_bytes <= 0 or a total below it:
 * one model.safetensors; otherwise shards of at most shard_bytes of data each (a tensor larger
 * than that gets its own shard) plus model.safetensors.index.json ({"metadata":{"total_size":N},
 * "weight_map":{name: file}}). Returns 0 or a negative errno / ERR_IO. */
int st_write_save(struct st_write *w, const char *dir, int64_t shard_bytes);

/* Element size in bytes of a safetensors dtype string, 0 when unknown. */
int st_write_dtype_size(const char *dtype);

#endif
