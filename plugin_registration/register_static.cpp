// zbound_register_h5filter(): registers the filter with the HDF5 library the program links, for programs that
// link the filter statically instead of loading the plugin. Here the HDF5 API comes from the linker, so this file
// (and the static library it is built into) needs libhdf5 at the program's link time.
#include <hdf5.h>

#include "zbound_filter.h"
#include "zbound_h5z.h"

namespace {

zbound_h5::H5Api linked_api() {
    zbound_h5::H5Api a;
    a.Epush2 = &H5Epush2;
    a.allocate_memory = &H5allocate_memory;
    a.resize_memory = &H5resize_memory;
    a.free_memory = &H5free_memory;
    a.Pget_filter_by_id2 = &H5Pget_filter_by_id2;
    a.Pmodify_filter = &H5Pmodify_filter;
    a.Pget_chunk = &H5Pget_chunk;
    a.Pfill_value_defined = &H5Pfill_value_defined;
    a.Pget_fill_value = &H5Pget_fill_value;
    a.Tget_class = &H5Tget_class;
    a.Tget_size = &H5Tget_size;
    a.Tget_order = &H5Tget_order;
    a.Tget_precision = &H5Tget_precision;
    a.Tget_offset = &H5Tget_offset;
    a.Tget_fields = &H5Tget_fields;
    a.Tget_ebias = &H5Tget_ebias;
    a.Tget_norm = &H5Tget_norm;
    a.Sget_simple_extent_dims = &H5Sget_simple_extent_dims;
    a.get_libversion = &H5get_libversion;
    a.ERR_CLS = &H5E_ERR_CLS_g;
    a.PLINE = &H5E_PLINE_g;
    a.CANTFILTER = &H5E_CANTFILTER_g;
    a.BADTYPE = &H5E_BADTYPE_g;
    a.BADVALUE = &H5E_BADVALUE_g;
    a.NOSPACE = &H5E_NOSPACE_g;
    a.CANTINIT = &H5E_CANTINIT_g;
    H5get_libversion(&a.version[0], &a.version[1], &a.version[2]);
    a.origin = "linked";
    return a;
}

const zbound_h5::H5Api *linked_lookup(const void *) {
    static const zbound_h5::H5Api api = linked_api();
    return &api;
}

}  // namespace

extern "C" int zbound_register_h5filter(void) {
    if (H5open() < 0) return -1;
    const herr_t r = H5Zregister(zbound_h5::filter_class(linked_lookup));
    return r < 0 ? -1 : 0;
}
