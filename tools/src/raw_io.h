// Reading and writing whole files (raw arrays, zbound streams) with messages that name the file and the cause.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>
#include "zbound.h"

namespace zbtool {

// Whole file into memory. Throws CliError (exit 1) naming the path and strerror on failure.
std::vector<uint8_t> read_file(const std::string &path);

// Writes `len` bytes to `path` (created or truncated). Throws CliError (exit 1) on failure.
void write_file(const std::string &path, const void *data, size_t len);

size_t dtype_size(zb_dtype dtype);
const char *dtype_name(zb_dtype dtype);
zb_dtype parse_dtype(const std::string &text);  // "f32"/"float32"/"f4", "f64"/"float64"/"f8"

// How to read a raw file: skip `offset` header bytes, values stored big- or little-endian (PLOT3D, Fortran files).
struct RawLayout {
    size_t offset = 0;
    bool big_endian = false;
};

// A raw array read from a file (converted to little-endian) that must fill the file after the offset exactly. With
// no dims the array is 1D.
struct RawArray {
    zb_dtype dtype = ZB_F32;
    std::vector<size_t> dims;
    std::vector<uint8_t> bytes;
    size_t count() const;
};
RawArray read_raw(const std::string &path, zb_dtype dtype, const std::vector<size_t> &dims, const RawLayout &layout);

std::string dims_to_string(const std::vector<size_t> &dims);  // "110x64x128"

}  // namespace zbtool
