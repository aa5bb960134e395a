// Finds the HDF5 library in the process at run time and builds the H5Api table from it.
//
// Why per caller: one process can hold several HDF5 libraries (h5py's and netCDF4-python's wheels each bundle one,
// next to the system's). When two of them load this plugin they get the same loaded copy of it (dlopen returns
// the same handle), so a single global table would send one library's ids to the other. Each callback therefore
// asks for the library that contains its return address, and the table of that library is cached.
#include "h5_resolver.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace zbound_h5 {

namespace {

template <typename T> bool load_fn(void *handle, const char *name, T &fn) {
    void *p = dlsym(handle, name);
    fn = reinterpret_cast<T>(p);
    return p != nullptr;
}

const hid_t *load_var(void *handle, const char *name) { return static_cast<const hid_t *>(dlsym(handle, name)); }

// Fills `api` from a dlopen handle (or RTLD_DEFAULT). True when every required member was found.
bool fill_from(void *handle, H5Api &api) {
    api = H5Api();
    load_fn(handle, "H5Epush2", api.Epush2);
    load_fn(handle, "H5allocate_memory", api.allocate_memory);
    load_fn(handle, "H5resize_memory", api.resize_memory);
    load_fn(handle, "H5free_memory", api.free_memory);
    load_fn(handle, "H5Pget_filter_by_id2", api.Pget_filter_by_id2);
    load_fn(handle, "H5Pmodify_filter", api.Pmodify_filter);
    load_fn(handle, "H5Pget_chunk", api.Pget_chunk);
    load_fn(handle, "H5Pfill_value_defined", api.Pfill_value_defined);
    load_fn(handle, "H5Pget_fill_value", api.Pget_fill_value);
    load_fn(handle, "H5Tget_class", api.Tget_class);
    load_fn(handle, "H5Tget_size", api.Tget_size);
    load_fn(handle, "H5Tget_order", api.Tget_order);
    load_fn(handle, "H5Tget_precision", api.Tget_precision);
    load_fn(handle, "H5Tget_offset", api.Tget_offset);
    load_fn(handle, "H5Tget_fields", api.Tget_fields);
    load_fn(handle, "H5Tget_ebias", api.Tget_ebias);
    load_fn(handle, "H5Tget_norm", api.Tget_norm);
    load_fn(handle, "H5Sget_simple_extent_dims", api.Sget_simple_extent_dims);
    load_fn(handle, "H5get_libversion", api.get_libversion);
    // The error ids are global variables in every HDF5 from 1.8 to 2.x (H5E_ERR_CLS is a macro over H5E_ERR_CLS_g).
    api.ERR_CLS = load_var(handle, "H5E_ERR_CLS_g");
    api.PLINE = load_var(handle, "H5E_PLINE_g");
    api.CANTFILTER = load_var(handle, "H5E_CANTFILTER_g");
    api.BADTYPE = load_var(handle, "H5E_BADTYPE_g");
    api.BADVALUE = load_var(handle, "H5E_BADVALUE_g");
    api.NOSPACE = load_var(handle, "H5E_NOSPACE_g");
    api.CANTINIT = load_var(handle, "H5E_CANTINIT_g");
    if (!api_complete(api)) return false;
    if (api.get_libversion(&api.version[0], &api.version[1], &api.version[2]) < 0) return false;
    // hid_t became 64-bit in 1.10; the table's types are those of 1.10 and later.
    return api.version[0] > 1 || (api.version[0] == 1 && api.version[1] >= 10);
}

// A cache entry: the load base of the library whose code called us, and its table.
struct Entry {
    const void *base = nullptr;
    H5Api api;
    std::string origin;
};

constexpr int kMaxEntries = 16;
Entry g_entries[kMaxEntries];
std::atomic<int> g_count{0};       // entries [0, g_count) are complete and never change
std::mutex g_mutex;                // serializes additions

bool is_hdf5_core_name(const char *path) {
    const char *base = std::strrchr(path, '/');
    base = base ? base + 1 : path;
    if (std::strncmp(base, "libhdf5", 7) != 0) return false;
    const char *rest = base + 7;
    // libhdf5.so*, libhdf5-<hash>.so* (wheels), libhdf5_serial.so*, libhdf5_openmpi.so* ...; not the hl/cpp/fortran
    // companions, which do not export the C API anyway (checked below by fill_from).
    return !(std::strstr(rest, "_hl") || std::strstr(rest, "hl_") || std::strstr(rest, "_cpp") ||
             std::strstr(rest, "fortran") || std::strstr(rest, "_java") || std::strstr(rest, "_tools"));
}

// Collects the paths of loaded objects named like the HDF5 C library. (dlopen is not called from inside the
// dl_iterate_phdr callback: the loader's lock is held there.)
int scan_cb(struct dl_phdr_info *info, size_t, void *data) {
    auto *names = static_cast<std::vector<std::string> *>(data);
    if (info->dlpi_name && *info->dlpi_name && is_hdf5_core_name(info->dlpi_name)) names->push_back(info->dlpi_name);
    return 0;
}

// Resolution for a caller not seen before. Fills api/origin; false when nothing fits.
bool resolve_uncached(const Dl_info *caller, H5Api &api, std::string &origin) {
    // 1. The library that contains the caller.
    if (caller && caller->dli_fname) {
        void *h = dlopen(caller->dli_fname, RTLD_LAZY | RTLD_NOLOAD);
        if (!h) h = dlopen(nullptr, RTLD_LAZY);   // the caller is the main program (HDF5 linked statically)
        if (h) {
            // On success the reference is kept: the table points into the library.
            if (fill_from(h, api)) {
                origin = caller->dli_fname;
                return true;
            }
            dlclose(h);
        }
    }
    // 2. An explicit library, which must already be loaded (a second, uninitialized HDF5 would not know the ids).
    if (const char *env = std::getenv("ZBOUND_HDF5_LIBRARY")) {
        if (*env) {
            if (void *h = dlopen(env, RTLD_LAZY | RTLD_NOLOAD)) {
                if (fill_from(h, api)) {
                    origin = env;
                    return true;
                }
                dlclose(h);
            }
        }
    }
    // 3. The global scope (a program linked against libhdf5, or libhdf5 loaded with RTLD_GLOBAL).
    if (fill_from(RTLD_DEFAULT, api)) {
        Dl_info di;
        origin = (dladdr(reinterpret_cast<void *>(api.Epush2), &di) && di.dli_fname) ? di.dli_fname : "global scope";
        return true;
    }
    // 4. Any loaded libhdf5 (h5py's wheel loads its copy with RTLD_LOCAL).
    std::vector<std::string> names;
    dl_iterate_phdr(scan_cb, &names);
    for (const std::string &name : names) {
        void *h = dlopen(name.c_str(), RTLD_LAZY | RTLD_NOLOAD);
        if (!h) continue;
        if (fill_from(h, api)) {   // keeps the reference: the table points into the library
            origin = name;
            return true;
        }
        dlclose(h);
    }
    return false;
}

}  // namespace

