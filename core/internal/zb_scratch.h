// Grow-only scratch arrays. HDF5 calls the codec once per chunk; reusing the same pages across calls avoids a page
// fault per 4 KiB on every chunk (measured: ~15% of CPU compression time before this). Uninitialized on purpose.
#pragma once
#include <cstddef>
#include <memory>

namespace zb {

template <typename T> class ScratchArray {
public:
    T *get(size_t n) {
        if (n > cap_) {
            data_.reset();
            cap_ = 0;  // if the allocation below throws, no later call may use the freed capacity
            data_.reset(new T[n]);
            cap_ = n;
        }
        return data_.get();
    }
    // Gives memory back after an unusually large call so that a process does not keep it for ever.
    void trim(size_t keep_bytes) {
        if (cap_ * sizeof(T) > keep_bytes) {
            data_.reset();
            cap_ = 0;
        }
    }

private:
    std::unique_ptr<T[]> data_;
    size_t cap_ = 0;
};

constexpr size_t kScratchKeepBytes = size_t(256) << 20;

}  // namespace zb
