/*
 * Parallel HDF5 with the zbound filter: every MPI rank writes its own hyperslab of one chunked, zbound-compressed
 * dataset with a collective write, the file is read back in parallel (each rank reading another rank's part) and
 * serially (rank 0 alone), and every value is checked against the bound. Needs the MPI flavour of HDF5 (1.10.2 or
 * newer: filters with parallel writes need collective I/O) and the zbound plugin on HDF5_PLUGIN_PATH.
 *
 *   mpirun -np 4 ./mpi_write_read out.h5 [rows_per_rank cols chunk_rows chunk_cols abs_bound]
 *   (defaults 100 300 64 128 1e-3; the rows are split unevenly so that ranks share chunks)
 *
 * One GPU per rank (the plugin picks the device from ZBOUND_DEVICE):
 *   mpirun -np 2 sh -c 'ZBOUND_DEVICE=$OMPI_COMM_WORLD_LOCAL_RANK exec ./mpi_write_read out.h5 8192 16384 1024 4096'
 *
 * Prints one line per phase and exits 0 when every value is within the bound, 1 otherwise.
 */
#include <hdf5.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ZBOUND_FILTER_ID 33000 /* ZBOUND_H5Z_FILTER in zbound_filter.h */

/* The value at global (row, col): smooth waves plus a small deterministic ripple, float32. */
static float field(hsize_t r, hsize_t c) {
    const double x = (double)c, y = (double)r;
    const uint32_t h = (uint32_t)(r * 2654435761u) ^ (uint32_t)(c * 40503u);
    return (float)(280.0 + 15.0 * sin(0.013 * x) * cos(0.021 * y) + 2.0 * sin(0.17 * x + 0.05 * y) +
                   1e-3 * (double)(h % 1000) / 1000.0);
}

/* Rows [first, first + count) of rank r when `rows` rows are split over `size` ranks as evenly as possible. */
static void split(hsize_t rows, int size, int r, hsize_t *first, hsize_t *count) {
    const hsize_t base = rows / (hsize_t)size, extra = rows % (hsize_t)size;
    *first = (hsize_t)r * base + ((hsize_t)r < extra ? (hsize_t)r : extra);
    *count = base + ((hsize_t)r < extra ? 1 : 0);
}

/* Largest |value - field| over a block of rows; counts values off by more than the bound. */
static double check_rows(const float *v, hsize_t first, hsize_t count, hsize_t cols, double bound, long *bad) {
    double max_err = 0;
    for (hsize_t i = 0; i < count; ++i)
        for (hsize_t c = 0; c < cols; ++c) {
            const double e = fabs((double)v[i * cols + c] - (double)field(first + i, c));
            if (e > max_err) max_err = e;
            if (!(e <= bound)) ++*bad;
        }
    return max_err;
}

