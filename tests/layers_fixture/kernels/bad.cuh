// Fixture: kernels may include core; line 4 reaches the public API above them.
#pragma once
#include "histeq/types.hpp"
#include "histeq/pipeline.hpp"
