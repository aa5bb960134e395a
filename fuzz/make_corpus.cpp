// Writes the seed corpora of the fuzz targets from real fields (the PLOT3D files of ../shared/data) and the
// archived v1 golden streams. Run once by hand; its output is committed under fuzz/corpus/:
//   zb_fuzz_make_corpus <shared/data dir> <tests/golden/v1 dir> <fuzz/corpus dir>
// Each seed is small (at most ~20 KB) so that the fuzzer mutates quickly.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>
#include "zbound.h"

namespace {

std::string g_out;
int g_count = 0;

bool read_plot3d(const std::string &path, std::vector<float> &vars, size_t &nk, size_t &nj, size_t &ni) {
    std::ifstream f(path, std::ios::binary);
    std::vector<uint8_t> raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (raw.size() < 28) return false;
    auto be32 = [&](size_t o) {
        return (uint32_t)raw[o] << 24 | (uint32_t)raw[o + 1] << 16 | (uint32_t)raw[o + 2] << 8 | raw[o + 3];
    };
    ni = be32(0), nj = be32(4), nk = be32(8);
    const size_t per = ni * nj * nk;
    if (raw.size() < 28 + 4 * 5 * per) return false;
    vars.resize(5 * per);
    for (size_t i = 0; i < 5 * per; ++i) {
        const uint32_t u = be32(28 + 4 * i);
        std::memcpy(&vars[i], &u, 4);
    }
    return true;
}

void write(const std::string &dir, const std::string &name, const std::vector<uint8_t> &bytes) {
    const std::string path = g_out + "/" + dir + "/" + name;
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char *>(bytes.data()), (std::streamsize)bytes.size());
    ++g_count;
}

zb_predictor g_predictor = ZB_PRED_AUTO;   // predictor and encoder of the streams compress() makes
zb_encoder g_encoder = ZB_ENC_AUTO;

template <typename T> std::vector<uint8_t> compress(const std::vector<T> &v, const std::vector<size_t> &dims,
                                                    zb_mode mode, double bound, bool fill = false, T fv = 0) {
    zb_params p = zb_params_default();
    p.predictor = g_predictor;
    p.encoder = g_encoder;
    p.mode = mode;
    p.bound = bound;
    p.backend = ZB_BACKEND_CPU;
    p.threads = 1;
    if (fill) {
        p.has_fill = 1;
        uint64_t b = 0;
        std::memcpy(&b, &fv, sizeof(T));
        p.fill_bits = b;
    }
    const zb_dtype dt = sizeof(T) == 8 ? ZB_F64 : ZB_F32;
    std::vector<uint8_t> s(zb_compress_bound(dt, v.size()));
    size_t len = 0;
    if (zb_compress(&p, dt, v.data(), (int)dims.size(), dims.data(), s.data(), s.size(), &len, nullptr) != ZB_OK) {
        std::fprintf(stderr, "compress failed: %s\n", zb_last_error());
        std::exit(1);
    }
    s.resize(len);
    return s;
}

// A sub-block of one variable: [z0, z0+dz) x [y0, y0+dy) x [x0, x0+dx) of a (nk, nj, ni) field.
std::vector<float> block(const std::vector<float> &vars, int var, size_t nk, size_t nj, size_t ni, size_t z0,
                         size_t dz, size_t y0, size_t dy, size_t x0, size_t dx) {
    std::vector<float> out;
    const size_t per = nk * nj * ni;
    for (size_t z = z0; z < z0 + dz; ++z)
        for (size_t y = y0; y < y0 + dy; ++y)
            for (size_t x = x0; x < x0 + dx; ++x) out.push_back(vars[var * per + (z * nj + y) * ni + x]);
    return out;
}

