#include "cli_args.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace zbtool {

std::string ParsedArgs::get(const std::string &long_name, const std::string &fallback) const {
    auto it = values.find(long_name);
    return it == values.end() ? fallback : it->second;
}

static const OptionSpec *find_spec(const std::vector<OptionSpec> &specs, const std::string &name) {
    for (const auto &s : specs) {
        if ((s.short_name && name == s.short_name) || name == s.long_name) return &s;
    }
    return nullptr;
}

ParsedArgs parse_args(const std::vector<std::string> &argv, const std::vector<OptionSpec> &specs) {
    ParsedArgs out;
    bool options_done = false;
    for (size_t i = 0; i < argv.size(); ++i) {
        const std::string &arg = argv[i];
        if (options_done || arg.size() < 2 || arg[0] != '-' || (arg[1] != '-' && !std::isalpha((unsigned char)arg[1]))) {
            out.positional.push_back(arg);  // plain words, "-" and negative numbers are positional
            continue;
        }
        if (arg == "--") { options_done = true; continue; }
        if (arg == "-h" || arg == "--help") { out.help = true; continue; }

        std::string name = arg, value;
        bool inline_value = false;
        if (arg[1] == '-') {
            size_t eq = arg.find('=');
            if (eq != std::string::npos) { name = arg.substr(0, eq); value = arg.substr(eq + 1); inline_value = true; }
        } else if (arg.size() > 2) {
            name = arg.substr(0, 2); value = arg.substr(2); inline_value = true;  // "-tf32"
        }
        const OptionSpec *spec = find_spec(specs, name);
        if (!spec) throw CliError("unknown option '" + name + "' (see --help)");
        if (!spec->metavar) {
            if (inline_value) throw CliError("option " + std::string(spec->long_name) + " takes no value");
            out.values[spec->long_name] = "1";
            continue;
        }
        if (!inline_value) {
            if (i + 1 >= argv.size()) throw CliError("option " + name + " needs a value (" + spec->metavar + ")");
            value = argv[++i];
        }
        out.values[spec->long_name] = value;
    }
    return out;
}

std::string format_help(const std::string &usage, const std::string &description,
                        const std::vector<OptionSpec> &specs) {
    std::ostringstream os;
    os << "usage: " << usage << "\n\n" << description << "\n\noptions:\n";
    for (const auto &s : specs) {
        std::string left = "  ";
        left += s.short_name ? std::string(s.short_name) + ", " : "    ";
        left += s.long_name;
        if (s.metavar) left += std::string(" ") + s.metavar;
        if (left.size() < 30) left.resize(30, ' '); else left += "\n" + std::string(30, ' ');
        os << left << s.help << "\n";
    }
    os << "  -h, --help                  this help\n";
    return os.str();
}

double parse_double(const std::string &text, const std::string &what) {
    errno = 0;
    char *end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
        throw CliError(what + ": '" + text + "' is not a finite number");
    return v;
}

long long parse_int(const std::string &text, const std::string &what, long long min_value, long long max_value) {
    errno = 0;
    char *end = nullptr;
    long long v = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || errno == ERANGE)
        throw CliError(what + ": '" + text + "' is not an integer");
    if (v < min_value || v > max_value)
        throw CliError(what + ": " + text + " is out of range [" + std::to_string(min_value) + ", " +
                       std::to_string(max_value) + "]");
    return v;
}

std::vector<size_t> parse_dims(const std::string &text) {
    std::vector<size_t> dims;
    size_t start = 0;
    while (start <= text.size()) {
        size_t end = text.find_first_of("x,", start);
        if (end == std::string::npos) end = text.size();
        std::string part = text.substr(start, end - start);
        dims.push_back((size_t)parse_int(part, "-d/--dims '" + text + "'", 1, (long long)1 << 50));
        start = end + 1;
    }
    if (dims.empty() || dims.size() > 16) throw CliError("-d/--dims: give 1 to 16 dims like 110x64x128");
    return dims;
}

// The comma-separated items of text, each read by parse_item.
template <typename F> auto parse_list(const std::string &text, F parse_item) {
    std::vector<decltype(parse_item(text))> out;
    size_t start = 0;
    while (start <= text.size()) {
        size_t end = text.find(',', start);
        if (end == std::string::npos) end = text.size();
        out.push_back(parse_item(text.substr(start, end - start)));
        start = end + 1;
    }
    return out;
}

std::vector<double> parse_double_list(const std::string &text, const std::string &what) {
    return parse_list(text, [&](const std::string &item) { return parse_double(item, what); });
}

std::vector<long long> parse_int_list(const std::string &text, const std::string &what, long long min_value,
                                      long long max_value) {
    return parse_list(text, [&](const std::string &item) { return parse_int(item, what, min_value, max_value); });
}

}  // namespace zbtool
