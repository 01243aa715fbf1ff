// Fixture: cpu and io are siblings; neither may include the other.
#include "histeq/pipeline.hpp"
// violation at line 4: cpu includes io
#include "io/codec.hpp"
// not the layers' business: a system header, a name that is no file of the repository
#include <cuda_runtime_api.h>

#include "not_in_the_repository.hpp"
