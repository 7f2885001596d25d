// gdn_seq (conv + step over whole items, rows in order, snapshots) through its real launchers
// (gdn_seq_conv_cuda / gdn_seq_step_cuda, kernels on the host emulator) vs gdn_seq_*_ref.
// Shapes as tests/kernels/test_gdn_seq.c: item lengths 0, 1, 3..37, slots permuted (random, not
// the item order), snapshots on some items with the last index range cut by n_snap, GQA ratio 1,
// 2 and 4, kc 2..4, head dim 128, items past several chunks of rows. The step runs at tile counts
// 1, 2, 4 (bit-identical to each other) and through gdn_seq_step_cuda (its choice checked). Each
// kernel is checked alone (the step gets the reference conv output). Outputs start as NaN (a row
// not written shows), state slots not named by an item and snapshot indices not written must stay
// bit-identical. Tolerances: test_gdn_seq.c's.
#include "emu.h"
#include "gdn_seq_emu.inc"
#undef D

static uint64_t rs = 88172645463325252ull;
static uint32_t ru32() { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return (uint32_t)(rs >> 11); }
static float runi(float lo, float hi) { return lo + (hi - lo) * (float)(ru32() & 0xffffff) / 16777216.0f; }
static float *fill(size_t n, float lo, float hi)
{
    float *p = (float *)emu_alloc(n * 4 + 4);
    for (size_t i = 0; i < n; i++) p[i] = runi(lo, hi);
    return p;
}
static float *dup(const float *s, size_t n)
{
    float *p = (float *)emu_alloc(n * 4 + 4);
    memcpy(p, s, n * 4);
    return p;
}

/* |got - ref| <= atol + rtol |ref| everywhere (NaN fails); the worst error printed. */
static size_t cmp(const char *what, const float *got, const float *ref, size_t n, double atol, double rtol, double *maxe)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        const double e = fabs((double)got[i] - ref[i]);
        if (!(e <= atol + rtol * fabs(ref[i]))) {
            if (bad < 3) printf("  %s mismatch %zu got %g ref %g\n", what, i, got[i], ref[i]);
            bad++;
        }
        if (e > *maxe || e != e) *maxe = e;
    }
    return bad;
}

