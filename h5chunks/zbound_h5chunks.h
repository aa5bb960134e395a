/*
 * zbound device chunk I/O: a dataset's chunks compressed on the GPU from an array in device memory and stored with
 * H5Dwrite_chunk, and read back with H5Dread_chunk and decompressed on the GPU into device memory, without the
 * HDF5 filter pipeline (which takes host memory only, one chunk at a time). The stored chunks are the exact
 * streams the zbound filter writes for the same values and dataset, so the file reads back through the plugin on
 * any machine, with or without a GPU.
 *
 * The dataset must be chunked, have the zbound filter as its only filter (created with H5Pset_filter(dcpl,
 * ZBOUND_H5Z_FILTER, ...), so that set_local recorded its words), and hold native (little-endian) float32 or
 * float64 values. The device array holds the whole dataset in C order with the dataset's value type.
 *
 * Chunks go through the GPU in windows of ZBOUND_CHUNK_WINDOW_MB (default 256) MB of raw values, with zb_compress_device_batch /
 * zb_decompress_device_batch (several chunks at a time on the library's CUDA streams), while the calling thread
 * writes (reads) the previous (next) window with HDF5; HDF5 is only called from the calling thread.
 *
 * Link: libzbound_h5chunks, libzbound (static or shared), libhdf5, the CUDA runtime.
 */
#ifndef ZBOUND_H5CHUNKS_H
#define ZBOUND_H5CHUNKS_H

#include <hdf5.h>
#include "zbound.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Compresses every chunk of `d_data` with the dataset's zbound parameters (bound, pipeline, fill value) and writes
 *  it with H5Dwrite_chunk; partial edge chunks are padded as HDF5 pads them (with the fill value, else 0). Every
 *  chunk is written, so every earlier value of the dataset is replaced. Work queued on `cuda_stream` (a
 *  cudaStream_t; NULL: the default stream) before the call is finished before `d_data` is read. Returns ZB_OK, or
 *  ZB_ERR_INVALID_ARG (not a dataset this can write: zb_last_error() says why), ZB_ERR_UNSUPPORTED (a build
 *  without the CUDA backend), ZB_ERR_GPU (no usable GPU, or a device failure), ZB_ERR_INTERNAL (an HDF5 call
 *  failed; the HDF5 error stack has its reason). */
ZB_API zb_status zbound_h5_write_chunks_device(hid_t dset, const void *d_data, void *cuda_stream);

/** Reads every stored chunk and decompresses it on the GPU into `d_data` (the whole dataset, C order). The stored
 *  bytes come from H5Dread_chunk, or, for a file open read-only through HDF5's default POSIX driver, from pread at
 *  the chunks' file addresses on several threads (the first chunk checked against H5Dread_chunk; ZBOUND_CHUNK_PREAD=0
 *  turns this off). Chunks never written read as the fill value (0 when none is defined), chunks stored unfiltered (the
 *  filter declined them) as they are, as H5Dread would give them. `d_data` is complete when the call returns.
 *  Statuses as zbound_h5_write_chunks_device, plus ZB_ERR_CORRUPT / ZB_ERR_TRUNCATED for a stored chunk that is
 *  not a zbound stream of the dataset's chunk. */
ZB_API zb_status zbound_h5_read_chunks_device(hid_t dset, void *d_data, void *cuda_stream);

#ifdef __cplusplus
}
#endif

#endif /* ZBOUND_H5CHUNKS_H */
