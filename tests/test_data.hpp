#pragma once
// Where the test fixtures are: $LUMINAL_TEST_DATA_DIR when set (the test
// executable run from a bundle on another machine: scripts/gpu_check.sh), else
// the source tree's tests/data the build was configured with.
#include <cstdlib>
#include <filesystem>

namespace luminal_test {

inline std::filesystem::path data_dir() {
    if (const char* dir = std::getenv("LUMINAL_TEST_DATA_DIR"); dir != nullptr && *dir != '\0') return dir;
    return LUMINAL_TEST_SOURCE_DATA_DIR;
}

}  // namespace luminal_test
