// Fixture: a kernel family over kernels/support and core (allowed).
#pragma once
#include "histeq/types.hpp"
#include "support/base.hpp"