/* cut: snapshot indices cut off the end by n_snap; < 0: no snapshot buffers (NULL) */
static int run(const int *lens, int n_items, int hk, int hv, int kc, int cut)
{
    const bool nosnap = cut < 0;
    const int D = GDN_SEQ_HEAD_DIM, ch = (2 * hk + hv) * D, n_slots = n_items + 3;
    std::vector<int32_t> items((size_t)n_items * GDN_SEQ_ITEM_INTS), perm(n_slots);
    for (int i = 0; i < n_slots; i++) perm[i] = i;
    for (int i = n_slots - 1; i > 0; i--) std::swap(perm[i], perm[ru32() % (uint32_t)(i + 1)]);
    int rows = 0, nsnap = 0;
    for (int i = 0; i < n_items; i++) {
        int32_t *it = &items[(size_t)i * GDN_SEQ_ITEM_INTS];
        it[0] = rows, it[1] = lens[i], it[2] = perm[i], it[3] = (i % 2 == 0) ? nsnap : -1;
        if (i % 2 == 0) nsnap += lens[i];
        rows += lens[i];
    }
    const int n_snap = nosnap ? 5 : nsnap > cut ? nsnap - cut : nsnap; /* the last index range cut */
    const size_t R = (size_t)rows, win = (size_t)ch * (kc - 1), ss = (size_t)hv * D * D, vw = (size_t)hv * D;
    const size_t ns1 = (size_t)(n_snap > 0 ? n_snap : 1);
    float *x = fill(R * ch, -2, 2), *w = fill((size_t)ch * kc, -1, 1), *cst0 = fill(n_slots * win, -1, 1);
    float *sst0 = fill(n_slots * ss, -0.1f, 0.1f), *z = fill(R * vw, -2, 2), *a = fill(R * hv, -3, 3);
    float *b = fill(R * hv, -3, 3), *alog = fill(hv, -2, 1), *dtb = fill(hv, -1, 1), *nw = fill(D, 0.5f, 1.5f);
    if (R > 2) a[hv + 1] = 25.0f; /* softplus threshold branch */
    float *csn0 = fill(ns1 * win, -9, -8), *ssn0 = fill(ns1 * ss, -9, -8); /* never-written marker values */
    /* reference */
    float *rcout = fill(R * ch, 0, 0), *rcst = dup(cst0, n_slots * win), *rcsn = dup(csn0, ns1 * win);
    float *rsout = fill(R * vw, 0, 0), *rsst = dup(sst0, n_slots * ss), *rssn = dup(ssn0, ns1 * ss);
    float *gcout = fill(R * ch, NAN, NAN), *gcst = dup(cst0, n_slots * win), *gcsn = dup(csn0, ns1 * win);
    if (nosnap) rcsn = gcsn = rssn = NULL;
    int rc = gdn_seq_conv_ref(rcout, rcst, 0, rcsn, n_snap, x, w, items.data(), n_items, ch, kc);
    rc |= gdn_seq_step_ref(rsout, rsst, 0, rssn, n_snap, rcout, z, a, b, alog, dtb, nw, items.data(), n_items, hk, hv, 1e-6f);
    /* emulated kernels through the launchers */
    int32_t *ditems = (int32_t *)emu_alloc(items.size() * 4);
    memcpy(ditems, items.data(), items.size() * 4);
    rc |= gdn_seq_conv_cuda(gcout, gcst, 0, gcsn, n_snap, x, w, ditems, n_items, rows, ch, kc, 0);
    /* one chunk per item (max_rows 0): bit for bit what the time-split launch gave */
    size_t split_diff = 0;
    {
        float *o1 = fill(R * ch, NAN, NAN), *s1 = dup(cst0, n_slots * win), *n1 = nosnap ? NULL : dup(csn0, ns1 * win);
        rc |= gdn_seq_conv_cuda(o1, s1, 0, n1, n_snap, x, w, ditems, n_items, 0, ch, kc, 0);
        split_diff += memcmp(o1, gcout, R * ch * 4) != 0;
        split_diff += memcmp(s1, gcst, n_slots * win * 4) != 0;
        if (!nosnap) split_diff += memcmp(n1, gcsn, ns1 * win * 4) != 0;
        if (split_diff) printf("  conv: the time-split launch differs from one chunk per item (%zu buffers)\n", split_diff);
    }
    double e[6] = {0, 0, 0, 0, 0, 0};
    size_t bad = split_diff;
    bad += cmp("conv out", gcout, rcout, R * ch, 1e-5, 1e-4, &e[0]);
    bad += cmp("conv state", gcst, rcst, n_slots * win, 1e-5, 1e-4, &e[1]);
    if (!nosnap) bad += cmp("conv snap", gcsn, rcsn, ns1 * win, 1e-5, 1e-4, &e[2]);
    /* the step at every tile count (0: the launcher's choice), then tiles 2 and 4 with the fused
     * norm's counters (items of up to GDN_SEQ_FUSE_ROWS rows normalised by the last tile block,
     * the longer ones by the norm kernel): each against the reference, every run bit-identical
     * to tiles 1, the counters back at zero */
    static const int tiles[] = {1, 2, 4, 0, 2, 4};
    float *gsout[6], *gsst[6], *gssn[6];
    size_t diff = 0, cnt_left = 0;
    std::string names, fused_names;
    unsigned *cnt = (unsigned *)calloc((size_t)n_items * hv + 1, sizeof(unsigned));
    for (int k = 0; k < 6; k++) {
        gsout[k] = fill(R * vw, NAN, NAN), gsst[k] = dup(sst0, n_slots * ss);
        gssn[k] = nosnap ? NULL : dup(ssn0, ns1 * ss);
        g_emu_launched.clear();
        rc |= gdn_seq_step_cuda_tiles(gsout[k], gsst[k], 0, gssn[k], n_snap, rcout, z, a, b, alog, dtb, nw, ditems,
                                      n_items, hk, hv, 1e-6f, tiles[k], k >= 4 ? cnt : NULL, 0);
        for (size_t i = 0; i < (size_t)n_items * hv; i++) cnt_left += cnt[i] != 0;
        if (k == 3) names = g_emu_launched;
        if (k == 5) fused_names = g_emu_launched;
        bad += cmp("step out", gsout[k], rsout, R * vw, 1e-4, 1e-3, &e[3]);
        bad += cmp("step S", gsst[k], rsst, n_slots * ss, 3e-5, 3e-4, &e[4]);
        if (!nosnap) bad += cmp("step snap", gssn[k], rssn, ns1 * ss, 3e-5, 3e-4, &e[5]);
        if (k > 0) {
            diff += memcmp(gsout[k], gsout[0], R * vw * 4) != 0;
            diff += memcmp(gsst[k], gsst[0], n_slots * ss * 4) != 0;
            diff += !nosnap && memcmp(gssn[k], gssn[0], ns1 * ss * 4) != 0;
        }
    }
    /* the launcher's choice: more than one tile (so the norm kernel) below 264 (item, head) pairs;
     * with counters through gdn_seq_step_cuda_tiles (the rows per item unknown to it) the norm
     * kernel still runs, for the longer items */
    const bool auto_ok = names == (n_items * hv < 264 ? "gdn_seq_step_kernel<T>;gdn_seq_norm_kernel;"
                                                      : "gdn_seq_step_kernel<T>;") &&
                         fused_names == "gdn_seq_step_kernel<T>;gdn_seq_norm_kernel;";
    free(cnt);
    /* untouched: slots of no item (and of empty items), and the snapshot marker where no row wrote */
    size_t moved = 0;
    for (int s = 0; s < n_slots; s++) {
        bool used = false;
        for (int i = 0; i < n_items; i++) used |= items[(size_t)i * GDN_SEQ_ITEM_INTS + 2] == s && lens[i] > 0;
        if (!used) {
            moved += memcmp(gcst + s * win, cst0 + s * win, win * 4) != 0;
            for (int k = 0; k < 6; k++) moved += memcmp(gsst[k] + s * ss, sst0 + s * ss, ss * 4) != 0;
        }
    }
    printf("gdn_seq emu items=%d rows=%zu hk=%d hv=%d kc=%d n_snap=%d%s: max_err conv out/state/snap=%.2g/%.2g/%.2g "
           "step out/S/snap=%.2g/%.2g/%.2g (tiles 1/2/4/auto/2+fused/4+fused) bad=%zu untouched_changed=%zu tiles_differ=%zu "
           "counters_left=%zu auto=%s rc=%d %s\n",
           n_items, R, hk, hv, kc, n_snap, nosnap ? "(NULL)" : "", e[0], e[1], e[2], e[3], e[4], e[5], bad, moved, diff, cnt_left,
           names.c_str(), rc, bad || moved || diff || cnt_left || !auto_ok || rc ? "FAIL" : "ok");
    return bad || moved || diff || cnt_left || !auto_ok || rc;
}

