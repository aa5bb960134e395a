#!/usr/bin/env python3
"""Extracts every floating-point field of ../shared/data into raw little-endian files for tests/gpu_realdata_test.cpp.

    python3 tests/gpu_make_fields.py DATA_DIR OUT_DIR

Writes OUT_DIR/<name>.raw and OUT_DIR/manifest.tsv, one line per field:
    name <TAB> f32|f64 <TAB> fill bits as hex or '-' <TAB> dims (comma separated, slowest first) <TAB> file name
Needs numpy and h5py only (netCDF-4 files are HDF5; the netCDF-3 files are parsed here, PLOT3D files too), so it
runs on a bare GPU machine as well.
"""
import os
import re
import struct
import sys

import numpy as np


# ---- netCDF-3 classic / 64-bit offset -------------------------------------------------------------------------------

_NC_TYPES = {1: ('i1', 1), 2: ('S1', 1), 3: ('>i2', 2), 4: ('>i4', 4), 5: ('>f4', 4), 6: ('>f8', 8)}


class _Reader:
    def __init__(self, raw):
        self.raw, self.pos = raw, 0

    def u32(self):
        v = struct.unpack_from('>I', self.raw, self.pos)[0]
        self.pos += 4
        return v

    def u64(self):
        v = struct.unpack_from('>Q', self.raw, self.pos)[0]
        self.pos += 8
        return v

    def name(self):
        n = self.u32()
        s = self.raw[self.pos:self.pos + n].decode('utf-8')
        self.pos += (n + 3) // 4 * 4
        return s

    def values(self, nc_type, count):
        dt, size = _NC_TYPES[nc_type]
        v = np.frombuffer(self.raw, dtype=dt, count=count, offset=self.pos)
        self.pos += (count * size + 3) // 4 * 4
        return v

    def attributes(self):
        tag, count = self.u32(), self.u32()
        atts = {}
        for _ in range(count if tag == 0x0C else 0):
            name = self.name()
            t = self.u32()
            atts[name] = (t, self.values(t, self.u32()))
        return atts


def read_netcdf3(path):
    """Yields (variable name, array, fill value or None) for every float variable of a netCDF-3 file."""
    raw = open(path, 'rb').read()
    if raw[:3] != b'CDF' or raw[3] not in (1, 2):
        raise ValueError(f'{path}: not a netCDF-3 classic or 64-bit offset file')
    r = _Reader(raw)
    r.pos = 4
    numrecs = r.u32()
    tag, ndims = r.u32(), r.u32()
    dims = []
    for _ in range(ndims if tag == 0x0A else 0):
        dims.append((r.name(), r.u32()))
    r.attributes()  # global attributes
    tag, nvars = r.u32(), r.u32()
    variables = []
    for _ in range(nvars if tag == 0x0B else 0):
        name = r.name()
        dimids = [r.u32() for _ in range(r.u32())]
        atts = r.attributes()
        nc_type, vsize = r.u32(), r.u32()
        begin = r.u64() if raw[3] == 2 else r.u32()
        is_record = bool(dimids) and dims[dimids[0]][1] == 0
        variables.append((name, dimids, atts, nc_type, vsize, begin, is_record))
    record_vars = [v for v in variables if v[6]]
    recsize = sum(v[4] for v in record_vars) if len(record_vars) != 1 else None
    for name, dimids, atts, nc_type, vsize, begin, is_record in variables:
        if nc_type not in (5, 6):
            continue
        dt, size = _NC_TYPES[nc_type]
        shape = [numrecs if (i == 0 and is_record) else dims[d][1] for i, d in enumerate(dimids)]
        if is_record:
            per_rec = int(np.prod(shape[1:], dtype=np.int64))
            step = recsize if recsize is not None else per_rec * size
            parts = [np.frombuffer(raw, dtype=dt, count=per_rec, offset=begin + k * step) for k in range(numrecs)]
            a = np.concatenate(parts).reshape(shape) if parts else np.zeros(shape, dt)
        else:
            a = np.frombuffer(raw, dtype=dt, count=int(np.prod(shape, dtype=np.int64)), offset=begin).reshape(shape)
        fill = atts.get('_FillValue')
        yield name, a, (fill[1][0] if fill is not None and fill[0] == nc_type else None)


# ---- HDF5 / netCDF-4 ------------------------------------------------------------------------------------------------

def read_hdf5(path):
    import h5py
    out = []
    with h5py.File(path, 'r') as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and obj.dtype.kind == 'f' and obj.dtype.itemsize in (4, 8):
                fill = obj.attrs.get('_FillValue')
                fill = None if fill is None else np.asarray(fill).reshape(-1)[0]
                out.append((name, obj[()], fill))
        f.visititems(visit)
    return out


def read_plot3d(path):
    raw = open(path, 'rb').read()
    ni, nj, nk = struct.unpack_from('>3i', raw, 0)
    a = np.frombuffer(raw, dtype='>f4', count=5 * nk * nj * ni, offset=28).reshape(5, nk, nj, ni)
    return [(f'q{v}', a[v], None) for v in range(5)]


def main():
    src, dst = sys.argv[1], sys.argv[2]
    os.makedirs(dst, exist_ok=True)
    lines = []
    for fn in sorted(os.listdir(src)):
        path = os.path.join(src, fn)
        if fn.endswith('.bin'):
            fields = read_plot3d(path)
        elif fn.endswith('.h5') or (fn.endswith('.nc') and open(path, 'rb').read(4) == b'\x89HDF'):
            fields = read_hdf5(path)
        elif fn.endswith('.nc'):
            fields = list(read_netcdf3(path))
        else:
            continue
        for var, a, fill in fields:
            if a.ndim == 0 or a.size < 2:
                continue
            a = np.ascontiguousarray(a)
            t = 'f64' if a.dtype.itemsize == 8 else 'f32'
            a = a.astype('<f8' if t == 'f64' else '<f4')
            name = re.sub(r'[^A-Za-z0-9_.-]', '_', os.path.splitext(fn)[0] + '__' + var)
            fill_hex = '-'
            if fill is not None:
                fv = np.array([fill], dtype=a.dtype)
                fill_hex = '%x' % int(fv.view('<u8' if t == 'f64' else '<u4')[0])
            a.tofile(os.path.join(dst, name + '.raw'))
            lines.append('\t'.join([name, t, fill_hex, ','.join(str(d) for d in a.shape), name + '.raw']))
    with open(os.path.join(dst, 'manifest.tsv'), 'w') as f:
        f.write('\n'.join(lines) + '\n')
    print(f'{len(lines)} fields written to {dst}')


if __name__ == '__main__':
    main()
