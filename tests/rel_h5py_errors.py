"""Every error reaches the h5py user: damaged zbound chunks in a file make h5py raise, and the zbound reason is
in the exception (HDF5 1.x) or, where HDF5 drops messages pushed by filter functions (2.x, HDFGroup/hdf5#6194),
on stderr. Covers what python_tests/ does not: bytes damaged on disk (not through write_direct_chunk), a cut
chunk, a foreign (non-zbound) chunk, a valid stream of another shape, and the other chunks still reading.
Run by ctest (rel_h5py_errors) with HDF5_PLUGIN_PATH set; exits 77 (skipped) without h5py/numpy."""
import os
import re
import struct
import sys
import tempfile

try:
    import h5py
    import numpy as np
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e}")
    sys.exit(77)

FILTER = 33000


def opts(abs_bound):
    hi, lo = struct.unpack(">II", struct.pack(">d", abs_bound))
    return (1, 0, hi, lo, 0, 0)


def read_with_stderr(fn):
    """Calls fn(); returns (exception or None, what the process wrote on fd 2 meanwhile)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        err = None
        try:
            fn()
        except Exception as e:  # h5py raises OSError (or RuntimeError with some versions)
            err = e
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        return err, tmp.read().decode(errors="replace")


def expect_failure(label, fn, pattern):
    err, stderr = read_with_stderr(fn)
    if err is None:
        raise AssertionError(f"{label}: the read succeeded")
    where = str(err) + "\n" + stderr
    if not re.search(pattern, where):
        raise AssertionError(f"{label}: {pattern!r} not in the exception nor on stderr:\n{where}")
    print(f"ok   {label}: {type(err).__name__}: {str(err).splitlines()[0][:100]}")
    for line in stderr.splitlines():
        if "zbound" in line:
            print(f"     stderr: {line[:160]}")


def main():
    if not h5py.h5z.filter_avail(FILTER):
        print("SKIP: the zbound plugin is not on HDF5_PLUGIN_PATH")
        return 77
    print(f"h5py {h5py.version.version}, HDF5 {h5py.version.hdf5_version}")
    y, x = np.mgrid[0:96, 0:64]
    a = (np.sin(x / 7.0) * np.cos(y / 11.0) * 100).astype("f4")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "e.h5")
        with h5py.File(path, "w") as f:
            f.create_dataset("x", data=a, chunks=(32, 64), compression=FILTER, compression_opts=opts(1e-3))
            f.create_dataset("other", data=a[:16, :16], chunks=(16, 16), compression=FILTER,
                             compression_opts=opts(1e-3))
        with h5py.File(path, "r") as f:
            info = f["x"].id.get_chunk_info(1)       # the chunk at rows 32..63
            other = f["other"].id.read_direct_chunk((0, 0))[1]
        # 1. A byte damaged in the file itself (the middle of chunk 1's payload).
        with open(path, "r+b") as raw:
            raw.seek(info.byte_offset + info.size // 2)
            b = raw.read(1)
            raw.seek(info.byte_offset + info.size // 2)
            raw.write(bytes([b[0] ^ 0x10]))
        with h5py.File(path, "r") as f:
            ok = f["x"][:32]
            if np.max(np.abs(ok - a[:32])) > 1e-3:
                raise AssertionError("the undamaged chunk no longer reads within the bound")
            print("ok   undamaged chunks still read")
            expect_failure("byte flipped on disk", lambda: f["x"][32:64],
                           r"zbound: cannot decompress a chunk of \d+ bytes: corrupt stream: payload checksum mismatch")
        with h5py.File(path, "a") as f:
            ds = f["x"]
            _, good = ds.id.read_direct_chunk((0, 0))
            ds.id.write_direct_chunk((0, 0), good[: len(good) // 2])          # 2. cut short
            ds.id.write_direct_chunk((64, 0), b"\0" * 200)                    # 3. not a zbound stream
        with h5py.File(path, "a") as f:
            f["x"].id.write_direct_chunk((32, 0), other)                      # 4. valid stream, other shape
        with h5py.File(path, "r") as f:
            expect_failure("chunk cut in half", lambda: f["x"][:32], r"zbound: cannot decompress.*truncated stream")
            expect_failure("foreign bytes", lambda: f["x"][64:], r"zbound: cannot decompress.*bad magic")
            expect_failure("stream of another chunk shape", lambda: f["x"][32:64],
                           r"zbound: cannot decompress: the chunk's stream holds 256 f32 values")
    print("rel_h5py_errors: 5 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