/* The chunked form (gdn_seq_step_chunked_cuda) against the reference: items of lens[i] rows,
 * snapshots on the items whose bit is set in snap_mask, chunk_min_rows min_rows; decay strong
 * (alpha down to ~1e-3) and beta near 0 and 1 when extreme. Items the chunked form does not take
 * (short, or with snapshots) must match the token-serial launch bit for bit; the taken ones the
 * reference at the step tolerances (out atol 1e-4 rtol 1e-3, S atol 3e-5 rtol 3e-4). */
static int run_chunked(const int *lens, int n_items, int hk, int hv, int min_rows,
                       unsigned snap_mask, bool extreme)
{
    const int D = GDN_SEQ_HEAD_DIM, ch = (2 * hk + hv) * D, n_slots = n_items + 2;
    std::vector<int32_t> items((size_t)n_items * GDN_SEQ_ITEM_INTS);
    int rows = 0, nsnap = 0, max_rows = 0, taken = 0;
    for (int i = 0; i < n_items; i++) {
        int32_t *it = &items[(size_t)i * GDN_SEQ_ITEM_INTS];
        const bool sn = (snap_mask >> i) & 1;
        it[0] = rows, it[1] = lens[i], it[2] = n_slots - 1 - i, it[3] = sn ? nsnap : -1;
        nsnap += sn ? lens[i] : 0;
        rows += lens[i];
        max_rows = std::max(max_rows, lens[i]);
        taken += !sn && lens[i] >= min_rows && min_rows > 0;
    }
    const int n_snap = nsnap;
    const size_t R = (size_t)rows, ss = (size_t)hv * D * D, vw = (size_t)hv * D;
    const size_t ns1 = (size_t)(n_snap > 0 ? n_snap : 1);
    float *qkv = fill(R * ch, -2, 2), *z = fill(R * vw, -2, 2);
    float *a = extreme ? fill(R * hv, 2, 6) : fill(R * hv, -3, 3);
    float *b = fill(R * hv, -3, 3);
    if (extreme)
        for (size_t i = 0; i < R * hv; i++) b[i] = (i % 3 == 0) ? -9.0f : (i % 3 == 1) ? 9.0f : b[i];
    float *alog = extreme ? fill(hv, 0.5f, 1.0f) : fill(hv, -2, 1), *dtb = fill(hv, -1, 1), *nw = fill(D, 0.5f, 1.5f);
    float *sst0 = fill(n_slots * ss, -0.1f, 0.1f), *ssn0 = fill(ns1 * ss, -9, -8);
    float *rout = fill(R * vw, 0, 0), *rst = dup(sst0, n_slots * ss), *rsn = dup(ssn0, ns1 * ss);
    int rc = gdn_seq_step_ref(rout, rst, 0, rsn, n_snap, qkv, z, a, b, alog, dtb, nw, items.data(), n_items, hk, hv, 1e-6f);
    int32_t *ditems = (int32_t *)emu_alloc(items.size() * 4);
    memcpy(ditems, items.data(), items.size() * 4);
    /* the token-serial launch */
    float *sout = fill(R * vw, NAN, NAN), *sst = dup(sst0, n_slots * ss), *ssn = dup(ssn0, ns1 * ss);
    rc |= gdn_seq_step_cuda(sout, sst, 0, ssn, n_snap, qkv, z, a, b, alog, dtb, nw, ditems, n_items, hk, hv, 1e-6f, 0);
    /* the chunked launch */
    const size_t wsf = gdn_seq_chunk_ws_floats(rows, hv);
    float *ws = fill(wsf, NAN, NAN);
    float *cout_ = fill(R * vw, NAN, NAN), *cst = dup(sst0, n_slots * ss), *csn = dup(ssn0, ns1 * ss);
    g_emu_launched.clear();
    /* with the fused norm's counters, as the runner calls it */
    unsigned *cnt = (unsigned *)calloc((size_t)n_items * hv, sizeof(unsigned));
    rc |= gdn_seq_step_chunked_cuda(cout_, cst, 0, csn, n_snap, qkv, z, a, b, alog, dtb, nw, ditems, n_items, hk, hv,
                                    1e-6f, min_rows, max_rows, ws, rows, cnt, 0);
    for (size_t i = 0; i < (size_t)n_items * hv; i++) rc |= cnt[i] != 0;
    free(cnt);
    /* items of at most GDN_SEQ_FUSE_ROWS rows: normalised by the step kernel, no norm launch */
    const bool fuse_ok = max_rows > GDN_SEQ_FUSE_ROWS ||
                         g_emu_launched.find("gdn_seq_norm_kernel") == std::string::npos;
    const bool chunk_ran = g_emu_launched.find("gdn_chunk_prep_kernel;gdn_chunk_state_kernel;") != std::string::npos;
    double e[3] = {0, 0, 0};
    size_t bad = cmp("chunked out", cout_, rout, R * vw, 1e-4, 1e-3, &e[0]);
    bad += cmp("chunked S", cst, rst, n_slots * ss, 3e-5, 3e-4, &e[1]);
    if (n_snap) bad += cmp("chunked snap", csn, rsn, ns1 * ss, 3e-5, 3e-4, &e[2]);
    size_t same = 0; /* the items not taken: bit for bit the token-serial launch */
    for (int i = 0; i < n_items; i++) {
        const int32_t *it = &items[(size_t)i * GDN_SEQ_ITEM_INTS];
        if (it[3] < 0 && it[1] >= min_rows && min_rows > 0) continue;
        same += memcmp(cout_ + (size_t)it[0] * vw, sout + (size_t)it[0] * vw, (size_t)it[1] * vw * 4) != 0;
        same += memcmp(cst + (size_t)it[2] * ss, sst + (size_t)it[2] * ss, ss * 4) != 0;
    }
    if (n_snap) same += memcmp(csn, ssn, ns1 * ss * 4) != 0;
    const bool f = bad || same || rc || chunk_ran != (taken > 0) || !fuse_ok;
    printf("gdn_seq emu chunked items=%d rows=%zu hk=%d hv=%d min_rows=%d taken=%d%s: max_err out/S/snap=%.2g/%.2g/%.2g "
           "bad=%zu serial_items_differ=%zu launched=%s rc=%d %s\n", n_items, R, hk, hv, min_rows, taken,
           extreme ? " extreme" : "", e[0], e[1], e[2], bad, same, g_emu_launched.c_str(), rc, f ? "FAIL" : "ok");
    return f;
}

