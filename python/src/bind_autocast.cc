// kiln._C.autocast: the calling thread's autocast state and the op lists (kiln/autocast.h);
// python/kiln/amp.py builds kiln.autocast on them.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include <string>
#include <utility>

#include "bindings.h"
#include "convert.h"
#include "kiln/autocast.h"

namespace kiln::py {
namespace nb = nanobind;
using namespace nb::literals;

namespace {

constexpr const char* kLowerPrecision = "lower_precision";
constexpr const char* kFloat32 = "float32";

std::optional<AutocastPolicy> policy_of(const std::optional<std::string>& name) {
  if (!name) return std::nullopt;
  if (*name == kLowerPrecision) return AutocastPolicy::kLowerPrecision;
  KILN_CHECK_VALUE(*name == kFloat32)
      << "set_autocast_policy: expected policy 'lower_precision', 'float32' or None, got '"
      << *name << "'";
  return AutocastPolicy::kFloat32;
}

}  // namespace

void bind_autocast(nb::module_& m) {
  nb::module_ autocast = m.def_submodule("autocast", "Autocast state and op lists (kiln.amp)");
  autocast.def(
      "state",
      [] {
        const AutocastState s = autocast_state();
        return std::make_pair(s.enabled, s.dtype);
      },
      "(enabled, dtype): the calling thread's autocast state.");
  autocast.def(
      "set_state",
      [](bool enabled, DType dtype) {
        const AutocastState previous = set_autocast_state({enabled, dtype});
        return std::make_pair(previous.enabled, previous.dtype);
      },
      "enabled"_a, "dtype"_a,
      "Sets the calling thread's autocast state; returns the previous (enabled, dtype).");
  autocast.def(
      "set_policy",
      [](const std::string& op, const std::optional<std::string>& policy) {
        set_autocast_policy(op, policy_of(policy));
      },
      "op"_a, "policy"_a.none(),
      "Lists op `op` under 'lower_precision' or 'float32', or removes it (None).");
  autocast.def(
      "policy",
      [](const std::string& op) -> std::optional<std::string> {
        const std::optional<AutocastPolicy> p = autocast_policy(op);
        if (!p) return std::nullopt;
        return *p == AutocastPolicy::kLowerPrecision ? kLowerPrecision : kFloat32;
      },
      "op"_a, "'lower_precision', 'float32' or None: the list op `op` is on.");
}

}  // namespace kiln::py
