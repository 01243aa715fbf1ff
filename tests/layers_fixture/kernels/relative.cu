// Fixture: a relative path into src/io (line 3), found as the compiler would.
#include "bad.cuh"
#include "../src/io/codec.hpp"