// A flat (nz, ny, nx) field of value c with a (dz, dy, dx) block `patch` copied in at (z0, y0, x0) (a real block
// across a Lorenzo segment border, below; rank 1 and 2 fields have nz = 1 and ny = 1): flat values give all-zero
// code blocks, so a stream of a million values stays a seed of about 20 KB. The block lies inside the field.
struct Box {
    size_t z, y, x;
};
template <typename T, typename P>
std::vector<T> flat_with_block(T c, Box n, const std::vector<P> &patch, Box d, Box at) {
    std::vector<T> v(n.z * n.y * n.x, c);
    for (size_t z = 0; z < d.z; ++z)
        for (size_t y = 0; y < d.y; ++y)
            for (size_t x = 0; x < d.x; ++x)
                v[((at.z + z) * n.y + at.y + y) * n.x + at.x + x] = (T)patch[(z * d.y + y) * d.x + x];
    return v;
}

template <typename T> void add_specials(std::vector<T> &v, T fill) {
    for (size_t i = 3; i < v.size(); i += 41) v[i] = std::numeric_limits<T>::quiet_NaN();
    for (size_t i = 7; i < v.size(); i += 97) v[i] = fill;
    if (v.size() > 20) {
        v[11] = std::numeric_limits<T>::infinity();
        v[12] = -std::numeric_limits<T>::infinity();
        v[13] = (T)-0.0;
        uint64_t payload_nan = sizeof(T) == 8 ? 0x7ff4000000001234ull : 0x7fa01234ull;
        std::memcpy(&v[14], &payload_nan, sizeof(T));
    }
}

template <typename T> std::vector<uint8_t> le_bytes(const std::vector<T> &v, bool big_endian) {
    std::vector<uint8_t> b(v.size() * sizeof(T));
    std::memcpy(b.data(), v.data(), b.size());
    if (big_endian)
        for (size_t i = 0; i < v.size(); ++i)
            for (size_t k = 0; k < sizeof(T) / 2; ++k) std::swap(b[i * sizeof(T) + k], b[i * sizeof(T) + sizeof(T) - 1 - k]);
    return b;
}

void put32(std::vector<uint8_t> &b, uint32_t v) {
    for (int i = 0; i < 4; ++i) b.push_back((uint8_t)(v >> (8 * i)));
}

