#include "raw_io.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <utility>
#include "cli_args.h"

namespace zbtool {

namespace {
struct FileCloser { void operator()(FILE *f) const { if (f) std::fclose(f); } };
using FilePtr = std::unique_ptr<FILE, FileCloser>;

[[noreturn]] void io_fail(const std::string &what, const std::string &path) {
    throw CliError(what + " '" + path + "': " + std::strerror(errno), kExitFailure);
}
}  // namespace

std::vector<uint8_t> read_file(const std::string &path) {
    FilePtr f(std::fopen(path.c_str(), "rb"));
    if (!f) io_fail("cannot open", path);
    if (std::fseek(f.get(), 0, SEEK_END) != 0) io_fail("cannot seek in", path);
    long size = std::ftell(f.get());
    if (size < 0) io_fail("cannot size", path);
    std::rewind(f.get());
    std::vector<uint8_t> data((size_t)size);
    if (size > 0 && std::fread(data.data(), 1, data.size(), f.get()) != data.size()) io_fail("cannot read", path);
    return data;
}

void write_file(const std::string &path, const void *data, size_t len) {
    FilePtr f(std::fopen(path.c_str(), "wb"));
    if (!f) io_fail("cannot create", path);
    if (len > 0 && std::fwrite(data, 1, len, f.get()) != len) io_fail("cannot write", path);
    if (std::fclose(f.release()) != 0) io_fail("cannot write", path);
}

size_t dtype_size(zb_dtype dtype) { return dtype == ZB_F64 ? 8 : 4; }

const char *dtype_name(zb_dtype dtype) { return dtype == ZB_F64 ? "f64" : "f32"; }

zb_dtype parse_dtype(const std::string &text) {
    if (text == "f32" || text == "float32" || text == "f4" || text == "float") return ZB_F32;
    if (text == "f64" || text == "float64" || text == "f8" || text == "double") return ZB_F64;
    throw CliError("-t/--type: '" + text + "' is not a supported type (f32 or f64)");
}

size_t RawArray::count() const {
    size_t n = 1;
    for (size_t d : dims) n *= d;
    return n;
}

std::string dims_to_string(const std::vector<size_t> &dims) {
    std::string s;
    for (size_t i = 0; i < dims.size(); ++i) s += (i ? "x" : "") + std::to_string(dims[i]);
    return s;
}

static void byteswap_values(std::vector<uint8_t> &bytes, size_t esize) {
    for (size_t i = 0; i + esize <= bytes.size(); i += esize)
        for (size_t j = 0; j < esize / 2; ++j) std::swap(bytes[i + j], bytes[i + esize - 1 - j]);
}

RawArray read_raw(const std::string &path, zb_dtype dtype, const std::vector<size_t> &dims, const RawLayout &layout) {
    RawArray a;
    a.dtype = dtype;
    a.bytes = read_file(path);
    const size_t esize = dtype_size(dtype);
    if (layout.offset > 0) {
        if (layout.offset >= a.bytes.size())
            throw CliError("--offset " + std::to_string(layout.offset) + " is not inside '" + path + "' (" +
                           std::to_string(a.bytes.size()) + " bytes)");
        a.bytes.erase(a.bytes.begin(), a.bytes.begin() + (ptrdiff_t)layout.offset);
    }
    if (a.bytes.empty()) throw CliError("'" + path + "' is empty", kExitFailure);
    if (dims.empty()) {
        if (a.bytes.size() % esize != 0)
            throw CliError("'" + path + "' has " + std::to_string(a.bytes.size()) + " bytes after the offset, not a "
                           "multiple of " + std::to_string(esize) + " (" + dtype_name(dtype) + ")");
        a.dims = {a.bytes.size() / esize};
    } else {
        a.dims = dims;
    }
    size_t n = 1;
    for (size_t d : a.dims) {
        if (n > SIZE_MAX / esize / d) throw CliError("-d " + dims_to_string(a.dims) + " is too large");
        n *= d;
    }
    if (n * esize != a.bytes.size())
        throw CliError("'" + path + "' has " + std::to_string(a.bytes.size()) + " bytes" +
                       (layout.offset ? " after the offset" : "") + " but -d " + dims_to_string(a.dims) + " -t " +
                       dtype_name(dtype) + " needs " + std::to_string(n * esize));
    if (layout.big_endian) byteswap_values(a.bytes, esize);
    return a;
}

}  // namespace zbtool
