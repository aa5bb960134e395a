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
};

// Runs warmup + repeat compressions of the host array `src` (copied to the device first) and as many
// decompressions of the resulting stream, all device to device; returns the times and the results.
DeviceRun run_device_resident(const zb_params &p, zb_dtype dtype, const std::vector<uint8_t> &src,
                              const std::vector<size_t> &dims, int warmup, int repeat);

}  // namespace zbtool
