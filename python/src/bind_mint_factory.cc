// Filled in by the op family's change.
#include "bindings.h"

namespace kiln::py {
namespace nb = nanobind;

void bind_mint_factory(nb::module_& mint) {}

}  // namespace kiln::py
