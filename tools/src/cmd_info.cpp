// zbound info: the header fields of a stream (zb_stream_info_get), and what the predictor needs besides them (the
// interp predictor's stored parameters, the Lorenzo segments of a version 6 stream), as text or one JSON line.
#include <cstdio>
#include <string>
#include "cli_args.h"
#include "codec_opts.h"
#include "commands.h"
#include "json_line.h"
#include "raw_io.h"
#include "zb_format.h"
#include "zb_interp.h"
#include "zb_lorenzo.h"

namespace zbtool {
namespace {

// The predictor's details that zb_stream_info does not carry (docs/FORMAT.md sections 8 and 13).
struct PredictorDetails {
    bool interp = false;        // ip holds the interp predictor's parameters
    zb::InterpParams ip;
    std::string interp_error;   // why an interp stream's parameters could not be read (the payload is not verified)
    bool segments = false;      // seg holds the Lorenzo segments of a version 6 stream
    zb::LorenzoSegments seg;
};

PredictorDetails predictor_details(const std::vector<uint8_t> &bytes) {
    PredictorDetails d;
    zb::Header h;
    std::string msg;
    if (zb::read_header(bytes.data(), bytes.size(), h, msg, false) != ZB_OK || (h.flags & zb::kFlagRaw)) return d;
    if (h.version == zb::kFormatVersionV6) {
        d.segments = true;
        d.seg = zb::lorenzo_segments(h.shape);
    }
    if (h.predictor == zb::kPredInterp) {
        if (h.nsegments > 0 && h.seg[0].length >= zb::kV2CommonParamBytes + zb::kInterpParamBytes) {
            const uint8_t *params = bytes.data() + h.header_bytes() + h.seg[0].offset + zb::kV2CommonParamBytes;
            d.interp = zb::interp_params_read(params, d.ip, d.interp_error);
        } else {
            d.interp_error = "parameter segment too short";
        }
    }
    return d;
}

// "z, y, x"-style names of the interp dim order and spline choices (the 3D view: 0 = z, 1 = y, 2 = x).
std::string interp_order_text(const zb::InterpParams &ip, const char *sep) {
    std::string s;
    for (int k = 0; k < 3; ++k) s += std::string(k ? sep : "") + "zyx"[ip.order[k]];
    return s;
}
std::string interp_splines_text(const zb::InterpParams &ip) {
    std::string s;
    for (int k = 0; k < 3; ++k)
        s += std::string(k ? ", " : "") + "zyx"[k] + (ip.natural[k] ? " natural" : " not-a-knot");
    return s;
}

}  // namespace

int cmd_info(const Args &argv) {
    const std::vector<OptionSpec> specs = {{nullptr, "--json", nullptr, "print one JSON object per file"}};
    ParsedArgs a = parse_args(argv, specs);
    if (a.help) {
        std::fputs(format_help("zbound info FILE.zb [FILE.zb ...] [--json]",
                               "Prints the header fields of zbound streams and the predictor's parameters (the "
                               "interp dim order, splines and level bounds; a version 6 stream's Lorenzo segments). "
                               "The header checksum is verified; the payload is not decoded.",
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
        const PredictorDetails pd = predictor_details(bytes);
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
            if (pd.segments)
                j.add("lorenzo_segments", pd.seg.count()).add("lorenzo_segment_layers", pd.seg.per_segment);
            if (pd.interp) {
                const zb::InterpParams &ip = pd.ip;
                j.add("interp_dim_order", interp_order_text(ip, "")).add("interp_natural_zyx",
                      std::string{char('0' + ip.natural[0]), char('0' + ip.natural[1]), char('0' + ip.natural[2])})
                    .add("interp_alpha", ip.alpha).add("interp_bound_stride1", ip.level_eb[0])
                    .add("interp_bound_stride2", ip.level_eb[1]).add("interp_bound_stride4", ip.level_eb[2])
                    .add("interp_bound_anchors", ip.level_eb[3]);
            }
            if (!pd.interp_error.empty()) j.add("interp_params_error", pd.interp_error);
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
            if (pd.segments) {
                const uint64_t last = pd.seg.layers - (pd.seg.count() - 1) * pd.seg.per_segment;
                std::printf("  lorenzo segments     %llu of %llu layers (the last %llu), predicted independently\n",
                            (unsigned long long)pd.seg.count(), (unsigned long long)pd.seg.per_segment,
                            (unsigned long long)last);
            }
            if (pd.interp) {
                const zb::InterpParams &ip = pd.ip;
                std::printf("  interp dim order     %s (3D view)\n", interp_order_text(ip, ", ").c_str());
                std::printf("  interp splines       %s\n", interp_splines_text(ip).c_str());
                std::printf("  interp alpha         %.9g (level bounds: stride 1 %.9g, stride 2 %.9g, stride 4 %.9g, "
                            "anchors %.9g)\n",
                            ip.alpha, ip.level_eb[0], ip.level_eb[1], ip.level_eb[2], ip.level_eb[3]);
            }
            if (!pd.interp_error.empty())
                std::printf("  interp parameters    unreadable: %s\n", pd.interp_error.c_str());
        }
        if (bytes.size() != i.stream_bytes)
            std::fprintf(stderr, "zbound info: warning: '%s' has %zu bytes but its stream has %zu\n", path.c_str(),
                         bytes.size(), i.stream_bytes);
    }
    return kExitOk;
}

}  // namespace zbtool
