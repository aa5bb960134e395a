// Command-line parsing for the zbound tool: a table of options per subcommand, values kept as strings, and
// converters that turn them into typed values with messages that name the option.
#pragma once
#include <cstddef>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace zbtool {

// Exit codes of the tool (also documented in `zbound --help`).
enum ExitCode { kExitOk = 0, kExitFailure = 1, kExitUsage = 2, kExitBoundViolation = 3 };

// A user error (bad option, bad value, unreadable file): main prints "zbound <cmd>: <what>" and exits.
struct CliError : std::runtime_error {
    int code;
    CliError(const std::string &what, int exit_code = kExitUsage) : std::runtime_error(what), code(exit_code) {}
};

struct OptionSpec {
    const char *short_name;  // "-t" or nullptr
    const char *long_name;   // "--type"
    const char *metavar;     // nullptr: a flag without a value
    const char *help;
};

struct ParsedArgs {
    std::map<std::string, std::string> values;  // keyed by long name; flags map to "1"
    std::vector<std::string> positional;
    bool help = false;

    bool has(const std::string &long_name) const { return values.count(long_name) != 0; }
    std::string get(const std::string &long_name, const std::string &fallback = "") const;
};

// Parses argv (without the program and subcommand names). Accepts "--opt value", "--opt=value", "-t value" and
// "-tvalue"; "--" ends options; "-h"/"--help" set `help`. Unknown options and missing values throw CliError.
ParsedArgs parse_args(const std::vector<std::string> &argv, const std::vector<OptionSpec> &specs);

// Help text: usage line, description, then one line per option.
std::string format_help(const std::string &usage, const std::string &description,
                        const std::vector<OptionSpec> &specs);

// Converters; `what` names the option in error messages.
double parse_double(const std::string &text, const std::string &what);
long long parse_int(const std::string &text, const std::string &what, long long min_value, long long max_value);
std::vector<size_t> parse_dims(const std::string &text);  // "110x64x128" (also ',' separated)
std::vector<double> parse_double_list(const std::string &text, const std::string &what);  // "1e-2,1e-3"
std::vector<long long> parse_int_list(const std::string &text, const std::string &what, long long min_value,
                                      long long max_value);  // "1,2,16"

}  // namespace zbtool