const H5Api *resolve_runtime_api(const void *caller) {
    Dl_info info;
    std::memset(&info, 0, sizeof info);
    const bool have = caller && dladdr(caller, &info) != 0;
    const void *base = have ? info.dli_fbase : nullptr;

    const int n = g_count.load(std::memory_order_acquire);
    for (int i = 0; i < n; ++i)
        if (g_entries[i].base == base) return &g_entries[i].api;

    std::lock_guard<std::mutex> lock(g_mutex);
    const int m = g_count.load(std::memory_order_relaxed);
    for (int i = 0; i < m; ++i)
        if (g_entries[i].base == base) return &g_entries[i].api;
    if (m == kMaxEntries) return nullptr;
    Entry &e = g_entries[m];
    if (!resolve_uncached(have ? &info : nullptr, e.api, e.origin)) return nullptr;
    e.base = base;
    e.api.origin = e.origin.c_str();
    g_count.store(m + 1, std::memory_order_release);
    // With ZBOUND_LOG set (the project's switch for one-line diagnostics), say which HDF5 serves this caller.
    if (std::getenv("ZBOUND_LOG"))
        std::fprintf(stderr, "zbound: HDF5 filter uses %s (HDF5 %u.%u.%u)\n", e.api.origin, e.api.version[0],
                     e.api.version[1], e.api.version[2]);
    return &e.api;
}

}  // namespace zbound_h5
