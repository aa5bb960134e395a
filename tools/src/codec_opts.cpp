#include "codec_opts.h"

#include <cstdlib>
#include <cstring>
#include <omp.h>

namespace zbtool {

std::vector<OptionSpec> raw_input_specs() {
    return {{"-t", "--type", "f32|f64", "value type of the raw file (required)"},
            {"-d", "--dims", "DIMS", "dims slowest first, e.g. 110x64x128 (default: 1D)"},
            {nullptr, "--offset", "BYTES", "header bytes to skip at the start of the file (default 0)"},
            {nullptr, "--endian", "little|big", "byte order of the values in the file (default little)"}};
}

RawInput raw_input_from_args(const ParsedArgs &args) {
    RawInput in;
    if (!args.has("--type")) throw CliError("missing -t f32|f64 (the value type of the raw file)");
    in.dtype = parse_dtype(args.get("--type"));
    if (args.has("--dims")) in.dims = parse_dims(args.get("--dims"));
    in.layout.offset = (size_t)parse_int(args.get("--offset", "0"), "--offset", 0, (long long)1 << 50);
    const std::string endian = args.get("--endian", "little");
    if (endian != "little" && endian != "big") throw CliError("--endian: '" + endian + "' is not little or big");
    in.layout.big_endian = endian == "big";
    return in;
}

std::vector<OptionSpec> bound_option_specs(bool allow_lists) {
    if (allow_lists)
        return {{nullptr, "--abs", "X[,X..]", "absolute error bound(s): |x - x'| <= X"},
                {nullptr, "--rel", "X[,X..]", "bound(s) relative to the finite value range: X * (max - min)"},
                {nullptr, "--pw-rel", "X[,X..]", "point-wise relative bound(s): |x - x'| <= X * |x|"}};
    return {{nullptr, "--abs", "X", "absolute error bound: |x - x'| <= X (0 = lossless)"},
            {nullptr, "--rel", "X", "bound relative to the finite value range: X * (max - min)"},
            {nullptr, "--pw-rel", "X", "point-wise relative bound: |x - x'| <= X * |x| (zeros and signs exact)"}};
}

std::vector<OptionSpec> pipeline_option_specs() {
    return {{nullptr, "--predictor", "auto|lorenzo|interp", "predictor (default auto)"},
            {nullptr, "--encoder", "auto|fast|ratio", "encoder (default auto)"}};
}

std::vector<OptionSpec> run_option_specs() {
    return {{nullptr, "--backend", "cpu|gpu|auto", "where to run (default auto; gpu fails without a GPU)"},
            {nullptr, "--threads", "N", "CPU threads (default: ZBOUND_THREADS or all cores)"},
            {nullptr, "--fill", "V", "fill value: kept bit for bit and ignored by --rel"}};
}

BoundChoice bound_from_args(const ParsedArgs &args, bool allow_lists) {
    const bool a = args.has("--abs"), r = args.has("--rel"), pw = args.has("--pw-rel");
    const int given = (int)a + (int)r + (int)pw;
    if (given != 1)
        throw CliError(given ? "give only one of --abs, --rel and --pw-rel"
                             : "give an error bound: --abs X, --rel X or --pw-rel X");
    BoundChoice c;
    c.mode = a ? ZB_MODE_ABS : r ? ZB_MODE_REL : ZB_MODE_PW_REL;
    const std::string opt = a ? "--abs" : r ? "--rel" : "--pw-rel";
    const std::string text = args.get(opt);
    c.bounds = allow_lists ? parse_double_list(text, opt) : std::vector<double>{parse_double(text, opt)};
    for (double b : c.bounds)
        if (b < 0) throw CliError(opt + ": the bound must be >= 0 (got " + text + ")");
    return c;
}

template <typename E>
static E enum_from(const std::string &opt, const std::string &text, std::initializer_list<std::pair<const char *, E>> names) {
    std::string list;
    for (const auto &n : names) {
        if (text == n.first) return n.second;
        list += (list.empty() ? "" : ", ") + std::string(n.first);
    }
    throw CliError(opt + ": '" + text + "' is not one of " + list);
}

void pipeline_from_args(const ParsedArgs &args, zb_params &p) {
    p.predictor = enum_from<zb_predictor>("--predictor", args.get("--predictor", "auto"),
                                          {{"auto", ZB_PRED_AUTO}, {"lorenzo", ZB_PRED_LORENZO}, {"interp", ZB_PRED_INTERP}});
    p.encoder = enum_from<zb_encoder>("--encoder", args.get("--encoder", "auto"),
                                      {{"auto", ZB_ENC_AUTO}, {"fast", ZB_ENC_FAST}, {"ratio", ZB_ENC_RATIO}});
}

zb_backend backend_from_args(const ParsedArgs &args) {
    return enum_from<zb_backend>("--backend", args.get("--backend", "auto"),
                                 {{"auto", ZB_BACKEND_AUTO}, {"cpu", ZB_BACKEND_CPU}, {"gpu", ZB_BACKEND_GPU}});
}

void run_from_args(const ParsedArgs &args, zb_dtype dtype, zb_params &p) {
    p.backend = backend_from_args(args);
    p.threads = args.has("--threads") ? (int)parse_int(args.get("--threads"), "--threads", 1, 4096) : 0;
    if (args.has("--fill")) {
        double v = parse_double(args.get("--fill"), "--fill");
        p.has_fill = 1;
        if (dtype == ZB_F64) {
            std::memcpy(&p.fill_bits, &v, 8);
        } else {
            float f = (float)v;
            if ((double)f != v) throw CliError("--fill: " + args.get("--fill") + " is not exactly representable as f32");
            uint32_t u;
            std::memcpy(&u, &f, 4);
            p.fill_bits = u;
        }
    }
}

int effective_threads(int requested) {
    if (requested > 0) return requested;
    if (const char *env = std::getenv("ZBOUND_THREADS")) {
        int v = std::atoi(env);
        if (v > 0) return v;
    }
    return omp_get_max_threads();
}

const char *backend_name(zb_backend b) {
    switch (b) {
        case ZB_BACKEND_AUTO: return "auto";
        case ZB_BACKEND_CPU: return "cpu";
        case ZB_BACKEND_GPU: return "gpu";
    }
    return "?";
}

void check_status(zb_status s, const std::string &what) {
    if (s == ZB_OK) return;
    std::string msg = zb_last_error();
    throw CliError(what + " failed: " + zb_status_string(s) + (msg.empty() ? "" : " (" + msg + ")"), kExitFailure);
}

}  // namespace zbtool
