/*
 * zbound HDF5 filter: its id, the cd_values layout, and registration for programs that link the filter statically.
 *
 * User cd_values (32-bit words, layout version first; shorter forms take defaults for the missing tail):
 *   [0] layout version = 1
 *   [1] mode: 0 abs, 1 rel, 2 pw_rel                                   (default 1 = rel)
 *   [2] bound, high 32 bits of the IEEE-754 double                     (default 1e-3)
 *   [3] bound, low 32 bits
 *   [4] predictor: 0 auto, 1 lorenzo, 2 interp                         (default 0)
 *   [5] encoder: 0 auto, 1 fast, 2 ratio                               (default 0)
 * Accepted user lengths: 0 (all defaults), 1, 2, 4, 5, 6. Three words are refused (the bound needs both of its
 * words). A bound must be finite and >= 0 (0 = lossless). Example, ABS 1e-3 (0x3F50624DD2F1A9FC), lorenzo, fast:
 *   { 1, 0, 0x3F50624D, 0xD2F1A9FC, 1, 1 }      h5repack: -f UD=33000,0,6,1,0,1062232653,3539053052,1,1
 *
 * set_local (called by HDF5 when a dataset is created) keeps the user's words, writes the defaults into any word
 * the user left out, and appends what it learns from the dataset, so that the dataset's pipeline message always
 * holds ZBOUND_CD_MAX_WORDS words:
 *   [6]  dtype: 1 f32, 2 f64 (zb_dtype); bit 8 (0x100) set when the dataset stores big-endian values;
 *        0 = not a float type (only possible when the filter was added as optional: it then declines every
 *        chunk and HDF5 stores the chunks unfiltered)
 *   [7]  has_fill: 1 when the dataset has a user-defined fill value (H5Pset_fill_value, netCDF-4 _FillValue)
 *   [8]  fill value bits, high 32 bits (0 for f32)
 *   [9]  fill value bits, low 32 bits
 *   [10..12] chunk shape folded to 3 dims (nz, ny, nx): unit dims dropped, leading dims multiplied, unused
 *        leading entries 1 (the codec folds the same way, docs/FORMAT.md section 1)
 * Words the user passes beyond [5] are replaced, so copying a dataset's full cd_values to another is safe.
 *
 * The filter compresses each chunk with zb_compress (backend AUTO: the GPU when one works, else the CPU). The
 * fill value is handed to the codec, so fill values come back bit for bit and never widen a REL range. REL is
 * relative to the finite, non-fill value range of one chunk; HDF5 pads partial edge chunks with the fill value
 * (0 when none is defined), and that padding takes part in the range like any other value of the chunk.
 * Decoding needs no cd_values: every chunk's stream is self-describing. The one exception is a big-endian
 * dataset: the values are swapped back to the dataset's byte order using word [6].
 *
 * can_apply refuses every datatype but IEEE-754 binary32/binary64 (little- or big-endian) with a message on the
 * HDF5 error stack; a mandatory filter then makes dataset creation fail. HDF5 ignores a refusal for optional
 * filters (h5py adds filters as optional): such a dataset is stored unfiltered. Invalid user cd_values, and
 * parameters the codec of this build cannot write, make dataset creation fail in either case.
 *
 * Errors: every failure pushes a "zbound: ..." message (with zb_last_error()'s reason) on the HDF5 error stack of
 * the library that called the filter. HDF5 2.x discards what a filter function pushes (it saves and restores the
 * error stack around the call, HDFGroup/hdf5 issue #6194), so with 2.x a chunk that fails to compress or decompress
 * is also reported on stderr (at most 20 lines per process); can_apply/set_local messages are not affected.
 *
 * The plugin (libh5z_zbound.so) does not link libhdf5: each callback uses the HDF5 library that contains its
 * caller, so h5py's, netCDF4-python's and the system's HDF5 can all use one loaded plugin in one process. If that
 * library cannot be found, ZBOUND_HDF5_LIBRARY may name it (it must already be loaded). ZBOUND_LOG=1 prints which
 * library serves each caller.
 */
#ifndef ZBOUND_FILTER_H
#define ZBOUND_FILTER_H

#include <stddef.h>
#include "zbound.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The HDF5 filter id (unregistered range 32768-65535). Every other place reads it from here. */
#define ZBOUND_H5Z_FILTER 33000
#define ZBOUND_CD_LAYOUT_VERSION 1
#define ZBOUND_CD_USER_WORDS 6      /**< words a user sets */
#define ZBOUND_CD_MAX_WORDS 13      /**< words after set_local (user words + dtype, fill, folded chunk shape) */

/** Fills cd[0..ZBOUND_CD_USER_WORDS) from params (mode, bound, predictor, encoder). Returns the word count, or 0
 *  (with zb_last_error() saying why) when params or cd is NULL or a field is out of range. */
ZB_API size_t zbound_cd_values_encode(const zb_params *params, unsigned int *cd);

/** Parses user cd_values (any length 0..ZBOUND_CD_MAX_WORDS) into params, filling defaults for missing words.
 *  With all ZBOUND_CD_MAX_WORDS words, has_fill and fill_bits come from words [7..9].
 *  Returns ZB_OK, or ZB_ERR_INVALID_ARG with zb_last_error() naming the bad word. */
ZB_API zb_status zbound_cd_values_decode(const unsigned int *cd, size_t n, zb_params *params);

/** Registers the filter with the HDF5 library the program links (for programs that link the filter
 *  statically instead of loading the plugin). Returns a negative value on failure. */
int zbound_register_h5filter(void);

#ifdef __cplusplus
}
#endif

#endif /* ZBOUND_FILTER_H */
