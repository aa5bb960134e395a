/*
 * Device-resident chunk I/O from C: an array in GPU memory written to an HDF5 dataset with the zbound filter by
 * zbound_h5_write_chunks_device (chunks compressed on the GPU, stored with H5Dwrite_chunk) and read back into GPU
 * memory by zbound_h5_read_chunks_device from the file opened again read-only; then read through the filter on the
 * CPU (H5Dread) and compared.
 *
 *   device_chunks OUT.h5 FIELD.raw NZ NY NX [SIZE_GB] [CHUNK_MB] [REL]
 *
 * FIELD.raw holds NZ*NY*NX float32 values; they are tiled along the slowest dim to SIZE_GB (default 1), written in
 * chunks of about CHUNK_MB (default 16) whole slabs, with an absolute bound of REL (default 1e-3) times the
 * field's value range. Prints the write and read throughput and checks every value against the bound.
 */
#include <cuda_runtime_api.h>
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "zbound_filter.h"
#include "zbound_h5chunks.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int fail(const char *what) {
    fprintf(stderr, "device_chunks: %s: %s\n", what, zb_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: %s OUT.h5 FIELD.raw NZ NY NX [SIZE_GB] [CHUNK_MB] [REL]\n", argv[0]);
        return 2;
    }
    const size_t nz = strtoull(argv[3], NULL, 10), ny = strtoull(argv[4], NULL, 10), nx = strtoull(argv[5], NULL, 10);
    const double size_gb = argc > 6 ? atof(argv[6]) : 1.0, chunk_mb = argc > 7 ? atof(argv[7]) : 16.0;
    const double rel = argc > 8 ? atof(argv[8]) : 1e-3;
    const size_t slab = ny * nx, field_n = nz * slab;
    float *field = malloc(field_n * sizeof(float));
    FILE *in = fopen(argv[2], "rb");
    if (!field || !in || fread(field, sizeof(float), field_n, in) != field_n) {
        fprintf(stderr, "device_chunks: cannot read %zu float32 values from %s\n", field_n, argv[2]);
        return 1;
    }
    fclose(in);
    /* The bound: rel times the finite value range of the field. */
    float lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < field_n; ++i)
        if (isfinite(field[i])) {
            lo = field[i] < lo ? field[i] : lo;
            hi = field[i] > hi ? field[i] : hi;
        }
    const double eb = rel * ((double)hi - (double)lo);
    /* The array: the field tiled along its slowest dim to SIZE_GB, on the host and on the device. */
    const size_t rows = (size_t)(size_gb * 1e9 / (double)(slab * sizeof(float)));
    const size_t n = rows * slab, bytes = n * sizeof(float);
    float *host = malloc(bytes), *check = malloc(bytes);
    if (!rows || !host || !check) return fprintf(stderr, "device_chunks: cannot allocate %zu bytes\n", bytes), 1;
    for (size_t r = 0; r < rows; ++r) memcpy(host + r * slab, field + (r % nz) * slab, slab * sizeof(float));
    void *dev = NULL, *back = NULL;
    if (cudaMalloc(&dev, bytes) != cudaSuccess || cudaMalloc(&back, bytes) != cudaSuccess ||
        cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
        fprintf(stderr, "device_chunks: cannot place %zu bytes on the GPU\n", bytes);
        return 1;
    }

    /* A dataset with the zbound filter: absolute bound eb, Lorenzo predictor, fast encoder; chunks of whole slabs. */
    zb_params p = zb_params_default();
    p.mode = ZB_MODE_ABS;
    p.bound = eb;
    p.predictor = ZB_PRED_LORENZO;
    p.encoder = ZB_ENC_FAST;
    unsigned cd[ZBOUND_CD_USER_WORDS];
    const size_t ncd = zbound_cd_values_encode(&p, cd);
    size_t chunk_rows = (size_t)(chunk_mb * 1e6 / (double)(slab * sizeof(float)));
    chunk_rows = chunk_rows < 1 ? 1 : chunk_rows > rows ? rows : chunk_rows;
    const hsize_t dims[3] = {rows, ny, nx}, chunk[3] = {chunk_rows, ny, nx};
    hid_t file = H5Fcreate(argv[1], H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t space = H5Screate_simple(3, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 3, chunk);
    H5Pset_filter(dcpl, ZBOUND_H5Z_FILTER, H5Z_FLAG_MANDATORY, ncd, cd);
    hid_t dset = H5Dcreate2(file, "x", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (file < 0 || dset < 0) {
        fprintf(stderr, "device_chunks: cannot create %s (is HDF5_PLUGIN_PATH set to the zbound plugin?)\n", argv[1]);
        return 1;
    }

    double t0 = now();
    if (zbound_h5_write_chunks_device(dset, dev, NULL) != ZB_OK) return fail("write");
    H5Fflush(file, H5F_SCOPE_LOCAL);
    const double t_write = now() - t0;
    /* Read as a reader would: the file opened again, read-only (the chunks are then read on several threads). */
    H5Dclose(dset);
    H5Fclose(file);
    file = H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT);
    dset = file < 0 ? H5I_INVALID_HID : H5Dopen2(file, "x", H5P_DEFAULT);
    if (dset < 0) {
        fprintf(stderr, "device_chunks: cannot open %s again\n", argv[1]);
        return 1;
    }
    t0 = now();
    if (zbound_h5_read_chunks_device(dset, back, NULL) != ZB_OK) return fail("read");
    const double t_read = now() - t0;
    const hsize_t stored = H5Dget_storage_size(dset);

    /* The CPU read through the plugin must give the device read's values, each within eb of the original. */
    if (H5Dread(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, check) < 0) {
        fprintf(stderr, "device_chunks: H5Dread through the plugin failed\n");
        return 1;
    }
    float *dev_read = malloc(bytes);
    if (!dev_read || cudaMemcpy(dev_read, back, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) return 1;
    size_t violations = 0;
    double max_err = 0;
    for (size_t i = 0; i < n; ++i) {
        const double e = fabs((double)check[i] - (double)host[i]);
        if (isfinite(host[i])) {
            max_err = e > max_err ? e : max_err;
            violations += e > eb;
        }
    }
    const int same = memcmp(dev_read, check, bytes) == 0;
    printf("%.2f GB in %.1f MB chunks, CR %.2f: device write %.2f GB/s, device read %.2f GB/s\n", (double)bytes / 1e9,
           (double)(chunk_rows * slab * sizeof(float)) / 1e6, (double)bytes / (double)stored, (double)bytes / t_write / 1e9,
           (double)bytes / t_read / 1e9);
    printf("max error / bound %.4f, values over the bound %zu, device read identical to the CPU plugin read: %s\n",
           max_err / eb, violations, same ? "yes" : "NO");
    H5Dclose(dset);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Fclose(file);
    cudaFree(dev);
    cudaFree(back);
    free(field);
    free(host);
    free(check);
    free(dev_read);
    return violations || !same ? 1 : 0;
}
