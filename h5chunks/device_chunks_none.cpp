// zbound_h5chunks.h in a build without the CUDA backend: the dataset is still checked, then the calls say why they
// cannot run.
#include "chunk_layout.h"
#include "zbound_cd_internal.h"
#include "zbound_h5chunks.h"

namespace {

zb_status refuse(hid_t dset, const void *d_data) {
    std::string msg;
    zbh5::ChunkLayout lay;
    if (!d_data) msg = "null device array";
    else if (zbh5::read_layout(dset, lay, msg)) msg.clear();
    zbound_cd::set_last_error("zbound device chunk I/O: " + (msg.empty() ? "this build has no CUDA backend" : msg));
    return msg.empty() ? ZB_ERR_UNSUPPORTED : ZB_ERR_INVALID_ARG;
}

}  // namespace

zb_status zbound_h5_write_chunks_device(hid_t dset, const void *d_data, void *) { return refuse(dset, d_data); }

zb_status zbound_h5_read_chunks_device(hid_t dset, void *d_data, void *) { return refuse(dset, d_data); }
