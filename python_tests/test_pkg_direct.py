"""zbound.write_chunks / read_chunks: chunks compressed outside HDF5's filter pipeline and stored with
H5Dwrite_chunk are the filter's own streams (same bytes), read back through the plugin, and read_chunks decodes
what the filter wrote exactly as h5py does. Device arrays (CuPy) where a GPU is usable."""
import numpy as np
import pytest

from test_pkg_common import assert_within, smooth, uint_view, zbound
import h5py


def _stored_chunks(ds):
    out = {}
    for i in range(ds.id.get_num_chunks()):
        off = tuple(ds.id.get_chunk_info(i).chunk_offset)
        out[off] = ds.id.read_direct_chunk(off)
    return out


def _field(shape, dtype, seed=0):
    a = smooth(shape, dtype, seed)
    flat = a.reshape(-1)
    flat[7] = np.nan
    flat[100] = -np.inf
    flat[333] = -0.0
    return a


def _case_field(dtype, seed, fill):
    """The field of the CASES tests: 45 x 60 x 70 (edge chunks for the chunk shapes used), a block of fill values."""
    a = _field((45, 60, 70), dtype, seed=seed)
    if fill is not None:
        a[3:5, 10:20, :] = fill
    return a


def _same_chunks_as_filter(f, a, kw, write, nchunks):
    """In open file f, a dataset written through the filter and one written by write(ds, a), both created with kw:
    asserts they store the same chunks (all filtered, byte for byte) and returns the two datasets."""
    via_filter = f.create_dataset("filter", **kw)
    via_filter[...] = a
    direct = f.create_dataset("direct", **kw)
    write(direct, a)
    sa, sb = _stored_chunks(via_filter), _stored_chunks(direct)
    assert sa.keys() == sb.keys() and len(sa) == nchunks
    for off in sa:
        assert sa[off][0] == sb[off][0] == 0
        assert sa[off][1] == sb[off][1], f"chunk {off}: different bytes"
    return via_filter, direct


CASES = [
    ("abs", 1e-2, "auto", "auto", None, "f4"),
    ("rel", 1e-3, "interp", "ratio", None, "f4"),
    ("rel", 1e-4, "lorenzo", "ratio", -999.0, "f8"),
    ("abs", 5e-3, "lorenzo", "fast", -999.0, "f4"),
    ("pw_rel", 1e-3, "auto", "auto", None, "f8"),
]


@pytest.mark.parametrize("mode,bound,pred,enc,fill,dtype", CASES)
def test_write_chunks_writes_the_filters_bytes(tmp_path, mode, bound, pred, enc, fill, dtype):
    """Same data, same dataset creation: chunk for chunk, write_chunks stores the bytes the filter stores."""
    a = _case_field(dtype, 0, fill)
    kw = dict(shape=a.shape, dtype=a.dtype, chunks=(16, 20, 70), fillvalue=fill,
              **zbound.Filter(**{mode: bound}, predictor=pred, encoder=enc))
    with h5py.File(tmp_path / "f.h5", "w") as f:
        _same_chunks_as_filter(f, a, kw, lambda ds, v: zbound.write_chunks(ds, v, threads=3), 3 * 3)


def test_edge_chunks_read_back_through_the_plugin(tmp_path):
    """A shape that is no multiple of the chunk shape: the edge chunks are padded like HDF5 pads them, and the
    dataset reads back through the plugin within the bound, specials exact."""
    a = _field((45, 61, 33), "f4", seed=2)
    with h5py.File(tmp_path / "e.h5", "w") as f:
        ds = f.create_dataset("x", shape=a.shape, dtype=a.dtype, chunks=(16, 20, 16), **zbound.Filter(abs=1e-3))
        zbound.write_chunks(ds, a)
    with h5py.File(tmp_path / "e.h5", "r") as f:
        back = f["x"][...]
        direct = zbound.read_chunks(f["x"])
    assert_within(a, back, 1e-3)
    assert np.array_equal(uint_view(back), uint_view(direct))


def test_read_chunks_equals_h5py_read(tmp_path):
    """read_chunks decodes what the filter wrote bit for bit like h5py does, unwritten chunks read as the fill value,
    and chunks stored unfiltered (an optional filter declining: here written raw with filter mask 1) as they are."""
    a = _field((40, 50), "f8", seed=4)
    with h5py.File(tmp_path / "r.h5", "w") as f:
        ds = f.create_dataset("x", shape=(80, 50), dtype="f8", chunks=(16, 25), fillvalue=-5.5,
                              **zbound.Filter(rel=1e-3))
        ds[:40] = a
        raw_chunk = np.arange(16 * 25, dtype="f8").reshape(16, 25)
        ds.id.write_direct_chunk((64, 25), raw_chunk.tobytes(), filter_mask=1)
    with h5py.File(tmp_path / "r.h5", "r") as f:
        expected = f["x"][...]
        got = zbound.read_chunks(f["x"])
        out = np.empty((80, 50), "f8")
        assert zbound.read_chunks(f["x"], out=out) is out
        by_threads = [zbound.read_chunks(f["x"], threads=t) for t in (1, 3, 64)]
    assert np.array_equal(uint_view(expected), uint_view(got))
    assert np.array_equal(uint_view(got), uint_view(out))
    for t in by_threads:
        assert np.array_equal(uint_view(got), uint_view(t))
    assert np.all(got[48:64] == -5.5) and np.array_equal(got[64:80, 25:], raw_chunk)


