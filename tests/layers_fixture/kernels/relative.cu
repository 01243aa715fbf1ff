// Fixture: a relative path, resolved as the compiler would.
#include "bad.cuh"
// violation at line 4: into src/io through ../
#include "../src/io/codec.hpp"