static void bound_words(double bound, unsigned cd[6]) {
    uint64_t u;
    memcpy(&u, &bound, sizeof u);
    cd[0] = 1;                          /* cd_values layout version */
    cd[1] = 0;                          /* abs */
    cd[2] = (unsigned)(u >> 32);
    cd[3] = (unsigned)(u & 0xffffffffu);
    cd[4] = 1;                          /* predictor lorenzo, encoder fast: the pipeline the GPU runs too (auto */
    cd[5] = 1;                          /* may choose the interp predictor, which runs on the CPU only for now) */
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 2) {
        if (rank == 0) fprintf(stderr, "usage: %s FILE [rows_per_rank cols chunk_rows chunk_cols abs_bound]\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    const char *path = argv[1];
    const hsize_t per = argc > 2 ? strtoull(argv[2], NULL, 10) : 100, cols = argc > 3 ? strtoull(argv[3], NULL, 10) : 300;
    const hsize_t crow = argc > 4 ? strtoull(argv[4], NULL, 10) : 64, ccol = argc > 5 ? strtoull(argv[5], NULL, 10) : 128;
    const double bound = argc > 6 ? atof(argv[6]) : 1e-3;
    const hsize_t rows = per * (hsize_t)size + (size > 1 ? 3 : 0); /* uneven split: chunks straddle ranks */
    int ok = 1;

    if (H5Zfilter_avail(ZBOUND_FILTER_ID) <= 0) {
        if (rank == 0) fprintf(stderr, "mpi_write_read: the zbound filter is not available (set HDF5_PLUGIN_PATH)\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    /* ---- collective write: each rank its own rows ---- */
    hsize_t first, count;
    split(rows, size, rank, &first, &count);
    float *mine = malloc((size_t)(count * cols) * sizeof(float) + 1);
    for (hsize_t i = 0; i < count; ++i)
        for (hsize_t c = 0; c < cols; ++c) mine[i * cols + c] = field(first + i, c);

    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL);
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    const hsize_t dims[2] = {rows, cols}, chunk[2] = {crow < rows ? crow : rows, ccol < cols ? ccol : cols};
    hid_t space = H5Screate_simple(2, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 2, chunk);
    unsigned cd[6];
    bound_words(bound, cd);
    H5Pset_filter(dcpl, ZBOUND_FILTER_ID, H5Z_FLAG_MANDATORY, 6, cd);
    hid_t dset = H5Dcreate2(file, "field", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    hid_t fsel = H5Dget_space(dset);
    const hsize_t start[2] = {first, 0}, block[2] = {count, cols};
    H5Sselect_hyperslab(fsel, H5S_SELECT_SET, start, NULL, block, NULL);
    hid_t mspace = H5Screate_simple(2, block, NULL);
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE); /* filtered datasets are written collectively */
    if (dset < 0 || H5Dwrite(dset, H5T_NATIVE_FLOAT, mspace, fsel, dxpl, mine) < 0) ok = 0;
    H5Sclose(mspace);
    H5Sclose(fsel);
    if (dset >= 0) H5Dclose(dset);
    H5Pclose(dcpl);
    H5Sclose(space);
    if (H5Fclose(file) < 0) ok = 0;
    double t_write = MPI_Wtime() - t0, t_write_max;
    MPI_Allreduce(&t_write, &t_write_max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    int all_ok;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        if (rank == 0) fprintf(stderr, "mpi_write_read: the collective write failed\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const double mb = (double)(rows * cols * sizeof(float)) / 1e6;

    /* ---- parallel read: each rank reads another rank's rows ---- */
    const int other = size - 1 - rank;
    hsize_t ofirst, ocount;
    split(rows, size, other, &ofirst, &ocount);
    float *theirs = malloc((size_t)(ocount * cols) * sizeof(float) + 1);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    dset = H5Dopen2(file, "field", H5P_DEFAULT);
    fsel = H5Dget_space(dset);
    const hsize_t ostart[2] = {ofirst, 0}, oblock[2] = {ocount, cols};
    H5Sselect_hyperslab(fsel, H5S_SELECT_SET, ostart, NULL, oblock, NULL);
    mspace = H5Screate_simple(2, oblock, NULL);
    if (H5Dread(dset, H5T_NATIVE_FLOAT, mspace, fsel, dxpl, theirs) < 0) ok = 0;
    const hsize_t stored = H5Dget_storage_size(dset);
    H5Sclose(mspace);
    H5Sclose(fsel);
    H5Dclose(dset);
    H5Fclose(file);
    double t_read = MPI_Wtime() - t0, t_read_max;
    MPI_Allreduce(&t_read, &t_read_max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    long bad = 0, bad_all = 0;
    double err = ok ? check_rows(theirs, ofirst, ocount, cols, bound, &bad) : INFINITY, err_all;
    if (!ok) bad = 1;
    MPI_Allreduce(&bad, &bad_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&err, &err_all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("mpi_write_read: %d ranks, %llux%llu f32 (%.1f MB) in %llux%llu chunks, ratio %.2f\n"
               "  collective write  %.3f s  %8.1f MB/s\n"
               "  parallel read     %.3f s  %8.1f MB/s   max error %.3g (bound %.3g), %ld values out of bound\n",
               size, (unsigned long long)rows, (unsigned long long)cols, mb, (unsigned long long)chunk[0],
               (unsigned long long)chunk[1], stored ? mb * 1e6 / (double)stored : 0.0, t_write_max, mb / t_write_max,
               t_read_max, mb / t_read_max, err_all, bound, bad_all);
    H5Pclose(fapl);

    /* ---- serial read on rank 0 (the default sec2 driver, as any later reader would) ---- */
    int serial_ok = 1;
    if (rank == 0) {
        float *all = malloc((size_t)(rows * cols) * sizeof(float));
        t0 = MPI_Wtime();
        file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
        dset = H5Dopen2(file, "field", H5P_DEFAULT);
        if (!all || H5Dread(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, all) < 0) serial_ok = 0;
        H5Dclose(dset);
        H5Fclose(file);
        const double t_serial = MPI_Wtime() - t0;
        long sbad = 0;
        const double serr = serial_ok ? check_rows(all, 0, rows, cols, bound, &sbad) : INFINITY;
        if (sbad) serial_ok = 0;
        printf("  serial read       %.3f s  %8.1f MB/s   max error %.3g (bound %.3g), %ld values out of bound\n",
               t_serial, mb / t_serial, serr, bound, sbad);
        free(all);
    }
    MPI_Bcast(&serial_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    const int pass = bad_all == 0 && serial_ok;
    if (rank == 0) printf("mpi_write_read: %s\n", pass ? "OK, every value within the bound" : "FAILED");
    H5Pclose(dxpl);
    free(mine);
    free(theirs);
    MPI_Finalize();
    return pass ? 0 : 1;
}
