// Fixture: core may include only core; line 4 reaches the CLI.
#pragma once
#include "histeq/types.hpp"
#include "cli/cli.hpp"
