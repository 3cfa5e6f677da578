// kv_stream.cu - a measurement, not part of the library or its build: how fast can the decode kernel's
// KV access pattern be read on an NVIDIA GPU, with no attention arithmetic at all? It answers whether the
// decode kernel loses time to its stream (the paged layout, 16-key tiles, the copy form) or to what it
// computes.
//
// The problem is the bench's: f16, D = 128, 8 kv heads, page 16 (one 16-key tile per page and kv head:
// 4 KiB of K and 4 KiB of V, each contiguous), block tables a random permutation of the pool, cold L2
// (the pool is 2.1 GB). Grid (splits, kv heads, batch) and 4 warps per block as the decode kernel's;
// each warp streams its split's tiles round-robin through an S-stage shared-memory ring and touches a
// few words of each (an XOR into a sink, so nothing is dead). Modes:
//   0: cp.async.cg, 16 bytes per lane and copy, rows padded by 16 bytes (the decode kernel's form);
//   1: cp.async.bulk per row (lane r < 16 copies K row r, lane 16 + r V row r: 256 bytes each), mbarrier;
//   2: cp.async.bulk of the whole 4 KiB K and V slices by one lane, rows unpadded (ldmatrix would
//      conflict on them: an upper bound for a bulk-copy pipeline, not a usable layout as is);
//   3: as 0, but a block per (split, sequence) with a warp per kv head, every warp on the same pages in
//      the same order (the kv heads of a page read together: a page's 16 x Hkv rows are contiguous);
//   4: (kv_stream_dyn) persistent blocks whose warps take chunks of tiles from a global counter.
// `kv_stream rows` runs the row-width table instead of the default list: 64-, 128- and
// 256-byte key rows (fp8 D 64; f16 D 64 / fp8 D 128; f16 D 128 / fp8 D 256), the pool's page and head
// strides scaled to the row, launches rotating over disjoint page sets at 8K (cold L2); a few rows again
// with sorted pages (each sequence's pages consecutive: whether short rows lose to DRAM pages or TLB reach)
// and in vLLM's layout (nhd: [pages][16][Hkv][row], a kv head's 16 rows Hkv rows apart).
// `kv_stream bulkrows`: mode 1 (a bulk copy per row, padded rows) against modes 0 and 2 at
// 64- and 128-byte rows.
// Median of 9 (batch 16) or 15 (batch 1) launches timed with events; GB/s = K + V bytes / time.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -o kv_stream lab/kv_stream.cu && ./kv_stream
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <random>
#include <string>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)

struct Args {
    const char *k, *v;
    const int *bt;
    unsigned *sink;
    long long page_stride, head_stride;   // bytes
    long long slot_stride;                // bytes between a kv head's key rows (modes 0, 1 and 3)
    int pages_per_seq, tiles_per_split, num_splits;
    int pool_pages;   // pages in the pool (block-table entries)
    int bt_offset;   // first block-table row of this launch (launches rotate over disjoint page sets)
};

__device__ __forceinline__ unsigned smem_u32(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

// One 16-key tile of K and V (rows slot_stride bytes apart in memory) into staged rows ROW bytes apart:
// 16-byte cp.async per lane, as the decode kernel copies, then one commit group.
template <int RB, int ROW>
__device__ __forceinline__ void copy_tile(unsigned char *kd, unsigned char *vd, const char *kg, const char *vg,
                                          long long slot_stride, int lane) {
    constexpr int CPR = RB / 16, RPJ = 32 / CPR;
    const int rl = lane / CPR, cl = lane % CPR;
#pragma unroll
    for (int j = 0; j < 16 / RPJ; ++j) {
        const int row = RPJ * j + rl;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_u32(kd + row * ROW + 16 * cl)), "l"(kg + row * slot_stride + 16 * cl) : "memory");
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_u32(vd + row * ROW + 16 * cl)), "l"(vg + row * slot_stride + 16 * cl) : "memory");
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
}

