// Testing hooks over Highway's target selection: supported_targets / set_target_for_testing.
#include "ops/simd/highway_targets.h"  // First: HWY_TARGETS must match the kernel files.
// Highway and the rest after the target selection.
#include <stdexcept>
#include <string>
#include <vector>

#include "hwy/highway.h"
#include "hwy/targets.h"
#include "ops/simd/float_kernels.h"

namespace kiln::simd {
namespace {

/// Compiled targets the CPU supports, best first. Resets any set_target_for_testing() mock.
std::vector<int64_t> real_targets() {
  hwy::SetSupportedTargetsForTest(0);
  return hwy::SupportedAndGeneratedTargets();
}

}  // namespace

std::vector<std::string> supported_targets() {
  const int64_t mocked = hwy::SupportedTargets();
  std::vector<std::string> names;
  for (int64_t target : real_targets()) names.emplace_back(hwy::TargetName(target));
  // Put back whatever a test had selected: real_targets() cleared it.
  if (mocked != hwy::SupportedTargets()) hwy::SetSupportedTargetsForTest(mocked);
  return names;
}

void set_target_for_testing(const std::string& name) {
  const std::vector<int64_t> targets = real_targets();
  if (name.empty()) return;
  std::string known;
  for (int64_t target : targets) {
    if (name == hwy::TargetName(target)) {
      hwy::SetSupportedTargetsForTest(target);
      return;
    }
    known += known.empty() ? "" : ", ";
    known += hwy::TargetName(target);
  }
  throw std::invalid_argument("set_target_for_testing: expected one of {" + known +
                              "} or \"\", got \"" + name + "\"");
}

}  // namespace kiln::simd
