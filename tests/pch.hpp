// Precompiled header for all test executables (see tests/CMakeLists.txt).
#pragma once
#include <doctest/doctest.h>
#include <luminal/cuda.hpp>
#include <luminal/luminal.hpp>
