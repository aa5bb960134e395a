// HDF5 helpers of the tests that use the HDF5 C API: an owning id, the error stack as text, temporary files.
#pragma once
#include <hdf5.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace h5t {

// Owns an HDF5 id and closes it with the closer that matches its type.
class Id {
  public:
    Id(hid_t id = -1) : id_(id) {}
    Id(const Id &) = delete;
    Id &operator=(const Id &) = delete;
    Id(Id &&o) noexcept : id_(o.id_) { o.id_ = -1; }
    Id &operator=(Id &&o) noexcept {
        if (this != &o) {
            reset();
            id_ = o.id_;
            o.id_ = -1;
        }
        return *this;
    }
    ~Id() { reset(); }
    operator hid_t() const { return id_; }
    bool ok() const { return id_ >= 0; }
    void reset() {
        if (id_ < 0) return;
        switch (H5Iget_type(id_)) {
            case H5I_FILE: H5Fclose(id_); break;
            case H5I_DATASET: H5Dclose(id_); break;
            case H5I_DATASPACE: H5Sclose(id_); break;
            case H5I_DATATYPE: H5Tclose(id_); break;
            case H5I_GENPROP_LST: H5Pclose(id_); break;
            default: break;
        }
        id_ = -1;
    }

  private:
    hid_t id_;
};

// The descriptions on the current error stack, innermost first, one per line.
inline std::string error_stack() {
    std::string s;
    H5Ewalk2(
        H5E_DEFAULT, H5E_WALK_UPWARD,
        [](unsigned, const H5E_error2_t *e, void *d) -> herr_t {
            if (e && e->desc) *static_cast<std::string *>(d) += std::string(e->desc) + "\n";
            return 0;
        },
        &s);
    return s;
}

// A file name in $TMPDIR (default /tmp) unique to this process.
inline std::string temp_path(const std::string &name) {
    const char *dir = std::getenv("TMPDIR");
    std::string base = dir && *dir ? dir : "/tmp";
    return base + "/zbound_test_" + std::to_string((long)getpid()) + "_" + name + ".h5";
}

// A test file, removed at the end.
struct TempFile {
    std::string path;
    Id file;
    explicit TempFile(const std::string &name) : path(temp_path(name)) {
        file = Id(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    }
    ~TempFile() {
        file.reset();
        std::remove(path.c_str());
    }
    void reopen() {
        file.reset();
        file = Id(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    }
};

}  // namespace h5t
