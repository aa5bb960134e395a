"""Throughput of h5py writes and reads through the zbound filter against the same writes and reads uncompressed
(issue 4, criterion 4). The field is tiled to --size-gb along its slowest dim and written in chunks of --chunk-mb to
a file in --dir (default /dev/shm), then read back twice: into a fresh array (whose pages the kernel maps as the read
first touches them) and again into the same array, as an application reading step after step into one buffer. Each
run is a child process with ZBOUND_STATS=1, so the filter's own summary (chunks, bytes, seconds inside the callback,
GB/s per direction and backend) is printed with the wall times.

    python3 bench/h5py_throughput.py FIELD.raw --dims 110x64x128 --plugin-dir build/plugin --rel 1e-3 \\
        [--size-gb 2] [--chunk-mb 16] [--predictor lorenzo --encoder fast] [--sz3]

--sz3 adds the same write and read through hdf5plugin's SZ3 filter at the same absolute bound (one run: it is slow).
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import time

CHILD = r"""
import json, os, sys, time
import numpy as np, h5py
spec = json.loads(sys.argv[1])
base = np.fromfile(spec["raw"], dtype=spec["dtype"]).reshape(spec["dims"])
reps = -(-spec["bytes"] // base.nbytes)
a = np.concatenate([base] * reps)[: max(1, spec["bytes"] // (base.nbytes // base.shape[0]))]
rows = max(1, spec["chunk_bytes"] // (a.nbytes // a.shape[0]))
if spec["filter"] == "sz3":
    import hdf5plugin
    kw = dict(hdf5plugin.SZ3(absolute=spec["eb"]))
else:
    kw = {"compression": spec["filter"], "compression_opts": tuple(spec["opts"])} if spec["filter"] else {}
path = spec["path"]
t0 = time.perf_counter()
with h5py.File(path, "w") as f:
    f.create_dataset("x", data=a, chunks=(rows,) + a.shape[1:], **kw)
tw = time.perf_counter() - t0
size = os.path.getsize(path)
eb = spec["eb"]
def read(back):
    t0 = time.perf_counter()
    with h5py.File(path, "r", rdcc_nbytes=0) as f:
        f["x"].read_direct(back)
    t = time.perf_counter() - t0
    return t, float(np.max(np.abs(back.astype(np.float64) - a))) if eb is not None else 0.0
# A fresh array, whose pages the kernel maps as the read first touches them; then the same array again, zeroed first
# (an application reading step after step into one buffer).
back = np.empty_like(a)
tr, err = read(back)
back.fill(0)
trr, err2 = read(back)
os.remove(path)
print(json.dumps({"bytes": a.nbytes, "file_bytes": size, "write_s": tw, "read_s": tr, "reread_s": trr,
                  "max_err": max(err, err2)}))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("raw")
    ap.add_argument("--dims", required=True)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--rel", type=float, default=1e-3)
    ap.add_argument("--size-gb", type=float, default=2.0)
    ap.add_argument("--chunk-mb", type=float, default=16.0)
    ap.add_argument("--dir", default="/dev/shm")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--plugin-dir", required=True, help="folder of libh5z_zbound.so (HDF5_PLUGIN_PATH)")
    ap.add_argument("--predictor", default="lorenzo", choices=["auto", "lorenzo", "interp"])
    ap.add_argument("--encoder", default="fast", choices=["auto", "fast", "ratio"])
    ap.add_argument("--sz3", action="store_true", help="also hdf5plugin's SZ3 at the same absolute bound (one run)")
    args = ap.parse_args()
    import numpy as np

    dims = [int(v) for v in args.dims.split("x")]
    base = np.fromfile(args.raw, dtype=args.dtype)
    fin = base[np.isfinite(base)]
    eb = args.rel * float(fin.max() - fin.min())
    # The six user cd_values words (filter/zbound_filter.h): layout 1, mode abs, the bound's two words, pipeline.
    bits = struct.unpack("<Q", struct.pack("<d", eb))[0]
    opts = [1, 0, bits >> 32, bits & 0xFFFFFFFF, {"auto": 0, "lorenzo": 1, "interp": 2}[args.predictor],
            {"auto": 0, "fast": 1, "ratio": 2}[args.encoder]]
    spec = {"raw": args.raw, "dtype": args.dtype, "dims": dims, "bytes": int(args.size_gb * 1e9),
            "chunk_bytes": int(args.chunk_mb * 1e6), "path": os.path.join(args.dir, f"zb_h5py_{os.getpid()}.h5")}
    env = dict(os.environ, ZBOUND_STATS="1", HDF5_PLUGIN_PATH=os.path.abspath(args.plugin_dir))
    results = {}
    configs = [("uncompressed", None), ("zbound", 33000)]   # ZBOUND_H5Z_FILTER
    if args.sz3:
        configs.append(("sz3", "sz3"))
    for name, filt in configs:
        runs = []
        for _ in range(1 if filt == "sz3" else args.repeat):
            s = dict(spec, filter=filt, opts=opts, eb=eb if filt else None)
            p = subprocess.run([sys.executable, "-c", CHILD, json.dumps(s)], env=env, capture_output=True, text=True)
            if p.returncode:
                sys.exit(f"{name} run failed: {p.stderr[-2000:]}")
            r = json.loads(p.stdout.strip().splitlines()[-1])
            r["stats"] = [ln for ln in p.stderr.splitlines() if ln.startswith("zbound stats:")]
            runs.append(r)
        runs.sort(key=lambda r: r["write_s"] + r["read_s"])
        results[name] = runs[len(runs) // 2]
    for name, r in results.items():
        gb = r["bytes"] / 1e9
        print(f"{name:12s} {gb:.2f} GB in {args.chunk_mb:g} MB chunks: write {gb / r['write_s']:6.2f} GB/s, read "
              f"{gb / r['read_s']:6.2f} GB/s (into the same array again {gb / r['reread_s']:6.2f}), file {r['file_bytes'] / 1e9:.3f} GB (CR {r['bytes'] / r['file_bytes']:.2f})"
              + (f", max err / eb {r['max_err'] / eb:.4f}" if name != "uncompressed" else ""))
        for line in r["stats"]:
            print("   ", line)
    u, z = results["uncompressed"], results["zbound"]
    print(f"zbound / uncompressed speed: write {u['write_s'] / z['write_s']:.2f}x, read {u['read_s'] / z['read_s']:.2f}x"
          f" (again {u['reread_s'] / z['reread_s']:.2f}x)")
    if "sz3" in results:
        q = results["sz3"]
        print(f"zbound / sz3 speed: write {q['write_s'] / z['write_s']:.1f}x, read {q['read_s'] / z['read_s']:.1f}x"
              f" (again {q['reread_s'] / z['reread_s']:.1f}x)")
    if results["zbound"]["max_err"] > eb:
        sys.exit("BOUND VIOLATED")


if __name__ == "__main__":
    main()
