// zbound cdvalues: the filter's cd_values for given parameters, and the strings h5repack and nccopy take.
// The words come from the filter's own encoder (zbound_cd_values_encode), never from a second copy of the layout.
#include <cstdio>
#include <string>
#include "cli_args.h"
#include "codec_opts.h"
#include "commands.h"
#include "zbound_filter.h"

namespace zbtool {

int cmd_cdvalues(const Args &argv) {
    std::vector<OptionSpec> specs = bound_option_specs(false);
    for (const auto &s : pipeline_option_specs()) specs.push_back(s);
    specs.push_back({nullptr, "--var", "NAME", "nccopy variable(s) to filter (default '*': every variable)"});
    specs.push_back({nullptr, "--format", "FMT",
                     "all (default), words, h5repack (the UD= value), nccopy (the -F value), h5py"});
    ParsedArgs a = parse_args(argv, specs);
    if (a.help) {
        std::fputs(format_help("zbound cdvalues (--abs X | --rel X | --pw-rel X) [--predictor P] [--encoder E] [--var NAME] "
                               "[--format FMT]",
                               "Prints the HDF5 filter parameters (cd_values) of zbound (filter id " +
                                   std::to_string(ZBOUND_H5Z_FILTER) +
                                   ") and the h5repack -f / nccopy -F strings that apply it.\n"
                                   "Example: h5repack -f \"$(zbound cdvalues --abs 1e-3 --format h5repack)\" "
                                   "in.h5 out.h5",
                               specs).c_str(), stdout);
        return kExitOk;
    }
    if (!a.positional.empty()) throw CliError("unexpected argument '" + a.positional[0] + "'");
    const BoundChoice bound = bound_from_args(a, false);
    zb_params p = zb_params_default();
    p.mode = bound.mode;
    p.bound = bound.bounds[0];
    pipeline_from_args(a, p);

    unsigned int cd[ZBOUND_CD_MAX_WORDS] = {0};
    const size_t n = zbound_cd_values_encode(&p, cd);
    if (n == 0 || n > ZBOUND_CD_MAX_WORDS) throw CliError("the filter could not encode these parameters", kExitFailure);
    std::string words;
    for (size_t i = 0; i < n; ++i) words += (i ? "," : "") + std::to_string(cd[i]);
    const std::string id = std::to_string(ZBOUND_H5Z_FILTER);
    // h5repack (1.10+): UD=<filter id>,<flags: 0 mandatory>,<number of cd values>,<values...>
    const std::string h5repack = "UD=" + id + ",0," + std::to_string(n) + "," + words;
    // nccopy (netCDF 4.7+): <variable or *>,<filter id>,<values...>
    const std::string nccopy = a.get("--var", "*") + "," + id + "," + words;
    const std::string h5py = "compression=" + id + ", compression_opts=(" + words + (n == 1 ? ",)" : ")");

    const std::string fmt = a.get("--format", "all");
    if (fmt == "words") std::printf("%s\n", words.c_str());
    else if (fmt == "h5repack") std::printf("%s\n", h5repack.c_str());
    else if (fmt == "nccopy") std::printf("%s\n", nccopy.c_str());
    else if (fmt == "h5py") std::printf("%s\n", h5py.c_str());
    else if (fmt == "all") {
        std::printf("filter id:  %s\n", id.c_str());
        std::printf("cd_values:  %s\n", words.c_str());
        std::printf("h5repack:   h5repack -f %s in.h5 out.h5\n", h5repack.c_str());
        std::printf("nccopy:     nccopy -F '%s' in.nc out.nc\n", nccopy.c_str());
        std::printf("h5py:       f.create_dataset(..., chunks=..., %s)\n", h5py.c_str());
        std::printf("(run with HDF5_PLUGIN_PATH set to the folder that holds libh5z_zbound.so)\n");
    } else {
        throw CliError("--format: '" + fmt + "' is not one of all, words, h5repack, nccopy, h5py");
    }
    return kExitOk;
}

}  // namespace zbtool