/* A state stride larger than the packed one (states inside larger regions, as the KV pool's
 * chunks): the conv, the token-serial step and the chunked step, launchers and references, give
 * bit for bit what the packed launch gives (the arithmetic does not depend on where a state
 * lives), and the padding between states is never written. */
static int run_strided(const int *lens, int n_items, int hk, int hv, int kc, int min_rows)
{
    const int D = GDN_SEQ_HEAD_DIM, ch = (2 * hk + hv) * D, n_slots = n_items + 2;
    std::vector<int32_t> items((size_t)n_items * GDN_SEQ_ITEM_INTS);
    int rows = 0, nsnap = 0, max_rows = 0;
    for (int i = 0; i < n_items; i++) {
        int32_t *it = &items[(size_t)i * GDN_SEQ_ITEM_INTS];
        it[0] = rows, it[1] = lens[i], it[2] = n_slots - 1 - i, it[3] = i % 2 ? nsnap : -1;
        nsnap += i % 2 ? lens[i] : 0;
        rows += lens[i];
        max_rows = std::max(max_rows, lens[i]);
    }
    const size_t R = (size_t)rows, win = (size_t)ch * (kc - 1), ss = (size_t)hv * D * D, vw = (size_t)hv * D;
    const size_t cstr = win + 12, sstr = ss + 64, ns1 = (size_t)(nsnap > 0 ? nsnap : 1);
    float *x = fill(R * ch, -2, 2), *w = fill((size_t)ch * kc, -1, 1), *z = fill(R * vw, -2, 2);
    float *a = fill(R * hv, -3, 3), *b = fill(R * hv, -3, 3), *alog = fill(hv, -2, 1), *dtb = fill(hv, -1, 1);
    float *nw = fill(D, 0.5f, 1.5f);
    float *cst0 = fill(n_slots * win, -1, 1), *sst0 = fill(n_slots * ss, -0.1f, 0.1f);
    /* the strided copies: the packed states at every stride, the rest a marker */
    float *cwide = fill(n_slots * cstr, -7, -7), *swide = fill(n_slots * sstr, -7, -7);
    for (int sl = 0; sl < n_slots; sl++) {
        memcpy(cwide + sl * cstr, cst0 + sl * win, win * 4);
        memcpy(swide + sl * sstr, sst0 + sl * ss, ss * 4);
    }
    int32_t *ditems = (int32_t *)emu_alloc(items.size() * 4);
    memcpy(ditems, items.data(), items.size() * 4);
    const size_t wsf = gdn_seq_chunk_ws_floats(rows, hv);
    int rc = 0;
    size_t diff = 0;
    for (int ref = 0; ref < 2; ref++) {
        float *co = fill(R * ch, NAN, NAN), *cs = dup(cst0, n_slots * win), *cn = fill(ns1 * win, -9, -9);
        float *co2 = fill(R * ch, NAN, NAN), *cs2 = dup(cwide, n_slots * cstr), *cn2 = fill(ns1 * win, -9, -9);
        float *so = fill(R * vw, NAN, NAN), *sst = dup(sst0, n_slots * ss), *sn = fill(ns1 * ss, -9, -9);
        float *so2 = fill(R * vw, NAN, NAN), *sst2 = dup(swide, n_slots * sstr), *sn2 = fill(ns1 * ss, -9, -9);
        if (ref) {
            rc |= gdn_seq_conv_ref(co, cs, 0, cn, nsnap, x, w, items.data(), n_items, ch, kc);
            rc |= gdn_seq_conv_ref(co2, cs2, (int64_t)cstr, cn2, nsnap, x, w, items.data(), n_items, ch, kc);
            rc |= gdn_seq_step_ref(so, sst, 0, sn, nsnap, co, z, a, b, alog, dtb, nw, items.data(), n_items, hk, hv, 1e-6f);
            rc |= gdn_seq_step_ref(so2, sst2, (int64_t)sstr, sn2, nsnap, co, z, a, b, alog, dtb, nw, items.data(),
                                   n_items, hk, hv, 1e-6f);
        } else {
            float *ws = fill(wsf, NAN, NAN);
            rc |= gdn_seq_conv_cuda(co, cs, 0, cn, nsnap, x, w, ditems, n_items, rows, ch, kc, 0);
            rc |= gdn_seq_conv_cuda(co2, cs2, (int64_t)cstr, cn2, nsnap, x, w, ditems, n_items, rows, ch, kc, 0);
            rc |= gdn_seq_step_chunked_cuda(so, sst, 0, sn, nsnap, co, z, a, b, alog, dtb, nw, ditems, n_items, hk, hv,
                                            1e-6f, min_rows, max_rows, ws, rows, NULL, 0);
            rc |= gdn_seq_step_chunked_cuda(so2, sst2, (int64_t)sstr, sn2, nsnap, co, z, a, b, alog, dtb, nw, ditems,
                                            n_items, hk, hv, 1e-6f, min_rows, max_rows, ws, rows, NULL, 0);
        }
        diff += memcmp(co, co2, R * ch * 4) != 0;
        diff += memcmp(cn, cn2, ns1 * win * 4) != 0;
        diff += memcmp(so, so2, R * vw * 4) != 0;
        diff += memcmp(sn, sn2, ns1 * ss * 4) != 0;
        for (int sl = 0; sl < n_slots; sl++) {
            diff += memcmp(cs + sl * win, cs2 + sl * cstr, win * 4) != 0;
            diff += memcmp(sst + sl * ss, sst2 + sl * sstr, ss * 4) != 0;
            diff += memcmp(cs2 + sl * cstr + win, cwide + sl * cstr + win, (cstr - win) * 4) != 0; /* padding */
            diff += memcmp(sst2 + sl * sstr + ss, swide + sl * sstr + ss, (sstr - ss) * 4) != 0;
        }
    }
    /* a stride below the packed one is refused */
    float *p8 = (float *)8;
    rc |= gdn_seq_conv_cuda(p8, p8, (int64_t)win - 1, NULL, 0, p8, p8, ditems, 1, 1, ch, kc, 0) != ERR_INVAL;
    rc |= gdn_seq_step_cuda(p8, p8, (int64_t)ss - 4, NULL, 0, p8, p8, p8, p8, p8, p8, p8, ditems, 1, hk, hv, 1e-6f, 0) !=
          ERR_INVAL;
    printf("gdn_seq emu strided items=%d rows=%zu hk=%d hv=%d kc=%d min_rows=%d strides=%zu/%zu: differ=%zu rc=%d %s\n",
           n_items, R, hk, hv, kc, min_rows, cstr, sstr, diff, rc, diff || rc ? "FAIL" : "ok");
    return diff || rc;
}

