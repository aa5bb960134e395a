// Run-time resolution of the HDF5 API for the plugin, which does not link libhdf5 (DESIGN invariant 5).
#pragma once
#include "zbound_h5z.h"

namespace zbound_h5 {

// The API of the HDF5 library that contains the code address `caller` (normally the return address of a filter
// callback or of H5PLget_plugin_info, i.e. inside libhdf5). Falls back, in order, to the library named by the
// environment variable ZBOUND_HDF5_LIBRARY (it must already be loaded), to the global symbol scope
// (dlsym(RTLD_DEFAULT)), and to the first loaded object whose file name starts with "libhdf5" and that exports
// the whole API. Results are cached per library; thread-safe. nullptr when nothing fits.
const H5Api *resolve_runtime_api(const void *caller);

}  // namespace zbound_h5
