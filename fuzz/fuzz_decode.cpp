// libFuzzer target: stream decoding on arbitrary bytes (zb_stream_info_get + zb_decompress, CPU backend).
//
// Input: one control byte, then the stream.
//   bit 0  recompute the header size, payload checksum and header checksum of the stream first (fuzz_common.h), so
//          that mutations reach the segment decoders instead of stopping at a checksum mismatch
//   bit 1  decompress into a buffer one value too small: must fail with ZB_ERR_BUFFER_TOO_SMALL, writing nothing
// Both dtypes and every predictor/encoder the format knows come from the stream bytes themselves (the corpus holds
// f32 and f64 streams of every format version: v1 and v6 (Lorenzo + fast in one or several Lorenzo segments), v2-v4
// (interp or Lorenzo, fast or ratio encoder), v5 (point-wise relative), raw passthrough, escapes, exceptions,
// specials, ranks 1-3).
//
// Invariants checked beyond "no crash, no sanitizer report, no hang":
//   - every call returns a defined status and sets zb_last_error() on failure;
//   - zb_stream_info_get and zb_decompress agree: a stream whose header is accepted and whose payload decodes has
//     info.decompressed_bytes = n * sizeof(value), info.stream_bytes <= input length;
//   - a raw-passthrough stream decodes to its payload bytes;
//   - decoding is deterministic (a second decode gives the same bytes);
//   - a failed decode never reports success with a short output, and a too-small buffer is refused.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "fuzz_common.h"
#include "zb_format.h"
#include "zbound.h"

namespace {
constexpr size_t kMaxOut = 64u << 20;   // skip decoding streams that claim more than this (the RSS limit)
}

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    setenv("ZBOUND_THREADS", "1", 1);   // deterministic and cheap; thread-count parity is the soak test's job
    setenv("ZBOUND_BACKEND", "cpu", 1);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint8_t ctl = data[0];
    std::vector<uint8_t> s(data + 1, data + size);
    if (ctl & 1) zbfuzz::fix_checksums(s.data(), s.size());
    const uint8_t *src = s.empty() ? nullptr : s.data();
    // A null pointer with length 0 must be refused, not dereferenced.
    zb_stream_info info;
    const zb_status hs = zb_stream_info_get(src ? src : data, s.size(), &info);
    if (hs != ZB_OK) {
        ZBF_CHECK(zb_last_error()[0] != '\0');
        // The full decoder validates the same header: it must refuse too.
        uint8_t dummy[16];
        ZBF_CHECK(zb_decompress(src ? src : data, s.size(), dummy, sizeof dummy, ZB_BACKEND_CPU, nullptr) != ZB_OK);
        return 0;
    }
    const size_t vb = info.dtype == ZB_F64 ? 8 : 4;
    ZBF_CHECK(info.dtype == ZB_F32 || info.dtype == ZB_F64);
    ZBF_CHECK(info.rank >= 1 && info.rank <= 3);
    ZBF_CHECK(info.n == info.dims[0] * info.dims[1] * info.dims[2]);
    ZBF_CHECK(info.decompressed_bytes == info.n * vb);
    ZBF_CHECK(info.stream_bytes <= s.size());
    ZBF_CHECK(info.format_version >= 1 && info.format_version <= zb::kFormatVersion);
    if (info.decompressed_bytes > kMaxOut) return 0;

    if (ctl & 2) {
        std::vector<uint8_t> small(info.decompressed_bytes - vb + 1, 0xA5);
        const zb_status st = zb_decompress(src, s.size(), small.data(), info.decompressed_bytes - vb,
                                           ZB_BACKEND_CPU, nullptr);
        ZBF_CHECK(st != ZB_OK);
        for (uint8_t b : small) ZBF_CHECK(b == 0xA5);   // nothing written past or into a refused buffer
    }

    std::vector<uint8_t> out(info.decompressed_bytes);
    const zb_status ds = zb_decompress(src, s.size(), out.data(), out.size(), ZB_BACKEND_CPU, nullptr);
    if (ds != ZB_OK) {
        ZBF_CHECK(ds == ZB_ERR_CORRUPT || ds == ZB_ERR_TRUNCATED);
        ZBF_CHECK(zb_last_error()[0] != '\0');
        return 0;
    }
    if (info.raw && info.format_version == 1) {   // v1 raw passthrough: the payload is the values
        const size_t hbytes = info.stream_bytes - info.decompressed_bytes;
        ZBF_CHECK(std::memcmp(out.data(), src + hbytes, out.size()) == 0);
    }
    // Deterministic: a second decode gives the same bytes (catches reads of uninitialized scratch).
    std::vector<uint8_t> again(out.size(), 0x5A);
    ZBF_CHECK(zb_decompress(src, s.size(), again.data(), again.size(), ZB_BACKEND_CPU, nullptr) == ZB_OK);
    ZBF_CHECK(again == out);
    return 0;
}