std::vector<uint32_t> user_words(zb_mode mode, double bound, unsigned pred, unsigned enc) {
    uint64_t u;
    std::memcpy(&u, &bound, 8);
    return {1u, (uint32_t)mode, (uint32_t)(u >> 32), (uint32_t)u, pred, enc};
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: %s <shared/data> <tests/golden/v1> <fuzz/corpus>\n", argv[0]);
        return 2;
    }
    const std::string data = argv[1], golden = argv[2];
    g_out = argv[3];
    std::vector<float> combq, postq;
    size_t ck, cj, ci, pk, pj, pi;
    if (!read_plot3d(data + "/nasa_cfd_combq.bin", combq, ck, cj, ci) ||
        !read_plot3d(data + "/nasa_cfd_postq.bin", postq, pk, pj, pi)) {
        std::fprintf(stderr, "cannot read the PLOT3D fields under %s\n", data.c_str());
        return 1;
    }
    const std::string D = "decode", F = "filter";
    auto dec_seed = [&](const std::string &name, const std::vector<uint8_t> &s) {
        for (uint8_t ctl : {0, 1}) {
            std::vector<uint8_t> b{ctl};
            b.insert(b.end(), s.begin(), s.end());
            write(D, name + (ctl ? "_fix" : ""), b);
        }
    };

    // Real blocks, f32 and f64, ranks 1-3, abs/rel/lossless.
    const auto b3 = block(combq, 0, ck, cj, ci, 4, 6, 5, 12, 10, 24);       // 6x12x24 f32
    const auto b2 = block(postq, 4, pk, pj, pi, 10, 1, 0, 40, 0, 38);       // 40x38
    const auto b1 = block(combq, 3, ck, cj, ci, 10, 1, 10, 1, 0, 57);       // 57 values
    dec_seed("combq3d_f32_rel1e-3", compress(b3, {6, 12, 24}, ZB_MODE_REL, 1e-3));
    dec_seed("combq3d_f32_abs1e-6_escapes", compress(b3, {6, 12, 24}, ZB_MODE_ABS, 1e-7));
    dec_seed("postq2d_f32_abs1e-4", compress(b2, {40, 38}, ZB_MODE_ABS, 1e-4));
    dec_seed("combq1d_f32_rel1e-2", compress(b1, {57}, ZB_MODE_REL, 1e-2));
    dec_seed("combq1d_f32_lossless", compress(b1, {57}, ZB_MODE_ABS, 0.0));
    const std::vector<double> b3d(b3.begin(), b3.end()), b2d(b2.begin(), b2.end());
    dec_seed("combq3d_f64_rel1e-4", compress(b3d, {6, 12, 24}, ZB_MODE_REL, 1e-4));
    dec_seed("postq2d_f64_abs1e-3", compress(b2d, {40, 38}, ZB_MODE_ABS, 1e-3));
    {
        auto s = b2;
        add_specials(s, -9999.9f);
        dec_seed("postq2d_f32_specials_fill", compress(s, {40, 38}, ZB_MODE_REL, 1e-3, true, -9999.9f));
        auto sd = b3d;
        add_specials(sd, 1e36);
        dec_seed("combq3d_f64_specials_fill", compress(sd, {6, 12, 24}, ZB_MODE_ABS, 1e-5, true, 1e36));
    }
    {   // Incompressible noise at a tiny bound: raw passthrough.
        std::mt19937 rng(7);
        std::vector<float> noise(300);
        for (auto &x : noise) {
            uint32_t u = rng();
            std::memcpy(&x, &u, 4);
        }
        dec_seed("noise_f32_raw", compress(noise, {300}, ZB_MODE_ABS, 0.0));
        std::vector<double> nd(100);
        for (auto &x : nd) x = std::ldexp((double)rng(), (int)(rng() % 200) - 100);
        dec_seed("noise_f64_raw", compress(nd, {10, 10}, ZB_MODE_ABS, 1e-300));
    }
    dec_seed("one_value_f32", compress(std::vector<float>{1.5f}, {1}, ZB_MODE_ABS, 1e-3));
    dec_seed("unitdims_f64", compress(std::vector<double>(b1.begin(), b1.begin() + 19), {1, 19, 1}, ZB_MODE_REL, 1e-3));
    dec_seed("multi_tile_f32", compress(block(postq, 0, pk, pj, pi, 0, 2, 0, 76, 0, 38), {2, 76, 38}, ZB_MODE_REL, 1e-3));
    // The interp predictor (format v3 since the pass-ordered codes; the v2_interp_* seeds of the corpus were written
    // by the library before, in index order, and stay as seeds of the v2 decoder).
    g_predictor = ZB_PRED_INTERP;
    dec_seed("v3_interp_combq3d_f32_rel1e-3", compress(b3, {6, 12, 24}, ZB_MODE_REL, 1e-3));
    dec_seed("v3_interp_postq2d_f64_abs1e-4", compress(b2d, {40, 38}, ZB_MODE_ABS, 1e-4));
    dec_seed("v3_interp_combq1d_f32_abs1e-7", compress(b1, {57}, ZB_MODE_ABS, 1e-7));
    {
        auto s = b2;
        add_specials(s, -9999.9f);
        dec_seed("v3_interp_postq2d_f32_specials_fill", compress(s, {40, 38}, ZB_MODE_REL, 1e-2, true, -9999.9f));
    }
    dec_seed("v3_interp_multi_block_f32",
             compress(block(postq, 1, pk, pj, pi, 0, 4, 0, 76, 0, 38), {4, 76, 38}, ZB_MODE_REL, 1e-4));
    // The ratio encoder with each predictor (Lorenzo: format v2, interp: v3).
    g_encoder = ZB_ENC_RATIO;
    g_predictor = ZB_PRED_LORENZO;
    dec_seed("v2_ratio_lorenzo_combq3d_f32_rel1e-3", compress(b3, {6, 12, 24}, ZB_MODE_REL, 1e-3));
    dec_seed("v2_ratio_lorenzo_postq2d_f64_abs1e-5", compress(b2d, {40, 38}, ZB_MODE_ABS, 1e-5));
    g_predictor = ZB_PRED_INTERP;
    dec_seed("v3_ratio_interp_multi_block_f32",
             compress(block(postq, 2, pk, pj, pi, 0, 4, 0, 76, 0, 38), {4, 76, 38}, ZB_MODE_REL, 1e-3));
    {
        auto s = b2;
        add_specials(s, -9999.9f);
        dec_seed("v3_ratio_interp_specials_fill", compress(s, {40, 38}, ZB_MODE_ABS, 1e-4, true, -9999.9f));
    }
    // The point-wise relative mode (format v5, a container around an inner stream), with zeros and both signs.
    {
        auto s = b2;
        add_specials(s, -9999.9f);
        for (size_t i = 0; i < s.size(); i += 11) s[i] = 0.0f;
        for (size_t i = 1; i < s.size(); i += 3) s[i] = -s[i];
        dec_seed("v5_pwrel_interp_ratio_specials_fill", compress(s, {40, 38}, ZB_MODE_PW_REL, 1e-3, true, -9999.9f));
        g_predictor = ZB_PRED_LORENZO;
        g_encoder = ZB_ENC_FAST;
        dec_seed("v5_pwrel_lorenzo_fast_f64", compress(b2d, {40, 38}, ZB_MODE_PW_REL, 1e-2));
    }
    // Lorenzo segments (format v6: the fast pipeline on more than one segment, docs/FORMAT.md section 13): arrays
    // of about a million values, flat but for a real block, specials and an outlier at and across a segment border
    // (segment 0 of each holds about 1 << 20 values), so that mutations reach the per-segment decoder. Ranks 1-3,
    // f32 and f64, abs and rel.
    g_predictor = ZB_PRED_LORENZO;
    g_encoder = ZB_ENC_FAST;
    std::vector<uint8_t> v6_r1;   // also a seed of the filter's reverse direction, below
    const float v6_fill = -9999.9f;
    const size_t v6_r1_n = (size_t(1) << 20) + 3000;
    {
        const size_t border = size_t(1) << 20;
        auto r1 = flat_with_block(271.5f, {1, 1, v6_r1_n}, b1, {1, 1, b1.size()}, {0, 0, border - 30});
        r1[5] = -std::numeric_limits<float>::infinity();
        r1[border] = std::numeric_limits<float>::quiet_NaN();
        r1[border + 1] = v6_fill;
        r1[border + 2] = 1e30f;   // a value outlier: an exception
        r1[border + 3] = -0.0f;
        v6_r1 = compress(r1, {r1.size()}, ZB_MODE_ABS, 1e-3, true, v6_fill);
        dec_seed("v6_lorenzo_fast_r1_f32_abs_specials_fill", v6_r1);
        // 1100 x 1000: segments of 1049 rows; b2 (40 x 38) at rows 1030-1069 spans the border.
        const auto r2 = flat_with_block(-3.25f, {1, 1100, 1000}, b2, {1, 40, 38}, {0, 1030, 500});
        dec_seed("v6_lorenzo_fast_r2_f32_rel1e-3", compress(r2, {1100, 1000}, ZB_MODE_REL, 1e-3));
        // 72 x 128 x 128 f64: segments of 64 planes; b3 (6 x 12 x 24) at planes 61-66.
        auto r3 = flat_with_block(1.0e5, {72, 128, 128}, b3, {6, 12, 24}, {61, 40, 70});
        r3[64 * 128 * 128] = std::numeric_limits<double>::infinity();
        dec_seed("v6_lorenzo_fast_r3_f64_abs1e-4", compress(r3, {72, 128, 128}, ZB_MODE_ABS, 1e-4));
    }
    g_encoder = ZB_ENC_AUTO;
    g_predictor = ZB_PRED_AUTO;
    // The archived golden streams (real fields, ~35-40 KB: truncated to max_len by the fuzzer when longer).
    for (const char *g : {"combq_v0_f32_rel1e-3", "combq_v3_f64_rel1e-2_specials"}) {
        std::ifstream f(golden + "/" + g + ".zbs", std::ios::binary);
        std::vector<uint8_t> s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        if (s.empty()) {
            std::fprintf(stderr, "missing golden stream %s\n", g);
            return 1;
        }
        std::vector<uint8_t> b{0};
        b.insert(b.end(), s.begin(), s.end());
        write(D, std::string("golden_") + g, b);
    }

    // Filter target, forward: control, word count, shape selector, user words, chunk bytes.
    auto fwd_seed = [&](const std::string &name, uint8_t ctl, uint8_t shape, const std::vector<uint32_t> &w,
                        const std::vector<uint8_t> &chunk) {
        std::vector<uint8_t> b{ctl, (uint8_t)w.size(), shape};
        for (uint32_t x : w) put32(b, x);
        b.insert(b.end(), chunk.begin(), chunk.end());
        write(F, name, b);
    };
    fwd_seed("fwd_f32_abs_3d", 0, 0x80 | 3 | (5 << 3), user_words(ZB_MODE_ABS, 1e-4, 1, 1), le_bytes(b3, false));
    fwd_seed("fwd_f32_rel_2d_be", 4, 37, user_words(ZB_MODE_REL, 1e-3, 0, 0), le_bytes(b2, true));
    fwd_seed("fwd_f64_rel_fill", 2 | 8, 11, user_words(ZB_MODE_REL, 1e-2, 1, 0), le_bytes(b2d, false));
    fwd_seed("fwd_f64_be_abs", 2 | 4, 0x80 | 7, user_words(ZB_MODE_ABS, 1e-6, 0, 1), le_bytes(b3d, true));
    {
        auto s = b2;
        add_specials(s, s[0]);
        fwd_seed("fwd_f32_specials_fill", 8, 38, user_words(ZB_MODE_ABS, 1e-3, 1, 1), le_bytes(s, false));
    }
    fwd_seed("fwd_defaults_0words", 0, 5, {}, le_bytes(b1, false));
    fwd_seed("fwd_1word", 0, 5, {1}, le_bytes(b1, false));
    fwd_seed("fwd_2words", 0, 5, {1, 0}, le_bytes(b1, false));
    fwd_seed("fwd_3words_refused", 0, 5, {1, 0, 0x3f50624d}, le_bytes(b1, false));
    fwd_seed("fwd_4words", 0, 5, {1, 1, 0x3f50624d, 0xd2f1a9fc}, le_bytes(b1, false));
    fwd_seed("fwd_pwrel", 0, 5, user_words(ZB_MODE_PW_REL, 1e-3, 0, 0), le_bytes(b1, false));
    fwd_seed("fwd_pwrel_interp_ratio_f64_fill", 2 | 8, 38, user_words(ZB_MODE_PW_REL, 1e-2, 2, 2), le_bytes(b2d, false));
    fwd_seed("fwd_interp_1d", 0, 5, user_words(ZB_MODE_ABS, 1e-3, 2, 0), le_bytes(b1, false));
    fwd_seed("fwd_ratio_1d", 0, 5, user_words(ZB_MODE_ABS, 1e-3, 0, 2), le_bytes(b1, false));
    fwd_seed("fwd_ratio_lorenzo_f32_3d", 0, 0x80 | 5 | (3 << 3), user_words(ZB_MODE_REL, 1e-4, 1, 2),
             le_bytes(b3, false));
    fwd_seed("fwd_ratio_interp_f64_be_fill", 2 | 4 | 8, 38, user_words(ZB_MODE_ABS, 1e-3, 2, 2), le_bytes(b2d, true));
    fwd_seed("fwd_nan_bound", 0, 5, {1, 0, 0x7ff80000, 0}, le_bytes(b1, false));
    fwd_seed("fwd_lossless", 0, 5, user_words(ZB_MODE_ABS, 0.0, 0, 0), le_bytes(b1, false));
    fwd_seed("fwd_interp_f32_3d", 0, 0x80 | 5 | (3 << 3), user_words(ZB_MODE_REL, 1e-3, 2, 0), le_bytes(b3, false));
    fwd_seed("fwd_interp_f64_be_fill", 2 | 4 | 8, 38, user_words(ZB_MODE_ABS, 1e-4, 2, 1), le_bytes(b2d, true));

    // Filter target, reverse: control (bit 0 set), 13 dataset words, a stream.
    auto rev_seed = [&](const std::string &name, uint8_t ctl, const std::vector<uint32_t> &cd,
                        const std::vector<uint8_t> &stream) {
        std::vector<uint8_t> b{(uint8_t)(ctl | 1), (uint8_t)cd.size(), 0};
        for (uint32_t x : cd) put32(b, x);
        b.insert(b.end(), stream.begin(), stream.end());
        write(F, name, b);
    };
    auto full_words = [](zb_mode m, double bound, uint32_t dtype, bool fill, uint64_t fill_bits, uint32_t nz,
                         uint32_t ny, uint32_t nx) {
        auto w = user_words(m, bound, 0, 0);
        for (uint32_t x : {dtype, fill ? 1u : 0u, (uint32_t)(fill_bits >> 32), (uint32_t)fill_bits, nz, ny, nx})
            w.push_back(x);
        return w;
    };
    rev_seed("rev_f32_3d", 0, full_words(ZB_MODE_REL, 1e-3, 1, false, 0, 6, 12, 24),
             compress(b3, {6, 12, 24}, ZB_MODE_REL, 1e-3));
    rev_seed("rev_f64_2d_fix", 2, full_words(ZB_MODE_ABS, 1e-3, 2, false, 0, 1, 40, 38),
             compress(b2d, {40, 38}, ZB_MODE_ABS, 1e-3));
    rev_seed("rev_f32_be_fix", 2, full_words(ZB_MODE_ABS, 1e-4, 1 | 0x100, false, 0, 1, 1, 57),
             compress(b1, {57}, ZB_MODE_ABS, 1e-4));
    rev_seed("rev_no_dataset_words", 0, {1, 0, 0x3f50624d, 0xd2f1a9fc}, compress(b1, {57}, ZB_MODE_ABS, 1e-3));
    g_predictor = ZB_PRED_LORENZO;
    g_encoder = ZB_ENC_RATIO;
    rev_seed("rev_v2_ratio_f64_2d_fix", 2, full_words(ZB_MODE_ABS, 1e-4, 2, false, 0, 1, 40, 38),
             compress(b2d, {40, 38}, ZB_MODE_ABS, 1e-4));
    g_encoder = ZB_ENC_AUTO;
    g_predictor = ZB_PRED_INTERP;
    rev_seed("rev_v2_interp_f32_3d_fix", 2, full_words(ZB_MODE_REL, 1e-3, 1, false, 0, 6, 12, 24),
             compress(b3, {6, 12, 24}, ZB_MODE_REL, 1e-3));
    g_predictor = ZB_PRED_AUTO;
    rev_seed("rev_mismatched_shape", 0, full_words(ZB_MODE_ABS, 1e-3, 1, false, 0, 1, 1, 56),
             compress(b1, {57}, ZB_MODE_ABS, 1e-3));
    {
        uint32_t fill_bits = 0;
        std::memcpy(&fill_bits, &v6_fill, 4);
        rev_seed("rev_v6_r1_f32_fill", 0, full_words(ZB_MODE_ABS, 1e-3, 1, true, fill_bits, 1, 1, (uint32_t)v6_r1_n),
                 v6_r1);
    }
    std::printf("wrote %d seeds under %s\n", g_count, g_out.c_str());
    return 0;
}
