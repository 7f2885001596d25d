/* gdn_seq: Gated DeltaNet over whole chunks: for each item (one sequence) its rows IN ORDER, the
 * causal conv1d window update (gdn_conv's math) and the gated delta rule recurrence with the
 * gated RMSNorm (gdn_step's math), each state kept on chip across the item's rows and written
 * back once. Two launches ("a pair"), conv first, because the q/k channels of one key head feed
 * several value heads:
 *   gdn_seq_conv_cuda: one thread per (item, channel, time chunk), looping over the chunk's
 *   rows (chunks of at least 16 rows of max_rows, as many as fill the GPU: a long prompt's
 *   conv runs on every SM, not 32 blocks);
 *   gdn_seq_step_cuda: S (128x128) of each (item, value head) in the registers of 1, 2 or 4
 *   blocks (value column tiles, more when there are few items), then the gated RMSNorm (fused
 *   with one tile, else a second launch over out, which holds the raw o in between).
 * Items: a device int32 table (n_items, GDN_SEQ_ITEM_INTS) of
 *   [row_start, n_rows, slot, snap]: rows row_start .. row_start+n_rows-1 of the inputs/outputs,
 *   the state slot, and snap = -1 (keep nothing) or the first snapshot index: the state after
 *   row t of the item is also stored at snapshot index snap + t (indices >= n_snap are skipped),
 *   which lets a caller roll the state back to any row (speculative decoding).
 * n_rows = 0 leaves the slot's state untouched. Two items must not share a slot.
 * state_stride: floats from one slot's state to the next (0: packed, channels * (kc-1) for the
 * conv, n_v_heads * 128 * 128 for the recurrence): a caller that keeps each sequence's state in
 * a larger region (the KV pool's blocks, docs/KV.md) passes the region's size; >= the packed
 * size, a multiple of 4 (16-byte rows).
 * Both kernels read the items' states (and their weights, the items table) before their
 * programmatic-dependent-launch wait (kernels/internal/pdl.cuh): the kernel launched right
 * before either must not write the states it reads (the runner's: the inputs' GEMV before the
 * conv, the conv before the recurrence; a launch after a copy or a synchronisation is safe). */
#ifndef KERNELS_GDN_SEQ_H
#define KERNELS_GDN_SEQ_H

#include <stddef.h>
#include <stdint.h>

#include "kstream.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GDN_SEQ_ITEM_INTS 4
#define GDN_SEQ_HEAD_DIM 128
/* norm_cnt (the step functions): NULL, or (n_items, n_v_heads) device counters, all 0 (and 0
 * again after each call): with them the last of the tile blocks of an (item, value head) to
 * finish normalises the head's rows of items with at most this many rows (decode and verify
 * windows) instead of a second launch; the same bits either way. */
#define GDN_SEQ_FUSE_ROWS 8

/* out, x: (rows, channels); w: (channels, kc); state: (n_slots, channels, kc-1) oldest first,
 * updated in place; snap: (n_snap, channels, kc-1) or NULL; items: see above; max_rows: at least
 * the rows of the longest item (the pass's total rows will do; it only sets the time split, <= 0
 * = one chunk per item). The results do not depend on it. Device pointers.
 * Returns 0, ERR_INVAL (kc < 2 or > 8, n_items > 65535, NULLs), ERR_CUDA. */
int gdn_seq_conv_cuda(float *out, float *state, int64_t state_stride, float *snap, int n_snap, const float *x,
                      const float *w, const int32_t *items, int n_items, int max_rows,
                      int channels, int kc, cudaStream_t stream);
int gdn_seq_conv_ref(float *out, float *state, int64_t state_stride, float *snap, int n_snap, const float *x,
                     const float *w, const int32_t *items, int n_items, int channels, int kc);

/* qkv: (rows, (2*n_k_heads + n_v_heads)*128) post-conv [q | k | v]; z, out: (rows,
 * n_v_heads*128); a, b: (rows, n_v_heads); a_log, dt_bias: (n_v_heads,); norm_w: (128,);
 * state: (n_slots, n_v_heads, 128 [k], 128 [v]) in place; snap: (n_snap, n_v_heads, 128, 128)
 * or NULL. Same math per row as gdn_step. Returns 0, ERR_INVAL, ERR_CUDA. */
int gdn_seq_step_cuda(float *out, float *state, int64_t state_stride, float *snap, int n_snap, const float *qkv,
                      const float *z, const float *a, const float *b, const float *a_log,
                      const float *dt_bias, const float *norm_w, const int32_t *items,
                      int n_items, int n_k_heads, int n_v_heads, float eps, cudaStream_t stream);
