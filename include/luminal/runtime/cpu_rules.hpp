#pragma once
// The CPU backend's rules: the core rules and the backend-neutral lowering.
#include "luminal/egraph/core_rules.hpp"
#include "luminal/lowering/rules.hpp"

namespace luminal::egraph {

using CpuRules = concat_t<CoreRules, LoweringRules>;

}  // namespace luminal::egraph
