// consumer.cpp - a C++ program that uses an installed librdna35attn through its CMake package
// (rdna35attn::rdna35attn_static: the static library).
//
// One small bf16 speculative decode (two sequences with 2 and 3 query tokens, MQA 4:1, a 16-key
// sliding window, an NHD cache [pages][page_size][kv_heads][head_size] described by strides) on the
// best available backend, checked against a float64 attention computed here. Exit status 0 when the
// output matches.
#include <rdna35attn.h>

#include "consumer_memory.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr int kNumSeqs = 2;
constexpr int kNumQHeads = 4;
constexpr int kNumKvHeads = 1;
constexpr int kHeadSize = 32;
constexpr int kPageSize = 8;
constexpr int kNumPages = 10;
constexpr int kWindow = 16;
constexpr int kMaxSeqLen = 48;
constexpr int kMaxQueryLen = 3;
const std::vector<int32_t> kSeqLens = {5, 45};
const std::vector<int32_t> kQueryStartLoc = {0, 2, 5};  // M = 2 and 3

// bf16 is the top half of a binary32; the values used (k/128, |k| <= 128) are exact in it.
uint16_t bf16_from_exact(float value)
{
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    return static_cast<uint16_t>(bits >> 16);
}

double bf16_to_double(uint16_t b)
{
    uint32_t bits = static_cast<uint32_t>(b) << 16;
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
}

// Throws with the library's status name and detail.
void check(r35a_status status, const char *call)
{
    if (status != R35A_OK)
        throw std::runtime_error(std::string(call) + " failed: " + r35a_status_string(status) + ": " +
                                 r35a_last_error_detail());
}

struct ContextDeleter {
    void operator()(r35a_context *ctx) const { r35a_context_destroy(ctx); }
};
struct PlanDeleter {
    void operator()(r35a_plan *plan) const { r35a_plan_destroy(plan); }
};

// A buffer where the context wants it, freed on scope exit.
class Buffer {
public:
    Buffer(const consumer_memory &mem, const void *host, size_t bytes)
        : mem_(mem), ptr_(consumer_memory_upload(&mem, host, bytes))
    {
        if (!ptr_)
            throw std::runtime_error("buffer allocation failed");
    }
    ~Buffer() { consumer_memory_free(&mem_, ptr_); }
    Buffer(const Buffer &) = delete;
    Buffer &operator=(const Buffer &) = delete;
    void *get() const { return ptr_; }

private:
    const consumer_memory &mem_;
    void *ptr_;
};

template <typename T>
Buffer upload(const consumer_memory &mem, const std::vector<T> &host)
{
    return Buffer(mem, host.data(), host.size() * sizeof(T));
}

