// zbound compress / zbound decompress: raw file <-> zbound stream file.
#include <chrono>
#include <cstdio>
#include <vector>
#include "cli_args.h"
#include "codec_opts.h"
#include "commands.h"
#include "raw_io.h"

namespace zbtool {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<OptionSpec> compress_specs() {
    std::vector<OptionSpec> s = {{"-o", "--output", "FILE", "output stream (default: INPUT.zb)"},
                                 {"-q", "--quiet", nullptr, "print nothing on success"}};
    for (auto v : {raw_input_specs(), bound_option_specs(false), pipeline_option_specs(), run_option_specs()})
        s.insert(s.end(), v.begin(), v.end());
    return s;
}

std::vector<OptionSpec> decompress_specs() {
    return {{"-o", "--output", "FILE", "output raw file (required)"},
            {nullptr, "--backend", "cpu|gpu|auto", "where to run (default auto)"},
            {nullptr, "--threads", "N", "CPU threads (default: ZBOUND_THREADS or all cores)"},
            {"-q", "--quiet", nullptr, "print nothing on success"}};
}

std::string one_input(const ParsedArgs &a) {
    if (a.positional.size() != 1)
        throw CliError(a.positional.empty() ? "missing input file" : "expected one input file, got " +
                                                                          std::to_string(a.positional.size()));
    return a.positional[0];
}

}  // namespace

int cmd_compress(const Args &argv) {
    const auto specs = compress_specs();
    ParsedArgs a = parse_args(argv, specs);
    if (a.help) {
        std::fputs(format_help("zbound compress INPUT -t f32|f64 [-d DIMS] (--abs X | --rel X | --pw-rel X) [-o OUT] [options]",
                               "Compresses a raw array (little-endian unless --endian big) into one self-describing zbound stream.",
                               specs).c_str(), stdout);
        return kExitOk;
    }
    const std::string in = one_input(a);
    const RawInput input = raw_input_from_args(a);
    const zb_dtype dtype = input.dtype;
    const BoundChoice bound = bound_from_args(a, false);
    zb_params p = zb_params_default();
    p.mode = bound.mode;
    p.bound = bound.bounds[0];
    pipeline_from_args(a, p);
    run_from_args(a, dtype, p);
    const std::string out = a.get("--output", in + ".zb");
    if (out == in) throw CliError("the output would overwrite the input '" + in + "'");

    RawArray raw = read_raw(in, dtype, input.dims, input.layout);
    std::vector<uint8_t> stream(zb_compress_bound(dtype, raw.count()));
    size_t len = 0;
    zb_run_stats st{};
    auto t0 = std::chrono::steady_clock::now();
    check_status(zb_compress(&p, dtype, raw.bytes.data(), (int)raw.dims.size(), raw.dims.data(), stream.data(),
                             stream.size(), &len, &st),
                 "compress");
    const double secs = seconds_since(t0);
    write_file(out, stream.data(), len);
    if (!a.has("--quiet")) {
        zb_stream_info info{};
        check_status(zb_stream_info_get(stream.data(), len, &info), "reading the new stream's header");
        std::printf("%s (%s %s, %zu bytes) -> %s (%zu bytes): ratio %.3f, abs bound %.6g, %s, %s on %s, %.3f s\n",
                    in.c_str(), dtype_name(dtype), dims_to_string(raw.dims).c_str(), raw.bytes.size(), out.c_str(),
                    len, (double)raw.bytes.size() / (double)len, info.abs_bound,
                    info.raw ? "stored raw" : predictor_name(info.predictor),
                    info.raw ? "-" : encoder_name(info.encoder), backend_name(st.backend_used), secs);
    }
    return kExitOk;
}

int cmd_decompress(const Args &argv) {
    const auto specs = decompress_specs();
    ParsedArgs a = parse_args(argv, specs);
    if (a.help) {
        std::fputs(format_help("zbound decompress INPUT.zb -o OUT [--backend cpu|gpu|auto] [--threads N]",
                               "Decompresses a zbound stream into a raw little-endian array (type and shape come "
                               "from the stream; see `zbound info`).",
                               specs).c_str(), stdout);
        return kExitOk;
    }
    const std::string in = one_input(a);
    if (!a.has("--output")) throw CliError("missing -o OUT (the raw output file)");
    const std::string out = a.get("--output");
    if (out == in) throw CliError("the output would overwrite the input '" + in + "'");
    const zb_backend backend = backend_from_args(a);
    const int threads = a.has("--threads") ? (int)parse_int(a.get("--threads"), "--threads", 1, 4096) : 0;

    std::vector<uint8_t> stream = read_file(in);
    zb_stream_info info{};
    check_status(zb_stream_info_get(stream.data(), stream.size(), &info), "reading the header of '" + in + "'");
    std::vector<uint8_t> values(info.decompressed_bytes);
    zb_run_stats st{};
    auto t0 = std::chrono::steady_clock::now();
    check_status(zb_decompress_threads(stream.data(), stream.size(), values.data(), values.size(), backend, threads,
                                       &st),
                 "decompress '" + in + "'");
    const double secs = seconds_since(t0);
    write_file(out, values.data(), values.size());
    if (!a.has("--quiet")) {
        std::vector<size_t> dims(info.dims, info.dims + info.rank);
        std::printf("%s (%zu bytes) -> %s (%s %s, %zu bytes) on %s, %.3f s\n", in.c_str(), stream.size(), out.c_str(),
                    dtype_name(info.dtype), dims_to_string(dims).c_str(), values.size(), backend_name(st.backend_used),
                    secs);
    }
    return kExitOk;
}

}  // namespace zbtool
