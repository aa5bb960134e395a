"""The zbound Python package: plugin registration with h5py, zbound.Filter, compress/decompress (numpy and device
arrays), errors carrying the library's message."""
import os
import re
import struct
import threading

import numpy as np
import pytest

from test_pkg_common import (assert_within, chunk_bounds, filters_of, pkg_env, python, smooth, uint_view,
                             zbound)
import h5py


def test_plugin_bundled_and_registered_on_import():
    import os
    assert os.path.isfile(os.path.join(zbound.PLUGIN_PATH, "libh5z_zbound.so"))
    assert zbound.FILTER_ID == 33000
    assert h5py.h5z.filter_avail(zbound.FILTER_ID)


@pytest.mark.parametrize("plugin_path", [False, True], ids=["import-only", "HDF5_PLUGIN_PATH"])
def test_h5py_in_a_fresh_process(tmp_path, plugin_path):
    """Without HDF5_PLUGIN_PATH, `import zbound` is what makes h5py read and write zbound datasets; with
    HDF5_PLUGIN_PATH=zbound.PLUGIN_PATH, h5py alone (no import) reads them."""
    path = tmp_path / "f.h5"
    write = f"""
import numpy as np, h5py, zbound
a = np.cumsum(np.random.default_rng(3).normal(size=(97, 131)), axis=1).astype('f4')
a[4, 4] = np.nan
with h5py.File({str(path)!r}, 'w') as f:
    d = f.create_dataset('a', data=a, chunks=(40, 50), **zbound.Filter(abs=1e-2))
    assert d.id.get_create_plist().get_filter(0)[0] == 33000
np.save({str(tmp_path / 'a.npy')!r}, a)
"""
    python(write, env=pkg_env(plugin_path=plugin_path))
    read = f"""
import numpy as np, h5py, sys
{'' if plugin_path else 'import zbound'}
with h5py.File({str(path)!r}, 'r') as f:
    np.save({str(tmp_path / 'b.npy')!r}, f['a'][...])
"""
    python(read, env=pkg_env(plugin_path=plugin_path))
    assert_within(np.load(tmp_path / "a.npy"), np.load(tmp_path / "b.npy"), 1e-2)
    # And with neither, reading fails (HDF5 cannot load the filter), rather than returning wrong data.
    p = python(read.replace("import zbound", ""), env=pkg_env(plugin_path=False), check=False)
    assert p.returncode != 0 and "OSError" in p.stderr, p.stderr[-800:]


def test_registration_resolves_h5py_own_hdf5(tmp_path):
    """Registered through import (no HDF5_PLUGIN_PATH), the plugin takes its HDF5 API from h5py's libhdf5, both for
    the registration call made from Python and for the callbacks HDF5 makes (ZBOUND_LOG names the library)."""
    code = f"""
import numpy as np, h5py, zbound, os
with h5py.File({str(tmp_path / 'l.h5')!r}, 'w') as f:
    f.create_dataset('a', data=np.ones((10, 10), 'f4'), chunks=(5, 5), **zbound.Filter(abs=0.1))
assert 'ZBOUND_HDF5_LIBRARY' not in os.environ
print(os.path.realpath(os.path.dirname(h5py.__file__)))
"""
    p = python(code, env=pkg_env(plugin_path=False, ZBOUND_LOG=1))
    h5py_dir = os.path.dirname(p.stdout.strip())
    libs = re.findall(r"zbound: HDF5 filter uses (\S+)", p.stderr)
    assert libs, p.stderr
    assert all(os.path.realpath(lib).startswith(h5py_dir) for lib in libs), (libs, h5py_dir)


def test_filter_is_a_mapping_for_h5py(tmp_path):
    f = zbound.Filter(abs=1e-3)
    assert dict(f) == {"compression": 33000, "compression_opts": f["compression_opts"]}
    words = f["compression_opts"]
    assert len(words) == 6 and words[:2] == (1, 0)
    assert struct.unpack(">d", struct.pack(">II", words[2], words[3]))[0] == 1e-3
    assert f.h5repack() == "UD=33000,0,6," + ",".join(map(str, words))
    a = smooth((64, 300), "f8")
    with h5py.File(tmp_path / "m.h5", "w") as h:
        d = h.create_dataset("x", data=a, chunks=(32, 64), **f)
        assert filters_of(d) == [33000]
    with h5py.File(tmp_path / "m.h5", "r") as h:
        assert_within(a, h["x"][...], 1e-3)
        assert set(chunk_bounds(h["x"]).values()) == {1e-3}


