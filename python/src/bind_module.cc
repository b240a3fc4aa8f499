// NB_MODULE(_C): assembles kiln._C from the bind_* functions.
#include "bindings.h"
#include "python_owned.h"

NB_MODULE(_C, m) {
  m.doc() = "Kiln's C++ core (use the kiln package, not this module directly)";
  kiln::py::bind_errors(m);
  kiln::py::bind_dtype(m);
  kiln::py::bind_tensor(m);
  kiln::py::bind_tensor_operators(m);
  kiln::py::bind_ops_registry(m);
  kiln::py::bind_runtime(m);
  kiln::py::bind_autograd(m);
  kiln::py::bind_autocast(m);
  kiln::py::bind_extension(m);
  kiln::py::bind_jit(m);
  kiln::py::bind_passes(m);
  nanobind::module_ graph = nanobind::borrow<nanobind::module_>(m.attr("graph"));
  kiln::py::bind_python_backend(graph);
  kiln::py::bind_distributed(m);
  nanobind::module_ mint = m.def_submodule("mint", "Built-in ops (kiln.mint)");
  kiln::py::bind_mint_elementwise(mint);
  kiln::py::bind_mint_reduce(mint);
  kiln::py::bind_mint_nn(mint);
  kiln::py::bind_mint_shape(mint);
  kiln::py::bind_generator(mint);
  kiln::py::bind_mint_factory(mint);
  nanobind::module_ linalg = m.def_submodule("linalg", "Linear-algebra primitives (kiln.linalg)");
  kiln::py::bind_linalg(linalg);
  // Python objects C++ keeps (hooks, Function backwards, pattern checks) go before the
  // interpreter does (python_owned.h).
  nanobind::module_::import_("atexit").attr("register")(
      nanobind::cpp_function(&kiln::py::release_python_owned));
}
