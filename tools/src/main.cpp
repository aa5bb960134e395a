// zbound: command-line front end of the zbound library (compress, decompress, info, cdvalues, bench).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>
#include "cli_args.h"
#include "commands.h"
#include "zbound.h"

namespace {

struct Command {
    const char *name;
    int (*run)(const zbtool::Args &);
    const char *summary;
};

const Command kCommands[] = {
    {"compress", zbtool::cmd_compress, "compress a raw f32/f64 file into a zbound stream"},
    {"decompress", zbtool::cmd_decompress, "decompress a zbound stream into a raw file"},
    {"info", zbtool::cmd_info, "print the header fields of a zbound stream"},
    {"cdvalues", zbtool::cmd_cdvalues, "print HDF5 cd_values and the h5repack / nccopy filter strings"},
    {"bench", zbtool::cmd_bench, "compress + decompress a raw file, verify the bound, report ratio and speed"},
};

void print_usage(FILE *out) {
    std::fprintf(out,
                 "usage: zbound <command> [options]   (zbound <command> --help for its options)\n\n"
                 "zbound %d.%d.%d, stream format %d: error-bounded lossy compression of float arrays.\n\n"
                 "commands:\n",
                 ZBOUND_VERSION_MAJOR, ZBOUND_VERSION_MINOR, ZBOUND_VERSION_PATCH, ZBOUND_FORMAT_VERSION);
    for (const auto &c : kCommands) std::fprintf(out, "  %-12s %s\n", c.name, c.summary);
    std::fprintf(out, "  %-12s %s\n  %-12s %s\n", "h5", "whole HDF5/netCDF-4 files: h5 repack, h5 verify (Python package)",
                 "report", "rate-distortion and error-map PNGs (Python package)");
    std::fprintf(out,
                 "\nraw files are little-endian arrays; -d gives dims slowest first (numpy/HDF5 order), "
                 "e.g. -d 110x64x128.\n"
                 "environment: ZBOUND_BACKEND=auto|cpu|gpu, ZBOUND_DEVICE=N, ZBOUND_THREADS=N, ZBOUND_LOG=1\n"
                 "exit codes: 0 ok, 1 failure (I/O, codec), 2 bad usage, 3 bound violated (bench)\n");
}

// `zbound h5 ...` and `zbound report ...` live in the Python package (python/zbound): run them there, with
// the interpreter ZBOUND_PYTHON (default python3 on PATH). A clear message when Python or the package is missing.
int forward_to_python(int argc, char **argv) {
    const char *env = std::getenv("ZBOUND_PYTHON");
    std::string python = (env && *env) ? env : "python3";
    static const char kBoot[] =
        "import sys\n"
        "try:\n"
        "    from zbound.__main__ import main\n"
        "except ImportError as e:\n"
        "    sys.stderr.write('zbound %s: error: this command is in the zbound Python package, which %s cannot "
        "import (%s); install it with: pip install . (from the zbound repository)\\n' % (sys.argv[1], "
        "sys.executable, e))\n"
        "    sys.exit(1)\n"
        "sys.exit(main(sys.argv[1:]))\n";
    std::vector<char *> args = {const_cast<char *>(python.c_str()), const_cast<char *>("-c"),
                                const_cast<char *>(kBoot)};
    for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
    args.push_back(nullptr);
    std::fflush(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr,
                 "zbound %s: error: cannot run %s (%s): this command needs Python 3 with the zbound package "
                 "(pip install . from the zbound repository); ZBOUND_PYTHON names the interpreter\n",
                 argv[1], python.c_str(), std::strerror(errno));
    return zbtool::kExitFailure;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 2) {
        print_usage(stderr);
        return zbtool::kExitUsage;
    }
    const std::string name = argv[1];
    if (name == "-h" || name == "--help" || name == "help") {
        print_usage(stdout);
        return zbtool::kExitOk;
    }
    if (name == "--version" || name == "version") {
        std::printf("zbound %d.%d.%d (stream format %d, gpu %s)\n", ZBOUND_VERSION_MAJOR, ZBOUND_VERSION_MINOR,
                    ZBOUND_VERSION_PATCH, ZBOUND_FORMAT_VERSION, zb_gpu_available() ? "available" : "not available");
        return zbtool::kExitOk;
    }
    if (name == "h5" || name == "report") return forward_to_python(argc, argv);
    for (const auto &c : kCommands) {
        if (name != c.name) continue;
        try {
            return c.run(zbtool::Args(argv + 2, argv + argc));
        } catch (const zbtool::CliError &e) {
            std::fprintf(stderr, "zbound %s: error: %s\n", c.name, e.what());
            return e.code;
        } catch (const std::bad_alloc &) {
            std::fprintf(stderr, "zbound %s: error: out of memory\n", c.name);
            return zbtool::kExitFailure;
        } catch (const std::exception &e) {
            std::fprintf(stderr, "zbound %s: error: %s\n", c.name, e.what());
            return zbtool::kExitFailure;
        }
    }
    std::fprintf(stderr, "zbound: error: unknown command '%s'\n\n", name.c_str());
    print_usage(stderr);
    return zbtool::kExitUsage;
}
