/* st_fixture: hand-built safetensors files and tiny qwen3_5_moe checkpoints for the loader
 * tests. Independent of the project's writer (model/st_write.c): the header JSON and the byte
 * layout are assembled here directly from the format description. */
#ifndef TEST_ST_FIXTURE_H
#define TEST_ST_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct stf;

struct stf *stf_create(void);
void stf_free(struct stf *f);
/* Append a tensor; data (nbytes) is copied; NULL data = zero bytes. */
void stf_add(struct stf *f, const char *name, const char *dtype, int ndim, const int64_t *shape,
             const void *data, size_t nbytes);
/* Write the file: 8-byte LE header length, header JSON, data. 0 on success. */
int stf_write(const struct stf *f, const char *path);
/* Write raw bytes: an explicit header length (may lie), header text, then data. */
int stf_write_raw(const char *path, uint64_t hlen, const char *header, const void *data,
                  size_t nbytes);
/* Write text to dir/name. */
int stf_write_text(const char *dir, const char *name, const char *text);
/* A fresh empty temp directory (static buffer per call site is the caller's). */
int stf_mkdtemp(char *buf, size_t len);
/* rm -r of a fixture directory (only plain files inside). */
void stf_rmdir(const char *dir);

enum fixture_kind {
    FIX_BF16_FUSED = 0,          // BF16 everything, fused 3-D experts, model.language_model.
    FIX_BF16_PER_EXPERT,         // BF16, per-expert 2-D experts, prefix "model."
    FIX_CT_NVFP4A16,             // compressed-tensors NVFP4 W4A16 experts + attention
    FIX_CT_NVFP4A16_BF16_STORED, // config says NVFP4, experts stored as BF16 .weight
};

struct fixture_ckpt {
    enum fixture_kind kind;
    bool mtp;             // write the mtp.* tensors
    bool mtp_partial;     // write them but leave out mtp.fc.weight
    bool drop_tensor;     // leave out layer 0's post_attention_layernorm
    bool bad_shape;       // router of layer 1 with one row too few
    bool visual;          // add two model.visual.* tensors
    bool ct_mtp_targeted; // CT config without "re:mtp.*" in ignore (MTP still stored BF16)
};

/* Tiny dims used by fixture_write: H 32, V 64, layers "LF", Hq 2, Hkv 1, D 16, Hk 2, Hv 4, Dk=Dv 8,
 * Kc 4, E 4, top-2, I 16, Is 16, mtp_num_hidden_layers 1. Values: deterministic pseudo-random. */
int fixture_write(const char *dir, const struct fixture_ckpt *o);

#endif
