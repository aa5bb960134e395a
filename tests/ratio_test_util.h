// Helpers of the ratio encoder tests: symbol generators (synthetic distributions, Lorenzo codes of real fields) and
// a plain reference decoder written from docs/FORMAT.md ("Ratio encoder (format v2)") alone: it parses the
// codebook, assigns canonical codes, undoes the sparse pass and decodes bit by bit, checking every metadata entry.
#pragma once
#include <gtest/gtest.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>
#include "test_util.h"
#include "zb_ratio.h"

namespace ratiot {

inline std::vector<zb::ByteSpan> spans(const std::vector<std::string> &seg) {
    std::vector<zb::ByteSpan> v;
    for (const std::string &s : seg) v.push_back({reinterpret_cast<const uint8_t *>(s.data()), (uint64_t)s.size()});
    return v;
}

// Symbols around `center` with a two-sided geometric distribution of mean magnitude `scale` (clamped to the
// alphabet), and a fraction `escape` of symbol 0.
inline std::vector<uint16_t> laplace_symbols(uint64_t n, uint32_t alphabet, double scale, uint32_t seed,
                                             double escape = 0.0) {
    std::mt19937_64 rng(seed);
    std::exponential_distribution<double> ex(1.0 / (scale > 0 ? scale : 1e-9));
    std::uniform_real_distribution<double> u(0, 1);
    std::vector<uint16_t> v(n);
    const int64_t c = alphabet / 2;
    for (uint64_t i = 0; i < n; ++i) {
        if (escape > 0 && u(rng) < escape) {
            v[i] = 0;
            continue;
        }
        int64_t d = scale > 0 ? (int64_t)std::floor(ex(rng)) : 0;
        if (u(rng) < 0.5) d = -d;
        int64_t s = c + d;
        if (s < 1) s = 1;
        if (s >= (int64_t)alphabet) s = alphabet - 1;
        v[i] = (uint16_t)s;
    }
    return v;
}

// The library's encoder (segments and stats) with the sub-block size and run symbol given.
struct Encoded {
    std::vector<std::string> seg;
    zb::RatioStats st;
};
inline Encoded encode(const std::vector<uint16_t> &sym, uint32_t A, int threads = 1, int lg = zb::kRatioSubBlockLog2,
                      uint32_t run_symbol = zb::kRatioNoRunSymbol) {
    Encoded e;
    std::string msg;
    zb::RatioOptions opt;
    opt.sub_block_log2 = lg;
    opt.run_symbol = run_symbol;
    EXPECT_EQ(zb::ratio_encode_cpu(sym.data(), sym.size(), A, threads, e.seg, &e.st, msg, opt), ZB_OK) << msg;
    return e;
}

// The library's decoder into out (n symbols, prefilled with 0xFFFF); a failure must come with a message.
inline zb_status decode(const std::vector<std::string> &seg, uint64_t n, uint32_t A, std::vector<uint16_t> &out,
                        int threads = 1, std::string *why = nullptr, bool allow_runs = true) {
    out.assign(n, 0xFFFF);
    std::string msg;
    const auto sp = spans(seg);
    const zb_status s = zb::ratio_decode_cpu(sp.data(), n, A, threads, out.data(), msg, allow_runs);
    if (why) *why = msg;
    if (s != ZB_OK) {
        EXPECT_FALSE(msg.empty());
    }
    return s;
}

// A PLOT3D q file (zbt::read_plot3d) as one 3D array, the 5 variables stacked: dims {5 nk, nj, ni}.
inline bool read_plot3d(const std::string &path, std::vector<float> &out, size_t dims[3]) {
    std::vector<size_t> d;
    if (!zbt::read_plot3d(path, out, d)) return false;
    dims[0] = d[0] * d[1];
    dims[1] = d[2];
    dims[2] = d[3];
    return true;
}

// Quantization codes of a 3D field (C order, dims slowest first) as the ratio pipeline produces them: q =
// round(x / 2eb) with eb = rel * range, 3D integer Lorenzo delta d, symbol = d + radius when |d| < radius, else 0
// (an escape).
inline std::vector<uint16_t> lorenzo_symbols(const std::vector<float> &x, const size_t dims[3], double rel,
                                             int radius = 512) {
    double lo = x[0], hi = x[0];
    for (float v : x) {
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    const double eb = rel * (hi - lo > 0 ? hi - lo : 1.0);
    const size_t nz = dims[0], ny = dims[1], nx = dims[2];
    std::vector<int64_t> q(x.size());
    for (size_t i = 0; i < x.size(); ++i) q[i] = (int64_t)std::nearbyint((double)x[i] / (2 * eb));
    auto Q = [&](int64_t z, int64_t y, int64_t xx) -> int64_t {
        return (z < 0 || y < 0 || xx < 0) ? 0 : q[((size_t)z * ny + (size_t)y) * nx + (size_t)xx];
    };
    std::vector<uint16_t> s(x.size());
    for (size_t z = 0; z < nz; ++z)
        for (size_t y = 0; y < ny; ++y)
            for (size_t xx = 0; xx < nx; ++xx) {
                const int64_t Z = (int64_t)z, Y = (int64_t)y, X = (int64_t)xx;
                const int64_t p = Q(Z, Y, X - 1) + Q(Z, Y - 1, X) + Q(Z - 1, Y, X) - Q(Z, Y - 1, X - 1) -
                                  Q(Z - 1, Y, X - 1) - Q(Z - 1, Y - 1, X) + Q(Z - 1, Y - 1, X - 1);
                const int64_t d = Q(Z, Y, X) - p;
                s[(z * ny + y) * nx + xx] = (uint16_t)((d > -radius && d < radius) ? d + radius : 0);
            }
    return s;
}

// ---- reference decoder -------------------------------------------------------------------------------------------

struct RefResult {
    bool ok = false;
    std::string why;
    std::vector<uint16_t> symbols;
    std::vector<int> len;  // code length per symbol
    uint32_t s0 = 0;
};

inline uint64_t le(const uint8_t *p, int bytes) {
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = v << 8 | p[i];
    return v;
}

inline RefResult reference_decode(const std::vector<std::string> &seg, uint64_t n, uint32_t A) {
    RefResult r;
    auto bad = [&](const char *w) {
        r.ok = false;
        r.why = w;
        return r;
    };
    if (seg.size() != 4) return bad("segment count");
    const uint8_t *cbk = reinterpret_cast<const uint8_t *>(seg[0].data());
    if (seg[0].size() < 19) return bad("codebook size");
    const bool runs = (cbk[0] & 0x80) != 0;  // run tokens (format v4): 23 more symbols A .. A + 22
    const int lg = cbk[0] & 0x7F;
    const uint64_t total = le(cbk + 1, 8);
    const uint32_t m = (uint32_t)le(cbk + 9, 4), lo = (uint32_t)le(cbk + 13, 2), hi = (uint32_t)le(cbk + 15, 2);
    r.s0 = (uint32_t)le(cbk + 17, 2);
    const uint32_t span = m ? hi - lo + 1 : 0;
    const bool has_bitmap = m < span;
    const size_t bm = has_bitmap ? (span + 7) / 8 : 0;
    const size_t main_bytes = 19 + bm + (m + 1) / 2;
    const uint32_t AT = runs ? A + 23 : A;  // codes for symbols and tokens
    uint32_t z = 0, mask = 0, ntok = 0;
    if (runs) {
        if (seg[0].size() < main_bytes + 6) return bad("codebook length");
        z = (uint32_t)le(cbk + main_bytes, 2);
        mask = (uint32_t)le(cbk + main_bytes + 2, 4);
        for (int t = 0; t < 23; ++t) ntok += (mask >> t) & 1;
        if (seg[0].size() != main_bytes + 6 + (ntok + 1) / 2) return bad("codebook length");
    } else if (seg[0].size() != main_bytes) {
        return bad("codebook length");
    }
    r.len.assign(AT, 0);
    uint32_t k = 0;
    for (uint32_t i = 0; i < span; ++i) {
        if (has_bitmap && !((cbk[19 + i / 8] >> (i % 8)) & 1)) continue;
        const uint8_t b = cbk[19 + bm + k / 2];
        r.len[lo + i] = ((k % 2 ? b >> 4 : b) & 15) + 1;
        ++k;
    }
    if (k != m) return bad("bitmap count");
    for (uint32_t t = 0, q = 0; t < 23; ++t)
        if ((mask >> t) & 1) {
            const uint8_t b = cbk[main_bytes + 6 + q / 2];
            r.len[A + t] = ((q % 2 ? b >> 4 : b) & 15) + 1;
            ++q;
        }
    // Canonical codes: order by (length, (s - s0) mod AT); code 0 first; next = (code + 1) << (length increase).
    std::vector<std::pair<int, uint32_t>> order;
    for (uint32_t s = 0; s < AT; ++s)
        if (r.len[s]) order.push_back({r.len[s], (s + AT - r.s0) % AT});
    std::sort(order.begin(), order.end());
    std::map<std::pair<int, uint32_t>, uint32_t> table;  // (length, code) -> symbol or token
    uint32_t code = 0;
    for (size_t i = 0; i < order.size(); ++i) {
        if (i) code = (code + 1) << (order[i].first - order[i - 1].first);
        table[{order[i].first, code}] = (order[i].second + r.s0) % AT;
    }
    // Sparse pass: flag bit i (LSB first) says block i of 16 bytes is stored.
    const uint64_t bytes = (total + 7) / 8, nblocks = (bytes + 15) / 16;
    if (seg[2].size() != (nblocks + 7) / 8) return bad("flag length");
    std::vector<uint8_t> bits(nblocks * 16, 0);
    uint64_t used = 0;
    for (uint64_t b = 0; b < nblocks; ++b)
        if ((uint8_t)seg[2][b / 8] >> (b % 8) & 1) {
            if ((used + 1) * 16 > seg[3].size()) return bad("blocks");
            std::memcpy(&bits[b * 16], seg[3].data() + used * 16, 16);
            ++used;
        }
    if (used * 16 != seg[3].size()) return bad("unused blocks");
    auto bit = [&](uint64_t i) { return (bits[i / 8] >> (7 - i % 8)) & 1; };
    // Metadata and bit-by-bit decoding.
    const uint64_t S = 1ull << lg, B = (n + S - 1) / S, P = (B + 31) / 32;
    const uint8_t *meta = reinterpret_cast<const uint8_t *>(seg[1].data());
    if (seg[1].size() != 8 * P + 2 * (B - P)) return bad("metadata length");
    r.symbols.resize(n);
    uint64_t pos = 0;
    for (uint64_t j = 0; j < B; ++j) {
        const uint64_t p = j / 32, rr = j % 32, bp = std::min<uint64_t>(32, B - 32 * p);
        if (rr == 0 && le(meta + 8 * p, 8) != pos) return bad("partition offset");
        const uint64_t start = pos, cnt = std::min(S, n - j * S);
        for (uint64_t i = 0; i < cnt;) {
            uint32_t c = 0, v = 0;
            int l = 0;
            for (;;) {
                if (pos >= total || l >= 16) return bad("bitstream");
                c = c << 1 | bit(pos++);
                ++l;
                auto it = table.find({l, c});
                if (it != table.end()) {
                    v = it->second;
                    break;
                }
            }
            if (v < A) {
                r.symbols[j * S + i++] = (uint16_t)v;
                continue;
            }
            // Token A + t: L = t + 2 for t < 14; else k = t - 10 extra bits give L = 2^k + extra.
            const uint32_t t = v - A;
            uint64_t L = t + 2;
            if (t >= 14) {
                const int xb = (int)t - 10;
                uint64_t extra = 0;
                for (int q = 0; q < xb; ++q) {
                    if (pos >= total) return bad("bitstream");
                    extra = extra << 1 | bit(pos++);
                }
                L = (1ull << xb) + extra;
            }
            if (i + L > cnt) return bad("run past the sub-block");
            for (uint64_t q = 0; q < L; ++q) r.symbols[j * S + i++] = (uint16_t)z;
        }
        const uint64_t floor_bits = runs ? 1 : cnt;
        if (rr + 1 < bp && le(meta + 8 * P + 2 * (31 * p + rr), 2) != pos - start - floor_bits) return bad("length");
    }
    if (pos != total) return bad("total bits");
    for (uint64_t i = total; i < nblocks * 128; ++i)
        if (bit(i)) return bad("padding");
    r.ok = true;
    return r;
}

}  // namespace ratiot
