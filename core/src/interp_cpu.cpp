// The interp predictor on the CPU: tuning, anchors (integer Lorenzo on the lattice of multiples of 8), then levels
// with strides 4, 2, 1, one pass per dim in the tuned order (docs/FORMAT.md "Interp predictor"). In a pass every
// point is predicted from points of earlier passes only, so the points of a pass are independent (OpenMP here,
// one thread per point on the GPU).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>
#include <omp.h>
#include "zb_bytes.h"
#include "zb_interp_cpu.h"
#include "zb_lorenzo.h"

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

// Linear index of (c[0], c[1], c[2]) in the 3D view.
inline int64_t lin(const int64_t d[3], int64_t z, int64_t y, int64_t x) { return (z * d[1] + y) * d[2] + x; }

// The points of one pass: along dims[order[i]] the odd multiples of s, along earlier dims multiples of s, along
// later dims multiples of 2s (with s the level's stride).
struct Pass {
    int dim;
    int64_t start[3], step[3], count[3];
};

Pass make_pass(const InterpParams &ip, const int64_t d[3], int64_t s, int i) {
    Pass p;
    p.dim = ip.order[i];
    for (int j = 0; j < 3; ++j) {
        const int dj = ip.order[j];
        p.start[dj] = j == i ? s : 0;
        p.step[dj] = j < i ? s : 2 * s;
    }
    for (int k = 0; k < 3; ++k)
        p.count[k] = d[k] > p.start[k] ? (d[k] - 1 - p.start[k]) / p.step[k] + 1 : 0;
    return p;
}

int64_t pass_points(const Pass &p) { return p.count[0] * p.count[1] * p.count[2]; }

// finite_prediction (zb_interp.h) written with selects instead of early returns, and "finite" as |v| <= DBL_MAX (a
// double compare; the bit test needs 64-bit integer vector compares, which SSE2 lacks), so that loops using it
// vectorize. Same result.
inline bool finite_double(double v) { return std::fabs(v) <= std::numeric_limits<double>::max(); }
inline double finite_prediction_sel(double p, double left, double right) {
    const double fallback = finite_double(left) ? left : (finite_double(right) ? right : 0.0);
    return finite_double(p) ? p : fallback;
}

// One row of a pass: the points at array indices first + ix * dx, numbered k0 + ix within the pass (ix < count).
struct Row {
    int64_t first, dx, k0, count;
};

// Predictions of one row, sink(ix, prediction) for each point ix in order, from rec at stride s (the arithmetic of
// interp_predict). A row of a pass along z or y has one spline case for all its points (their coordinate along the
// pass dim is the row's), so the case is chosen once per row and the loop over x is branch-free; along x the cubic
// interior runs without the per-point case choice, the few points near the ends through interp_predict. With a sink
// that only stores into a buffer, and Branchless, the loops vectorize.
template <bool Natural, bool Branchless, typename T, typename Sink>
void predict_row(const Pass &p, const int64_t d[3], int64_t s, const T *__restrict rec, int64_t z, int64_t y,
                 const Row &row, Sink sink) {
    // The fallback for a non-finite spline: without branches where the loop is to vectorize, else the early-return
    // form, which is faster in a scalar loop.
    auto finite = [](double pred, double b, double c) {
        return Branchless ? finite_prediction_sel(pred, b, c) : finite_prediction(pred, b, c);
    };
    const int64_t stride = p.dim == 0 ? d[1] * d[2] : (p.dim == 1 ? d[2] : 1);
    const int64_t o1 = s * stride, o3 = 3 * s * stride;   // neighbours at idx -+ o1, -+ o3
    const int64_t n = row.count, dx = row.dx;
    const T *__restrict v = rec + row.first;   // v[ix * dx]: the point ix's value
    if (p.dim == 2) {
        const int64_t x0 = p.start[2];
        auto general = [&](int64_t ix) {
            const int64_t x = x0 + ix * dx;
            sink(ix, interp_predict(x, s, d[2], Natural, [&](int64_t j) { return (double)v[j - x0]; }));
        };
        const int64_t lo = std::min(n, x0 >= 3 * s ? (int64_t)0 : (3 * s - x0 + dx - 1) / dx);
        const int64_t hi = std::max(lo, std::min(n, d[2] - 3 * s > x0 ? (d[2] - 3 * s - x0 + dx - 1) / dx : 0));
        for (int64_t ix = 0; ix < lo; ++ix) general(ix);
        for (int64_t ix = lo; ix < hi; ++ix) {
            const int64_t i = ix * dx;
            const double b = v[i - o1], c = v[i + o1];
            sink(ix, finite(spline_cubic(Natural, v[i - o3], b, c, v[i + o3]), b, c));
        }
        for (int64_t ix = hi; ix < n; ++ix) general(ix);
        return;
    }
    // The neighbours of point ix along the pass dim, each read as its own strided stream (one load per iteration
    // from each pointer, which the vectorizer handles; four loads at offsets from one pointer it does not).
    const T *__restrict va = v - o3, *__restrict vb = v - o1, *__restrict vc = v + o1, *__restrict vd = v + o3;
    switch (spline_case(p.dim == 0 ? z : y, s, d[p.dim])) {
        case SplineCase::kLeftOnly:
            for (int64_t ix = 0; ix < n; ++ix) {
                const double b = vb[ix * dx];
                sink(ix, finite(b, b, b));
            }
            break;
        case SplineCase::kCubic:
            for (int64_t ix = 0; ix < n; ++ix) {
                const double b = vb[ix * dx], c = vc[ix * dx];
                sink(ix, finite(spline_cubic(Natural, va[ix * dx], b, c, vd[ix * dx]), b, c));
            }
            break;
        case SplineCase::kQuadLeft:
            for (int64_t ix = 0; ix < n; ++ix) {
                const double b = vb[ix * dx], c = vc[ix * dx];
                sink(ix, finite(spline_quad_left(va[ix * dx], b, c), b, c));
            }
            break;
        case SplineCase::kQuadRight:
            for (int64_t ix = 0; ix < n; ++ix) {
                const double b = vb[ix * dx], c = vc[ix * dx];
                sink(ix, finite(spline_quad_right(b, c, vd[ix * dx]), b, c));
            }
            break;
        default:
            for (int64_t ix = 0; ix < n; ++ix) {
                const double b = vb[ix * dx], c = vc[ix * dx];
                sink(ix, finite(spline_linear(b, c), b, c));
            }
    }
}

