// cd_values encode/decode: pure C++, no HDF5. Used by the H5Z callbacks, `zbound cdvalues` and the tests.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include "zbound_cd_internal.h"

namespace zbound_cd {

namespace {

uint64_t double_bits(double v) {
    uint64_t u;
    std::memcpy(&u, &v, sizeof u);
    return u;
}

double bits_double(uint64_t u) {
    double v;
    std::memcpy(&v, &u, sizeof v);
    return v;
}

template <typename E> unsigned enum_value(const E &e) {
    static_assert(sizeof(E) <= sizeof(unsigned), "enum wider than unsigned");
    unsigned v = 0;
    std::memcpy(&v, &e, sizeof(E));
    return v;
}

std::string word_text(size_t i, unsigned int v) {
    return "cd_values[" + std::to_string(i) + "] = " + std::to_string(v);
}

std::string fmt_double(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return buf;
}

bool check_bound(double b, std::string &why) {
    if (!std::isfinite(b) || b < 0) {
        why = "the bound " + fmt_double(b) + " (cd_values[2..3] = 0x" + [&] {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)double_bits(b));
            return std::string(buf);
        }() + ") is not finite and >= 0";
        return false;
    }
    return true;
}

}  // namespace

const char *mode_name(int m) {
    switch (m) {
        case ZB_MODE_ABS: return "abs";
        case ZB_MODE_REL: return "rel";
        case ZB_MODE_PW_REL: return "pw_rel";
    }
    return "?";
}

const char *predictor_name(int p) {
    switch (p) {
        case ZB_PRED_AUTO: return "auto";
        case ZB_PRED_LORENZO: return "lorenzo";
        case ZB_PRED_INTERP: return "interp";
    }
    return "?";
}

const char *encoder_name(int e) {
    switch (e) {
        case ZB_ENC_AUTO: return "auto";
        case ZB_ENC_FAST: return "fast";
        case ZB_ENC_RATIO: return "ratio";
    }
    return "?";
}


void set_last_error(const std::string &msg) { zb_set_last_error(msg.c_str()); }

std::string describe(const zb_params &p) {
    return std::string(mode_name(p.mode)) + " " + fmt_double(p.bound) + ", predictor " +
           predictor_name(p.predictor) + ", encoder " + encoder_name(p.encoder);
}

bool decode_user(const unsigned int *cd, size_t n, zb_params &params, std::string &why) {
    params = zb_params_default();
    if (n > ZBOUND_CD_MAX_WORDS) {
        why = "cd_values has " + std::to_string(n) + " words; zbound takes at most " +
              std::to_string(ZBOUND_CD_MAX_WORDS);
        return false;
    }
    if (n > 0 && !cd) {
        why = "cd_values is NULL";
        return false;
    }
    if (n >= 1 && cd[kVersion] != ZBOUND_CD_LAYOUT_VERSION) {
        why = word_text(kVersion, cd[kVersion]) + ": unknown cd_values layout version (this build reads " +
              std::to_string(ZBOUND_CD_LAYOUT_VERSION) + ")";
        return false;
    }
    if (n >= 2) {
        if (cd[kMode] > 2) {
            why = word_text(kMode, cd[kMode]) + ": the mode must be 0 (abs), 1 (rel) or 2 (pw_rel)";
            return false;
        }
        params.mode = (zb_mode)cd[kMode];
    }
    if (n == 3) {
        why = "cd_values has 3 words: the bound needs both cd_values[2] (high word) and cd_values[3] (low word)";
        return false;
    }
    if (n >= 4) {
        const double b = bits_double(((uint64_t)cd[kBoundHi] << 32) | cd[kBoundLo]);
        if (!check_bound(b, why)) return false;
        params.bound = b;
    }
    if (n >= 5) {
        if (cd[kPredictor] > 2) {
            why = word_text(kPredictor, cd[kPredictor]) + ": the predictor must be 0 (auto), 1 (lorenzo) or 2 (interp)";
            return false;
        }
        params.predictor = (zb_predictor)cd[kPredictor];
    }
    if (n >= 6) {
        if (cd[kEncoder] > 2) {
            why = word_text(kEncoder, cd[kEncoder]) + ": the encoder must be 0 (auto), 1 (fast) or 2 (ratio)";
            return false;
        }
        params.encoder = (zb_encoder)cd[kEncoder];
    }
    return true;
}

