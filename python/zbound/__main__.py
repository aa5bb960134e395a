"""The `zbound` command of the Python package (also `python -m zbound`).

    zbound h5 repack IN OUT (--abs X | --rel X) [--include PATTERN]... [--exclude PATTERN]...
    zbound h5 verify ORIG NEW
    zbound report FILE [--dataset NAME] [-o DIR]

Every other command (compress, decompress, info, cdvalues, bench, --version) runs the C++ tool bundled in the
package; that tool in turn hands `h5` and `report` to this module. Exit codes as the C++ tool: 0 ok, 1 failure
(I/O, codec; the message names the dataset), 2 bad usage, 3 bound violated or content changed (verify).
"""
import argparse
import json
import math
import os
import sys

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_VIOLATION = 0, 1, 2, 3
PY_COMMANDS = ("h5", "report")
BUNDLED_CLI = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "zbound")


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(EXIT_USAGE)


def _bound(p):
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--abs", type=float, help="absolute bound: |x - x'| <= X")
    g.add_argument("--rel", type=float, help="bound relative to the finite value range of each chunk")
    g.add_argument("--pw-rel", type=float, help="point-wise relative bound: |x - x'| <= X * |x| (zeros and signs exact)")


def _progress_opts(p):
    g = p.add_mutually_exclusive_group()
    g.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="draw the progress bar even when stderr is not a terminal")
    g.add_argument("--no-progress", dest="progress", action="store_false",
                   help="never draw it (default: only on a terminal)")


def _parser():
    top = _Parser(prog="zbound", description="zbound: whole-file tools and reports (Python package). Other "
                  "commands (compress, decompress, info, cdvalues, bench) run the bundled C++ tool.")
    sub = top.add_subparsers(dest="cmd", parser_class=_Parser)
    h5 = sub.add_parser("h5", help="whole HDF5 / netCDF-4 files")
    h5sub = h5.add_subparsers(dest="h5cmd", parser_class=_Parser)

    rp = h5sub.add_parser("repack", help="recompress every float dataset with zbound, copy the rest unchanged",
                          description="Recompresses every float32/float64 dataset of IN with the zbound filter "
                          "(chunks of about --chunk-mb MiB where there are none) and copies everything else "
                          "(groups, attributes, other datasets, links, dimension scales) unchanged into OUT. Every "
                          "value written is read back and checked; a per-dataset report follows.")
    rp.add_argument("input")
    rp.add_argument("output")
    _bound(rp)
    rp.add_argument("--include", action="append", default=[], metavar="PATTERN",
                    help="only datasets whose path matches (fnmatch, e.g. '/NS/SLV/*'); repeatable")
    rp.add_argument("--exclude", action="append", default=[], metavar="PATTERN",
                    help="leave datasets whose path matches unchanged; repeatable")
    rp.add_argument("--scales", action="store_true",
                    help="recompress float dimension scales (netCDF coordinates) too (default: copied exactly)")
    rp.add_argument("--predictor", default="auto", choices=["auto", "lorenzo", "interp"])
    rp.add_argument("--encoder", default="auto", choices=["auto", "fast", "ratio"])
    rp.add_argument("--chunk-mb", type=float, default=4.0, help="chunk size for datasets without chunks (MiB)")
    rp.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    rp.add_argument("-q", "--quiet", action="store_true", help="no report on stdout")
    _progress_opts(rp)

    vp = h5sub.add_parser("verify", help="check NEW against ORIG: bounds, and everything else identical",
                          description="Checks every value of every zbound dataset of NEW against ORIG and the bound "
                          "recorded in its chunk (NaN, Inf, -0.0, fill values bit for bit), and that every other "
                          "dataset, attribute, group and link is identical. Exit 3 on any violation.")
    vp.add_argument("orig")
    vp.add_argument("new")
    vp.add_argument("--json", metavar="FILE", help="also write the result as JSON")
    vp.add_argument("-q", "--quiet", action="store_true", help="print problems only")
    _progress_opts(vp)

    rep = sub.add_parser("report", help="rate-distortion and error-map PNGs for a field",
                         description="Writes PREFIX_rd.png (PSNR vs bits per value over a sweep of bounds, zbound "
                         "beside SZ3 and ZFP from hdf5plugin) and PREFIX_errmap.png (a 2D slice: original, "
                         "reconstruction, error) plus PREFIX_rd.json.")
    rep.add_argument("input", help=".h5 / .nc (HDF5 or netCDF-4; netCDF-3 with netCDF4 installed) or .npy")
    rep.add_argument("--dataset", "-d", help="dataset / variable (default: the largest float one)")
    rep.add_argument("-o", "--out", default=".", help="output folder (default: .)")
    rep.add_argument("--prefix", help="file name prefix (default: from the input and dataset names)")
    rep.add_argument("--rel", default=",".join(f"{r:g}" for r in (1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 3e-5,
                                                                   1e-5)),
                     help="bounds of the sweep, relative to the finite value range (comma separated)")
    rep.add_argument("--peers", default="sz3,zfp", help="peers from hdf5plugin: sz3,zfp or none")
    rep.add_argument("--map-rel", type=float, default=1e-2, help="relative bound of the error map")
    return top, h5


def _fmt(v):
    return "inf" if v == math.inf else f"{v:.4g}"


def _write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1, default=str)


