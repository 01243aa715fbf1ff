// Fixture: core is the C++ standard library only.
#pragma once
#include <vector>
// violation at line 5: a CUDA header in core
#include <cuda_runtime_api.h>
