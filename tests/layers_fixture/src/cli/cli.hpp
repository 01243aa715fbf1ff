// Fixture: the CLI over io (allowed).
#pragma once
#include "io/codec.hpp"
