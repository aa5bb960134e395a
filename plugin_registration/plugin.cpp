// The HDF5 plugin entry points (libh5z_zbound.so, found through HDF5_PLUGIN_PATH). These two functions are the
// only symbols the plugin exports (h5z_zbound.map); it does not link libhdf5 (h5_resolver.cpp finds it).
#include <H5PLextern.h>

#include "h5_resolver.h"
#include "zbound_h5z.h"

#define ZB_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))

ZB_PLUGIN_EXPORT H5PL_type_t H5PLget_plugin_type(void) { return H5PL_TYPE_FILTER; }

ZB_PLUGIN_EXPORT const void *H5PLget_plugin_info(void) {
    // Resolving here (the caller is the HDF5 library that loads the plugin) warms the cache for its callbacks.
    // The class is returned even when nothing is found: a program that registers it by hand (ctypes, then
    // H5Zregister) calls from elsewhere, and the callbacks resolve again from inside HDF5.
    (void)zbound_h5::resolve_runtime_api(__builtin_return_address(0));
    return zbound_h5::filter_class(zbound_h5::resolve_runtime_api);
}