def _h5(args):
    from . import h5tools
    from ._lib import ZboundError
    if args.h5cmd == "repack":
        mode, bound = [(m, v) for m, v in (("abs", args.abs), ("rel", args.rel), ("pw_rel", args.pw_rel))
                       if v is not None][0]
        if not math.isfinite(bound) or bound < 0:
            sys.stderr.write(f"zbound h5 repack: error: the bound must be a finite number >= 0, got {bound}\n")
            return EXIT_USAGE
        if not os.path.isfile(args.input):
            sys.stderr.write(f"zbound h5 repack: error: {args.input}: no such file\n")
            return EXIT_FAILURE
        try:
            rep = h5tools.repack(args.input, args.output, mode, bound, include=args.include, exclude=args.exclude,
                                 predictor=args.predictor, encoder=args.encoder, chunk_mb=args.chunk_mb,
                                 scales=args.scales, progress=args.progress)
        except ZboundError as e:
            sys.stderr.write(f"zbound h5 repack: error: {e}\n")
            return EXIT_USAGE if e.status_name == "ZB_ERR_UNSUPPORTED" else EXIT_FAILURE
        except (h5tools.H5ToolError, OSError) as e:
            sys.stderr.write(f"zbound h5 repack: error: {e}\n")
            return EXIT_FAILURE
        if args.json:
            _write_json(args.json, rep)
        if not args.quiet:
            print(h5tools.format_rows(rep["datasets"], f"zbound h5 repack {args.input} -> {args.output} "
                                                       f"({mode} {bound:g})"))
            print(f"{len(rep['copied'])} other datasets copied unchanged")
        for r in rep["datasets"]:
            if r["violations"]:
                sys.stderr.write(f"zbound h5 repack: bound violated in {r['path']}: {r['first_violation']}\n")
        return EXIT_OK if rep["ok"] else EXIT_VIOLATION
    if args.h5cmd == "verify":
        for p in (args.orig, args.new):
            if not os.path.isfile(p):
                sys.stderr.write(f"zbound h5 verify: error: {p}: no such file\n")
                return EXIT_FAILURE
        try:
            res = h5tools.verify(args.orig, args.new, progress=args.progress)
        except (h5tools.H5ToolError, OSError, ZboundError) as e:
            sys.stderr.write(f"zbound h5 verify: error: {e}\n")
            return EXIT_FAILURE
        if args.json:
            _write_json(args.json, res)
        if not args.quiet:
            print(h5tools.format_rows(res["datasets"], f"zbound h5 verify {args.orig} {args.new}"))
        for r in res["datasets"]:
            if r["violations"]:
                print(f"VIOLATION {r['path']}: {r['violations']} values; first: {r['first_violation']}")
        for prob in res["problems"]:
            print(f"VIOLATION {prob}")
        if res["ok"]:
            if not args.quiet:
                print("verify: ok (every value within its bound, everything else identical)")
            return EXIT_OK
        print("verify: FAILED", file=sys.stderr)
        return EXIT_VIOLATION
    return None


def _report(args):
    from . import report
    try:
        rels = tuple(float(r) for r in args.rel.split(",") if r.strip())
    except ValueError:
        sys.stderr.write(f"zbound report: error: --rel {args.rel!r}: comma-separated numbers expected\n")
        return EXIT_USAGE
    peers = () if args.peers in ("", "none") else tuple(p.strip() for p in args.peers.split(","))
    bad = [p for p in peers if p not in report.PEERS]
    if bad:
        sys.stderr.write(f"zbound report: error: unknown peer {bad[0]!r} (sz3, zfp, none)\n")
        return EXIT_USAGE
    try:
        out = report.report(args.input, args.dataset, args.out, args.prefix, rels, peers, args.map_rel,
                            log=lambda m: sys.stderr.write(m + "\n"))
    except (ValueError, OSError, KeyError) as e:
        sys.stderr.write(f"zbound report: error: {e}\n")
        return EXIT_FAILURE
    print(f"rate-distortion: {out['rd_png']}")
    print(f"error map:       {out['errmap_png']}")
    print(f"numbers:         {out['json']}")
    for name, pts in out["rd"]["curves"].items():
        row = ", ".join("fail" if "error" in p else f"{p['bits']:.2f} b/v {_fmt(p['psnr'])} dB" for p in pts)
        print(f"  {name}: {row}")
    return EXIT_OK


def _run_bundled(argv):
    if not os.access(BUNDLED_CLI, os.X_OK):
        sys.stderr.write(f"zbound: the C++ tool is missing from the package ({BUNDLED_CLI}); "
                         f"reinstall with pip install . from the zbound repository\n")
        return EXIT_FAILURE
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(BUNDLED_CLI, [BUNDLED_CLI, *argv])


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] not in PY_COMMANDS and argv[0] not in ("-h", "--help", "help"):
        return _run_bundled(argv)
    top, h5 = _parser()
    if not argv or argv[0] in ("-h", "--help", "help"):
        top.print_help()
        return EXIT_OK if argv else EXIT_USAGE
    args = top.parse_args(argv)
    if args.cmd == "h5":
        if not args.h5cmd:
            h5.print_help(sys.stderr)
            return EXIT_USAGE
        return _h5(args)
    if args.cmd == "report":
        return _report(args)
    top.print_help(sys.stderr)
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
