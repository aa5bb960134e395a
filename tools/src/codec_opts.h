// The codec options shared by compress, bench and cdvalues (bound, predictor, encoder, backend, threads, fill)
// and the names the tool prints for the API's enums.
#pragma once
#include <string>
#include <vector>
#include "cli_args.h"
#include "raw_io.h"
#include "zbound.h"
#include "zbound_cd_internal.h"

namespace zbtool {

// How to read the raw input: -t, -d, --offset, --endian.
std::vector<OptionSpec> raw_input_specs();
struct RawInput {
    zb_dtype dtype = ZB_F32;
    std::vector<size_t> dims;  // empty: 1D
    RawLayout layout;
};
RawInput raw_input_from_args(const ParsedArgs &args);  // -t is required

// Option table entries: the bound (--abs/--rel), --predictor, --encoder.
std::vector<OptionSpec> bound_option_specs(bool allow_lists);
std::vector<OptionSpec> pipeline_option_specs();
// --backend, --threads, --fill.
std::vector<OptionSpec> run_option_specs();

struct BoundChoice {
    zb_mode mode = ZB_MODE_REL;
    std::vector<double> bounds;  // one, or several for bench
};
// Exactly one of --abs/--rel is required; each bound must be finite and >= 0.
BoundChoice bound_from_args(const ParsedArgs &args, bool allow_lists);

// Fills predictor and encoder (and, with run options, backend, threads and fill) into p.
void pipeline_from_args(const ParsedArgs &args, zb_params &p);
void run_from_args(const ParsedArgs &args, zb_dtype dtype, zb_params &p);
zb_backend backend_from_args(const ParsedArgs &args);

// What the library will use for threads = 0: ZBOUND_THREADS if set, else the OpenMP default.
int effective_threads(int requested);

// The names come from the filter's cd_values code (one spelling everywhere); "raw" for 0 in a stream header context
// is handled by the caller.
using zbound_cd::mode_name;
using zbound_cd::predictor_name;
using zbound_cd::encoder_name;
const char *backend_name(zb_backend b);

// Throws CliError (exit 1) with the library's message when s != ZB_OK.
void check_status(zb_status s, const std::string &what);

}  // namespace zbtool
