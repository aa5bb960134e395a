/*
 * Writes a netCDF-4 variable through the zbound filter with nc_def_var_filter, reads it back with the netCDF C API,
 * and prints the largest error against the bound. The filter is the HDF5 plugin, found through HDF5_PLUGIN_PATH.
 *
 *   cc nc_filter.c -o nc_filter $(pkg-config --cflags --libs netcdf) -lm     (or: nc-config --cflags --libs)
 *   HDF5_PLUGIN_PATH=/path/to/plugin ./nc_filter [out.nc] [abs_bound]
 *
 * The file holds `temperature(time, lat, lon)` compressed with zbound, with a _FillValue (masked points, kept bit
 * for bit), and `temperature_raw`, the same values stored without a filter, so that any reader can compare them.
 * Exit status 0 when every value read back is within the bound and every fill value is exact, 1 otherwise,
 * 2 on a netCDF error (for example when the plugin is not found).
 */
#include <math.h>
#include <netcdf.h>
#include <netcdf_filter.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ZBOUND_FILTER_ID 33000 /* ZBOUND_H5Z_FILTER in zbound_filter.h */
#define FILL -9999.0f

#define CHECK(call)                                                                      \
    do {                                                                                 \
        int rc_ = (call);                                                                \
        if (rc_ != NC_NOERR) {                                                           \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, nc_strerror(rc_)); \
            goto fail;                                                                   \
        }                                                                                \
    } while (0)

/* cd_values: [layout version 1, mode (0 abs, 1 rel), bound high word, bound low word, predictor (0 auto),
 * encoder (0 auto)]; the bound is an IEEE-754 double split high word first (zbound cdvalues prints them). */
static void zbound_params(unsigned int p[6], unsigned int mode, double bound) {
    uint64_t bits;
    memcpy(&bits, &bound, sizeof bits);
    p[0] = 1;
    p[1] = mode;
    p[2] = (unsigned int)(bits >> 32);
    p[3] = (unsigned int)(bits & 0xffffffffu);
    p[4] = 0;
    p[5] = 0;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "zbound_nc_example.nc";
    const double bound = argc > 2 ? atof(argv[2]) : 1e-2;
    enum { NT = 12, NY = 90, NX = 180 };
    const size_t n = (size_t)NT * NY * NX;
    int ncid = -1, status = 2;
    float *data = malloc(n * sizeof *data), *back = malloc(n * sizeof *back);
    if (!data || !back) return 2;

    /* A smooth temperature-like field; every 97th point is masked with the fill value. */
    for (size_t i = 0; i < n; ++i) {
        const size_t x = i % NX, y = (i / NX) % NY, t = i / ((size_t)NX * NY);
        data[i] = (float)(288.0 - 30.0 * cos(M_PI * ((double)y + 0.5) / NY) * cos(M_PI * ((double)y + 0.5) / NY) +
                          5.0 * sin(2.0 * M_PI * (double)x / NX + 0.5 * (double)t) + 0.05 * sin(1.3 * (double)i));
        if (i % 97 == 0) data[i] = FILL;
    }

    int dims[3], var, raw, lat, lon;
    unsigned int params[6];
    const size_t chunks[3] = {4, NY, NX};
    const float fill = FILL;
    zbound_params(params, 0 /* abs */, bound);

    CHECK(nc_create(path, NC_CLOBBER | NC_NETCDF4, &ncid));
    /* nc_inq_filter_avail (netCDF >= 4.8) says whether HDF5 can load the plugin at all. */
    if (nc_inq_filter_avail(ncid, ZBOUND_FILTER_ID) != NC_NOERR) {
        fprintf(stderr, "the zbound filter (id %d) is not available: set HDF5_PLUGIN_PATH to the folder that holds "
                        "libh5z_zbound.so\n", ZBOUND_FILTER_ID);
        nc_abort(ncid);
        return 2;
    }
    CHECK(nc_def_dim(ncid, "time", NC_UNLIMITED, &dims[0]));
    CHECK(nc_def_dim(ncid, "lat", NY, &dims[1]));
    CHECK(nc_def_dim(ncid, "lon", NX, &dims[2]));
    CHECK(nc_def_var(ncid, "lat", NC_FLOAT, 1, &dims[1], &lat));
    CHECK(nc_def_var(ncid, "lon", NC_FLOAT, 1, &dims[2], &lon));
    CHECK(nc_def_var(ncid, "temperature", NC_FLOAT, 3, dims, &var));
    CHECK(nc_put_att_text(ncid, var, "units", 1, "K"));
    CHECK(nc_def_var_fill(ncid, var, NC_FILL, &fill));
    CHECK(nc_def_var_chunking(ncid, var, NC_CHUNKED, chunks));
    /* The filter: id, then the cd_values. nc_def_var_filter fails here if the parameters are invalid. */
    CHECK(nc_def_var_filter(ncid, var, ZBOUND_FILTER_ID, 6, params));
    CHECK(nc_def_var(ncid, "temperature_raw", NC_FLOAT, 3, dims, &raw));
    CHECK(nc_def_var_fill(ncid, raw, NC_FILL, &fill));
    CHECK(nc_def_var_chunking(ncid, raw, NC_CHUNKED, chunks));
    CHECK(nc_enddef(ncid));
    {
        float la[NY], lo[NX];
        for (int j = 0; j < NY; ++j) la[j] = -89.0f + 2.0f * (float)j;
        for (int i = 0; i < NX; ++i) lo[i] = 2.0f * (float)i;
        CHECK(nc_put_var_float(ncid, lat, la));
        CHECK(nc_put_var_float(ncid, lon, lo));
    }
    const size_t start[3] = {0, 0, 0}, count[3] = {NT, NY, NX};
    CHECK(nc_put_vara_float(ncid, var, start, count, data));
    CHECK(nc_put_vara_float(ncid, raw, start, count, data));
    CHECK(nc_close(ncid));
    ncid = -1;

    /* Read back: netCDF (through HDF5 and the plugin) decompresses transparently. */
    CHECK(nc_open(path, NC_NOWRITE, &ncid));
    CHECK(nc_inq_varid(ncid, "temperature", &var));
    size_t nfilters = 0;
    unsigned int ids[8];
    CHECK(nc_inq_var_filter_ids(ncid, var, &nfilters, ids));
    if (nfilters != 1 || ids[0] != ZBOUND_FILTER_ID) {
        fprintf(stderr, "temperature does not carry the zbound filter\n");
        goto fail;
    }
    CHECK(nc_get_vara_float(ncid, var, start, count, back));
    CHECK(nc_close(ncid));
    ncid = -1;

    double max_err = 0.0;
    size_t fills = 0, bad = 0;
    for (size_t i = 0; i < n; ++i) {
        if (data[i] == FILL) {
            fills++;
            if (memcmp(&data[i], &back[i], sizeof(float)) != 0) bad++;
            continue;
        }
        const double e = fabs((double)data[i] - (double)back[i]);
        if (e > max_err) max_err = e;
        if (!(e <= bound)) bad++;
    }
    printf("%s: temperature %dx%dx%d through zbound: max error %g (bound %g), %zu fill values, %zu violations\n",
           path, NT, NY, NX, max_err, bound, fills, bad);
    status = bad ? 1 : 0;
    free(data);
    free(back);
    return status;

fail:
    if (ncid >= 0) nc_close(ncid);
    free(data);
    free(back);
    return 2;
}