/* gdn_seq_conv_step_cuda (items of 0 or 1 row: the conv in the step's launch) against
 * gdn_seq_conv_cuda then gdn_seq_step_cuda, both emulated, bit for bit: output, both states (at
 * padded strides, the padding untouched) and both snapshot buffers (snapshots on odd items, the
 * last index cut). */
static int run_fused(const int *lens, int n_items, int hk, int hv, int kc)
{
    const int D = GDN_SEQ_HEAD_DIM, ch = (2 * hk + hv) * D, n_slots = n_items + 2;
    std::vector<int32_t> items((size_t)n_items * GDN_SEQ_ITEM_INTS);
    int rows = 0, nsnap = 0;
    for (int i = 0; i < n_items; i++) {
        int32_t *it = &items[(size_t)i * GDN_SEQ_ITEM_INTS];
        it[0] = rows, it[1] = lens[i], it[2] = n_slots - 1 - i, it[3] = i % 2 ? nsnap : -1;
        nsnap += i % 2 ? lens[i] : 0;
        rows += lens[i];
    }
    const int n_snap = nsnap > 1 ? nsnap - 1 : nsnap;
    const size_t R = (size_t)(rows > 0 ? rows : 1), win = (size_t)ch * (kc - 1), ss = (size_t)hv * D * D;
    const size_t vw = (size_t)hv * D, cstr = win + 8, sstr = ss + 16, ns1 = (size_t)(n_snap > 0 ? n_snap : 1);
    float *x = fill(R * ch, -2, 2), *w = fill((size_t)ch * kc, -1, 1), *z = fill(R * vw, -2, 2);
    float *a = fill(R * hv, -3, 3), *b = fill(R * hv, -3, 3), *alog = fill(hv, -2, 1), *dtb = fill(hv, -1, 1);
    float *nw = fill(D, 0.5f, 1.5f), *cst0 = fill(n_slots * cstr, -1, 1), *sst0 = fill(n_slots * sstr, -0.1f, 0.1f);
    int32_t *ditems = (int32_t *)emu_alloc(items.size() * 4);
    memcpy(ditems, items.data(), items.size() * 4);
    float *o[2], *cs[2], *cn[2], *st[2], *sn[2];
    for (int k = 0; k < 2; k++) {
        o[k] = fill(R * vw, NAN, NAN), cs[k] = dup(cst0, n_slots * cstr), cn[k] = fill(ns1 * win, -9, -9);
        st[k] = dup(sst0, n_slots * sstr), sn[k] = fill(ns1 * ss, -9, -9);
    }
    float *mix = fill(R * ch, NAN, NAN);
    int rc = gdn_seq_conv_cuda(mix, cs[0], (int64_t)cstr, cn[0], n_snap, x, w, ditems, n_items, 1, ch, kc, 0);
    rc |= gdn_seq_step_cuda(o[0], st[0], (int64_t)sstr, sn[0], n_snap, mix, z, a, b, alog, dtb, nw, ditems, n_items,
                            hk, hv, 1e-6f, 0);
    unsigned *cnt = (unsigned *)emu_alloc((size_t)n_items * hk * 4 + 4);
    memset(cnt, 0, (size_t)n_items * hk * 4 + 4);
    g_emu_launched.clear();
    rc |= gdn_seq_conv_step_cuda(o[1], st[1], (int64_t)sstr, sn[1], cs[1], (int64_t)cstr, cn[1], n_snap, x, w, ch, kc,
                                 z, a, b, alog, dtb, nw, ditems, n_items, hk, hv, 1e-6f, cnt, 0);
    size_t diff = 0;
    for (int i = 0; i < n_items * hk; i++) diff += cnt[i] != 0; /* the counters back to 0 */
    diff += memcmp(o[0], o[1], R * vw * 4) != 0;
    diff += memcmp(cs[0], cs[1], n_slots * cstr * 4) != 0;
    diff += memcmp(cn[0], cn[1], ns1 * win * 4) != 0;
    diff += memcmp(st[0], st[1], n_slots * sstr * 4) != 0;
    diff += memcmp(sn[0], sn[1], ns1 * ss * 4) != 0;
    for (int sl = 0; sl < n_slots; sl++) { /* the padding past each slot's states untouched */
        diff += memcmp(cs[1] + sl * cstr + win, cst0 + sl * cstr + win, (cstr - win) * 4) != 0;
        diff += memcmp(st[1] + sl * sstr + ss, sst0 + sl * sstr + ss, (sstr - ss) * 4) != 0;
    }
    const bool one = g_emu_launched == "gdn_seq_step_kernel<1, true>;";
    const int fail = rc || diff || !one;
    printf("gdn_seq_conv_step emu items=%d hk=%d hv=%d kc=%d n_snap=%d ran=%s: buffers differing=%zu rc=%d %s\n",
           n_items, hk, hv, kc, n_snap, g_emu_launched.c_str(), diff, rc, fail ? "FAIL" : "ok");
    return fail;
}