@pytest.mark.parametrize("userblock", [0, 512, 4096])
def test_chunk_reader_gives_hdf5s_bytes(tmp_path, monkeypatch, userblock):
    """The device read's chunk reader (zbound.direct._ChunkReader) gives read_direct_chunk's bytes and masks for
    every chunk: by preadv at the chunks' addresses (pieces of 4 KiB on three threads) for a file open read-only,
    with and without a user block, and through HDF5 for a file open for writing, the in-memory driver and
    ZBOUND_CHUNK_PREAD=0; windows read in parts into places out of the chunks' order."""
    from zbound.direct import _ChunkReader

    a = _field((90, 64, 50), "f4", seed=9)
    path = tmp_path / "reader.h5"
    with h5py.File(path, "w", userblock_size=userblock) as f:
        ds = f.create_dataset("x", shape=(100, 64, 50), dtype="f4", chunks=(10, 64, 50), **zbound.Filter(abs=1e-4))
        ds[:90] = a
        ds.id.write_direct_chunk((90, 0, 0), np.ones((10, 64, 50), "f4").tobytes(), filter_mask=1)
    for mode, driver, env, direct in (("r", None, None, True), ("r+", None, None, False),
                                      ("r", "core", None, False), ("r", None, "0", False)):
        if env is None:
            monkeypatch.delenv("ZBOUND_CHUNK_PREAD", raising=False)
        else:
            monkeypatch.setenv("ZBOUND_CHUNK_PREAD", env)
        with h5py.File(path, mode, driver=driver) as f:
            ds = f["x"]
            reader = _ChunkReader(ds, threads=3)
            reader._PIECE = 4096
            assert (reader.fd is not None) == direct, (mode, driver, env)
            infos = [ds.id.get_chunk_info(i) for i in range(ds.id.get_num_chunks())]
            assert len(infos) == 10
            places, pos = {}, 0
            for info in reversed(infos):
                places[tuple(info.chunk_offset)] = pos
                pos += int(info.size) + 7
            buf = np.full(pos, 0xEE, np.uint8)
            masks = []
            for k in range(0, len(infos), 4):
                part = infos[k:k + 4]
                masks += reader.read(part, [places[tuple(i.chunk_offset)] for i in part], buf)
            assert (reader.fd is not None) == direct   # the first chunk agreed both ways
            for info, mask in zip(infos, masks):
                want_mask, want = ds.id.read_direct_chunk(tuple(info.chunk_offset))
                at = places[tuple(info.chunk_offset)]
                assert mask == want_mask
                assert buf[at:at + len(want)].tobytes() == want, (mode, driver, env, info.chunk_offset)