bool encode_user(const zb_params &p, unsigned int *cd, std::string &why) {
    // A caller may have stored any integer in the enum fields: read them as integers (loading an out-of-range
    // value as the enum type is undefined behaviour).
    const unsigned mode = enum_value(p.mode), predictor = enum_value(p.predictor), encoder = enum_value(p.encoder);
    if (mode > 2) {
        why = "unknown bound mode " + std::to_string((int)mode);
        return false;
    }
    if (!check_bound(p.bound, why)) return false;
    if (predictor > 2) {
        why = "unknown predictor " + std::to_string((int)predictor);
        return false;
    }
    if (encoder > 2) {
        why = "unknown encoder " + std::to_string((int)encoder);
        return false;
    }
    const uint64_t b = double_bits(p.bound);
    cd[kVersion] = ZBOUND_CD_LAYOUT_VERSION;
    cd[kMode] = mode;
    cd[kBoundHi] = (unsigned)(b >> 32);
    cd[kBoundLo] = (unsigned)(b & 0xffffffffu);
    cd[kPredictor] = predictor;
    cd[kEncoder] = encoder;
    return true;
}

bool decode_dataset(const unsigned int *cd, size_t n, DatasetWords &out, std::string &why) {
    out = DatasetWords();
    if (n != ZBOUND_CD_MAX_WORDS || !cd) {
        why = "cd_values has " + std::to_string(n) + " words, not the " + std::to_string(ZBOUND_CD_MAX_WORDS) +
              " that set_local writes when a dataset is created (were they copied by hand?)";
        return false;
    }
    const unsigned int dt = cd[kDtype];
    if (dt == 0) {
        out.applicable = false;
    } else {
        const unsigned int base = dt & ~kBigEndianBit;
        if (base != ZB_F32 && base != ZB_F64) {
            why = word_text(kDtype, dt) + ": unknown dtype word";
            return false;
        }
        out.applicable = true;
        out.dtype = (zb_dtype)base;
        out.big_endian = (dt & kBigEndianBit) != 0;
    }
    if (cd[kHasFill] > 1) {
        why = word_text(kHasFill, cd[kHasFill]) + ": has_fill must be 0 or 1";
        return false;
    }
    out.has_fill = cd[kHasFill] == 1;
    out.fill_bits = ((uint64_t)cd[kFillHi] << 32) | cd[kFillLo];
    if (out.has_fill && out.applicable && out.dtype == ZB_F32 && cd[kFillHi] != 0) {
        why = word_text(kFillHi, cd[kFillHi]) + ": an f32 fill value has no high word";
        return false;
    }
    for (int i = 0; i < 3; ++i) {
        const unsigned int d = cd[kDim0 + i];
        if (d == 0) {
            why = word_text(kDim0 + i, d) + ": a chunk dim is 0";
            return false;
        }
        out.dims[i] = d;
    }
    return true;
}

void encode_dataset(const DatasetWords &d, unsigned int *cd) {
    cd[kDtype] = d.applicable ? ((unsigned)d.dtype | (d.big_endian ? kBigEndianBit : 0u)) : 0u;
    cd[kHasFill] = d.has_fill ? 1u : 0u;
    cd[kFillHi] = d.has_fill ? (unsigned)(d.fill_bits >> 32) : 0u;
    cd[kFillLo] = d.has_fill ? (unsigned)(d.fill_bits & 0xffffffffu) : 0u;
    for (int i = 0; i < 3; ++i) cd[kDim0 + i] = (unsigned)d.dims[i];
}

