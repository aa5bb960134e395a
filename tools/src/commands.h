// The tool's subcommands. Each takes the arguments after its name and returns the process exit code; user errors
// are thrown as CliError and reported by main.
#pragma once
#include <string>
#include <vector>

namespace zbtool {

using Args = std::vector<std::string>;

int cmd_compress(const Args &args);
int cmd_decompress(const Args &args);
int cmd_info(const Args &args);
int cmd_cdvalues(const Args &args);
int cmd_bench(const Args &args);

}  // namespace zbtool
