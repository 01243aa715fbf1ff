// Fixture of the include_layers self-test: a clean core header.
#pragma once
#include <cstdint>
