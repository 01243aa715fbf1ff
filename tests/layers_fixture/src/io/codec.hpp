// Fixture: io over the API (allowed).
#pragma once
#include "histeq/pipeline.hpp"
