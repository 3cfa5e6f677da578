"""Independent float64 attention in numpy (the tests' notion of the right answer), random inputs,
and bf16 coding. Written from the semantics in include/rdna35attn.h, not from the library's code."""

import os
import random

import numpy as np

# Per-dtype tolerance of the library's output against float64 math on the same (rounded) inputs:
# the output's own rounding dominates (f16: 2^-11 relative, bf16: 2^-8), fp32 accumulation is far below.
TOLERANCE = {"float16": (3e-3, 3e-3), "bfloat16": (2e-2, 2e-2), "float32": (2e-5, 2e-5)}


def seed():
    """The seed of this run: R35A_TEST_SEED if set, else a fresh one (printed by run.py)."""
    value = os.environ.get("R35A_TEST_SEED")
    return int(value, 0) if value else random.SystemRandom().randrange(2 ** 32)


def bf16_bits(values):
    """float32 -> bf16 bit patterns (uint16), round to nearest even."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return bits.astype(np.uint16)


def bf16_values(bits):
    """bf16 bit patterns -> float64."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def make(rng, shape, dtype, scale=1.0):
    """Random data in the storage dtype ("float16", "bfloat16" as uint16 bits, "float32") and its
    exact float64 value."""
    data = (rng.standard_normal(shape) * scale).astype(np.float32)
    if dtype == "bfloat16":
        stored = bf16_bits(data)
        return stored, bf16_values(stored)
    stored = data.astype(dtype)
    return stored, stored.astype(np.float64)


def fp8_e4m3_values(codes):
    """OCP float8_e4m3fn codes (uint8) -> float64, from the format's definition: bias 7, 3 mantissa
    bits, subnormals, S.1111.111 NaN, no infinities."""
    codes = np.asarray(codes, dtype=np.uint8).astype(np.int64)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exponent, mantissa = (codes >> 3) & 0xF, codes & 7
    magnitude = np.where(exponent == 0, mantissa / 8.0 * 2.0 ** -6, (1.0 + mantissa / 8.0) * 2.0 ** (exponent - 7.0))
    return np.where((codes & 0x7F) == 0x7F, np.nan, sign * magnitude)


def make_kv8(rng, shape, kv_dtype):
    """A random 8-bit cache: fp8 e4m3 codes (stored as uint8) of magnitudes 2^-2 .. 15, or int8 values,
    and their exact float64 values before scaling."""
    if kv_dtype == "fp8_e4m3":
        codes = (rng.integers(0, 2, shape) << 7) | (rng.integers(5, 11, shape) << 3) | rng.integers(0, 8, shape)
        codes = codes.astype(np.uint8)
        return codes, fp8_e4m3_values(codes)
    values = rng.integers(-128, 128, shape).astype(np.int8)
    return values, values.astype(np.float64)


def as_float64(stored, dtype):
    return bf16_values(stored) if dtype == "bfloat16" else np.asarray(stored, dtype=np.float64)


def _scores(q_rows, keys, scale, softcap):
    s = scale * np.einsum("hd,hjd->hj", q_rows, keys)
    if softcap > 0:
        s = softcap * np.tanh(s / softcap)
    return s


def _softmax_rows(s, visible, sinks=None):
    """Softmax of each row over its visible logits; with sinks ([rows] raw logits) each row's sink joins
    the denominator and gets no column (a row that sees nothing stays zero)."""
    s = np.where(visible, s, -np.inf)
    top = s.max(axis=-1, keepdims=True)
    seen = np.isfinite(top)
    if sinks is not None:
        top = np.maximum(top, np.asarray(sinks, np.float64)[:, None])
    top = np.where(np.isfinite(top), top, 0.0)
    w = np.where(visible, np.exp(s - top), 0.0)
    total = w.sum(axis=-1, keepdims=True)
    if sinks is not None:
        total = total + np.where(seen, np.exp(np.asarray(sinks, np.float64)[:, None] - top), 0.0)
    return np.divide(w, total, out=np.zeros_like(w), where=total > 0)


def _lse_rows(s, visible, sinks=None):
    """Each row's natural-log softmax denominator (the sink's exp included); -inf for a row that sees
    nothing (its sink not counted)."""
    s = np.where(visible, s, -np.inf)
    top = s.max(axis=-1)
    seen = np.isfinite(top)
    if sinks is not None:
        top = np.maximum(top, np.asarray(sinks, np.float64))
    top = np.where(np.isfinite(top), top, 0.0)
    total = np.where(visible, np.exp(s - top[:, None]), 0.0).sum(axis=-1)
    if sinks is not None:
        total = total + np.exp(np.asarray(sinks, np.float64) - top)
    with np.errstate(divide="ignore"):
        return np.where(seen, top + np.log(total), -np.inf)


