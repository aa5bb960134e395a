// The HDF5-free half of the filter: cd_values words (user words and the words set_local appends), shared by the
// H5Z callbacks, the `zbound cdvalues` command and the tests. Nothing here includes or calls HDF5.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include "zbound_filter.h"

namespace zbound_cd {

// Word indices of the layout documented in zbound_filter.h.
enum Word : size_t {
    kVersion = 0, kMode = 1, kBoundHi = 2, kBoundLo = 3, kPredictor = 4, kEncoder = 5,
    kDtype = 6, kHasFill = 7, kFillHi = 8, kFillLo = 9, kDim0 = 10, kDim1 = 11, kDim2 = 12
};
static_assert(kDim2 + 1 == ZBOUND_CD_MAX_WORDS, "word layout and ZBOUND_CD_MAX_WORDS disagree");

constexpr unsigned int kBigEndianBit = 0x100u;

// What set_local learned from the dataset (words 6..12).
struct DatasetWords {
    bool applicable = false;   // false: not a float type (optional filter that declines every chunk)
    zb_dtype dtype = ZB_F32;
    bool big_endian = false;   // the dataset's values are stored big-endian
    bool has_fill = false;
    uint64_t fill_bits = 0;    // value bits in host order (f32 in the low 32 bits)
    uint64_t dims[3] = {1, 1, 1};

    size_t value_bytes() const { return dtype == ZB_F64 ? 8 : 4; }
    uint64_t values() const { return dims[0] * dims[1] * dims[2]; }
};

// Parses the user words of cd (the first min(n, ZBOUND_CD_USER_WORDS)) into params; defaults for the rest.
// On error returns false and sets `why` (a sentence naming the word).
bool decode_user(const unsigned int *cd, size_t n, zb_params &params, std::string &why);

// Writes the full user part cd[0..ZBOUND_CD_USER_WORDS) for params. False (with `why`) on an out-of-range field.
bool encode_user(const zb_params &params, unsigned int *cd, std::string &why);

// Parses words 6..12. Requires n == ZBOUND_CD_MAX_WORDS. False (with `why`) when missing or inconsistent.
bool decode_dataset(const unsigned int *cd, size_t n, DatasetWords &out, std::string &why);

// Writes words 6..12 (cd must hold ZBOUND_CD_MAX_WORDS words).
void encode_dataset(const DatasetWords &d, unsigned int *cd);

// Folds a chunk shape the way the codec does (drop unit dims, multiply leading dims down to 3). Each folded dim
// must fit a 32-bit word. False (with `why`) on a zero dim, rank < 0 or overflow.
bool fold_chunk(int rank, const uint64_t *dims, uint64_t out[3], std::string &why);

// Human-readable summary of params for messages ("rel 0.001, predictor auto, encoder auto").
std::string describe(const zb_params &p);

// Sets zb_last_error() of the calling thread (through core, see zbound_cd_values.cpp).
void set_last_error(const std::string &msg);

// Names of the modes, predictors and encoders as the CLI and the messages spell them ("?" for unknown values;
// ints so that values read from cd_values or streams need no enum cast).
const char *mode_name(int m);
const char *predictor_name(int p);
const char *encoder_name(int e);

}  // namespace zbound_cd
