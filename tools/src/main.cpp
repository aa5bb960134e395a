// zbound: command-line front end of the zbound library (compress, decompress, info, cdvalues, bench).
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
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
    std::fprintf(out,
                 "\nraw files are little-endian arrays; -d gives dims slowest first (numpy/HDF5 order), "
                 "e.g. -d 110x64x128.\n"
                 "environment: ZBOUND_BACKEND=auto|cpu|gpu, ZBOUND_DEVICE=N, ZBOUND_THREADS=N, ZBOUND_LOG=1\n"
                 "exit codes: 0 ok, 1 failure (I/O, codec), 2 bad usage, 3 bound violated (bench)\n");
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