def test_read_chunks_reports_a_corrupt_chunk(tmp_path):
    """A damaged stream among many chunks decoded at once: read_chunks raises the library's error for it (no hang,
    no partial result returned)."""
    a = _field((64, 40), "f4", seed=5)
    with h5py.File(tmp_path / "c.h5", "w") as f:
        ds = f.create_dataset("x", shape=a.shape, dtype=a.dtype, chunks=(8, 40), **zbound.Filter(abs=1e-3))
        zbound.write_chunks(ds, a)
        mask, good = ds.id.read_direct_chunk((24, 0))
        bad = bytearray(good)
        bad[len(bad) // 2] ^= 0x5A
        ds.id.write_direct_chunk((24, 0), bytes(bad), filter_mask=mask)
    with h5py.File(tmp_path / "c.h5", "r") as f:
        for t in (1, 4):
            with pytest.raises(zbound.ZboundError):
                zbound.read_chunks(f["x"], threads=t)


def test_refusals(tmp_path):
    with h5py.File(tmp_path / "x.h5", "w") as f:
        plain = f.create_dataset("plain", shape=(10, 10), dtype="f4", chunks=(5, 5))
        with pytest.raises(ValueError, match="only filter"):
            zbound.write_chunks(plain, np.zeros((10, 10), "f4"))
        both = f.create_dataset("both", shape=(10, 10), dtype="f4", chunks=(5, 5), shuffle=True,
                                **zbound.Filter(abs=1))
        with pytest.raises(ValueError, match="only filter"):
            zbound.read_chunks(both)
        contiguous = f.create_dataset("contiguous", shape=(10, 10), dtype="f4")
        with pytest.raises(ValueError, match="not chunked"):
            zbound.write_chunks(contiguous, np.zeros((10, 10), "f4"))
        ints = f.create_dataset("ints", shape=(10,), dtype="i4", chunks=(5,), **zbound.Filter(abs=1))
        with pytest.raises(TypeError, match="float32/float64"):
            zbound.write_chunks(ints, np.zeros(10, "i4"))
        ok = f.create_dataset("ok", shape=(10, 10), dtype="f4", chunks=(5, 5), **zbound.Filter(abs=1))
        with pytest.raises(ValueError, match="shape"):
            zbound.write_chunks(ok, np.zeros((10, 11), "f4"))
        with pytest.raises(TypeError, match="float64"):
            zbound.write_chunks(ok, np.zeros((10, 10), "f8"))
        with pytest.raises(ValueError, match="out must be"):
            zbound.read_chunks(ok, out=np.empty((10, 10), "f8"))


def _cupy_or_skip():
    cp = pytest.importorskip("cupy")
    if not zbound.gpu_available():
        pytest.skip("no usable GPU")
    return cp


@pytest.mark.parametrize("window", [None, 1 << 20])
@pytest.mark.parametrize("mode,bound,pred,enc,fill,dtype", CASES)
def test_device_arrays_round_trip(tmp_path, monkeypatch, window, mode, bound, pred, enc, fill, dtype):
    """A CuPy array, chunked along every dimension with edge chunks (chunks gathered into staging buffers) and,
    with a 1 MB window, in many batches (the double buffering): the GPU's chunks are the CPU's bytes (the
    filter's), and read_chunks(device=True) gives the same values as the CPU read."""
    cp = _cupy_or_skip()
    if window:
        monkeypatch.setattr(zbound.direct, "_WINDOW_BYTES", window)
    a = _case_field(dtype, 5, fill)
    kw = dict(shape=a.shape, dtype=a.dtype, chunks=(16, 20, 32), fillvalue=fill,
              **zbound.Filter(**{mode: bound}, predictor=pred, encoder=enc))
    with h5py.File(tmp_path / "d.h5", "w") as f:
        via_filter, dev = _same_chunks_as_filter(f, a, kw, lambda ds, v: zbound.write_chunks(ds, cp.asarray(v)),
                                                 3 * 3 * 3)
        back = zbound.read_chunks(dev, device=True)
        assert isinstance(back, cp.ndarray)
        assert np.array_equal(uint_view(cp.asnumpy(back)), uint_view(via_filter[...]))


def test_device_whole_chunks_in_place(tmp_path):
    """Chunks that are whole slabs of the array (chunked along the slowest dimension only) are compressed from and
    decompressed into the user's arrays in place; the result is the CPU's, and an `out` array is filled."""
    cp = _cupy_or_skip()
    a = _field((64, 128, 96), "f4", seed=5)
    kw = dict(shape=a.shape, dtype=a.dtype, chunks=(16, 128, 96), **zbound.Filter(rel=1e-3))
    with h5py.File(tmp_path / "d.h5", "w") as f:
        host = f.create_dataset("host", **kw)
        zbound.write_chunks(host, a)
        dev = f.create_dataset("dev", **kw)
        zbound.write_chunks(dev, cp.asarray(a))
        assert _stored_chunks(host) == _stored_chunks(dev)
        out = cp.full(a.shape, 7.0, dtype=a.dtype)
        back = zbound.read_chunks(dev, out=out)
        assert back is out
        assert np.array_equal(uint_view(cp.asnumpy(out)), uint_view(zbound.read_chunks(host)))


def test_device_read_of_unfiltered_and_missing_chunks(tmp_path):
    """read_chunks(device=True) copies a chunk stored unfiltered (filter mask 1) as it is and fills the chunks
    never written with the fill value, as h5py's read does."""
    cp = _cupy_or_skip()
    a = _field((40, 50), "f4", seed=3)
    kw = dict(shape=a.shape, dtype=a.dtype, chunks=(20, 25), fillvalue=-5.0, **zbound.Filter(abs=1e-3))
    with h5py.File(tmp_path / "u.h5", "w") as f:
        ds = f.create_dataset("x", **kw)
        ds[0:20, 0:25] = a[0:20, 0:25]
        ds.id.write_direct_chunk((20, 0), np.ascontiguousarray(a[20:40, 0:25]).tobytes(), filter_mask=1)
    # Reopened, so that h5py decodes chunk (0, 0) from the file instead of serving HDF5's cached raw copy.
    with h5py.File(tmp_path / "u.h5", "r") as f:
        ds = f["x"]
        expect = ds[...]
        back = zbound.read_chunks(ds, device=True)
        assert np.array_equal(uint_view(cp.asnumpy(back)), uint_view(expect))
        assert np.array_equal(cp.asnumpy(back)[20:40, 0:25], a[20:40, 0:25])
        assert np.all(cp.asnumpy(back)[:, 25:] == -5.0)
