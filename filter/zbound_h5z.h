// The H5Z filter class of zbound (internal to filter/ and plugin_registration/).
//
// The callbacks never call libhdf5 directly: every HDF5 function and error-class global they use goes through an
// `H5Api` table. Whoever registers the class says how to get the table:
//   - the plugin (plugin_registration/h5_resolver.cpp) resolves it at run time from the HDF5 library that called
//     the callback, so one plugin binary works under HDF5 1.10, 1.14 and 2.x and never links libhdf5;
//   - zbound_register_h5filter() (plugin_registration/register_static.cpp) fills it with link-time addresses.
// Only HDF5 headers are included here (types and prototypes, for decltype); nothing is linked.
#pragma once
#include <hdf5.h>

namespace zbound_h5 {

struct H5Api {
    // Functions (present since HDF5 1.8.15).
    decltype(&H5Epush2) Epush2 = nullptr;
    decltype(&H5allocate_memory) allocate_memory = nullptr;
    decltype(&H5resize_memory) resize_memory = nullptr;
    decltype(&H5free_memory) free_memory = nullptr;
    decltype(&H5Pget_filter_by_id2) Pget_filter_by_id2 = nullptr;
    decltype(&H5Pmodify_filter) Pmodify_filter = nullptr;
    decltype(&H5Pget_chunk) Pget_chunk = nullptr;
    decltype(&H5Pfill_value_defined) Pfill_value_defined = nullptr;
    decltype(&H5Pget_fill_value) Pget_fill_value = nullptr;
    decltype(&H5Tget_class) Tget_class = nullptr;
    decltype(&H5Tget_size) Tget_size = nullptr;
    decltype(&H5Tget_order) Tget_order = nullptr;
    decltype(&H5Tget_precision) Tget_precision = nullptr;
    decltype(&H5Tget_offset) Tget_offset = nullptr;
    decltype(&H5Tget_fields) Tget_fields = nullptr;
    decltype(&H5Tget_ebias) Tget_ebias = nullptr;
    decltype(&H5Tget_norm) Tget_norm = nullptr;
    decltype(&H5Sget_simple_extent_dims) Sget_simple_extent_dims = nullptr;
    decltype(&H5get_libversion) get_libversion = nullptr;
    // Error class and message ids: addresses of the library's globals (read at each use: they are set by H5open).
    const hid_t *ERR_CLS = nullptr;    // H5E_ERR_CLS_g
    const hid_t *PLINE = nullptr;      // H5E_PLINE_g (major)
    const hid_t *CANTFILTER = nullptr; // H5E_CANTFILTER_g (minor)
    const hid_t *BADTYPE = nullptr;    // H5E_BADTYPE_g (minor; optional, CANTFILTER if absent)
    const hid_t *BADVALUE = nullptr;   // H5E_BADVALUE_g (minor; optional)
    const hid_t *NOSPACE = nullptr;    // H5E_NOSPACE_g (minor; optional)
    const hid_t *CANTINIT = nullptr;   // H5E_CANTINIT_g (minor; optional)
    unsigned version[3] = {0, 0, 0};   // of the library the table came from
    const char *origin = "";           // where it was found (for messages): a path or "linked"
};

// Returns the API of the HDF5 library that made the call at `caller` (a return address inside it), or nullptr
// when none can be found. Must be thread-safe.
using ApiLookup = const H5Api *(*)(const void *caller);

// The filter class (id ZBOUND_H5Z_FILTER, name "zbound"); its callbacks use `lookup`. The first call fixes the
// lookup for the lifetime of the binary (the class is a single static object).
const H5Z_class2_t *filter_class(ApiLookup lookup);

// Every required member is set (the optional minor ids may be null).
bool api_complete(const H5Api &api);

}  // namespace zbound_h5
