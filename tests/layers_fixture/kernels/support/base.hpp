// Fixture: kernels/support is below every kernel family; it may include core only.
#pragma once
#include "histeq/types.hpp"
// violation at line 5: support reaches up into a kernel family
#include "family/thing.cuh"