def test_filter_rel_with_data_gives_every_chunk_one_bound(tmp_path):
    """Filter(rel=r, data=a): eb = r * (max - min) over the finite values of the whole array, in every chunk."""
    a = smooth((120, 90), "f4")
    a[::7, 3] = np.nan
    rel = 1e-3
    fin = a[np.isfinite(a)].astype(np.float64)
    eb = rel * (fin.max() - fin.min())
    f = zbound.Filter(rel=rel, data=a)
    assert f.mode == "abs" and f.bound == pytest.approx(eb, rel=1e-12)
    with h5py.File(tmp_path / "r.h5", "w") as h:
        h.create_dataset("x", data=a, chunks=(30, 30), **f)
    with h5py.File(tmp_path / "r.h5", "r") as h:
        bounds = chunk_bounds(h["x"])
        assert len(bounds) == 12 and len(set(bounds.values())) == 1
        assert_within(a, h["x"][...], eb)
        # A plain rel filter gives chunks their own bounds instead.
        h2 = h5py.File(tmp_path / "r2.h5", "w")
        h2.create_dataset("x", data=a, chunks=(30, 30), **zbound.Filter(rel=rel))
        h2.close()
    with h5py.File(tmp_path / "r2.h5", "r") as h:
        assert len(set(chunk_bounds(h["x"]).values())) > 1


@pytest.mark.parametrize("dtype", ["<f4", "<f8", ">f4", ">f8"])
@pytest.mark.parametrize("shape", [(1000,), (37, 53), (1, 64, 1, 33), (5, 6, 7, 8, 3)])
def test_compress_decompress_numpy(dtype, shape):
    a = smooth(shape, dtype)
    flat = a.reshape(-1)
    flat[1] = np.nan
    flat[2] = -np.inf
    flat[3] = -0.0
    b = zbound.compress(a, abs=1e-3)
    assert isinstance(b, bytes) and len(b) < a.nbytes + 4096
    info = zbound.stream_info(b)
    assert info["n"] == a.size and info["abs_bound"] == 1e-3
    back = zbound.decompress(b, shape=a.shape)
    assert back.shape == a.shape and back.dtype == a.dtype.newbyteorder("=")
    assert_within(a.astype(a.dtype.newbyteorder("=")), back, 1e-3)
    # without shape: the stream's own (folded) shape, same values
    assert np.array_equal(uint_view(zbound.decompress(b).reshape(-1)), uint_view(back.reshape(-1)))
    # into a given buffer, from a memoryview
    out = np.empty(a.size, dtype=back.dtype)
    assert zbound.decompress(memoryview(b), out=out) is out
    assert np.array_equal(uint_view(out), uint_view(back.reshape(-1)))


def test_rel_and_fill_value():
    a = smooth((200, 100), "f4")
    a[a > 15] = -9999.0
    b = zbound.compress(a, rel=1e-3, fill=-9999.0)
    ok = a != -9999.0
    eb = 1e-3 * float(a[ok].max() - a[ok].min())
    assert zbound.stream_info(b)["abs_bound"] == pytest.approx(eb, rel=1e-12)
    back = zbound.decompress(b, shape=a.shape)
    assert_within(a, back, zbound.stream_info(b)["abs_bound"], fill=np.float32(-9999.0))


