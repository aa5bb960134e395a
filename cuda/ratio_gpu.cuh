// The ratio encoder stage on the GPU (docs/FORMAT.md, "Ratio encoder (format v2)"): the same segment bytes as
// zb::ratio_encode_cpu, and a decoder into device memory. Declarations only (kernels live in ratio_gpu.cu), so that
// host C++ (tests, benchmarks) can include this header next to gpu_internal.h.
//
// How a pipeline uses it (the flow of encode.cuh: sizes first, then every segment written at its final offset):
//   RatioEncoder enc;
//   enc.plan(c, c.arena[kArenaRatio], d_symbols, n, alphabet, s, &timer);   // waits for the stream twice
//   ... lay out the payload: enc.segment_length(k) for k < kRatioSegmentCount ...
//   enc.write(dst, s, &timer);          // dst[k]: device addresses of the segments (any alignment), asynchronous
// and for decoding, with the segments in device memory (and, when the caller has it, a host copy of segment 0):
//   ratio_decode(c, c.arena[kArenaRatio], d_segments, h_codebook_or_null, n, alphabet, d_symbols, s, &timer);
// Both throw Failure (ZB_ERR_CORRUPT for inconsistent segments, ZB_ERR_INVALID_ARG, ZB_ERR_GPU) like the rest of
// the backend. Device scratch comes from the Arena the caller passes; the plan's buffers stay in use until write()
// has been queued, so the arena must not be reused in between. Symbol arrays must be 16-byte aligned (arena
// pieces are) and hold fewer than 2^32 symbols.
#pragma once
#include <cuda_runtime.h>
#include <string>
#include <vector>
#include "gpu_internal.h"
#include "zb_ratio.h"

namespace zb {
namespace gpu {

class RatioEncoder {
public:
    // Histogram (privatized shared-memory bins) -> host: codebook -> Huffman bitstream in sub-blocks -> zero-block
    // flags and counts. Waits for the stream after the histogram and after the block count.
    void plan(Context &c, Arena &arena, const uint16_t *d_symbols, uint64_t n, uint32_t alphabet, cudaStream_t s,
              KernelTimer *timer, const RatioOptions &opt = RatioOptions());
    uint64_t segment_length(int k) const { return len_[k]; }
    uint64_t total_length() const { return len_[0] + len_[1] + len_[2] + len_[3]; }
    // Writes segment k to dst[k] (device memory, any alignment), queued on s. dst[k] may be null when the length
    // is 0.
    void write(uint8_t *const *dst, cudaStream_t s, KernelTimer *timer) const;
    const RatioStats &stats() const { return stats_; }

private:
    std::string codebook_;
    std::vector<uint32_t> enc_;  // host copy of the code table (kept alive for the asynchronous upload)
    uint64_t len_[kRatioSegmentCount] = {};
    RatioStats stats_;
    uint64_t n_ = 0, B_ = 0, P_ = 0, nblocks_ = 0;
    int lg_ = kRatioSubBlockLog2;
    bool runs_ = false;
    const uint32_t *d_bits_ = nullptr, *d_words_ = nullptr, *d_flagw_ = nullptr, *d_off_ = nullptr;
    const unsigned long long *d_poff_ = nullptr;
};

// Decodes the segments (device memory; d_segments[k].size their lengths) into d_symbols[0..n). h_codebook: a host
// copy of segment 0, or null (then it is copied from the device). Validates like ratio_decode_cpu; throws
// Failure(ZB_ERR_CORRUPT) on inconsistent data (d_symbols may be partly written then). allow_runs: the stream's
// version has run tokens (v4), as for ratio_decode_cpu.
void ratio_decode(Context &c, Arena &arena, const ByteSpan *d_segments, const ByteSpan *h_codebook, uint64_t n,
                  uint32_t alphabet, uint16_t *d_symbols, cudaStream_t s, KernelTimer *timer, bool allow_runs = true);

// ---- status-returning wrappers (tests, tools): take the context lock, never throw ----------------------------------

// Encodes device symbols into host segments (appended to `segments`). scratch: a device arena for the work, or
// null for a temporary one. Output bytes equal ratio_encode_cpu's.
zb_status ratio_encode_gpu(const uint16_t *d_symbols, uint64_t n, uint32_t alphabet, cudaStream_t s,
                           std::vector<std::string> &segments, RatioStats *stats, std::string &msg,
                           Arena *scratch = nullptr, const RatioOptions &opt = RatioOptions());
// Decodes segments held in device memory into d_symbols.
zb_status ratio_decode_gpu(const ByteSpan *d_segments, uint64_t n, uint32_t alphabet, cudaStream_t s,
                           uint16_t *d_symbols, std::string &msg, Arena *scratch = nullptr, bool allow_runs = true);

}  // namespace gpu
}  // namespace zb
