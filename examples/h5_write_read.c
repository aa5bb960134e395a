/*
 * Writes a chunked float dataset through the zbound HDF5 filter, reads it back, and prints the compression ratio
 * and the largest error. Plain HDF5 C API: the filter is loaded as a plugin.
 *
 *   cc h5_write_read.c -o h5_write_read $(pkg-config --cflags --libs hdf5) -lm   (or: h5cc h5_write_read.c)
 *   HDF5_PLUGIN_PATH=/path/to/build/plugin ./h5_write_read [out.h5] [abs_bound]
 *
 * Exit status 0 when every value read back is within the bound, 1 otherwise, 2 on an HDF5 error.
 */
#include <hdf5.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ZBOUND_FILTER_ID 33000 /* the value of ZBOUND_H5Z_FILTER in zbound_filter.h */

/* cd_values of the zbound filter: [layout version 1, mode (0 abs, 1 rel), bound high word, bound low word,
 * predictor (0 auto), encoder (0 auto)]. The bound is an IEEE-754 double split into two 32-bit words. */
static void zbound_cd_values(unsigned int cd[6], unsigned int mode, double bound) {
    uint64_t bits;
    memcpy(&bits, &bound, sizeof bits);
    cd[0] = 1;
    cd[1] = mode;
    cd[2] = (unsigned int)(bits >> 32);
    cd[3] = (unsigned int)(bits & 0xffffffffu);
    cd[4] = 0;
    cd[5] = 0;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "zbound_example.h5";
    const double bound = argc > 2 ? atof(argv[2]) : 1e-3;
    /* 60 x 90 x 120 values in chunks of 32 x 32 x 50: the last chunk along every axis is partial. */
    const hsize_t dims[3] = {60, 90, 120}, chunk[3] = {32, 32, 50};
    const size_t n = (size_t)(dims[0] * dims[1] * dims[2]);
    int status = 2;

    if (H5Zfilter_avail(ZBOUND_FILTER_ID) <= 0) {
        fprintf(stderr, "the zbound filter (id %d) is not available: set HDF5_PLUGIN_PATH to the folder that holds "
                        "libh5z_zbound.so\n", ZBOUND_FILTER_ID);
        return 2;
    }

    float *data = malloc(n * sizeof *data), *back = malloc(n * sizeof *back);
    if (!data || !back) return 2;
    for (size_t i = 0; i < n; ++i) {
        const size_t x = i % dims[2], y = (i / dims[2]) % dims[1], z = i / (dims[2] * dims[1]);
        data[i] = (float)(280.0 + 15.0 * sin(0.07 * (double)x) * cos(0.05 * (double)y) + 0.2 * (double)z +
                          0.01 * sin(1.7 * (double)i));
    }

    unsigned int cd[6];
    zbound_cd_values(cd, 0 /* abs */, bound);

    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t space = H5Screate_simple(3, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (file < 0 || space < 0 || dcpl < 0) goto done;
    /* Optional, as h5py adds filters: a chunk the filter declines is stored as it is. */
    if (H5Pset_chunk(dcpl, 3, chunk) < 0 || H5Pset_filter(dcpl, ZBOUND_FILTER_ID, H5Z_FLAG_OPTIONAL, 6, cd) < 0)
        goto done;
    hid_t dset = H5Dcreate2(file, "temperature", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (dset < 0) goto done;
    if (H5Dwrite(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) {
        H5Dclose(dset);
        goto done;
    }
    const hsize_t stored = H5Dget_storage_size(dset);
    H5Dclose(dset);
    H5Fclose(file);
    file = -1;

    /* Read it back from the file. */
    file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0) goto done;
    dset = H5Dopen2(file, "temperature", H5P_DEFAULT);
    if (dset < 0) goto done;
    herr_t r = H5Dread(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, back);
    H5Dclose(dset);
    if (r < 0) goto done;

    double max_err = 0;
    for (size_t i = 0; i < n; ++i) {
        const double e = fabs((double)data[i] - (double)back[i]);
        if (e > max_err) max_err = e;
    }
    const double ratio = stored ? (double)(n * sizeof(float)) / (double)stored : 0.0;
    printf("%s: %zu values, %llu bytes stored, ratio %.2f, max error %.6g (bound %.6g)\n", path, n,
           (unsigned long long)stored, ratio, max_err, bound);
    status = max_err <= bound ? 0 : 1;
    if (status) fprintf(stderr, "error bound exceeded\n");

done:
    if (status == 2) fprintf(stderr, "HDF5 error (see the error stack above)\n");
    if (dcpl >= 0) H5Pclose(dcpl);
    if (space >= 0) H5Sclose(space);
    if (file >= 0) H5Fclose(file);
    free(data);
    free(back);
    return status;
}
