// Fixture: cpu and io are siblings; line 3 crosses.
#include "histeq/pipeline.hpp"
#include "io/codec.hpp"
#include <cuda_runtime_api.h>
#include "not_in_the_repository.hpp"
