// NAME=INTEGER arguments of the CLI (-D, --shape).
#ifndef KILN_CLIENT_CLI_BINDINGS_H_
#define KILN_CLIENT_CLI_BINDINGS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kiln::cli {

// Parses NAME=INTEGER items (each argument may be a comma-separated list;
// integers in C notation: 64, 0x40). On a malformed item prints
// "COMMAND: error: FLAG expects NAME=INTEGER, got 'ITEM'" and exits with
// the usage status.
std::map<std::string, int64_t> ParseBindings(
    const std::vector<std::string>& items, const char* command,
    const char* flag);

}  // namespace kiln::cli

#endif  // KILN_CLIENT_CLI_BINDINGS_H_