bool fold_chunk(int rank, const uint64_t *dims, uint64_t out[3], std::string &why) {
    out[0] = out[1] = out[2] = 1;
    if (rank < 0 || (rank > 0 && !dims)) {
        why = "bad chunk rank " + std::to_string(rank);
        return false;
    }
    uint64_t kept[64];
    int k = 0;
    for (int i = 0; i < rank; ++i) {
        if (dims[i] == 0) {
            why = "chunk dim " + std::to_string(i) + " is 0";
            return false;
        }
        if (dims[i] == 1) continue;
        if (k == 64) {
            why = "chunk rank " + std::to_string(rank) + " is too large";
            return false;
        }
        kept[k++] = dims[i];
    }
    // Multiply the leading dims together until at most 3 remain.
    uint64_t lead = 1;
    const int first = k > 3 ? k - 2 : 0;   // kept[0..first) fold into one dim when k > 3
    if (k > 3) {
        for (int i = 0; i < first; ++i) {
            if (kept[i] > UINT32_MAX || lead > UINT32_MAX / kept[i]) {
                why = "the chunk has too many values for one chunk";
                return false;
            }
            lead *= kept[i];
        }
    }
    uint64_t folded[3];
    int r = 0;
    if (k > 3) {
        folded[r++] = lead;
        folded[r++] = kept[first];
        folded[r++] = kept[first + 1];
    } else {
        for (int i = 0; i < k; ++i) folded[r++] = kept[i];
    }
    uint64_t total = 1;
    for (int i = 0; i < r; ++i) {
        if (folded[i] > UINT32_MAX || total > UINT64_MAX / folded[i]) {
            why = "a folded chunk dim does not fit 32 bits";
            return false;
        }
        total *= folded[i];
        out[3 - r + i] = folded[i];
    }
    return true;
}

}  // namespace zbound_cd

extern "C" {

size_t zbound_cd_values_encode(const zb_params *params, unsigned int *cd) {
    try {
        std::string why;
        if (!params || !cd) {
            zbound_cd::set_last_error("zbound_cd_values_encode: params or cd is NULL");
            return 0;
        }
        if (!zbound_cd::encode_user(*params, cd, why)) {
            zbound_cd::set_last_error("zbound_cd_values_encode: " + why);
            return 0;
        }
        return ZBOUND_CD_USER_WORDS;
    } catch (...) {
        return 0;
    }
}

zb_status zbound_cd_values_decode(const unsigned int *cd, size_t n, zb_params *params) {
    try {
        if (!params) {
            zbound_cd::set_last_error("zbound_cd_values_decode: params is NULL");
            return ZB_ERR_INVALID_ARG;
        }
        std::string why;
        zb_params p;
        const size_t user = n < ZBOUND_CD_USER_WORDS ? n : ZBOUND_CD_USER_WORDS;
        if (n > ZBOUND_CD_MAX_WORDS) {
            zbound_cd::set_last_error("cd_values has " + std::to_string(n) + " words; zbound takes at most " +
                                      std::to_string(ZBOUND_CD_MAX_WORDS));
            return ZB_ERR_INVALID_ARG;
        }
        if (!zbound_cd::decode_user(cd, user, p, why)) {
            zbound_cd::set_last_error(why);
            return ZB_ERR_INVALID_ARG;
        }
        if (n == ZBOUND_CD_MAX_WORDS) {
            zbound_cd::DatasetWords d;
            if (!zbound_cd::decode_dataset(cd, n, d, why)) {
                zbound_cd::set_last_error(why);
                return ZB_ERR_INVALID_ARG;
            }
            p.has_fill = d.has_fill ? 1 : 0;
            p.fill_bits = d.fill_bits;
        }
        *params = p;
        return ZB_OK;
    } catch (...) {
        return ZB_ERR_NOMEM;   // std::string allocation failed
    }
}

}  // extern "C"