/* Host reference: the single-step references (gdn_conv_ref, gdn_step_ref) row by row. */
int gdn_seq_step_ref(float *out, float *state, int64_t state_stride, float *snap, int n_snap, const float *qkv,
                     const float *z, const float *a, const float *b, const float *a_log,
                     const float *dt_bias, const float *norm_w, const int32_t *items,
                     int n_items, int n_k_heads, int n_v_heads, float eps);
/* gdn_seq_step_cuda with an explicit tile count, for tests and benchmarks: tiles 1, 2 or 4
 * blocks per (item, value head), or 0 (what gdn_seq_step_cuda does: 4 when n_items * n_v_heads
 * is below 132, an H200's SM count, 2 below 264, else 1). Every tile count gives the same bits.
 * Returns ERR_INVAL for another tiles value, else as gdn_seq_step_cuda. */
int gdn_seq_step_cuda_tiles(float *out, float *state, int64_t state_stride, float *snap, int n_snap,
                            const float *qkv, const float *z, const float *a, const float *b,
                            const float *a_log, const float *dt_bias, const float *norm_w,
                            const int32_t *items, int n_items, int n_k_heads, int n_v_heads,
                            float eps, int tiles, unsigned *norm_cnt, cudaStream_t stream);
/* The tiles the token-serial kernel runs with for a pass of n_items items whose longest has
 * max_rows rows (0: unknown, as gdn_seq_step_cuda): 0's rule above, except a pass of one-row
 * items with fewer heads than SMs (batch-1 decode): GDN_ONE_ROW_TILES (gdn_seq.cu, 1). The
 * dispatch log prints it. */
int gdn_seq_step_tiles(int n_items, int n_v_heads, int max_rows);

/* The conv and the recurrence of a pass whose items have one row each (decode) in one launch:
 * gdn_seq_conv_cuda (x, conv_w, conv_state at conv_stride, conv_snap) then gdn_seq_step_cuda on
 * its output, the same bits, the conv's output not stored. Each (item, value head) block runs
 * its head's conv channels (q and k of its key head, its v) and then the recurrence at one block
 * a head; of the value heads sharing a key head, the last to have read its q / k windows writes
 * them back (cnt: (n_items, n_k_heads) device counters, all 0, and 0 again after the call; the
 * step's norm_cnt will do). Items of more than one row are outside its contract. The conv state and
 * weights are read before the PDL wait too: the kernel launched right before must not write them.
 * ERR_UNSUPPORTED where the pass is not one block a head (gdn_seq_step_tiles(n_items, n_v_heads, 1)
 * != 1: as many heads as SMs); ERR_INVAL as the two functions', or channels != (2 n_k_heads +
 * n_v_heads) * 128. */
int gdn_seq_conv_step_cuda(float *out, float *state, int64_t state_stride, float *snap,
                           float *conv_state, int64_t conv_stride, float *conv_snap, int n_snap,
                           const float *x, const float *conv_w, int channels, int kc,
                           const float *z, const float *a, const float *b, const float *a_log,
                           const float *dt_bias, const float *norm_w, const int32_t *items,
                           int n_items, int n_k_heads, int n_v_heads, float eps, unsigned *cnt,
                           cudaStream_t stream);

/* The chunked form for items of many rows (prefill): the same results as gdn_seq_step_cuda (to
 * fp32 rounding: a different order of operations) with the recurrence run a chunk of 64 rows at
 * a time as small matrix products (kernels/gdn_seq.cu, "the chunked form"), not row after row.
 * It takes the items of at least chunk_min_rows rows (> 0) without snapshots (snap = -1) whose
 * rows lie below ws_rows; the others run the token-serial kernel as gdn_seq_step_cuda does.
 * max_rows: the rows of the longest item (the grid's chunk count; an item longer than it runs
 * token-serial; 1 also makes a pass of fewer heads than SMs one block a head, gdn_seq.cu). ws:
 * device scratch of gdn_seq_chunk_ws_floats(ws_rows, n_v_heads) floats, 16-byte aligned, as is out.
 * chunk_min_rows <= 0 (or max_rows below it): exactly gdn_seq_step_cuda, ws unused. Returns 0,
 * ERR_INVAL, ERR_CUDA. */
size_t gdn_seq_chunk_ws_floats(int rows, int n_v_heads);
int gdn_seq_step_chunked_cuda(float *out, float *state, int64_t state_stride, float *snap,
                              int n_snap, const float *qkv, const float *z, const float *a,
                              const float *b, const float *a_log, const float *dt_bias,
                              const float *norm_w, const int32_t *items, int n_items, int n_k_heads,
                              int n_v_heads, float eps, int chunk_min_rows, int max_rows, float *ws,
                              int ws_rows, unsigned *norm_cnt, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
