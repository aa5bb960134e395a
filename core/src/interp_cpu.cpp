// The interp predictor on the CPU: tuning, anchors (integer Lorenzo on the lattice of multiples of 8), then levels
// with strides 4, 2, 1, one pass per dim in the tuned order (docs/FORMAT.md "Interp predictor"). In a pass every
// point is predicted from points of earlier passes only, so the points of a pass are independent (one thread per
// point on the GPU); here a level's rows run plane by plane on OpenMP threads (zb_interp_levels.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>
#include <omp.h>
#include "zb_bytes.h"
#include "zb_chunk_escapes.h"
#include "zb_codes16.h"
#include "zb_interp_cpu.h"
#include "zb_interp_levels.h"
#include "zb_interp_rows.h"
#include "zb_lorenzo.h"
#include "zb_stage_clock.h"

namespace zb {

double interp_alpha(double eps) {
    // Piecewise linear in eps, from 1 at eps <= 1e-5 to 2 at eps >= 1e-1 (cusz-i.txt Eq. 2).
    if (!(eps > 1e-5)) return 1.0;
    if (eps >= 1e-1) return 2.0;
    const double lo[] = {1e-5, 1e-4, 1e-3, 1e-2}, base[] = {1.0, 1.25, 1.5, 1.75};
    for (int i = 3; i >= 0; --i)
        if (eps >= lo[i]) return base[i] + 0.25 * (eps - lo[i]) / (lo[i] * 10 - lo[i]);
    return 1.0;
}

namespace {

// ZBOUND_CPU_TIMING's names of the levels (index: log2 of the stride).
constexpr const char *kLevelStage[] = {"stride1", "stride2", "stride4"};
static_assert(sizeof(kLevelStage) / sizeof(kLevelStage[0]) == kInterpLevels, "a name per level");

// A row's codes between the int32 form of the row functions (in the thread's buffer, hot in the cache) and the
// encoder's 16-bit form in the code array (codes of point ix at c16[ix * step]): the int32 array of all codes and
// the passes that converted it as a whole (a write and a read of 4 bytes per value; on 16 threads 5 ms of a 45 ms
// decompression and of an 85 ms compression of 256 MB) are gone. Contiguous rows in loops that vectorize (one clone
// per vector level); narrow_row returns nothing, widen_row the number of escaped codes.
template <typename Code16T>
ZB_ALWAYS_INLINE void narrow_row(const int32_t *__restrict codes, uint16_t *__restrict c16, int64_t count,
                                 Code16T code16) {
    for (int64_t i = 0; i < count; ++i) c16[i] = code16(codes[i]);
}
ZB_SIMD_CLONES(narrow_row)
template <typename Code32T>
ZB_ALWAYS_INLINE uint32_t widen_row(const uint16_t *__restrict c16, int32_t *__restrict codes, int64_t count,
                                    Code32T code32) {
    uint32_t escaped = 0;
    for (int64_t i = 0; i < count; ++i) {
        codes[i] = code32(c16[i]);
        escaped += codes[i] == kEscapedCode ? 1u : 0u;
    }
    return escaped;
}
ZB_SIMD_CLONES(widen_row)

// walk_row's body for the baseline: sink(ix, prediction) for every point in order (Branchless: see span_prediction;
// the encoder's loop vectorizes, the decoder's fused loop does not).
template <bool Branchless, typename Sink> struct SinkRow {
    Sink sink;
    template <SplineCase K, bool Natural, typename T>
    void span(int64_t ix0, int64_t ix1, int64_t dx, const T *__restrict a, const T *__restrict b,
              const T *__restrict c, const T *__restrict d) {
        for (int64_t ix = ix0; ix < ix1; ++ix) sink(ix, span_prediction<K, Natural, Branchless>(ix * dx, a, b, c, d));
    }
    void point(int64_t ix, double pred) { sink(ix, pred); }
};
template <bool Branchless, typename Sink> SinkRow<Branchless, Sink> sink_row(Sink sink) { return {sink}; }

// The encoder's row on the baseline: predictions into a buffer, then quantization: two loops without control flow
// that the compiler vectorizes.
template <typename T>
void encode_row_base(const EncodePass<T> &ep, int64_t z, int64_t y, const Row &row, int32_t *__restrict codes,
                     int64_t code_step, double *__restrict pred) {
    auto body = sink_row<true>([pred](int64_t ix, double v) { pred[ix] = v; });
    walk_row(ep.g, ep.recon, z, y, row, body);
    const ResidualParams rp = ep.rp;
    const T *__restrict x = ep.x;
    uint8_t *__restrict exc = ep.exc;
    T *__restrict recon = ep.recon;
    const bool store_recon = ep.store_recon;   // a local: the byte stores to exc could alias the member
    for (int64_t ix = 0; ix < row.count; ++ix) {
        const int64_t idx = row.first + ix * row.dx;
        int32_t q;
        T r;
        const bool regular = quantize_residual<T>(x[idx], pred[ix], rp.twoe, rp.recip, rp.eb, rp.radius, rp.has_fill,
                                                  rp.fill_bits, q, r);
        codes[ix * code_step] = q;
        exc[idx] = regular ? 0 : 1;
        if (store_recon) recon[idx] = r;
    }
}

// The decoder's row on the baseline: one fused scalar loop. The store is masked (exceptions keep their values) and
// strided, which does not vectorize well (predictions into a buffer and a separate loop measured slower).
template <typename T>
void decode_row_base(const DecodePass<T> &dp, int64_t z, int64_t y, const Row &row, const int32_t *codes,
                     int64_t code_step, double *) {
    auto body = sink_row<false>([&](int64_t ix, double pred) {
        const int64_t idx = row.first + ix * row.dx;
        if (!dp.mask || !dp.mask[idx]) dp.out[idx] = dequantize_residual<T>(pred, codes[ix * code_step], dp.twoe);
    });
    walk_row(dp.g, dp.out, z, y, row, body);
}

// The row functions of the vector level in use: `dense` for rows whose points are at most two values apart, `strided`
// for sparser ones (the passes of strides 2 and 4 that step over x: dx 4 or 8), whose vector lanes are gathered and
// scattered one by one. The decoder's strided rows run fastest on the baseline's fused scalar loop at every level
// (stride 2 of a 64 MB TREFHT on the EPYC VM 11.1 -> 8.1 ms with one thread; 256 MB on the Xeon's 16 threads
// 5.8-6.3 -> 4.2-4.8 ms), the encoder's on the AVX-512 gathers where they are fast (simd_fast_gathers), else on the
// AVX2 rows (EPYC VM 25 -> 16.5 ms; the baseline 21). bench/NOTES.md 94.
template <typename F> struct RowFunctions {
    F dense, strided;
    F operator()(const Row &row) const { return row.dx > 2 ? strided : dense; }
};
template <typename T> auto encode_row_functions() {
    RowFunctions<decltype(&encode_row_base<T>)> f{encode_row_base<T>, encode_row_base<T>};
#if ZB_SIMD_X86
    if (simd_level() >= kSimdAvx2) f.dense = f.strided = encode_row_avx2<T>;
    if (simd_level() >= kSimdAvx512) {
        f.dense = encode_row_avx512<T>;
        if (simd_fast_gathers()) f.strided = encode_row_avx512<T>;
    }
#endif
    return f;
}
template <typename T> auto decode_row_functions() {
    RowFunctions<decltype(&decode_row_base<T>)> f{decode_row_base<T>, decode_row_base<T>};
#if ZB_SIMD_X86
    if (simd_level() >= kSimdAvx2) f.dense = decode_row_avx2<T>;
    if (simd_level() >= kSimdAvx512) f.dense = decode_row_avx512<T>;
#endif
    return f;
}

// Position in the code array of a point (docs/FORMAT.md sections 8 and 10).
struct CodePos {
    InterpCodeOrder order;
    int64_t base = 0;   // kPass: first position of the current pass
    int64_t anchor(int64_t a, int64_t idx) const { return order == InterpCodeOrder::kPass ? a : idx; }
    // The codes of a row's points: code of point ix at codes(c, row)[ix * code_step(row)].
    template <typename C> C *codes(C *c, const Row &row) const {
        return c + (order == InterpCodeOrder::kPass ? base + row.k0 : row.first);
    }
    int64_t code_step(const Row &row) const { return order == InterpCodeOrder::kPass ? 1 : row.dx; }
};

// The three passes of the level with stride s and where each one's codes start: kPass order puts them one after
// another from `base` (the first position after the earlier levels) to `end`.
struct Level {
    Pass p[3];
    CodePos pos[3];
    int64_t end;
    Level(const InterpParams &ip, const int64_t d[3], int64_t s, InterpCodeOrder order, int64_t base) {
        for (int i = 0; i < 3; ++i) {
            p[i] = make_pass(ip, d, s, i);
            pos[i] = CodePos{order, base};
            base += pass_points(p[i]);
        }
        end = base;
    }
};

// Lattice of anchors: dims and the linear index of lattice point (a, b, c).
struct Lattice {
    int64_t n[3];
    explicit Lattice(const int64_t d[3]) {
        for (int k = 0; k < 3; ++k) n[k] = (d[k] - 1) / (1 << kInterpAnchorLog2) + 1;
    }
    int64_t size() const { return n[0] * n[1] * n[2]; }
    // The array index of lattice point a (in lattice order).
    int64_t index(const int64_t d[3], int64_t a) const {
        const int64_t A = 1 << kInterpAnchorLog2;
        return lin(d, (a / (n[1] * n[2])) * A, ((a / n[2]) % n[1]) * A, (a % n[2]) * A);
    }
};

// The anchor passes run over the lattice on nt threads, in chunks of kAnchorChunk points with escape counts
// (zb_chunk_escapes.h). Serial, they took 15 ms of a 90 ms 16-thread compression of a 2D field of 256 MB (1M
// anchors, each at its own cache line of the array). Chunks smaller than kChunkValues: a 3D field of 256 MB has
// 131072 anchors, which chunks of 65536 gave to two threads (16 threads: 1.7 ms, 3x one thread).
constexpr uint64_t kAnchorChunk = 4096;

// The 3D prefix sums of the lattice's deltas in place (wrap-around uint32), one dim after another, on nt threads over
// independent lines: rows for x; for y and z, the lines in blocks of kColumns neighbouring columns (whole cache lines
// per thread).
void lattice_prefix_sums(uint32_t *q, const Lattice &L, int nt) {
    const int64_t nz = L.n[0], ny = L.n[1], nx = L.n[2];
    const bool parallel = (uint64_t)L.size() > kChunkValues;
    constexpr int64_t kColumns = 64;
#pragma omp parallel for num_threads(nt) schedule(static) if (parallel)
    for (int64_t r = 0; r < nz * ny; ++r)
        for (int64_t x = 1; x < nx; ++x) q[r * nx + x] += q[r * nx + x - 1];
    const int64_t xblocks = (nx + kColumns - 1) / kColumns;
#pragma omp parallel for num_threads(nt) schedule(static) if (parallel)
    for (int64_t t = 0; t < nz * xblocks; ++t) {
        const int64_t z = t / xblocks, x0 = (t % xblocks) * kColumns, x1 = std::min(nx, x0 + kColumns);
        for (int64_t y = 1; y < ny; ++y)
            for (int64_t x = x0; x < x1; ++x) q[(z * ny + y) * nx + x] += q[(z * ny + y - 1) * nx + x];
    }
    const int64_t plane = ny * nx, pblocks = (plane + kColumns - 1) / kColumns;
#pragma omp parallel for num_threads(nt) schedule(static) if (parallel)
    for (int64_t t = 0; t < pblocks; ++t) {
        const int64_t k0 = t * kColumns, k1 = std::min(plane, k0 + kColumns);
        for (int64_t z = 1; z < nz; ++z)
            for (int64_t k = k0; k < k1; ++k) q[z * plane + k] += q[(z - 1) * plane + k];
    }
}

}  // namespace

void interp_tune_points(const Shape &s, std::vector<uint64_t> &idx) {
    int64_t d[3];
    view3(s, d);
    int64_t step[3], cnt[3];
    for (int k = 0; k < 3; ++k) {  // as interp_tune
        const int64_t cells = d[k] >= 8 ? (d[k] - 4) / 8 : 0;
        step[k] = cells > 16 ? cells / 16 : 1;
        cnt[k] = cells;
    }
    for (int64_t a = 0; a < std::max<int64_t>(cnt[0], 1); a += step[0])
        for (int64_t b = 0; b < std::max<int64_t>(cnt[1], 1); b += step[1])
            for (int64_t c = 0; c < std::max<int64_t>(cnt[2], 1); c += step[2]) {
                const int64_t p[3] = {d[0] >= 8 ? 8 * a + 4 : 0, d[1] >= 8 ? 8 * b + 4 : 0, d[2] >= 8 ? 8 * c + 4 : 0};
                const int64_t centre = lin(d, p[0], p[1], p[2]);
                idx.push_back((uint64_t)centre);
                for (int k = 0; k < 3; ++k) {
                    if (d[k] < 8 || p[k] + 3 >= d[k]) continue;
                    const int64_t stride = k == 0 ? d[1] * d[2] : (k == 1 ? d[2] : 1);
                    for (int64_t o : {-3, -1, 1, 3}) idx.push_back((uint64_t)(centre + o * stride));
                }
            }
    interp_tune_alpha_points(s, idx);
}

template <typename T>
InterpParams interp_tune(const T *x, const Shape &s, double eb, double range, int has_fill, uint64_t fill_bits,
                         uint8_t encoder, bool tune_alpha, int nt) {
    using U = typename FloatBits<T>::U;
    InterpParams ip;
    int64_t d[3];
    view3(s, d);
    // Samples: centres (offset 4) of anchor cells, at most about 16 per dim; errors of both cubic splines at
    // stride 1 along each dim, on the original values, summed in a fixed order.
    double err[3][2] = {{0, 0}, {0, 0}, {0, 0}};
    int64_t step[3], cnt[3];
    for (int k = 0; k < 3; ++k) {
        const int64_t cells = d[k] >= 8 ? (d[k] - 4) / 8 : 0;  // centres c = 8j + 4 with c + 3 < d
        step[k] = cells > 16 ? cells / 16 : 1;
        cnt[k] = cells;
    }
    auto usable = [&](T v) { return is_finite_value(v) && !(has_fill && bits_of(v) == (U)fill_bits); };
    for (int64_t a = 0; a < std::max<int64_t>(cnt[0], 1); a += step[0])
        for (int64_t b = 0; b < std::max<int64_t>(cnt[1], 1); b += step[1])
            for (int64_t c = 0; c < std::max<int64_t>(cnt[2], 1); c += step[2]) {
                const int64_t p[3] = {d[0] >= 8 ? 8 * a + 4 : 0, d[1] >= 8 ? 8 * b + 4 : 0, d[2] >= 8 ? 8 * c + 4 : 0};
                const int64_t centre = lin(d, p[0], p[1], p[2]);
                if (!usable(x[centre])) continue;
                for (int k = 0; k < 3; ++k) {
                    if (d[k] < 8 || p[k] + 3 >= d[k]) continue;
                    const int64_t stride = k == 0 ? d[1] * d[2] : (k == 1 ? d[2] : 1);
                    const T v[4] = {x[centre - 3 * stride], x[centre - stride], x[centre + stride],
                                    x[centre + 3 * stride]};
                    if (!usable(v[0]) || !usable(v[1]) || !usable(v[2]) || !usable(v[3])) continue;
                    for (int nat = 0; nat < 2; ++nat) {
                        const double pred = interp_predict(3, 1, 7, nat != 0, [&](int64_t j) {
                            return (double)v[j == 0 ? 0 : (j == 2 ? 1 : (j == 4 ? 2 : 3))];
                        });
                        err[k][nat] += std::fabs((double)x[centre] - pred);
                    }
                }
            }
    double smooth[3];
    for (int k = 0; k < 3; ++k) {
        ip.natural[k] = err[k][1] < err[k][0] ? 1 : 0;
        smooth[k] = std::min(err[k][0], err[k][1]);
    }
    // Least smooth dim first: fewer interpolations run along it (cusz-i.txt section V-C2). Ties keep dim order.
    int order[3] = {0, 1, 2};
    std::stable_sort(order, order + 3, [&](int a, int b) { return smooth[a] > smooth[b]; });
    for (int k = 0; k < 3; ++k) ip.order[k] = (uint8_t)order[k];
    interp_set_alpha(ip, eb, range > 0 ? interp_alpha(eb / range) : 2.0);
    if (tune_alpha) interp_tune_alpha(x, s, eb, encoder, has_fill, fill_bits, ip, nt);
    return ip;
}

void interp_params_write(const InterpParams &p, uint8_t *dst) {
    std::memset(dst, 0, kInterpParamBytes);
    dst[0] = kInterpAnchorLog2;
    dst[1] = kInterpLevels;
    for (int k = 0; k < 3; ++k) {
        dst[2 + k] = p.order[k];
        dst[5 + k] = p.natural[k];
    }
    put_f64(dst + 8, p.alpha);
    for (int l = 0; l <= kInterpLevels; ++l) put_f64(dst + 16 + 8 * l, p.level_eb[l]);
}

bool interp_params_read(const uint8_t *src, InterpParams &p, std::string &why) {
    if (src[0] != kInterpAnchorLog2 || src[1] != kInterpLevels) {
        why = "unsupported interp anchor stride or level count";
        return false;
    }
    bool seen[3] = {false, false, false};
    for (int k = 0; k < 3; ++k) {
        p.order[k] = src[2 + k];
        p.natural[k] = src[5 + k];
        if (p.order[k] > 2 || seen[p.order[k]] || p.natural[k] > 1) {
            why = "bad interp dim order or spline choice";
            return false;
        }
        seen[p.order[k]] = true;
    }
    p.alpha = get_f64(src + 8);
    for (int l = 0; l <= kInterpLevels; ++l) {
        p.level_eb[l] = get_f64(src + 16 + 8 * l);
        if (!std::isfinite(p.level_eb[l]) || p.level_eb[l] < 0) {
            why = "bad interp level bound";
            return false;
        }
    }
    return true;
}

// interp_encode_cpu in the code form of Code16T (Code16<true> or Code16<false>).
template <typename T, typename Code16T>
void interp_encode_form(const T *x, const Shape &s, const InterpParams &ip, InterpCodeOrder order, double eb,
                        Code16T code16, int has_fill, uint64_t fill_bits, uint16_t *c16, uint8_t *exc, T *recon,
                        std::vector<int32_t> &escapes, int nt) {
    const int32_t radius = code16.radius;
    int64_t d[3];
    view3(s, d);
    // Anchors: dual-quant integers at the anchor bound, Lorenzo on the lattice (0 outside), escapes beyond radius.
    const Lattice L(d);
    const QuantParams qa = make_quant_params(ip.level_eb[kInterpLevels], has_fill, fill_bits);
    CodePos pos{order};
    std::vector<uint32_t> qlat((size_t)L.size());
    const uint64_t anchors = (uint64_t)L.size();
#pragma omp parallel for num_threads(nt) schedule(static) if (anchors > kAnchorChunk)
    for (int64_t a = 0; a < L.size(); ++a) {
        const int64_t i = L.index(d, a);
        int32_t q;
        const bool regular = quantize<T>(x[i], qa, q);
        qlat[(size_t)a] = (uint32_t)q;
        exc[i] = regular ? 0 : 1;
        recon[i] = regular ? dequantize<T>(q, qa.twoeb) : x[i];
    }
    auto delta_at = [&](int64_t a) {
        const int64_t az = a / (L.n[1] * L.n[2]), ay = (a / L.n[2]) % L.n[1], ax = a % L.n[2];
        auto qat = [&](int64_t zz, int64_t yy, int64_t xx) -> uint32_t {
            return (zz < 0 || yy < 0 || xx < 0) ? 0u : qlat[(size_t)((zz * L.n[1] + yy) * L.n[2] + xx)];
        };
        return lorenzo_delta<3>(az, ay, ax, qat);
    };
    auto anchor_code = [&](uint64_t a) -> uint16_t & { return c16[pos.anchor((int64_t)a, L.index(d, (int64_t)a))]; };
    // Codes per chunk with their escapes counted; the escapes (in lattice order) then written by their rank.
    const std::vector<uint64_t> first = count_escapes_by_chunk(anchors, nt, [&](uint64_t a0, uint64_t a1) {
        uint64_t escaped = 0;
        for (uint64_t a = a0; a < a1; ++a) {
            const int32_t delta = delta_at((int64_t)a);
            const bool in_range = delta > -radius && delta < radius;
            anchor_code(a) = in_range ? code16(delta) : Code16T::kEscaped;
            escaped += in_range ? 0 : 1;
        }
        return escaped;
    }, kAnchorChunk);
    const size_t esc0 = escapes.size();
    escapes.resize(esc0 + (size_t)first.back());
    for_each_escape(anchors, first, nt, [&](uint64_t a) { return anchor_code(a) == Code16T::kEscaped; },
                    [&](uint64_t a, uint64_t e) { escapes[esc0 + e] = delta_at((int64_t)a); }, kAnchorChunk);
    stage_mark("anchors");
    // Levels from stride 4 down to 1; within a level one pass per dim in the tuned order, with the row functions of
    // the vector level in use.
    const auto encode_row = encode_row_functions<T>();
    const auto narrow = ZB_SIMD_PICK(void (*)(const int32_t *, uint16_t *, int64_t, Code16T), narrow_row);
    int64_t base = L.size();
    for (int l = kInterpLevels - 1; l >= 0; --l) {
        const int64_t st = (int64_t)1 << l;
        const double twoe = 2.0 * ip.level_eb[l];
        const ResidualParams rp{twoe, twoe > 0 ? 1.0 / twoe : 0.0, eb, radius, has_fill, fill_bits};
        const Level level(ip, d, st, order, base);
        EncodePass<T> ep[3];
        for (int i = 0; i < 3; ++i) {
            ep[i] = EncodePass<T>{{&level.p[i], d, st, ip.natural[level.p[i].dim] != 0}, x, recon, exc, rp};
            ep[i].store_recon = !(l == 0 && i == 2);   // the last pass's reconstructions are never read
        }
        auto encode_one_row = [&](int i, int64_t z, int64_t y, const Row &row, RowScratch &scratch) {
            encode_row(row)(ep[i], z, y, row, scratch.codes, 1, scratch.pred);
            uint16_t *dst = level.pos[i].codes(c16, row);
            const int64_t step = level.pos[i].code_step(row);
            if (step == 1) narrow(scratch.codes, dst, row.count, code16);
            else for (int64_t ix = 0; ix < row.count; ++ix) dst[ix * step] = code16(scratch.codes[ix]);
        };
        for_each_level_row(level.p, d, st, nt, kEncodeMinPoints, encode_one_row);
        base = level.end;
        stage_mark(kLevelStage[l]);
    }
}

template <typename T>
void interp_encode_cpu(const T *x, const Shape &s, const InterpParams &ip, InterpCodeOrder order, double eb,
                       uint8_t encoder, int has_fill, uint64_t fill_bits, uint16_t *c16, uint8_t *exc, T *recon,
                       std::vector<int32_t> &escapes, int nt) {
    if (encoder == kEncRatio) interp_encode_form(x, s, ip, order, eb, Code16<true>{kRatioRadius}, has_fill, fill_bits,
                                                 c16, exc, recon, escapes, nt);
    else interp_encode_form(x, s, ip, order, eb, Code16<false>{kFastRadius}, has_fill, fill_bits, c16, exc, recon,
                            escapes, nt);
}

// interp_decode_cpu in the code form of Code32T (RatioCode32 or FastCode32).
template <typename T, typename Code32T>
zb_status interp_decode_form(const Shape &s, const InterpParams &ip, InterpCodeOrder order, Code32T code32,
                             const uint16_t *c16, const int32_t *escapes, uint64_t nescapes, const uint8_t *mask,
                             T *out, int nt, std::string &msg) {
    int64_t d[3];
    view3(s, d);
    const Lattice L(d);
    // Anchors: deltas (escaped ones from the list, by their rank: zb_chunk_escapes.h) -> 3D prefix sums on the
    // lattice -> values.
    CodePos pos{order};
    std::vector<uint32_t> qlat((size_t)L.size());
    const uint64_t anchors = (uint64_t)L.size();
    auto anchor_delta = [&](uint64_t a) { return code32(c16[pos.anchor((int64_t)a, L.index(d, (int64_t)a))]); };
    const std::vector<uint64_t> first = count_escapes_by_chunk(anchors, nt, [&](uint64_t a0, uint64_t a1) {
        uint64_t escaped = 0;
        for (uint64_t a = a0; a < a1; ++a) {
            const int32_t delta = anchor_delta(a);
            qlat[(size_t)a] = (uint32_t)delta;   // escaped ones replaced below
            escaped += delta == kEscapedCode ? 1 : 0;
        }
        return escaped;
    }, kAnchorChunk);
    if (first.back() > nescapes) {
        msg = "corrupt stream: more escaped anchors than escapes";
        return ZB_ERR_CORRUPT;
    }
    if (first.back() != nescapes) {
        msg = "corrupt stream: escape count does not match the anchors";
        return ZB_ERR_CORRUPT;
    }
    for_each_escape(anchors, first, nt, [&](uint64_t a) { return anchor_delta(a) == kEscapedCode; },
                    [&](uint64_t a, uint64_t e) { qlat[(size_t)a] = (uint32_t)escapes[e]; }, kAnchorChunk);
    lattice_prefix_sums(qlat.data(), L, nt);
    const double twoa = 2.0 * ip.level_eb[kInterpLevels];
#pragma omp parallel for num_threads(nt) schedule(static) if (anchors > kAnchorChunk)
    for (int64_t a = 0; a < L.size(); ++a) {
        const int64_t i = L.index(d, a);
        if (!mask || !mask[i]) out[i] = dequantize<T>((int32_t)qlat[(size_t)a], twoa);
    }
    stage_mark("anchors");
    // Levels, as the encoder ran them.
    const auto decode_row = decode_row_functions<T>();
    // The codes are in (-radius, radius) by their 16-bit form; escaped ones may be anchors only (checked above), so
    // the rows count theirs.
    const auto widen = ZB_SIMD_PICK(uint32_t (*)(const uint16_t *, int32_t *, int64_t, Code32T), widen_row);
    int64_t base = L.size();
    for (int l = kInterpLevels - 1; l >= 0; --l) {
        const int64_t st = (int64_t)1 << l;
        const double twoe = 2.0 * ip.level_eb[l];
        const Level level(ip, d, st, order, base);
        DecodePass<T> dp[3];
        for (int i = 0; i < 3; ++i)
            dp[i] = DecodePass<T>{{&level.p[i], d, st, ip.natural[level.p[i].dim] != 0}, out, mask, twoe};
        auto decode_one_row = [&](int i, int64_t z, int64_t y, const Row &row, RowScratch &scratch) {
            const uint16_t *src = level.pos[i].codes(c16, row);
            const int64_t step = level.pos[i].code_step(row);
            uint64_t escaped = 0;
            if (step == 1) {
                escaped = widen(src, scratch.codes, row.count, code32);
            } else {
                for (int64_t ix = 0; ix < row.count; ++ix) {
                    scratch.codes[ix] = code32(src[ix * step]);
                    escaped += scratch.codes[ix] == kEscapedCode ? 1 : 0;
                }
            }
            scratch.count += escaped;
            decode_row(row)(dp[i], z, y, row, scratch.codes, 1, scratch.pred);
        };
        const uint64_t stray_escapes = for_each_level_row(level.p, d, st, nt, kDecodeMinPoints, decode_one_row);
        base = level.end;
        if (stray_escapes) {
            msg = "corrupt stream: an escaped code outside the anchors";
            return ZB_ERR_CORRUPT;
        }
        stage_mark(kLevelStage[l]);
    }
    return ZB_OK;
}

template <typename T>
zb_status interp_decode_cpu(const Shape &s, const InterpParams &ip, InterpCodeOrder order, uint8_t encoder,
                            const uint16_t *c16, const int32_t *escapes, uint64_t nescapes, const uint8_t *mask,
                            T *out, int nt, std::string &msg) {
    if (encoder == kEncRatio)
        return interp_decode_form(s, ip, order, RatioCode32{kRatioRadius}, c16, escapes, nescapes, mask, out, nt, msg);
    return interp_decode_form(s, ip, order, FastCode32{}, c16, escapes, nescapes, mask, out, nt, msg);
}

#define ZB_INTERP_INSTANTIATE(T)                                                                                     \
    template InterpParams interp_tune<T>(const T *, const Shape &, double, double, int, uint64_t, uint8_t, bool,   \
                                         int);                                                                     \
    template void interp_encode_cpu<T>(const T *, const Shape &, const InterpParams &, InterpCodeOrder, double,      \
                                       uint8_t, int, uint64_t, uint16_t *, uint8_t *, T *, std::vector<int32_t> &,  \
                                       int);                                                                       \
    template zb_status interp_decode_cpu<T>(const Shape &, const InterpParams &, InterpCodeOrder, uint8_t,          \
                                            const uint16_t *, const int32_t *, uint64_t, const uint8_t *, T *, int, \
                                            std::string &);
ZB_INTERP_INSTANTIATE(float)
ZB_INTERP_INSTANTIATE(double)

}  // namespace zb