template <int MODE, int S, int RB, int WARPS, int KT = 16>
__global__ void __launch_bounds__(32 * WARPS) kv_stream(Args a) {
    extern __shared__ __align__(128) unsigned char smem[];
    // RB: row bytes (D x element bytes); staged pitch: an odd number of 16-byte bank groups, as the kernel's
    constexpr int ROW = MODE == 2 ? RB : ((RB / 16) % 2 == 0 ? RB + 16 : RB + 32);
    constexpr int PAGES = KT / 16;                  // pages (16-key tiles) per step
    static_assert(KT == 16 || MODE == 2, "steps of several pages: mode 2 only");
    constexpr int TILE = KT * ROW;
    constexpr bool HEADS = MODE == 3;             // a warp per kv head, all on the same pages
    constexpr bool CPASYNC = MODE == 0 || MODE == 3;
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int split = blockIdx.x, g = HEADS ? w : blockIdx.y, s = blockIdx.z;
    unsigned char *ring = smem + w * (S * 2 * TILE + 64);
    unsigned long long *bar = (unsigned long long *)(ring + S * 2 * TILE);   // S mbarriers (8 B each)
    const int t0 = split * a.tiles_per_split;
    const int steps = a.tiles_per_split / PAGES;
    const int mine = HEADS ? steps : (steps - w + WARPS - 1) / WARPS;   // steps of this warp
    const int *bt = a.bt + (a.bt_offset + s) * a.pages_per_seq;
    if (!CPASYNC && lane == 0)
        for (int i = 0; i < S; ++i)
            asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(smem_u32(bar + i)));
    __syncwarp();
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    auto issue = [&](int i) {
        const int slot = i % S;
        unsigned char *kd = ring + slot * 2 * TILE, *vd = kd + TILE;
        if (i >= mine) {   // keep the group count
            if (CPASYNC) asm volatile("cp.async.commit_group;" ::: "memory");
            return;
        }
        const int tile = t0 + (HEADS ? i : (w + i * WARPS) * PAGES);
        const int page = bt[tile];   // page size 16: one tile per page
        const char *kg = a.k + page * a.page_stride + g * a.head_stride;
        const char *vg = a.v + page * a.page_stride + g * a.head_stride;
        (void)tile;
        if (CPASYNC) {
            copy_tile<RB, ROW>(kd, vd, kg, vg, a.slot_stride, lane);
        } else if (MODE == 1) {
            if (lane == 0)
                asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(smem_u32(bar + slot)), "r"(2 * 16 * RB) : "memory");
            __syncwarp();
            const int row = lane & 15;
            const char *src = (lane < 16 ? kg : vg) + row * a.slot_stride;
            unsigned char *dst = (lane < 16 ? kd : vd) + row * ROW;
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                         ::"r"(smem_u32(dst)), "l"(src), "r"(RB), "r"(smem_u32(bar + slot)) : "memory");
        } else {
            if (lane == 0)
                asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(smem_u32(bar + slot)), "r"(2 * KT * RB) : "memory");
            __syncwarp();
            if (lane < PAGES) {   // lane p copies page p of the step
                const int pg = bt[tile + lane];
                const char *kp = a.k + pg * a.page_stride + g * a.head_stride;
                const char *vp = a.v + pg * a.page_stride + g * a.head_stride;
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                             ::"r"(smem_u32(kd + lane * 16 * RB)), "l"(kp), "r"(16 * RB), "r"(smem_u32(bar + slot)) : "memory");
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                             ::"r"(smem_u32(vd + lane * 16 * RB)), "l"(vp), "r"(16 * RB), "r"(smem_u32(bar + slot)) : "memory");
            }
        }
    };
    unsigned acc = 0;
    for (int p = 0; p < S - 1; ++p) issue(p);
    for (int i = 0; i < mine; ++i) {
        issue(i + S - 1);
        const int slot = i % S;
        if (CPASYNC) {
            asm volatile("cp.async.wait_group %0;" ::"n"(S - 1) : "memory");
        } else {
            const unsigned phase = (i / S) & 1;
            unsigned done = 0;
            while (!done)
                asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                             : "=r"(done) : "r"(smem_u32(bar + slot)), "r"(phase) : "memory");
        }
        __syncwarp();
        const unsigned *kd = (const unsigned *)(ring + slot * 2 * TILE);
        acc ^= kd[lane * 7] + kd[TILE / 4 + lane * 5];
        __syncwarp();   // the slot is refilled S - 1 steps later by this warp only
    }
    if (CPASYNC) asm volatile("cp.async.wait_group 0;" ::: "memory");
    if (acc == 0x12345678u) a.sink[0] = acc;
}