int run()
{
    r35a_context *raw_ctx = nullptr;
    check(r35a_context_create(nullptr, &raw_ctx), "r35a_context_create");  // AUTO backend
    std::unique_ptr<r35a_context, ContextDeleter> ctx(raw_ctx);
    r35a_context_info ctx_info{};
    ctx_info.struct_size = sizeof ctx_info;
    check(r35a_context_get_info(ctx.get(), &ctx_info), "r35a_context_get_info");
    consumer_memory mem;
    if (consumer_memory_open(&mem, &ctx_info) != 0)
        return 1;

    // The shape from the init function, then the strides of an NHD cache.
    r35a_paged_attention_desc desc;
    const int num_tokens = kQueryStartLoc.back();
    r35a_paged_attention_desc_init(&desc, R35A_DTYPE_BF16, kNumSeqs, num_tokens, kMaxQueryLen, kMaxSeqLen,
                                   kNumQHeads, kNumKvHeads, kHeadSize, kPageSize, kNumPages);
    desc.window = kWindow;
    desc.k_page_stride = desc.v_page_stride = int64_t{kPageSize} * kNumKvHeads * kHeadSize;
    desc.k_slot_stride = desc.v_slot_stride = int64_t{kNumKvHeads} * kHeadSize;
    desc.k_head_stride = desc.v_head_stride = kHeadSize;
    r35a_plan *raw_plan = nullptr;
    check(r35a_paged_attention_plan(ctx.get(), &desc, &raw_plan), "r35a_paged_attention_plan");
    std::unique_ptr<r35a_plan, PlanDeleter> plan(raw_plan);
    r35a_plan_info plan_info{};
    plan_info.struct_size = sizeof plan_info;
    check(r35a_plan_get_info(plan.get(), &plan_info), "r35a_plan_get_info");

    std::mt19937 rng(20240601u);
    std::uniform_int_distribution<int> level(-128, 128);
    auto random_bf16 = [&] { return bf16_from_exact(static_cast<float>(level(rng)) / 128.0f); };
    const size_t row_count = static_cast<size_t>(num_tokens) * kNumQHeads * kHeadSize;
    const size_t cache_count = static_cast<size_t>(kNumPages) * kPageSize * kNumKvHeads * kHeadSize;
    std::vector<uint16_t> q(row_count), k_cache(cache_count), v_cache(cache_count);
    for (auto &x : q)
        x = random_bf16();
    for (size_t i = 0; i < cache_count; ++i) {
        k_cache[i] = random_bf16();
        v_cache[i] = random_bf16();
    }
    std::vector<uint16_t> out(row_count, 0x7fc0);  // NaN until written

    // Pages in reverse order; the window means sequence 1 never reads its first two pages.
    const int pages_per_seq = static_cast<int>(desc.block_table_stride);
    std::vector<int32_t> block_table(static_cast<size_t>(kNumSeqs) * pages_per_seq, -1);
    int next_page = kNumPages - 1;
    for (int s = 0; s < kNumSeqs; ++s)
        for (int p = 0; p * kPageSize < kSeqLens[s]; ++p)
            block_table[static_cast<size_t>(s) * pages_per_seq + p] = next_page--;

    Buffer d_q = upload(mem, q), d_k = upload(mem, k_cache), d_v = upload(mem, v_cache), d_out = upload(mem, out);
    Buffer d_seq_lens = upload(mem, kSeqLens), d_qsl = upload(mem, kQueryStartLoc);
    Buffer d_block_table = upload(mem, block_table);
    std::unique_ptr<Buffer> workspace;
    if (plan_info.workspace_bytes)
        workspace.reset(new Buffer(mem, nullptr, plan_info.workspace_bytes));

    r35a_paged_attention_args args{};
    args.struct_size = sizeof args;
    args.q = d_q.get();
    args.k_cache = d_k.get();
    args.v_cache = d_v.get();
    args.out = d_out.get();
    args.seq_lens = static_cast<const int32_t *>(d_seq_lens.get());
    args.query_start_loc = static_cast<const int32_t *>(d_qsl.get());
    args.block_table = static_cast<const int32_t *>(d_block_table.get());
    check(r35a_paged_attention_run(ctx.get(), plan.get(), &args, workspace ? workspace->get() : nullptr,
                                   plan_info.workspace_bytes, nullptr),
          "r35a_paged_attention_run");
    if (consumer_memory_download(&mem, out.data(), d_out.get(), out.size() * sizeof out[0]) != 0)
        throw std::runtime_error("copying the output back failed");

    // float64: query token i of sequence s sits at p = L - M + i and sees keys max(0, p-W+1) .. p.
    auto key = [&](const std::vector<uint16_t> &cache, int s, int j) {
        int32_t page = block_table[static_cast<size_t>(s) * pages_per_seq + j / kPageSize];
        return &cache[static_cast<size_t>(page * desc.k_page_stride + (j % kPageSize) * desc.k_slot_stride)];
    };
    double max_error = 0.0;
    size_t bad = 0;
    for (int s = 0; s < kNumSeqs; ++s) {
        const int m = kQueryStartLoc[s + 1] - kQueryStartLoc[s];
        for (int i = 0; i < m; ++i) {
            const int t = kQueryStartLoc[s] + i;
            const int p = kSeqLens[s] - m + i;
            const int first = std::max(0, p - kWindow + 1);
            for (int h = 0; h < kNumQHeads; ++h) {
                const uint16_t *q_row = &q[(static_cast<size_t>(t) * kNumQHeads + h) * kHeadSize];
                std::vector<double> weight;
                for (int j = first; j <= p; ++j) {
                    const uint16_t *k = key(k_cache, s, j);
                    double dot = 0.0;
                    for (int d = 0; d < kHeadSize; ++d)
                        dot += bf16_to_double(q_row[d]) * bf16_to_double(k[d]);
                    weight.push_back(dot / std::sqrt(static_cast<double>(kHeadSize)));
                }
                const double top = *std::max_element(weight.begin(), weight.end());
                for (auto &w : weight)
                    w = std::exp(w - top);
                const double total = std::accumulate(weight.begin(), weight.end(), 0.0);
                for (int d = 0; d < kHeadSize; ++d) {
                    double expected = 0.0;
                    for (int j = first; j <= p; ++j)
                        expected += weight[static_cast<size_t>(j - first)] / total * bf16_to_double(key(v_cache, s, j)[d]);
                    const double got = bf16_to_double(out[(static_cast<size_t>(t) * kNumQHeads + h) * kHeadSize + d]);
                    const double error = std::fabs(got - expected);
                    if (!(error <= 1e-2)) {  // bf16 output: 8 significant bits; NaN counts as bad
                        if (bad < 5)
                            std::fprintf(stderr, "consumer_cxx: out[token %d][head %d][%d] = %g, expected %g\n", t,
                                         h, d, got, expected);
                        ++bad;
                    }
                    max_error = std::max(max_error, error);
                }
            }
        }
    }
    std::printf("consumer_cxx: librdna35attn %s, backend %s (%s), implementation %s: max abs error "
                "%.3g over %zu outputs, %zu above 1e-2\n",
                r35a_version_string(), ctx_info.backend_name, ctx_info.reason, plan_info.implementation, max_error,
                row_count, bad);
    consumer_memory_close(&mem);
    return bad == 0 ? 0 : 1;
}

}  // namespace

int main()
{
    try {
        return run();
    } catch (const std::exception &e) {
        std::fprintf(stderr, "consumer_cxx: %s\n", e.what());
        return 1;
    }
}
