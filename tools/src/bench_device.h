// Device-resident runs of `zbound bench --sizes`: the array and the stream stay in GPU memory (zb_compress_device /
// zb_decompress_device), allocated once before the timed loop. Built with the CUDA runtime when the CUDA backend
// is (bench_device_cuda.cpp), else a stand-in that says why there are no device-resident numbers.
#pragma once
#include <string>
#include <vector>
#include "zbound.h"

namespace zbtool {

struct DeviceRun {
    bool ran = false;
    std::string why_not;                      // when !ran
    std::vector<double> comp_wall, decomp_wall, comp_kernel, decomp_kernel;   // seconds per timed call
    std::vector<uint8_t> stream;              // the stream the device wrote (copied back once)
    std::vector<uint8_t> decoded;             // the array the device decoded from it (copied back once)
    size_t batch = 1;                         // chunks per timed call (run_device_batch); times cover them all
    bool batch_same_bytes = true;             // every chunk of the batch got `stream`
};

// Runs warmup + repeat compressions of the host array `src` (copied to the device first) and as many
// decompressions of the resulting stream, all device to device; returns the times and the results.
DeviceRun run_device_resident(const zb_params &p, zb_dtype dtype, const std::vector<uint8_t> &src,
                              const std::vector<size_t> &dims, int warmup, int repeat);

// The same through the batched calls (zb_compress_device_batch / zb_decompress_device_batch): each timed call
// compresses (decompresses) `batch` device copies of the array, as a chunked dataset's chunks would be; batch 0
// picks enough copies for about 1 GB (2 to 64). `stream` and `decoded` are the first chunk's.
DeviceRun run_device_batch(const zb_params &p, zb_dtype dtype, const std::vector<uint8_t> &src,
                           const std::vector<size_t> &dims, int warmup, int repeat, size_t batch);

}  // namespace zbtool