// Median of `reps` launches timed with events; launch(r) runs launch r (r = -1: the untimed warm-up).
template <class L>
static float median_launch_us(int reps, L launch) {
    launch(-1);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    std::vector<float> ts;
    for (int r = 0; r < reps; ++r) {
        cudaEventRecord(e0);
        launch(r);
        cudaEventRecord(e1);
        CK(cudaEventSynchronize(e1));
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        ts.push_back(ms * 1000.f);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    std::sort(ts.begin(), ts.end());
    return ts[reps / 2];
}

static const int *g_bt_sorted;   // the identity block table (each sequence's pages consecutive)

template <int MODE, int S, int RB, int WARPS, int KT = 16>
static float run(const Args &a0, int B, int hkv, int ctx, int splits, int reps, bool sorted = false, bool nhd = false) {
    Args a = a0;
    if (sorted) a.bt = g_bt_sorted;
    if (nhd && MODE == 2) {
        printf("mode 2 copies whole tiles: not for the nhd layout\n");
        return 0.f;
    }
    a.num_splits = splits;
    a.tiles_per_split = ctx / 16 / splits;
    a.pages_per_seq = ctx / 16;
    a.head_stride = nhd ? RB : 16LL * RB;   // hnd: [pages][Hkv][16][row]; nhd (vLLM's): [pages][16][Hkv][row]
    a.slot_stride = nhd ? (long long)hkv * RB : RB;
    a.page_stride = (long long)hkv * 16 * RB;
    const int sets = a.pool_pages / (B * a.pages_per_seq);   // disjoint page sets for the launches to rotate over
    constexpr int ROW = MODE == 2 ? RB : ((RB / 16) % 2 == 0 ? RB + 16 : RB + 32);
    const int smem = WARPS * (S * 2 * KT * ROW + 64);
    auto k = kv_stream<MODE, S, RB, WARPS, KT>;
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    if (MODE == 3 && WARPS != hkv) {
        printf("mode 3 needs a warp per kv head\n");
        return 0.f;
    }
    dim3 grid(splits, MODE == 3 ? 1 : hkv, B);
    const float t = median_launch_us(reps, [&](int r) {
        a.bt_offset = r < 0 ? 0 : (r % (sets > 0 ? sets : 1)) * B;
        k<<<grid, 32 * WARPS, smem>>>(a);
    });
    int occ = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k, 32 * WARPS, smem);
    const double bytes = 2.0 * B * hkv * (double)ctx * RB;
    printf("%s %s mode %d S %d RB %3d warps %d keys/step %2d B %2d ctx %6d splits %3d smem %6d blk/SM %d: %8.1f us %6.0f GB/s\n", sorted ? "sorted  " : "shuffled", nhd ? "nhd" : "hnd", MODE,
           S, RB, WARPS, KT, B, ctx, splits, smem, occ, t, bytes / t / 1e3);
    return t;
}


// Mode 4 (its own kernel): dynamic distribution. A grid of `blocks` persistent blocks; each warp takes
// chunks of CH tiles of one (sequence, kv head) from a global counter (one atomicAdd per chunk) and
// streams them through its ring as mode 0 does, the next chunk's copies issued while the last tiles of
// the current one are in flight. Whether handing out work as it is done removes the end-time spread of
// static splits (lab/decode_timeline.py: loops of 92-138 us on equal work at batch 16 8K), with no
// attention arithmetic to confound it.
template <int S, int RB, int WARPS, int CH>
__global__ void __launch_bounds__(32 * WARPS) kv_stream_dyn(Args a, unsigned *counter, int num_seqs, int hkv) {
    extern __shared__ __align__(128) unsigned char smem[];
    constexpr int ROW = (RB / 16) % 2 == 0 ? RB + 16 : RB + 32;
    constexpr int TILE = 16 * ROW;
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    unsigned char *ring = smem + w * (S * 2 * TILE + 64);
    const int chunks = a.pages_per_seq / CH;                 // chunks per (sequence, kv head)
    const int items = num_seqs * hkv * chunks;
    int item = 0, n_end = 0x7fffffff;                        // the issuer's current chunk; tiles the warp will have
    auto issue = [&](int i) {
        const int slot = i % S;
        if (i >= n_end) {
            asm volatile("cp.async.commit_group;" ::: "memory");
            return;
        }
        if (i % CH == 0) {   // the next chunk
            unsigned got = 0;
            if (lane == 0) got = atomicAdd(counter, 1u);
            item = (int)__shfl_sync(0xffffffffu, got, 0);
            if (item >= items) {
                n_end = i;
                asm volatile("cp.async.commit_group;" ::: "memory");
                return;
            }
        }
        const int c = item % chunks, g = (item / chunks) % hkv, sq = item / (chunks * hkv);
        const int page = a.bt[(a.bt_offset + sq) * a.pages_per_seq + c * CH + i % CH];
        const char *kg = a.k + page * a.page_stride + g * a.head_stride;
        const char *vg = a.v + page * a.page_stride + g * a.head_stride;
        unsigned char *kd = ring + slot * 2 * TILE;
        copy_tile<RB, ROW>(kd, kd + TILE, kg, vg, a.slot_stride, lane);
    };
    unsigned acc = 0;
    for (int p = 0; p < S - 1; ++p) issue(p);
    for (int i = 0; i < n_end; ++i) {
        issue(i + S - 1);
        asm volatile("cp.async.wait_group %0;" ::"n"(S - 1) : "memory");
        __syncwarp();
        if (i >= n_end) break;
        const unsigned *kd = (const unsigned *)(ring + (i % S) * 2 * TILE);
        acc ^= kd[lane * 7] + kd[TILE / 4 + lane * 5];
        __syncwarp();
    }
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    if (acc == 0x12345678u) a.sink[0] = acc;
}

