#pragma once
// Moved to luminal/cpu/cpu_rules.hpp (the CPU backend has its own folder, as cuda/ has);
// this forwarding header is kept for one release.
#include "luminal/cpu/cpu_rules.hpp"
