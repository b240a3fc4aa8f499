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
}

}  // namespace kiln::py
