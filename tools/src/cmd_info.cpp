// zbound info: the header fields of a stream (zb_stream_info_get), as text or one JSON line.
#include <cstdio>
#include "cli_args.h"
#include "codec_opts.h"
#include "commands.h"
#include "json_line.h"
#include "raw_io.h"

namespace zbtool {

int cmd_info(const Args &argv) {
    const std::vector<OptionSpec> specs = {{nullptr, "--json", nullptr, "print one JSON object per file"}};
    ParsedArgs a = parse_args(argv, specs);
    if (a.help) {
        std::fputs(format_help("zbound info FILE.zb [FILE.zb ...] [--json]",
                               "Prints the header fields of zbound streams (the header checksum is verified; "
                               "the payload is not decoded).",
                               specs).c_str(), stdout);
        return kExitOk;
    }
    if (a.positional.empty()) throw CliError("missing input file");
    const bool json = a.has("--json");
    for (const std::string &path : a.positional) {
        std::vector<uint8_t> bytes = read_file(path);
        zb_stream_info i{};
        check_status(zb_stream_info_get(bytes.data(), bytes.size(), &i), "reading the header of '" + path + "'");
        std::vector<size_t> dims(i.dims, i.dims + i.rank);
        const double ratio = i.stream_bytes ? (double)i.decompressed_bytes / (double)i.stream_bytes : 0.0;
        const char *pred = i.raw ? "none (raw)" : predictor_name(i.predictor);
        const char *enc = i.raw ? "none (raw)" : encoder_name(i.encoder);
        if (json) {
            JsonLine j;
            j.add("file", path).add("format_version", i.format_version).add("dtype", dtype_name(i.dtype))
                .add("rank", i.rank).add("dims", dims_to_string(dims)).add("n", (uint64_t)i.n)
                .add("decompressed_bytes", (uint64_t)i.decompressed_bytes).add("stream_bytes", (uint64_t)i.stream_bytes)
                .add("ratio", ratio).add("mode", mode_name(i.mode)).add("bound", i.bound).add("abs_bound", i.abs_bound)
                .add("predictor", i.raw ? "none" : pred).add("encoder", i.raw ? "none" : enc).add("raw", i.raw != 0)
                .add("escapes", (uint64_t)i.escapes).add("exceptions", (uint64_t)i.exceptions)
                .add("exception_runs", (uint64_t)i.exception_runs)
                .add("nonzero_code_blocks", (uint64_t)i.nonzero_code_blocks)
                .add("ratio_metadata_bytes", (uint64_t)i.ratio_metadata_bytes)
                .add("ratio_payload_bytes", (uint64_t)i.ratio_payload_bytes).add("file_bytes", (uint64_t)bytes.size());
            std::printf("%s\n", j.str().c_str());
        } else {
            std::printf("%s:\n", path.c_str());
            std::printf("  format version       %d\n", i.format_version);
            std::printf("  dtype                %s\n", dtype_name(i.dtype));
            std::printf("  rank, dims           %d, %s (after dropping unit dims and folding)\n", i.rank,
                        dims_to_string(dims).c_str());
            std::printf("  values               %llu\n", (unsigned long long)i.n);
            std::printf("  decompressed bytes   %zu\n", i.decompressed_bytes);
            std::printf("  stream bytes         %zu (ratio %.3f)\n", i.stream_bytes, ratio);
            std::printf("  bound                %s %.9g\n", mode_name(i.mode), i.bound);
            std::printf("  absolute bound       %.9g%s\n", i.abs_bound, i.abs_bound == 0 ? " (lossless)" : "");
            std::printf("  predictor            %s\n", pred);
            std::printf("  encoder              %s\n", enc);
            std::printf("  raw passthrough      %s\n", i.raw ? "yes" : "no");
            std::printf("  escapes              %llu\n", (unsigned long long)i.escapes);
            std::printf("  exceptions           %llu in %llu runs\n", (unsigned long long)i.exceptions,
                        (unsigned long long)i.exception_runs);
            std::printf("  non-zero code blocks %llu\n", (unsigned long long)i.nonzero_code_blocks);
            if (i.ratio_payload_bytes)
                std::printf("  ratio metadata       %llu bytes for %llu payload bytes (f = %.3f%%)\n",
                            (unsigned long long)i.ratio_metadata_bytes, (unsigned long long)i.ratio_payload_bytes,
                            100.0 * (double)i.ratio_metadata_bytes / (double)i.ratio_payload_bytes);
        }
        if (bytes.size() != i.stream_bytes)
            std::fprintf(stderr, "zbound info: warning: '%s' has %zu bytes but its stream has %zu\n", path.c_str(),
                         bytes.size(), i.stream_bytes);
    }
    return kExitOk;
}

}  // namespace zbtool