def merge_states(parts_o, parts_lse):
    """float64 merge of partial states: parts_o [N, T, H, D], parts_lse [N, T, H]."""
    lse = np.asarray(parts_lse, np.float64)
    top = lse.max(axis=0)
    finite = np.isfinite(top)
    safe = np.where(finite, top, 0.0)
    w = np.where(np.isneginf(lse), 0.0, np.exp(lse - safe[None]))
    total = w.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        merged = np.where(finite, safe + np.log(total), -np.inf)
        o = np.where(finite[..., None], np.einsum("nth,nthd->thd", w / np.where(total > 0, total, 1.0)[None],
                                                  np.where(np.isneginf(lse)[..., None], 0.0, parts_o)), 0.0)
    return o, merged


def paged_attention(q, k_cache, v_cache, seq_lens, query_start_loc, block_table, *, kv_layout="HND",
                    window=0, softmax_scale=None, logit_softcap=0.0, alibi_slopes=None, sinks=None,
                    return_lse=False):
    """float64 paged attention. q [T, Hq, D] and the caches are float64 arrays (HND or NHD) of the
    real (already scaled) values. return_lse: also each row's LSE [T, Hq]."""
    if kv_layout == "NHD":
        k_cache, v_cache = k_cache.transpose(0, 2, 1, 3), v_cache.transpose(0, 2, 1, 3)
    num_tokens, num_q_heads, head_size = q.shape
    num_kv_heads, page_size = k_cache.shape[1], k_cache.shape[2]
    group = num_q_heads // num_kv_heads
    scale = 1.0 / np.sqrt(head_size) if softmax_scale is None else softmax_scale
    out = np.zeros_like(q)
    lse = np.full(q.shape[:2], -np.inf)
    for s in range(len(seq_lens)):
        length = int(seq_lens[s])
        first, last = int(query_start_loc[s]), int(query_start_loc[s + 1])
        m = last - first
        if m == 0:
            continue
        j = np.arange(length)
        pages = block_table[s, j // page_size]
        keys = k_cache[pages, :, j % page_size, :].transpose(1, 0, 2)    # [Hkv, L, D]
        values = v_cache[pages, :, j % page_size, :].transpose(1, 0, 2)
        keys, values = np.repeat(keys, group, axis=0), np.repeat(values, group, axis=0)  # [Hq, L, D]
        for i in range(m):
            p = length - m + i
            visible = j <= p
            if window > 0:
                visible &= p - j < window
            s_row = _scores(q[first + i], keys, scale, logit_softcap)
            if alibi_slopes is not None:
                s_row = s_row + np.asarray(alibi_slopes, np.float64)[:, None] * (j - p)[None, :]
            w = _softmax_rows(s_row, visible[None, :], sinks)
            out[first + i] = np.einsum("hj,hjd->hd", w, values)
            lse[first + i] = _lse_rows(s_row, visible[None, :], sinks)
    return (out, lse) if return_lse else out


def varlen_attention(q, k, v, cu_seqlens, *, causal=False, softmax_scale=None, logit_softcap=0.0, sinks=None,
                     return_lse=False):
    """float64 varlen attention: q [T, Hq, D], k/v [T, Hkv, D] float64; return_lse: also the LSE."""
    num_q_heads, head_size = q.shape[1], q.shape[2]
    group = num_q_heads // k.shape[1]
    scale = 1.0 / np.sqrt(head_size) if softmax_scale is None else softmax_scale
    out = np.zeros_like(q)
    lse = np.full(q.shape[:2], -np.inf)
    for s in range(len(cu_seqlens) - 1):
        a, b = int(cu_seqlens[s]), int(cu_seqlens[s + 1])
        if a == b:
            continue
        keys = np.repeat(k[a:b].transpose(1, 0, 2), group, axis=0)
        values = np.repeat(v[a:b].transpose(1, 0, 2), group, axis=0)
        j = np.arange(b - a)
        for i in range(b - a):
            visible = j <= i if causal else np.ones_like(j, dtype=bool)
            s_row = _scores(q[a + i], keys, scale, logit_softcap)
            w = _softmax_rows(s_row, visible[None, :], sinks)
            out[a + i] = np.einsum("hj,hjd->hd", w, values)
            lse[a + i] = _lse_rows(s_row, visible[None, :], sinks)
    return (out, lse) if return_lse else out


def assert_close(testcase, got, want, dtype, what):
    """Fails with the max error, the count and the first mismatches with their coordinates."""
    atol, rtol = TOLERANCE[dtype]
    got = np.asarray(got, dtype=np.float64)
    error = np.abs(got - want)
    bad = ~(error <= atol + rtol * np.abs(want))  # NaN is bad
    if bad.any():
        where = np.argwhere(bad)[:5]
        lines = ["%s%s: got %r want %r" % (what, tuple(int(x) for x in w), got[tuple(w)], want[tuple(w)])
                 for w in where]
        testcase.fail("%s: %d of %d outputs off (max error %.3g, atol %g rtol %g); first:\n  %s"
                      % (what, int(bad.sum()), bad.size, float(np.nanmax(error)), atol, rtol, "\n  ".join(lines)))
