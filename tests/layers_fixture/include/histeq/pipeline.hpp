// Fixture: an API header over core (allowed).
#pragma once
#include "histeq/types.hpp"
