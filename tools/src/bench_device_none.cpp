// bench_device.h without the CUDA runtime: no device-resident runs in this build.
#include "bench_device.h"

namespace zbtool {

DeviceRun run_device_resident(const zb_params &, zb_dtype, const std::vector<uint8_t> &, const std::vector<size_t> &,
                              int, int) {
    DeviceRun r;
    r.why_not = "this build has no CUDA backend";
    return r;
}

DeviceRun run_device_batch(const zb_params &, zb_dtype, const std::vector<uint8_t> &, const std::vector<size_t> &,
                           int, int, size_t) {
    DeviceRun r;
    r.why_not = "this build has no CUDA backend";
    return r;
}

}  // namespace zbtool