template <int S, int RB, int WARPS, int CH>
static float run_dyn(const Args &a0, int B, int hkv, int ctx, int blocks_per_sm, int reps) {
    Args a = a0;
    a.pages_per_seq = ctx / 16;
    a.head_stride = 16LL * RB;
    a.slot_stride = RB;
    a.page_stride = (long long)hkv * 16 * RB;
    const int sets = a.pool_pages / (B * a.pages_per_seq);
    constexpr int ROW = (RB / 16) % 2 == 0 ? RB + 16 : RB + 32;
    const int smem = WARPS * (S * 2 * 16 * ROW + 64);
    auto k = kv_stream_dyn<S, RB, WARPS, CH>;
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    int occ = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k, 32 * WARPS, smem);
    const int bps = blocks_per_sm < occ ? blocks_per_sm : occ;
    unsigned *counters;
    CK(cudaMalloc(&counters, (reps + 1) * sizeof(unsigned)));
    CK(cudaMemset(counters, 0, (reps + 1) * sizeof(unsigned)));
    const float t = median_launch_us(reps, [&](int r) {
        a.bt_offset = r < 0 ? 0 : (r % (sets > 0 ? sets : 1)) * B;
        k<<<sms * bps, 32 * WARPS, smem>>>(a, counters + (r < 0 ? reps : r), B, hkv);
    });
    CK(cudaFree(counters));
    const double bytes = 2.0 * B * hkv * (double)ctx * RB;
    printf("shuffled hnd mode 4 S %d RB %3d warps %d chunk %2d tiles  B %2d ctx %6d blocks %4d (%d/SM) smem %6d: %8.1f us %6.0f GB/s\n",
           S, RB, WARPS, CH, B, ctx, sms * bps, bps, smem, t, bytes / t / 1e3);
    return t;
}

