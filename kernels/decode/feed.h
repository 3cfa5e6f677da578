/*
 * decode/feed.h - where a workgroup's keys come from: the sequence's metadata (read_seq), the tiles
 * each wave streams (split_wave_tiles), the block table read ahead (guess_table_block, tile_feed) and
 * the loads tile_feed issues into a KV pipeline (kv_pipe_regs.h, kv_pipe_lds_nv.h; make_pipe).
 */
#ifndef R35A_DECODE_FEED_H
#define R35A_DECODE_FEED_H

#include "decode/policy.h"

namespace r35a {

/* Where a sequence's query rows and keys are: the one place its metadata is read. */
struct seq_meta {
    int q0, M, L;
};
R35A_DEV seq_meta read_seq(const r35a_decode_args &a, int s) {
    seq_meta m;
    m.q0 = a.query_start_loc[s];
    m.M = a.query_start_loc[s + 1] - m.q0;
    m.L = a.seq_lens[s];
    return m;
}

/* The tiles one wave of a workgroup streams: split `split` of the sequence's whole tiles (split evenly
 * over the splits it uses, decode_args.h), every KW-th from the key group's kg: for the kernel body
 * and its table guess (the merge counts its records with the same decode_args.h rules). */
struct wave_tiles {
    int nsplit, t_begin, t_end, mine;   /* splits the sequence uses, the split's [t_begin, t_end), the wave's count */
};
R35A_DEV wave_tiles split_wave_tiles(int L, int M, int W, int planned, int min_tiles, int split, int kg, int kw) {
    wave_tiles r;
    const int tile_lo = r35a_decode_seq_tile_lo(L, M, W), ntiles = r35a_decode_seq_ntiles(L, M, W);
    r.nsplit = r35a_decode_seq_splits(planned, ntiles, min_tiles);
    r.t_begin = tile_lo + r35a_decode_split_first_tile(split, r.nsplit, ntiles);
    r.t_end = tile_lo + r35a_decode_split_first_tile(split + 1, r.nsplit, ntiles);
    r.mine = r.t_end - r.t_begin > kg ? (r.t_end - r.t_begin - kg + kw - 1) / kw : 0;
    return r;
}
/* Tile of a wave's step i, clamped to its last one (to t_begin for a wave without tiles). */
R35A_DEV int wave_tile(const wave_tiles &r, int i, int kg, int kw) {
    return r.mine > 0 ? r.t_begin + imin(i, r.mine - 1) * kw + kg : r.t_begin;
}

/* The first block of a wave's block-table entries, read before the sequence's metadata arrives:
 * the entries of the tiles the wave would take if the sequence had max_seq_len keys and one query
 * (a decode step at batch 1, as plans are made). tile_feed::start keeps them when the real tiles
 * turn out the same for every lane, so the first KV loads wait for one round trip (the metadata
 * and the table together) instead of two. Reads stay in bounds: the host checked that a row of the
 * table holds ceil(max_seq_len / page_size) entries. idx -1: no guess (the workgroup would have no
 * tiles). */
struct table_guess {
    int idx, entry;
};
R35A_DEV table_guess guess_table_block(const r35a_decode_args &a, int s, int split, int kg, int kw) {
    table_guess g;
    g.idx = -1;
    g.entry = 0;
    const wave_tiles r = split_wave_tiles(a.max_seq_len, 1, a.window, a.num_splits, a.min_split_tiles, split, kg, kw);
    if (split >= r.nsplit || r.mine <= 0) return g;   /* uniform */
    g.idx = wave_tile(r, lane_id(), kg, kw) * 16 / a.page_size;
    g.entry = load_i32(a.block_table + (i64)s * a.block_table_stride + g.idx);
    return g;
}

/* Where a wave's tiles come from: its tile i is tile t_begin + i * KW + kg of the sequence. The
 * block-table entries are read 32 tiles at a time, one per lane (page and slot of tile 32b + lane),
 * a block ahead of use, so issuing a tile never waits for its table entry; issue() picks the
 * entry with a lane read and starts the tile's loads. The one place KV addresses are formed (and
 * where a check of the entries against the cache's page count would go).
 * Pipelines that count their loads in order (gfx11's vmcnt: registers, P::ISSUE_ALWAYS) issue a
 * load every step: a step past the wave's last tile reloads that tile (a cache hit, never used), so
 * every path through the loop issues the same loads and the compiler's waits stay exact (a load
 * issued on one path only makes it wait for everything, the next tile's loads included). */
struct tile_feed {
    const int32_t *bt;
    const char *k_base, *v_base;   /* this kv head's d slice in page 0 slot 0 */
    i64 k_page, v_page, k_slot, v_slot;   /* bytes */
    int B, L, lo, kw, kg, num_pages;
    wave_tiles r;                 /* the wave's tiles */
    int page_cur, slot_cur, page_next, slot_next;
    bool bad;                     /* this lane read a block-table entry outside 0..num_pages-1 */

    R35A_MEMBER int tile_of(int i) const { return wave_tile(r, i, kg, kw); }
    /* block b's table index of this lane (its tile 32 b + lane) and the tile's first slot in the page */
    R35A_MEMBER int table_index(int b, int &slot) const {
        const int key = tile_of(32 * b + lane_id()) * 16, idx = key / B;
        slot = key - idx * B;
        return idx;
    }
    R35A_MEMBER int checked_page(int entry) {
        const bool ok = r35a_page_index_ok(entry, num_pages);   /* one compare per page entry */
        bad |= !ok;
        return ok ? entry : 0;
    }
    R35A_MEMBER void table_block(int b, int &page, int &slot) { page = checked_page(load_i32(bt + table_index(b, slot))); }
    /* block 0 from the guess where every lane's index agrees (uniform), else read now */
    R35A_MEMBER void start(const table_guess &guess) {
        const int idx = table_index(0, slot_cur);
        int entry = guess.entry;
        if (wave_any(idx != guess.idx)) entry = load_i32(bt + idx);
        page_cur = checked_page(entry);
        if (r.mine > 32) table_block(1, page_next, slot_next);
    }
    template <class P>
    R35A_MEMBER void issue(P &pipe, int slot, int i) {
        const int mine = r.mine;
        if (!P::ISSUE_ALWAYS && i >= mine) {   /* uniform: this wave has no tile i */
            pipe.skip(slot);
            return;
        }
        if (i > 0 && (i & 31) == 0 && i < mine) {   /* the next block of table entries; load the one after */
            page_cur = page_next;
            slot_cur = slot_next;
            if (mine > i + 32) table_block((i >> 5) + 1, page_next, slot_next);
        }
        const int tile = tile_of(i), lane = (i < mine ? i : imax(mine - 1, 0)) & 31;
        const i64 page = read_lane(page_cur, lane);
        const i64 slot_in_page = read_lane(slot_cur, lane);
        pipe.issue(slot, k_base + page * k_page + slot_in_page * k_slot, v_base + page * v_page + slot_in_page * v_slot,
                   k_slot, v_slot, imin(16, L - 16 * tile), imax(lo - 16 * tile, 0));
    }
};

/* A wave's KV pipeline on its LDS region: a shared one (kv_pipe_lds with SHARERS > 1) also takes the
 * wave's share of each tile (its row wave) and the sharers' named barrier. */
template <class P>
R35A_DEV P make_pipe(unsigned char *region, int sharer, int barrier) {
    if constexpr (P::SHARERS > 1) {
        return P(region, sharer, barrier);
    } else {
        (void)sharer;
        (void)barrier;
        return P(region);
    }
}

} /* namespace r35a */

#endif /* R35A_DECODE_FEED_H */