// Calls f(z, y, row, scratch) for every row of pass p; rows are independent (OpenMP when the pass is large), and
// scratch is the calling thread's buffer of p.count[2] doubles.
template <typename F> void for_each_row(const Pass &p, const int64_t d[3], int nt, F f) {
    const int64_t rows = p.count[0] * p.count[1], nxp = p.count[2];
    const bool parallel = rows * nxp > 65536;
    const int threads = parallel ? nt : 1;
    std::vector<double> buffers((size_t)(threads * nxp));   // allocated before the region: no throw inside it
#pragma omp parallel num_threads(threads) if (parallel)
    {
        double *scratch = buffers.data() + (size_t)(omp_get_thread_num() * nxp);
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
            const int64_t z = p.start[0] + (r / p.count[1]) * p.step[0];
            const int64_t y = p.start[1] + (r % p.count[1]) * p.step[1];
            f(z, y, Row{lin(d, z, y, p.start[2]), p.step[2], r * nxp, nxp}, scratch);
        }
    }
}

// predict_row with the spline variant chosen at run time.
template <bool Branchless, typename T, typename Sink>
void predict_row(bool natural, const Pass &p, const int64_t d[3], int64_t s, const T *rec, int64_t z, int64_t y,
                 const Row &row, Sink sink) {
    if (natural) predict_row<true, Branchless>(p, d, s, rec, z, y, row, sink);
    else predict_row<false, Branchless>(p, d, s, rec, z, y, row, sink);
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

// Encoder, one row: quantize_residual of every point against its prediction; codes, exception mask bits and the
// reconstruction. Nothing here reads what it writes, so the loop vectorizes.
template <typename T>
void quantize_row(const T *__restrict x, const double *__restrict pred, const Row &row, int32_t *__restrict codes,
                  int64_t code_step, double twoe, double recip, double eb, int32_t radius, int has_fill,
                  uint64_t fill_bits, uint8_t *__restrict exc, T *__restrict recon) {
    for (int64_t ix = 0; ix < row.count; ++ix) {
        const int64_t idx = row.first + ix * row.dx;
        int32_t q;
        T r;
        const bool regular = quantize_residual<T>(x[idx], pred[ix], twoe, recip, eb, radius, has_fill, fill_bits, q, r);
        codes[ix * code_step] = q;
        exc[idx] = regular ? 0 : 1;
        recon[idx] = r;
    }
}

// Lattice of anchors: dims and the linear index of lattice point (a, b, c).
struct Lattice {
    int64_t n[3];
    explicit Lattice(const int64_t d[3]) {
        for (int k = 0; k < 3; ++k) n[k] = (d[k] - 1) / (1 << kInterpAnchorLog2) + 1;
    }
    int64_t size() const { return n[0] * n[1] * n[2]; }
};

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
                         uint8_t encoder, bool tune_alpha) {
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
    if (tune_alpha) interp_tune_alpha(x, s, eb, encoder, has_fill, fill_bits, ip);
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

template <typename T>
void interp_encode_cpu(const T *x, const Shape &s, const InterpParams &ip, InterpCodeOrder order, double eb,
                       int32_t radius, int has_fill, uint64_t fill_bits, int32_t *codes, uint8_t *exc, T *recon,
                       std::vector<int32_t> &escapes, int nt) {
    int64_t d[3];
    view3(s, d);
    // Anchors: dual-quant integers at the anchor bound, Lorenzo on the lattice (0 outside), escapes beyond radius.
    const Lattice L(d);
    const int64_t A = 1 << kInterpAnchorLog2;
    const QuantParams qa = make_quant_params(ip.level_eb[kInterpLevels], has_fill, fill_bits);
    CodePos pos{order};
    std::vector<uint32_t> qlat((size_t)L.size());
#pragma omp parallel for num_threads(nt) schedule(static) if (L.size() > 65536)
    for (int64_t a = 0; a < L.size(); ++a) {
        const int64_t i = lin(d, (a / (L.n[1] * L.n[2])) * A, ((a / L.n[2]) % L.n[1]) * A, (a % L.n[2]) * A);
        int32_t q;
        const bool regular = quantize<T>(x[i], qa, q);
        qlat[(size_t)a] = (uint32_t)q;
        exc[i] = regular ? 0 : 1;
        recon[i] = regular ? dequantize<T>(q, qa.twoeb) : x[i];
    }
    for (int64_t a = 0; a < L.size(); ++a) {  // in index order, so escapes are ordered
        const int64_t az = a / (L.n[1] * L.n[2]), ay = (a / L.n[2]) % L.n[1], ax = a % L.n[2];
        auto qat = [&](int64_t zz, int64_t yy, int64_t xx) -> uint32_t {
            return (zz < 0 || yy < 0 || xx < 0) ? 0u : qlat[(size_t)((zz * L.n[1] + yy) * L.n[2] + xx)];
        };
        const int32_t delta = lorenzo_delta<3>(az, ay, ax, qat);
        const int64_t i = lin(d, az * A, ay * A, ax * A);
        int32_t &code = codes[pos.anchor(a, i)];
        if (delta > -radius && delta < radius) {
            code = delta;
        } else {
            code = kEscapedCode;
            escapes.push_back(delta);
        }
    }
    // Levels from stride 4 down to 1; within a level one pass per dim in the tuned order.
    pos.base = L.size();
    for (int l = kInterpLevels - 1; l >= 0; --l) {
        const int64_t st = (int64_t)1 << l;
        const double twoe = 2.0 * ip.level_eb[l];
        const double recip = twoe > 0 ? 1.0 / twoe : 0.0;
        for (int i = 0; i < 3; ++i) {
            const Pass p = make_pass(ip, d, st, i);
            const bool natural = ip.natural[p.dim] != 0;
            // Predictions into a buffer, then quantization: two loops without control flow that vectorize.
            for_each_row(p, d, nt, [&](int64_t z, int64_t y, const Row &row, double *pred) {
                predict_row<true>(natural, p, d, st, recon, z, y, row, [pred](int64_t ix, double v) { pred[ix] = v; });
                quantize_row(x, pred, row, pos.codes(codes, row), pos.code_step(row), twoe, recip, eb, radius,
                             has_fill, fill_bits, exc, recon);
            });
            pos.base += pass_points(p);
        }
    }
}

template <typename T>
zb_status interp_decode_cpu(const Shape &s, const InterpParams &ip, InterpCodeOrder order, int32_t radius,
                            const int32_t *codes, const int32_t *escapes, uint64_t nescapes, const uint8_t *mask,
                            T *out, int nt, std::string &msg) {
    int64_t d[3];
    view3(s, d);
    const Lattice L(d);
    const int64_t A = 1 << kInterpAnchorLog2;
    // Anchors: deltas (escapes in order) -> 3D prefix sums on the lattice -> values.
    CodePos pos{order};
    std::vector<uint32_t> qlat((size_t)L.size());
    uint64_t e = 0;
    for (int64_t a = 0; a < L.size(); ++a) {
        const int64_t i = lin(d, (a / (L.n[1] * L.n[2])) * A, ((a / L.n[2]) % L.n[1]) * A, (a % L.n[2]) * A);
        int32_t delta = codes[pos.anchor(a, i)];
        if (delta == kEscapedCode) {
            if (e >= nescapes) {
                msg = "corrupt stream: more escaped anchors than escapes";
                return ZB_ERR_CORRUPT;
            }
            delta = escapes[e++];
        }
        qlat[(size_t)a] = (uint32_t)delta;
    }
    if (e != nescapes) {
        msg = "corrupt stream: escape count does not match the anchors";
        return ZB_ERR_CORRUPT;
    }
    const int64_t nx = L.n[2], ny = L.n[1], nz = L.n[0];
    for (int64_t r = 0; r < nz * ny; ++r)
        for (int64_t x = 1; x < nx; ++x) qlat[(size_t)(r * nx + x)] += qlat[(size_t)(r * nx + x - 1)];
    for (int64_t z = 0; z < nz; ++z)
        for (int64_t y = 1; y < ny; ++y)
            for (int64_t x = 0; x < nx; ++x) qlat[(size_t)((z * ny + y) * nx + x)] += qlat[(size_t)((z * ny + y - 1) * nx + x)];
    for (int64_t z = 1; z < nz; ++z)
        for (int64_t k = 0; k < ny * nx; ++k) qlat[(size_t)(z * ny * nx + k)] += qlat[(size_t)((z - 1) * ny * nx + k)];
    const double twoa = 2.0 * ip.level_eb[kInterpLevels];
    for (int64_t a = 0; a < L.size(); ++a) {
        const int64_t i = lin(d, (a / (L.n[1] * L.n[2])) * A, ((a / L.n[2]) % L.n[1]) * A, (a % L.n[2]) * A);
        if (!mask[i]) out[i] = dequantize<T>((int32_t)qlat[(size_t)a], twoa);
    }
    // Every code is in (-radius, radius), but anchors may also be escaped.
    const int64_t n = d[0] * d[1] * d[2];
    int64_t bad = 0;
#pragma omp parallel for num_threads(nt) schedule(static) reduction(+ : bad) if (n > 65536)
    for (int64_t i = 0; i < n; ++i) {
        const int32_t q = codes[i];
        if (q > -radius && q < radius) continue;
        const int64_t x = i % d[2], y = (i / d[2]) % d[1], z = i / (d[1] * d[2]);
        const bool anchor = order == InterpCodeOrder::kPass ? i < L.size() : ((x | y | z) & (A - 1)) == 0;
        bad += !(anchor && q == kEscapedCode);
    }
    if (bad) {
        msg = "corrupt stream: interp code out of range";
        return ZB_ERR_CORRUPT;
    }
    // Levels, as the encoder ran them.
    pos.base = L.size();
    for (int l = kInterpLevels - 1; l >= 0; --l) {
        const int64_t st = (int64_t)1 << l;
        const double twoe = 2.0 * ip.level_eb[l];
        for (int i = 0; i < 3; ++i) {
            const Pass p = make_pass(ip, d, st, i);
            const bool natural = ip.natural[p.dim] != 0;
            // One fused loop: the store is masked (exceptions keep their values) and strided, which does not vectorize
            // well; fused, the prediction is not written to memory and read back.
            for_each_row(p, d, nt, [&](int64_t z, int64_t y, const Row &row, double *) {
                const int32_t *c = pos.codes(codes, row);
                const int64_t cstep = pos.code_step(row);
                predict_row<false>(natural, p, d, st, out, z, y, row, [&](int64_t ix, double pred) {
                    const int64_t idx = row.first + ix * row.dx;
                    if (!mask[idx]) out[idx] = dequantize_residual<T>(pred, c[ix * cstep], twoe);
                });
            });
            pos.base += pass_points(p);
        }
    }
    return ZB_OK;
}

#define ZB_INTERP_INSTANTIATE(T)                                                                                     \
    template InterpParams interp_tune<T>(const T *, const Shape &, double, double, int, uint64_t, uint8_t, bool);  \
    template void interp_encode_cpu<T>(const T *, const Shape &, const InterpParams &, InterpCodeOrder, double,      \
                                       int32_t, int, uint64_t, int32_t *, uint8_t *, T *, std::vector<int32_t> &,   \
                                       int);                                                                       \
    template zb_status interp_decode_cpu<T>(const Shape &, const InterpParams &, InterpCodeOrder, int32_t,          \
                                            const int32_t *, const int32_t *, uint64_t, const uint8_t *, T *, int,  \
                                            std::string &);
ZB_INTERP_INSTANTIATE(float)
ZB_INTERP_INSTANTIATE(double)

}  // namespace zb
