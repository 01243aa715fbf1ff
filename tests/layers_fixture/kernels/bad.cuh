// Fixture: kernels may include core.
#pragma once
#include "histeq/types.hpp"
// violation at line 5: a kernel includes the public API above it
#include "histeq/pipeline.hpp"