def test_errors_carry_the_library_message():
    a = smooth((50, 50))
    b = zbound.compress(a, abs=1e-2)
    with pytest.raises(zbound.CorruptStreamError) as e:
        zbound.decompress(b[:40])
    assert "ZB_ERR_TRUNCATED" in str(e.value) and e.value.status == 5
    bad = bytearray(b)
    bad[len(b) // 2] ^= 0xFF
    with pytest.raises(zbound.ZboundError) as e:
        zbound.decompress(bytes(bad))
    assert e.value.status_name in ("ZB_ERR_CORRUPT", "ZB_ERR_TRUNCATED") and len(str(e.value)) > 20
    with pytest.raises(TypeError, match="float32 and float64"):
        zbound.compress(np.arange(10), abs=1)
    with pytest.raises(ValueError, match="exactly one error bound"):
        zbound.compress(a, abs=1, rel=1)
    with pytest.raises(ValueError, match="finite number"):
        zbound.Filter(abs=float("nan"))
    with pytest.raises(ValueError, match="predictor"):
        zbound.Filter(abs=1, predictor="magic")


@pytest.mark.parametrize("kw", [{"pw_rel": 1e-3}, {"abs": 1e-3, "predictor": "interp"},
                                {"abs": 1e-3, "encoder": "ratio"}], ids=["pw_rel", "interp", "ratio"])
def test_features_beyond_format_v1_raise_or_hold_the_bound(kw, tmp_path):
    """pw_rel, interp and ratio are not in format v1: the library says ZB_ERR_UNSUPPORTED and every entry point
    raises UnsupportedError with its message. If a later library supports one, it must hold its bound instead."""
    a = smooth((60, 70), "f4") + 50.0
    try:
        b = zbound.compress(a, **kw)
    except zbound.UnsupportedError as e:
        assert "ZB_ERR_UNSUPPORTED" in str(e) and e.status == 9
        for make in (lambda: zbound.Filter(**kw), lambda: zbound.Zbound(**kw)):
            with pytest.raises(zbound.UnsupportedError):
                make()
        return
    back = zbound.decompress(b, shape=a.shape)
    if "pw_rel" in kw:
        assert np.all(np.abs(a.astype(np.float64) - back) <= kw["pw_rel"] * np.abs(a.astype(np.float64)))
    else:
        assert_within(a, back, kw["abs"])
    with h5py.File(tmp_path / "x.h5", "w") as f:
        f.create_dataset("x", data=a, chunks=(30, 35), **zbound.Filter(**kw))


def test_threads_compress_in_parallel():
    arrays = [smooth((300, 200), "f4", seed=s) for s in range(8)]
    results = [None] * len(arrays)

    def work(i):
        results[i] = zbound.decompress(zbound.compress(arrays[i], abs=1e-3, threads=1), shape=arrays[i].shape)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(len(arrays))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for a, r in zip(arrays, results):
        assert_within(a, r, 1e-3)


def test_decompress_threads_are_the_calls():
    """decompress(threads=N) decodes on N threads whatever ZBOUND_THREADS says (the library's ZBOUND_CPU_TIMING
    line names the count of each call), threads=0 takes ZBOUND_THREADS, the values are the same, and a negative
    count is the library's invalid-argument error."""
    code = (
        "import numpy as np, zbound\n"
        "z, y, x = np.mgrid[0:40, 0:60, 0:70]\n"
        "a = (np.sin(x / 9.0) * np.cos(y / 7.0) + z / 40.0).astype('f4')\n"
        "b = zbound.compress(a, abs=1e-3, predictor='interp', encoder='ratio', threads=1)\n"
        "outs = [zbound.decompress(b, shape=a.shape, threads=t) for t in (3, 1, 0)]\n"
        "assert all(np.array_equal(o.view('u4'), outs[0].view('u4')) for o in outs)\n"
        "assert np.abs(outs[0].astype('f8') - a).max() <= 1e-3\n"
        "try:\n"
        "    zbound.decompress(b, threads=-1)\n"
        "except zbound.ZboundError as e:\n"
        "    assert 'threads' in str(e), str(e)\n"
        "else:\n"
        "    raise AssertionError('threads=-1 accepted')\n")
    p = python(code, env=pkg_env(ZBOUND_CPU_TIMING=1, ZBOUND_THREADS=2))
    calls = [line.split(":")[0] for line in p.stderr.splitlines() if line.startswith("zbound cpu decompress")]
    assert calls == ["zbound cpu decompress 3 threads", "zbound cpu decompress 1 threads",
                     "zbound cpu decompress 2 threads"], p.stderr[-2000:]


class _FakeDeviceArray:
    """Quacks like a device array (__cuda_array_interface__) without a GPU; its pointer is never dereferenced."""

    def __init__(self, shape, typestr):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (0x1000, False), "version": 3,
                                         "strides": None}


def test_device_arrays_without_a_gpu_fail_cleanly():
    if zbound.gpu_available():
        pytest.skip("a GPU is available: the device path is tested by test_device_arrays_with_cupy")
    with pytest.raises(zbound.ZboundError) as e:
        zbound.compress(_FakeDeviceArray((100, 10), "<f4"), abs=1e-3)
    assert e.value.status_name in ("ZB_ERR_UNSUPPORTED", "ZB_ERR_GPU")
    assert "CUDA" in str(e.value) or "GPU" in str(e.value)
    with pytest.raises(zbound.ZboundError) as e:
        zbound.decompress(_FakeDeviceArray((500,), "|u1"))
    assert e.value.status_name in ("ZB_ERR_UNSUPPORTED", "ZB_ERR_GPU")


def test_device_arrays_with_cupy():
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed (no GPU in CI): device path not run")
    if not zbound.gpu_available():
        pytest.skip("this zbound build has no CUDA backend or no usable GPU: device path not run")
    a = smooth((256, 300), "f4")
    d = cupy.asarray(a)
    b = zbound.compress(d, abs=1e-3)
    assert hasattr(b, "__cuda_array_interface__")
    host = cupy.asnumpy(b).tobytes()
    # the same stream on the host decodes (CPU and GPU streams are interchangeable)
    assert_within(a, zbound.decompress(host, shape=a.shape), 1e-3)
    back = zbound.decompress(b, shape=a.shape)
    assert_within(a, cupy.asnumpy(back), 1e-3)
