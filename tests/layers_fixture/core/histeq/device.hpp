// Fixture: core is the standard library only; line 4 is not.
#pragma once
#include <vector>
#include <cuda_runtime_api.h>
