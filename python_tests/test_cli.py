"""The `zbound` command-line tool on the real fields of ../shared/data.

Checks properties, never numbers the code produced: every finite value within the bound the stream records, NaN /
Inf / -0.0 / fill values bit for bit, the relative bound derived from the finite range, identical bytes whatever
the thread count, h5repack / nccopy accepting the cdvalues strings, and exit codes with messages on bad input.

The tool is <build>/bin/zbound, the build directory being conftest's (ZBOUND_BUILD_DIR, default build/).
"""
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest

from conftest import BUILD_DIR, DATA_DIR, PLUGIN_DIR, assert_within, field_abs_bound, uint_view

ZBOUND = str(BUILD_DIR / "bin" / "zbound")
DATA = str(DATA_DIR)


def lorenzo_segment_count(shape):
    """Lorenzo segments of an array (docs/FORMAT.md section 13): layers of the slowest dim after dropping unit dims
    and folding to at most 3 dims; layers of at most 2^14 values are cut into segments of ceil(2^20 / V) layers."""
    dims = [d for d in shape if d != 1] or [1]
    n = int(np.prod(dims))
    folded_rank = min(len(dims), 3)
    layers = n if folded_rank == 1 else n // int(np.prod(dims[-(folded_rank - 1):]))
    per_layer = n // layers
    if per_layer > 1 << 14:
        return 1
    k = -(-(1 << 20) // per_layer)
    return -(-layers // k)


@pytest.fixture(scope="module", autouse=True)
def _cli_built():
    if not os.access(ZBOUND, os.X_OK):
        pytest.fail(f"{ZBOUND} is missing: build first (bash scripts/setup.sh) or set ZBOUND_BUILD_DIR")


def zb(*args, expect=0, env=None):
    """Runs the CLI; asserts the exit code; returns the completed process."""
    full_env = dict(os.environ, **(env or {}))
    p = subprocess.run([ZBOUND, *map(str, args)], capture_output=True, text=True, env=full_env)
    assert p.returncode == expect, f"zbound {' '.join(map(str, args))} -> {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p


# ---------------------------------------------------------------- real fields (read once per session)

def _load_trefht_stacked():
    netCDF4 = pytest.importorskip("netCDF4")
    members = []
    for m in (57, 59, 60, 61):
        with netCDF4.Dataset(os.path.join(DATA, f"cesm_trefht_b06_{m}.nc")) as d:
            v = d["TREFHT"]
            v.set_auto_mask(False)
            members.append(np.asarray(v[:], dtype=np.float32))
    return np.ascontiguousarray(np.concatenate(members))


def _load_h5(name, var):
    h5py = pytest.importorskip("h5py")
    with h5py.File(os.path.join(DATA, name), "r") as f:
        return np.ascontiguousarray(f[var][...])


def _load_plot3d(name):
    raw = open(os.path.join(DATA, name), "rb").read()
    ni, nj, nk = struct.unpack(">3i", raw[:12])
    return np.frombuffer(raw[28:], ">f4").reshape(5, nk, nj, ni)


FIELDS = {
    "cesm_trefht_440x64x128": _load_trefht_stacked,
    "gmt_sst_nan": lambda: _load_h5("gmt_sst.nc", "z"),
    "gmt_data_w_nans": lambda: _load_h5("gmt_data_w_nans.nc", "z"),
    "gmt_geoid": lambda: _load_h5("gmt_geoid_1m.nc", "z"),
    "radar_rainsum_f64": lambda: _load_h5("radar_rainsum_f64.h5", "data"),
    "nasa_cfd_postq_4d": lambda: np.ascontiguousarray(_load_plot3d("nasa_cfd_postq.bin").astype(np.float32)),
}


@pytest.fixture(scope="session")
def fields():
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = FIELDS[name]()
        return cache[name]
    return get


def write_raw(tmp_path, name, arr):
    path = tmp_path / f"{name}.raw"
    np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tofile(path)
    return path


def raw_opts(arr):
    return ["-t", "f64" if arr.dtype == np.float64 else "f32", "-d", "x".join(map(str, arr.shape))]


def finite_range(a, fill=None):
    return field_abs_bound(a, 1.0, fill)


def info_json(path):
    return json.loads(zb("info", "--json", path).stdout.strip())


# ---------------------------------------------------------------- round trips through files

@pytest.mark.parametrize("name", list(FIELDS))
@pytest.mark.parametrize("rel", [1e-2, 1e-3, 1e-4])
def test_file_round_trip_holds_bound(tmp_path, fields, name, rel):
    arr = fields(name)
    raw = write_raw(tmp_path, name, arr)
    zfile, out = tmp_path / "f.zb", tmp_path / "f.out"
    zb("compress", raw, *raw_opts(arr), "--rel", rel, "-o", zfile)
    info = info_json(zfile)
    # docs/FORMAT.md section 7: Lorenzo + fast (and raw passthrough) is written as v1, or v6 when the array holds
    # more than one Lorenzo segment (section 13), Lorenzo + ratio as v2, the interp predictor as v3; a ratio stream
    # with run tokens (section 11) as v4.
    assert info["predictor"] in ("lorenzo", "interp", "none") and info["encoder"] in ("fast", "ratio", "none")
    v1 = (info["predictor"], info["encoder"]) in (("lorenzo", "fast"), ("none", "none"))
    base = 1 if v1 else 3 if info["predictor"] == "interp" else 2
    if info["predictor"] == "lorenzo" and info["encoder"] == "fast" and lorenzo_segment_count(arr.shape) > 1:
        base = 6
    assert info["format_version"] in ((base, 4) if info["encoder"] == "ratio" else (base,))
    # The predictor's details: a v6 stream's segments (section 13); the interp parameters (section 8), whose level
    # bounds are the stream's bound divided by alpha once per level, each division as the encoder made it.
    if base == 6:
        assert info["lorenzo_segments"] == lorenzo_segment_count(arr.shape) > 1
    else:
        assert "lorenzo_segments" not in info
    if info["predictor"] == "interp":
        assert sorted(info["interp_dim_order"]) == ["x", "y", "z"]
        assert len(info["interp_natural_zyx"]) == 3 and set(info["interp_natural_zyx"]) <= {"0", "1"}
        alpha = info["interp_alpha"]
        assert 1.0 <= alpha <= 2.0
        e = [info[f"interp_bound_{k}"] for k in ("stride1", "stride2", "stride4", "anchors")]
        assert e[0] == info["abs_bound"]
        assert e[1] == e[0] / alpha and e[2] == e[1] / alpha and e[3] == e[2] / alpha
    else:
        assert "interp_alpha" not in info
    assert info["dtype"] == ("f64" if arr.dtype == np.float64 else "f32")
    assert info["n"] == arr.size
    assert info["decompressed_bytes"] == arr.nbytes
    assert info["stream_bytes"] == os.path.getsize(zfile)
    assert info["mode"] == "rel" and info["bound"] == rel
    # REL is relative to the finite value range: NaN does not widen it.
    assert info["abs_bound"] == pytest.approx(rel * finite_range(arr), rel=1e-12)
    zb("decompress", zfile, "-o", out)
    rec = np.fromfile(out, dtype=arr.dtype.newbyteorder("<")).reshape(arr.shape)
    assert_within(arr, rec, info["abs_bound"])


def test_info_shows_predictor_details(tmp_path, fields):
    """`zbound info` shows a v6 stream's Lorenzo segments and an interp stream's stored parameters, in text and JSON."""
    arr = fields("cesm_trefht_440x64x128")
    raw = write_raw(tmp_path, "t", arr)
    zb("compress", raw, *raw_opts(arr), "--rel", 1e-3, "--predictor", "lorenzo", "--encoder", "fast",
       "-o", tmp_path / "l.zb")
    info = info_json(tmp_path / "l.zb")
    # 64x128 planes: segments of ceil(2^20 / 8192) = 128 planes, 440 planes in 4 (the last 56).
    assert (info["format_version"], info["lorenzo_segments"], info["lorenzo_segment_layers"]) == (6, 4, 128)
    assert "4 of 128 layers (the last 56)" in zb("info", tmp_path / "l.zb").stdout
    zb("compress", raw, *raw_opts(arr), "--rel", 1e-3, "--predictor", "interp", "--encoder", "ratio",
       "-o", tmp_path / "i.zb")
    info = info_json(tmp_path / "i.zb")
    alpha, e0 = info["interp_alpha"], info["interp_bound_stride1"]
    assert e0 == info["abs_bound"] and info["interp_bound_stride2"] == e0 / alpha
    text = zb("info", tmp_path / "i.zb").stdout
    order = ", ".join(info["interp_dim_order"])
    assert f"interp dim order     {order} (3D view)" in text and "interp alpha" in text
    assert "lorenzo segments" not in text
    # Parameters that do not parse (the payload is not verified by info): said so, the header fields still shown.
    data = bytearray((tmp_path / "i.zb").read_bytes())
    perm = bytes("zyx".index(c) for c in info["interp_dim_order"])
    at = data.find(b"\x03\x03" + perm)   # anchor stride log2 3, three levels, the dim order (section 8)
    assert at > 0
    data[at + 2] = 7
    (tmp_path / "bad.zb").write_bytes(bytes(data))
    text = zb("info", tmp_path / "bad.zb").stdout
    assert "interp parameters    unreadable: bad interp dim order" in text and "predictor            interp" in text
    assert "interp_alpha" not in info_json(tmp_path / "bad.zb")


@pytest.mark.parametrize("eb", [0.0, 1e-6, 0.05, 1.0])
def test_absolute_bound_and_lossless(tmp_path, fields, eb):
    arr = fields("cesm_trefht_440x64x128")[:110]
    raw = write_raw(tmp_path, "t", arr)
    zb("compress", raw, *raw_opts(arr), "--abs", eb, "-o", tmp_path / "t.zb")
    info = info_json(tmp_path / "t.zb")
    assert info["mode"] == "abs" and info["abs_bound"] == eb
    zb("decompress", tmp_path / "t.zb", "-o", tmp_path / "t.out")
    rec = np.fromfile(tmp_path / "t.out", np.float32).reshape(arr.shape)
    assert_within(arr, rec, eb)
    if eb == 0.0:
        assert np.array_equal(uint_view(arr), uint_view(rec))


def test_big_endian_input_with_offset(tmp_path, fields):
    """The PLOT3D file read in place (28 header bytes, big-endian) gives the same stream as its little-endian copy."""
    arr = fields("nasa_cfd_postq_4d")
    dims = "x".join(map(str, arr.shape))
    zb("compress", os.path.join(DATA, "nasa_cfd_postq.bin"), "-t", "f32", "--offset", 28, "--endian", "big",
       "-d", dims, "--rel", 1e-3, "-o", tmp_path / "be.zb")
    zb("compress", write_raw(tmp_path, "le", arr), "-t", "f32", "-d", dims, "--rel", 1e-3, "-o", tmp_path / "le.zb")
    assert (tmp_path / "be.zb").read_bytes() == (tmp_path / "le.zb").read_bytes()


def test_special_values_bit_exact(tmp_path, fields):
    """NaN with payloads, +-Inf, -0.0 and a fill value come back bit for bit and do not widen the REL range."""
    arr = fields("cesm_trefht_440x64x128")[:110].copy()
    flat = arr.reshape(-1)
    rng = np.random.default_rng(7)
    idx = rng.choice(flat.size, 4000, replace=False)
    payload_nans = (np.uint32(0x7FC00000) | rng.integers(1, 1 << 22, 1000).astype(np.uint32)).view(np.float32)
    flat[idx[:1000]] = payload_nans
    flat[idx[1000:1500]] = np.inf
    flat[idx[1500:2000]] = -np.inf
    flat[idx[2000:2500]] = -0.0
    fill = -9999.9
    flat[idx[2500:]] = np.float32(fill)
    raw = write_raw(tmp_path, "s", arr)
    zb("compress", raw, *raw_opts(arr), "--rel", 1e-3, "--fill", np.float32(fill).item(), "-o", tmp_path / "s.zb")
    info = info_json(tmp_path / "s.zb")
    assert info["abs_bound"] == pytest.approx(1e-3 * finite_range(arr, fill=np.float32(fill)), rel=1e-12)
    zb("decompress", tmp_path / "s.zb", "-o", tmp_path / "s.out")
    rec = np.fromfile(tmp_path / "s.out", np.float32).reshape(arr.shape)
    assert_within(arr, rec, info["abs_bound"], fill=np.float32(fill))
    assert np.array_equal(uint_view(rec.reshape(-1)[idx]), uint_view(flat[idx]))


def test_thread_count_does_not_change_bytes(tmp_path, fields):
    arr = fields("gmt_sst_nan")
    raw = write_raw(tmp_path, "sst", arr)
    for t in (1, 2, 3):
        zb("compress", raw, *raw_opts(arr), "--rel", 1e-3, "--threads", t, "--backend", "cpu", "-o", tmp_path / f"{t}.zb")
    one = (tmp_path / "1.zb").read_bytes()
    assert one == (tmp_path / "2.zb").read_bytes() == (tmp_path / "3.zb").read_bytes()


def _stage_lines(stderr, call):
    """{stage: ms} of each `zbound cpu CALL N threads: stage ms ... total ms` line (ZBOUND_CPU_TIMING)."""
    out = []
    for line in stderr.splitlines():
        head, sep, rest = line.partition(" threads: ")
        if not sep or not head.startswith(f"zbound cpu {call} "):
            continue
        words = rest.split()
        out.append({words[i]: float(words[i + 1]) for i in range(0, len(words), 2)})
    return out


def test_cpu_timing_prints_the_stages_of_each_call(tmp_path, fields):
    """ZBOUND_CPU_TIMING=1: one line per call on stderr with the interp / ratio pipeline's stages (the samples of the
    tuning do not add lines or stages of their own), whose times add up to at most the call's total; unset, none."""
    arr = fields("cesm_trefht_440x64x128")
    raw = write_raw(tmp_path, "t", arr)
    stream = tmp_path / "t.zb"
    args = ["compress", raw, *raw_opts(arr), "--rel", 1e-3, "--predictor", "interp", "--encoder", "ratio",
            "--backend", "cpu", "--threads", 2, "-o", stream]
    p = zb(*args, env={"ZBOUND_CPU_TIMING": "1"})
    lines = _stage_lines(p.stderr, "compress")
    assert len(lines) == 1, p.stderr
    stages = lines[0]
    for name in ("tune", "anchors", "stride4", "stride2", "stride1", "histogram", "bitstream", "checksum", "total"):
        assert name in stages, p.stderr
    assert sum(v for k, v in stages.items() if k != "total") <= stages["total"] + 0.01 * len(stages)
    p = zb("decompress", stream, "-o", tmp_path / "back.raw", "--backend", "cpu", env={"ZBOUND_CPU_TIMING": "1"})
    lines = _stage_lines(p.stderr, "decompress")
    assert len(lines) == 1 and {"header", "decoder", "mask", "anchors", "stride1", "total"} <= set(lines[0]), p.stderr
    p = zb(*args, env={"ZBOUND_CPU_TIMING": "0"})
    assert "zbound cpu" not in p.stderr


def test_decompress_threads_option_is_the_calls(tmp_path, fields):
    """`zbound decompress --threads N` decodes on N threads whatever ZBOUND_THREADS says (the stage line names the
    count), and gives the same values as without it."""
    arr = fields("cesm_trefht_440x64x128")
    raw = write_raw(tmp_path, "t", arr)
    stream = tmp_path / "t.zb"
    zb("compress", raw, *raw_opts(arr), "--rel", 1e-3, "--backend", "cpu", "-o", stream)
    outs = []
    for extra, expect in (([], "1 threads"), (["--threads", 3], "3 threads")):
        out = tmp_path / f"back{len(outs)}.raw"
        p = zb("decompress", stream, "-o", out, "--backend", "cpu", *extra,
               env={"ZBOUND_CPU_TIMING": "1", "ZBOUND_THREADS": "1"})
        heads = [line.partition(":")[0] for line in p.stderr.splitlines() if line.startswith("zbound cpu decompress")]
        assert heads == [f"zbound cpu decompress {expect}"], p.stderr
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]


# ---------------------------------------------------------------- bench

REQUIRED_BENCH_KEYS = {"ratio", "psnr", "max_abs_error", "abs_bound", "compress_gbps", "decompress_gbps",
                       "compress_kernel_gbps", "decompress_kernel_gbps", "backend", "encoder", "predictor",
                       "bytes_in", "bytes_out", "bitrate", "nrmse", "threads", "violations"}


def test_bench_json_on_real_field(tmp_path, fields):
    arr = fields("cesm_trefht_440x64x128")
    raw = write_raw(tmp_path, "t", arr)
    rels = [1e-2, 1e-3, 1e-4]
    p = zb("bench", raw, *raw_opts(arr), "--rel", ",".join(map(str, rels)), "--repeat", 3, "--json",
           "--encoder", "fast", "--threads", 1)
    lines = [json.loads(l) for l in p.stdout.strip().splitlines()]
    assert [l["bound"] for l in lines] == rels
    for rel, r in zip(rels, lines):
        assert REQUIRED_BENCH_KEYS <= r.keys()
        assert r["violations"] == 0 and r["special_mismatches"] == 0 and r["bound_ok"] is True
        assert r["deterministic"] is True
        assert r["bytes_in"] == arr.nbytes and r["checked_values"] == arr.size
        assert r["ratio"] == pytest.approx(r["bytes_in"] / r["bytes_out"])
        assert r["bitrate"] == pytest.approx(8 * r["bytes_out"] / arr.size)
        assert 0 < r["max_abs_error"] <= r["abs_bound"]
        assert r["abs_bound"] == pytest.approx(rel * finite_range(arr), rel=1e-12)
        assert r["threads"] == 1 and r["encoder"] == "fast" and r["backend"] in ("cpu", "gpu")
        for k in ("compress_gbps", "decompress_gbps", "compress_kernel_gbps", "decompress_kernel_gbps"):
            assert r[k] > 0
        # the reported quality agrees with an independent computation from a stream written by `compress`
        zfile = tmp_path / f"{rel}.zb"
        zb("compress", raw, *raw_opts(arr), "--rel", rel, "--encoder", "fast", "-o", zfile)
        assert os.path.getsize(zfile) == r["bytes_out"]
        zb("decompress", zfile, "-o", tmp_path / "o.raw")
        rec = np.fromfile(tmp_path / "o.raw", np.float32)
        d = np.abs(arr.reshape(-1).astype(np.float64) - rec)
        assert r["max_abs_error"] == pytest.approx(float(d.max()), rel=1e-12)
        mse = float(np.mean(d * d))
        rng = finite_range(arr)
        assert r["psnr"] == pytest.approx(20 * np.log10(rng) - 10 * np.log10(mse), abs=1e-6)
        assert r["nrmse"] == pytest.approx(np.sqrt(mse) / rng, rel=1e-6)


def test_bench_reports_the_ratio_metadata_overhead(tmp_path, fields):
    # f = decode metadata / payload of the ratio encoder (issue 3). The metadata is one u64 offset per partition of
    # 32 sub-blocks of 4096 symbols plus one u16 length per other sub-block (docs/FORMAT.md section 9); the payload
    # is whatever the stream's remaining encoder segments hold, so it is checked against the stream size.
    arr = fields("cesm_trefht_440x64x128")
    raw = write_raw(tmp_path, "t", arr)
    p = zb("bench", raw, *raw_opts(arr), "--rel", "1e-3", "--repeat", 1, "--warmup", 0, "--json",
           "--predictor", "lorenzo", "--encoder", "ratio")
    r = json.loads(p.stdout)
    blocks = -(-arr.size // 4096)
    parts = -(-blocks // 32)
    assert r["encoder"] == "ratio"
    assert r["ratio_metadata_bytes"] == 8 * parts + 2 * (blocks - parts)
    assert 0 < r["ratio_payload_bytes"] < r["bytes_out"]
    assert r["overhead_f"] == pytest.approx(r["ratio_metadata_bytes"] / r["ratio_payload_bytes"])
    assert 0 < r["overhead_f"] < 0.01
    table = zb("bench", raw, *raw_opts(arr), "--rel", "1e-3", "--repeat", 1, "--warmup", 0,
               "--predictor", "lorenzo", "--encoder", "ratio").stdout
    assert "f %" in table and f"{100 * r['overhead_f']:.3f}" in table
    fast = json.loads(zb("bench", raw, *raw_opts(arr), "--rel", "1e-3", "--repeat", 1, "--warmup", 0, "--json",
                         "--encoder", "fast").stdout)
    assert fast["overhead_f"] == 0 and fast["ratio_metadata_bytes"] == 0 and fast["ratio_payload_bytes"] == 0


def test_bench_table_counts_specials(tmp_path, fields):
    arr = fields("gmt_sst_nan")
    p = zb("bench", write_raw(tmp_path, "sst", arr), *raw_opts(arr), "--rel", "1e-2,1e-4", "--repeat", 2)
    assert "violations: 0 " in p.stdout
    nan_count = int(np.isnan(arr).sum())
    rows = [l for l in p.stdout.splitlines() if l.startswith("rel ")]
    assert len(rows) == 2 and all(f" {nan_count} " in r for r in rows)


def test_bench_size_mb_tiles_input(tmp_path, fields):
    arr = fields("radar_rainsum_f64")
    p = zb("bench", write_raw(tmp_path, "r", arr), *raw_opts(arr), "--abs", 0.5, "--size-mb", 10, "--repeat", 1,
           "--warmup", 0, "--json")
    r = json.loads(p.stdout)
    k = -(-10_000_000 // arr.nbytes)  # ceil
    assert r["dims"] == f"{arr.shape[0] * k}x{arr.shape[1]}" and r["bytes_in"] == k * arr.nbytes
    assert r["bound_ok"] is True


def test_bench_sizes_crops_and_tiles(tmp_path, fields):
    """--sizes: one host row per size (the array cropped or tiled along its slowest dim to the fewest slabs that hold
    the size), and one device row per size where a GPU is usable, its stream identical to the host run's."""
    arr = fields("radar_rainsum_f64")
    slab = arr.nbytes // arr.shape[0]
    sizes = [0.3, arr.nbytes / 1e6, 3 * arr.nbytes / 1e6 + 0.01]
    p = zb("bench", write_raw(tmp_path, "r", arr), *raw_opts(arr), "--abs", 0.5, "--sizes",
           ",".join(repr(v) for v in sizes), "--repeat", 1, "--warmup", 0, "--json")
    rows = [json.loads(line) for line in p.stdout.splitlines()]
    host = [r for r in rows if r["residency"] == "host"]
    device = [r for r in rows if r["residency"] == "device"]
    assert [r["bytes_in"] for r in host] == [-(-int(round(mb * 1e6)) // slab) * slab for mb in sizes]
    assert [int(r["dims"].split("x")[0]) for r in host] == [r["bytes_in"] // slab for r in host]
    assert all(r["bound_ok"] and r["ratio"] > 1 for r in host)
    if "gpu available" in zb("--version").stdout:
        assert len(device) == len(sizes) and all(r["bound_ok"] for r in device), rows
        assert all(r["check"] == "bound held, same bytes as host" for r in device)
    else:
        assert not device and "no device-resident runs" in p.stderr


def test_bench_thread_sweep(tmp_path, fields):
    """--thread-sweep: one row per thread count and bound, in the order given, each count's values within the bound
    and its stream the first count's (exit 0 with deterministic true); the first count's gain over itself is 1 in
    every round, the others' medians lie within their quartiles; the options it excludes are refused."""
    arr = fields("cesm_trefht_440x64x128")
    raw = write_raw(tmp_path, "t", arr)
    p = zb("bench", raw, *raw_opts(arr), "--rel", "1e-3,1e-2", "--predictor", "interp", "--encoder", "ratio",
           "--backend", "cpu", "--thread-sweep", "2,1,3", "--repeat", 3, "--warmup", 0, "--json")
    rows = [json.loads(line) for line in p.stdout.splitlines()]
    assert [(r["bound"], r["threads"]) for r in rows] == [(b, t) for b in (1e-3, 1e-2) for t in (2, 1, 3)]
    for r in rows:
        assert r["bound_ok"] and r["violations"] == 0 and r["max_err_over_eb"] <= 1.0 and r["deterministic"], r
        assert r["pipeline"] == "interp/ratio" and r["compress_gbps"] > 0 and r["decompress_gbps"] > 0, r
        for k in ("compress", "decompress"):
            assert 0 < r[f"{k}_gain_q1"] <= r[f"{k}_gain"] <= r[f"{k}_gain_q3"], r
    for r in rows[::3]:
        assert r["compress_gain"] == r["compress_gain_q1"] == r["compress_gain_q3"] == 1.0, r
        assert r["decompress_gain"] == 1.0, r
    assert len({r["ratio"] for r in rows[:3]}) == 1 and len({r["ratio"] for r in rows[3:]}) == 1
    table = zb("bench", raw, *raw_opts(arr), "--rel", 1e-3, "--backend", "cpu", "--thread-sweep", "1,2",
               "--repeat", 1, "--warmup", 0).stdout
    assert "thread counts in turn" in table and len([l for l in table.splitlines() if l.split()[:1] in (["1"], ["2"])]) == 2
    for bad in (["--thread-sweep", "1,2", "--threads", 2], ["--thread-sweep", "1,2", "--sizes", 1],
                ["--thread-sweep", "0,2"], ["--thread-sweep", "1,x"]):
        q = zb("bench", raw, *raw_opts(arr), "--rel", 1e-3, "--backend", "cpu", *bad, expect=2)
        assert "thread" in q.stderr, q.stderr


def test_bench_gpu_backend_without_gpu_fails_cleanly(tmp_path, fields):
    if "gpu available" in zb("--version").stdout:
        pytest.skip("a GPU is usable here: --backend gpu is expected to work")
    arr = fields("gmt_geoid")
    p = zb("bench", write_raw(tmp_path, "g", arr), *raw_opts(arr), "--rel", 1e-3, "--backend", "gpu", expect=1)
    assert "error:" in p.stderr and "GPU" in p.stderr


# ---------------------------------------------------------------- cdvalues

def _words(*args):
    return [int(w) for w in zb("cdvalues", *args, "--format", "words").stdout.strip().split(",")]


@pytest.mark.parametrize("mode,bound", [("abs", 1e-3), ("abs", 1 / 3), ("rel", 1e-4), ("abs", 0.0), ("rel", 12.5)])
def test_cdvalues_words_carry_the_exact_bound(mode, bound):
    w = _words(f"--{mode}", repr(bound))
    assert len(w) == 6 and w[0] == 1 and w[1] == {"abs": 0, "rel": 1}[mode]
    assert all(0 <= x < 2**32 for x in w)
    assert struct.unpack(">d", struct.pack(">II", w[2], w[3]))[0] == bound
    assert w[4:] == [0, 0]
    assert _words(f"--{mode}", repr(bound), "--predictor", "lorenzo", "--encoder", "fast")[4:] == [1, 1]


def test_cdvalues_strings_use_the_same_words():
    words = ",".join(map(str, _words("--rel", "1e-3")))
    h5repack = zb("cdvalues", "--rel", "1e-3", "--format", "h5repack").stdout.strip()
    nccopy = zb("cdvalues", "--rel", "1e-3", "--format", "nccopy").stdout.strip()
    nccopy_var = zb("cdvalues", "--rel", "1e-3", "--format", "nccopy", "--var", "TREFHT").stdout.strip()
    assert h5repack == f"UD=33000,0,{len(words.split(','))},{words}"
    assert nccopy == f"*,33000,{words}" and nccopy_var == f"TREFHT,33000,{words}"
    everything = zb("cdvalues", "--rel", "1e-3").stdout
    assert f"h5repack -f {h5repack} " in everything and f"nccopy -F '{nccopy}' " in everything
    assert f"compression_opts=({words})" in everything


def _need_plugin_and(tool):
    if not (PLUGIN_DIR / "libh5z_zbound.so").is_file():
        pytest.skip(f"plugin not built at {PLUGIN_DIR}")
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} not installed (apt-get install hdf5-tools netcdf-bin)")


def test_h5repack_accepts_cdvalues_string(tmp_path, fields):
    _need_plugin_and("h5repack")
    ud = zb("cdvalues", "--abs", "0.05", "--format", "h5repack").stdout.strip()
    out = tmp_path / "radar_zb.h5"
    env = dict(os.environ, HDF5_PLUGIN_PATH=str(PLUGIN_DIR))
    p = subprocess.run(["h5repack", "-f", f"/data:{ud}", os.path.join(DATA, "radar_rainsum_f64.h5"), str(out)],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    dump = subprocess.run(["h5dump", "-pH", "-d", "/data", str(out)], capture_output=True, text=True, env=env).stdout
    assert "FILTER_ID 33000" in dump
    # read back in a fresh interpreter (HDF5 reads HDF5_PLUGIN_PATH once, when it starts)
    code = "import h5py,numpy as np,sys; np.save(sys.argv[2], h5py.File(sys.argv[1],'r')['data'][...])"
    subprocess.run([sys.executable, "-c", code, str(out), str(tmp_path / "r.npy")], check=True, env=env)
    assert_within(fields("radar_rainsum_f64"), np.load(tmp_path / "r.npy"), 0.05)


def test_nccopy_accepts_cdvalues_string(tmp_path):
    _need_plugin_and("nccopy")
    netCDF4 = pytest.importorskip("netCDF4")
    spec = zb("cdvalues", "--abs", "0.01", "--format", "nccopy", "--var", "TREFHT").stdout.strip()
    out = tmp_path / "t.nc"
    src = os.path.join(DATA, "cesm_trefht_b06_57.nc")
    env = dict(os.environ, HDF5_PLUGIN_PATH=str(PLUGIN_DIR))
    p = subprocess.run(["nccopy", "-F", spec, src, str(out)], capture_output=True, text=True, env=env)
    assert p.returncode == 0, f"nccopy exit {p.returncode}: {p.stderr}"
    dump = subprocess.run(["ncdump", "-hs", str(out)], capture_output=True, text=True, env=env).stdout
    assert 'TREFHT:_Filter = "33000,' in dump
    code = ("import netCDF4,numpy as np,sys\n"
            "for f,n in ((sys.argv[1],sys.argv[3]),(sys.argv[2],sys.argv[4])):\n"
            "  d=netCDF4.Dataset(f); v=d['TREFHT']; v.set_auto_mask(False); np.save(n, v[:]); d.close()\n")
    subprocess.run([sys.executable, "-c", code, src, str(out), str(tmp_path / "a.npy"), str(tmp_path / "b.npy")],
                   check=True, env=env)
    assert_within(np.load(tmp_path / "a.npy"), np.load(tmp_path / "b.npy"), 0.01)


# ---------------------------------------------------------------- errors

@pytest.fixture()
def small_raw(tmp_path, fields):
    arr = fields("gmt_geoid")
    return write_raw(tmp_path, "g", arr), arr


@pytest.mark.parametrize("args,code,message", [
    ([], 2, "usage: zbound"),
    (["frob"], 2, "unknown command 'frob'"),
    (["compress", "{raw}", "--abs", "1"], 2, "missing -t"),
    (["compress", "{raw}", "-t", "f16", "--abs", "1"], 2, "'f16' is not a supported type"),
    (["compress", "{raw}", "-t", "f32", "-d", "451x600", "--abs", "1"], 2, "needs 1082400"),
    (["compress", "{raw}", "-t", "f64", "--abs", "1"], 2, "not a multiple of 8"),
    (["compress", "{raw}", "-t", "f32"], 2, "give an error bound"),
    (["compress", "{raw}", "-t", "f32", "--abs", "1", "--rel", "1"], 2, "only one of --abs, --rel and --pw-rel"),
    (["compress", "{raw}", "-t", "f32", "--abs", "inf"], 2, "not a finite number"),
    (["compress", "{raw}", "-t", "f32", "--rel", "-0.1"], 2, "must be >= 0"),
    (["compress", "{raw}", "-t", "f32", "--abs", "1", "--encoder", "zip"], 2, "'zip' is not one of"),
    (["compress", "{raw}", "-t", "f32", "--abs", "1", "--threads", "0"], 2, "--threads: 0 is out of range"),
    (["compress", "{raw}", "-t", "f32", "--abs", "1", "--fill", "0.1"], 2, "not exactly representable as f32"),
    (["compress", "{raw}", "-t", "f32", "--abs", "1", "--offset", "99999999"], 2, "--offset 99999999 is not inside"),
    (["compress", "{raw}", "-t", "f32", "--abs", "1", "-o", "{raw}"], 2, "would overwrite the input"),
    (["compress", "{raw}", "{raw}", "-t", "f32", "--abs", "1"], 2, "expected one input file"),
    (["compress", "{missing}", "-t", "f32", "--abs", "1"], 1, "cannot open"),
    (["compress", "{raw}", "-t", "f32", "--abs", "1", "-o", "/nonexistent_dir/x.zb"], 1, "cannot create"),
    (["decompress", "{raw}"], 2, "missing -o"),
    (["decompress", "{raw}", "-o", "{tmp}/x"], 1, "not a zbound stream|bad magic|corrupt"),
    (["info", "{raw}"], 1, "not a zbound stream|bad magic|corrupt"),
    (["info"], 2, "missing input file"),
    (["bench", "{raw}", "-t", "f32", "--rel", "1e-3", "--warmup", "-1"], 2, "--warmup: -1 is out of range"),
    (["bench", "{raw}", "-t", "f32", "--rel", "1e-3,x"], 2, "'x' is not a finite number"),
    (["bench", "{raw}", "-t", "f32", "--rel", "1e-3", "--size-mb", "0"], 2, "--size-mb must be > 0"),
    (["bench", "{raw}", "-t", "f32", "--rel", "1e-3", "--sizes", "4,0"], 2, "every size must be > 0"),
    (["bench", "{raw}", "-t", "f32", "--rel", "1e-3", "--sizes", "4", "--size-mb", "4"], 2, "exclude each other"),
    (["bench", "{raw}", "-t", "f32", "--rel"], 2, "option --rel needs a value"),
    (["bench", "{raw}", "-t", "f32", "--rel", "1e-3", "--json=yes"], 2, "option --json takes no value"),
    (["cdvalues", "--abs", "1", "extra"], 2, "unexpected argument 'extra'"),
])
def test_bad_input_exits_with_message(tmp_path, small_raw, args, code, message):
    import re
    raw, _ = small_raw
    subst = {"raw": str(raw), "missing": str(tmp_path / "missing.raw"), "tmp": str(tmp_path)}
    p = zb(*[a.format(**subst) for a in args], expect=code)
    assert re.search(message, p.stderr), p.stderr
    if args:
        assert p.stderr.startswith("zbound") and "error" in p.stderr


def test_corrupt_streams_give_errors_not_crashes(tmp_path, small_raw):
    raw, arr = small_raw
    zfile = tmp_path / "g.zb"
    zb("compress", raw, *raw_opts(arr), "--rel", 1e-3, "-o", zfile)
    good = zfile.read_bytes()
    cases = {"truncated_header": good[:40], "truncated_payload": good[: len(good) // 2], "empty": b""}
    for pos in (5, 20, 70, len(good) // 2, len(good) - 1):  # header fields and payload bytes
        b = bytearray(good)
        b[pos] ^= 0x10
        cases[f"flip_{pos}"] = bytes(b)
    for name, data in cases.items():
        bad = tmp_path / f"{name}.zb"
        bad.write_bytes(data)
        p = subprocess.run([ZBOUND, "decompress", str(bad), "-o", str(tmp_path / "o.raw")], capture_output=True,
                           text=True)
        assert p.returncode == 1, f"{name}: exit {p.returncode}\n{p.stderr}"
        assert "zbound decompress: error:" in p.stderr, name


def test_help_for_every_command():
    top = zb("--help").stdout
    for cmd in ("compress", "decompress", "info", "cdvalues", "bench"):
        assert cmd in top
        out = zb(cmd, "--help").stdout
        assert out.startswith(f"usage: zbound {cmd}") and "--help" in out