int main(int argc, char **argv) {
    const int D = 128, RB = 2 * D, hkv = 8;   // the pool: sized for the widest rows (f16 D = 128)
    // a pool big enough to be cold: 2.2 GB of K and V at B16 32K, pages shuffled
    const int B = 16, ctx = 32768, pps = ctx / 16, pages = B * pps;
    const long long page_stride = (long long)hkv * 16 * D * 2, head_stride = 16 * D * 2;
    char *k, *v;
    int *bt;
    unsigned *sink;
    CK(cudaMalloc(&k, (size_t)pages * page_stride));
    CK(cudaMalloc(&v, (size_t)pages * page_stride));
    CK(cudaMemset(k, 1, (size_t)pages * page_stride));
    CK(cudaMemset(v, 2, (size_t)pages * page_stride));
    CK(cudaMalloc(&bt, pages * sizeof(int)));
    CK(cudaMalloc(&sink, 64));
    std::vector<int> perm(pages);
    for (int i = 0; i < pages; ++i) perm[i] = i;
    std::mt19937 rng(1);
    std::shuffle(perm.begin(), perm.end(), rng);
    CK(cudaMemcpy(bt, perm.data(), pages * sizeof(int), cudaMemcpyHostToDevice));
    int *bt_sorted;
    CK(cudaMalloc(&bt_sorted, pages * sizeof(int)));
    for (int i = 0; i < pages; ++i) perm[i] = i;
    CK(cudaMemcpy(bt_sorted, perm.data(), pages * sizeof(int), cudaMemcpyHostToDevice));
    g_bt_sorted = bt_sorted;
    Args a{k, v, bt, sink, page_stride, head_stride, 2LL * D, pps, 0, 0, pages, 0};
    if (argc > 1 && std::string(argv[1]) == "rows") {
        // Row width: the decode kernels' tiles by bytes per key row (fp8 D 64: 64, f16 D 64 / fp8 D 128: 128,
        // f16 D 128 / fp8 D 256: 256), batch 16, 8 kv heads, 8K and 32K, each with the block shape and stage
        // count of the sm_90 kernel that reads it (warps per block, pipeline depth) and neighbours of it.
        for (int c : {8192, 32768}) {
            run<0, 5, 64, 8>(a, 16, hkv, c, 2, 9);    // fp8 D 64 rows 8: kw8 (8 warps), 5 stages
            run<0, 5, 64, 8>(a, 16, hkv, c, 3, 9);
            run<0, 8, 64, 8>(a, 16, hkv, c, 2, 9);
            run<0, 5, 64, 4>(a, 16, hkv, c, 2, 9);
            run<0, 8, 64, 4>(a, 16, hkv, c, 2, 9);
            run<0, 12, 64, 4>(a, 16, hkv, c, 2, 9);
            run<0, 3, 128, 4>(a, 16, hkv, c, 2, 9);   // f16 D 64 kw4, 3-4 stages; fp8 D 128 kw4 4 stages
            run<0, 4, 128, 4>(a, 16, hkv, c, 2, 9);
            run<0, 8, 128, 4>(a, 16, hkv, c, 2, 9);
            run<0, 3, 256, 4>(a, 16, hkv, c, 2, 9);   // f16 D 128 kw4, 3 stages
            run<2, 4, 64, 4, 16>(a, 16, hkv, c, 2, 9);   // bulk copies of whole 1 KiB tiles
            run<2, 4, 64, 4, 32>(a, 16, hkv, c, 2, 9);   // two pages per step
            run<2, 4, 128, 4, 16>(a, 16, hkv, c, 2, 9);
            run<2, 4, 256, 4, 16>(a, 16, hkv, c, 2, 9);
            run<3, 5, 64, 8>(a, 16, hkv, c, 16, 9);   // a warp per kv head: 16 splits keep 256 blocks
            run<3, 8, 64, 8>(a, 16, hkv, c, 16, 9);
            run<3, 5, 64, 8>(a, 16, hkv, c, 32, 9);
            run<3, 4, 128, 8>(a, 16, hkv, c, 16, 9);
            run<3, 3, 256, 8>(a, 16, hkv, c, 16, 9);
            run<0, 5, 64, 8>(a, 16, hkv, c, 2, 9, true);   // sorted pages: a kv head's tiles 8 KiB apart in order
            run<0, 3, 128, 4>(a, 16, hkv, c, 2, 9, true);
            run<0, 3, 256, 4>(a, 16, hkv, c, 2, 9, true);
            run<3, 5, 64, 8>(a, 16, hkv, c, 16, 9, true);
            run<0, 5, 64, 8>(a, 16, hkv, c, 2, 9, false, true);   // vLLM's layout: a kv head's rows Hkv rows apart
            run<3, 5, 64, 8>(a, 16, hkv, c, 16, 9, false, true);
            run<0, 3, 256, 4>(a, 16, hkv, c, 2, 9, false, true);
            run<3, 3, 256, 8>(a, 16, hkv, c, 16, 9, false, true);
            // dynamic distribution against the static splits above (mode 0, 2 splits)
            run_dyn<5, 64, 8, 8>(a, 16, hkv, c, 2, 9);
            run_dyn<5, 64, 8, 32>(a, 16, hkv, c, 2, 9);
            run_dyn<8, 64, 4, 16>(a, 16, hkv, c, 4, 9);
            run_dyn<3, 256, 4, 8>(a, 16, hkv, c, 4, 9);
            run_dyn<3, 256, 4, 32>(a, 16, hkv, c, 4, 9);
            run_dyn<4, 128, 4, 16>(a, 16, hkv, c, 4, 9);
        }
        run<0, 3, 256, 4>(a, 1, hkv, 32768, 32, 15);   // batch 1, 32K: the planner's splits against dynamic chunks
        run_dyn<3, 256, 4, 8>(a, 1, hkv, 32768, 4, 15);
        run_dyn<3, 256, 4, 16>(a, 1, hkv, 32768, 4, 15);
        printf("done\n");
        return 0;
    }
    if (argc > 1 && std::string(argv[1]) == "bulkrows") {
        // Bulk copies a row at a time into padded rows (mode 1: the layout ldmatrix reads
        // without conflicts) against the kernel's copy form (mode 0) and whole unpadded tiles (mode 2), at
        // 64- and 128-byte key rows (fp8 D 64; f16 D 64 / fp8 D 128), batch 16, 8K and 32K.
        for (int c : {8192, 32768}) {
            run<0, 5, 64, 8>(a, 16, hkv, c, 2, 9);
            run<0, 8, 64, 4>(a, 16, hkv, c, 2, 9);
            run<1, 4, 64, 4>(a, 16, hkv, c, 2, 9);
            run<1, 6, 64, 4>(a, 16, hkv, c, 2, 9);
            run<1, 8, 64, 4>(a, 16, hkv, c, 2, 9);
            run<1, 5, 64, 8>(a, 16, hkv, c, 2, 9);
            run<2, 4, 64, 4>(a, 16, hkv, c, 2, 9);
            run<0, 4, 128, 4>(a, 16, hkv, c, 2, 9);
            run<1, 4, 128, 4>(a, 16, hkv, c, 2, 9);
            run<1, 6, 128, 4>(a, 16, hkv, c, 2, 9);
            run<2, 4, 128, 4>(a, 16, hkv, c, 2, 9);
        }
        printf("done\n");
        return 0;
    }
    for (int c : {8192, 32768}) {
        const int bb = c == 32768 ? 16 : 16;
        run<0, 3, RB, 4>(a, bb, hkv, c, 2, 9);
        run<0, 4, RB, 4>(a, bb, hkv, c, 2, 9);
        run<0, 2, RB, 4>(a, bb, hkv, c, 2, 9);
        run<0, 3, RB, 4>(a, bb, hkv, c, 1, 9);
        run<0, 3, RB, 4>(a, bb, hkv, c, 4, 9);
        run<1, 3, RB, 4>(a, bb, hkv, c, 2, 9);
        run<1, 4, RB, 4>(a, bb, hkv, c, 2, 9);
        run<1, 6, RB, 4>(a, bb, hkv, c, 1, 9);
        run<2, 3, RB, 4>(a, bb, hkv, c, 2, 9);
        run<2, 4, RB, 4>(a, bb, hkv, c, 2, 9);
    }
    // batch 1, 32K: the planner's 33 splits
    run<0, 3, RB, 4>(a, 1, hkv, 32768, 32, 15);
    run<1, 3, RB, 4>(a, 1, hkv, 32768, 32, 15);
    run<1, 6, RB, 4>(a, 1, hkv, 32768, 32, 15);
    run<2, 4, RB, 4>(a, 1, hkv, 32768, 32, 15);
    run<0, 3, RB, 4>(a, 1, hkv, 32768, 64, 15);
    run<1, 4, RB, 4>(a, 1, hkv, 32768, 64, 15);
    // fewer, longer-lived blocks with more bytes per request (steps of 2-4 pages)
    run<2, 3, RB, 4, 32>(a, 1, hkv, 32768, 16, 15);
    run<2, 3, RB, 4, 32>(a, 1, hkv, 32768, 32, 15);
    run<2, 2, RB, 2, 64>(a, 1, hkv, 32768, 16, 15);
    run<2, 3, RB, 8, 16>(a, 1, hkv, 32768, 16, 15);
    run<2, 3, RB, 4, 32>(a, 16, hkv, 32768, 2, 9);
    run<2, 2, RB, 2, 64>(a, 16, hkv, 32768, 1, 9);
    run<2, 2, RB, 2, 64>(a, 16, hkv, 8192, 1, 9);
    run<2, 3, RB, 4, 32>(a, 16, hkv, 8192, 2, 9);
    printf("done\n");
    return 0;
}
