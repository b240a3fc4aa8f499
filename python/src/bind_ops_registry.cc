// kiln._C.ops: the op registry as Python sees it (listing, signatures, calling by name).
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "kiln/op.h"

namespace kiln::py {
namespace nb = nanobind;
using namespace nb::literals;

void bind_ops_registry(nb::module_& m) {
  m.def("list_ops", [] { return OpRegistry::Instance().list(); },
        "Names of every registered op (primitive), sorted.");
  m.def("op_signature", [](const std::string& name) { return OpRegistry::Instance().get(name)->signature(); },
        "name"_a, "The schema of an op, e.g. 'Add(a, b)'.");
  m.def("op_doc", [](const std::string& name) { return OpRegistry::Instance().get(name)->doc(); },
        "name"_a);
  m.def(
      "op_gradient",
      [](const std::string& name) {
        const OpDefPtr op = OpRegistry::Instance().get(name);
        if (op->has_trait(kTraitNotDifferentiable)) return "not differentiable";
        return op->grad_fn() ? "rule" : "missing";
      },
      "name"_a,
      "How autograd differentiates an op: 'rule' (it has a gradient rule), 'not differentiable' "
      "(its outputs carry no gradient) or 'missing' (backward through it raises).");
}

}  // namespace kiln::py
