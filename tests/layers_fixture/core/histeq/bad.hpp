// Fixture of the include_layers self-test (each include in a block of its own, so that
// clang-format's sorting keeps the lines): core may include only core.
#pragma once
#include "histeq/types.hpp"
// violation at line 6: core reaches the CLI
#include "cli/cli.hpp"