int main(int argc, char **argv)
{
    const bool quick = argc > 1 && strcmp(argv[1], "quick") == 0;
    int f = 0;
    static const int l1[] = {3, 1, 7, 0, 5}, l2[] = {37}, l3[] = {1, 1, 1, 1}, l4[] = {2, 9, 4}, l5[] = {6, 0, 2, 0};
    f += run(l1, 5, 2, 4, 4, 1);
    f += run(l3, 4, 2, 2, 2, 0);
    f += run(l5, 4, 1, 4, 4, 2);
    {   /* the conv inside the step's launch (items of 0 or 1 row) */
        static const int f1[] = {1, 1, 0, 1}, f2[] = {1, 1, 1};
        f += run_fused(f1, 4, 2, 4, 4);
        f += run_fused(f2, 3, 1, 1, 2);
        f += run_fused(f2, 3, 1, 2, 8);
        if (!quick) {
            static const int f3[] = {1};
            f += run_fused(f3, 1, 16, 32, 4); /* the model's heads */
        }
    }
    if (!quick) {
        f += run(l2, 1, 1, 1, 4, 1);
        f += run(l4, 3, 1, 2, 3, 3);
        f += run(l1, 5, 2, 2, 3, -1); /* no snapshot buffers */
        static const int lf[] = {4, 1};
        f += run(lf, 2, 16, 32, 4, 1); /* the model's head counts: 8192 conv channels, 32 value heads */
        static const int ll[] = {70, 33, 16};
        f += run(ll, 3, 1, 2, 2, 5); /* several chunks of 16 and 32 rows, and a partial one */
        static const int ls[] = {40, 2, 1, 0};
        f += run(ls, 4, 1, 2, 4, 1); /* conv time chunks next to items shorter than the window */
        static const int l5i[] = {2, 1, 3, 1, 1}, l9i[] = {1, 2, 1, 1, 0, 1, 1, 3, 1};
        f += run(l5i, 5, 16, 32, 4, 1); /* 160 (item, head) pairs: 2 tiles chosen */
        f += run(l9i, 9, 16, 32, 4, 2); /* 288 pairs: 1 tile chosen */
    }
    {   /* the chunked form: chunk boundaries (63, 64, 65, 128, 130 rows), short and snapshot
         * items beside taken ones, strong decays and extreme betas, the model's heads */
        static const int c1[] = {65, 3, 130, 64, 0, 63}, c2[] = {200}, c3[] = {1, 70, 2};
        f += run_chunked(c1, 6, 1, 2, 64, 0x1u << 3, false); /* the 64-row item has snapshots */
        f += run_chunked(c2, 1, 2, 4, 16, 0, true);
        f += run_chunked(c3, 3, 2, 2, 1, 0x1u, false);       /* min 1: every item without snapshots */
        f += run_chunked(c3, 3, 2, 2, 0, 0, false);          /* min 0: nothing taken */
        static const int d1[] = {1, 1, 1, 1}, v4[] = {4, 8, 1, 0}; /* decode, verify windows */
        f += run_chunked(d1, 4, 2, 4, 64, 0, false);         /* 2 x 2 tiles: the fused norm */
        f += run_chunked(v4, 4, 16, 32, 64, 0x3u, false);    /* 128 pairs: 4 tiles, snapshots */
        if (!quick) {
            static const int c4[] = {130};
            f += run_chunked(c4, 1, 16, 32, 64, 0, false);
            f += run_chunked(c1, 6, 2, 4, 32, 0, true);
            static const int c5[] = {2048, 1, 1};
            f += run_chunked(c5, 3, 1, 2, 64, 0, false); /* a 2,048-row prefill: S over 32 chunks */
        }
    }
    {   /* states at a stride larger than the packed one */
        static const int t1[] = {3, 70, 0, 1}, t2[] = {5, 2};
        f += run_strided(t1, 4, 1, 2, 4, 64);
        if (!quick)
            f += run_strided(t2, 2, 16, 32, 4, 1);
    }
    /* launcher argument checks (nothing launched) */
    float *p = (float *)8;
    const int32_t *ip = (const int32_t *)8;
    int inval = 0;
    inval += gdn_seq_step_cuda(p, p, 0, NULL, 0, p, p, p, p, p, p, p, ip, 1, 3, 4, 1e-6f, 0) == ERR_INVAL;
    inval += gdn_seq_conv_cuda(p, p, 0, NULL, 0, p, p, ip, 1, 1, 16, 9, 0) == ERR_INVAL;
    inval += gdn_seq_conv_cuda(p, p, 0, NULL, 0, p, p, ip, 65536, 1, 16, 4, 0) == ERR_INVAL;
    inval += gdn_seq_conv_cuda(p, p, 0, NULL, 0, p, p, ip, 0, 1, 16, 4, 0) == 0;
    inval += gdn_seq_step_cuda_tiles(p, p, 0, NULL, 0, p, p, p, p, p, p, p, ip, 1, 2, 4, 1e-6f, 3, NULL, 0) == ERR_INVAL;
    inval += gdn_seq_step_chunked_cuda(p, p, 0, NULL, 0, p, p, p, p, p, p, p, ip, 1, 2, 4, 1e-6f, 64, 128, NULL, 128, NULL, 0) == ERR_INVAL;
    inval += gdn_seq_step_chunked_cuda(p, p, 0, NULL, 0, p, p, p, p, p, p, p, ip, 1, 2, 4, 1e-6f, 64, 128, (float *)4, 128, NULL, 0) == ERR_INVAL;
    printf("gdn_seq emu launcher checks: %d/7 ok, refused launches=%d\n", inval, g_emu_bad_launches);
    f += inval != 7 || g_emu_bad_launches != 0;
    printf("failures=%d\n", f);
    return f != 0;
}
