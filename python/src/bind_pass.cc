// kiln._C.graph's passes: registration, listing, Python patterns and verify_pass (python/kiln/
// graph.py wraps them in documented record types).
//
// A Python pattern is traced here, in C++, with the jit's Trace (python/kiln/jit.py's helper
// calls the function, so a read of a traced value names the user's line), and becomes a
// kiln::make_graph_pattern_pass that runs in C++ in every later jit build; only its optional
// check callback calls back into Python (taking the GIL: the jit may run passes on any thread).
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "jit/trace.h"
#include "kiln/jit.h"
#include "kiln/verify_pass.h"
#include "pass/builtin/builtin_passes.h"
#include "python_owned.h"

namespace kiln::py {
namespace nb = nanobind;
using namespace nb::literals;

namespace {

using Metas = std::vector<std::pair<DType, std::vector<int64_t>>>;

// Traces `fn` into a graph whose parameters are named `names`: parameter i a tracer of metas[i],
// or of float32 [4, 4] past the end of `metas`.
FuncGraphPtr trace_pattern(const nb::handle& fn, const std::string& graph_name,
                           const std::vector<std::string>& names, const Metas& metas,
                           const nb::handle& trace_call) {
  jit_detail::Trace trace(graph_name);
  nb::list args;
  for (size_t i = 0; i < names.size(); ++i) {
    const TensorMeta meta =
        i < metas.size()
            ? TensorMeta(metas[i].first, Shape(metas[i].second.begin(), metas[i].second.end()))
            : TensorMeta(DType::kFloat32, {4, 4});
    args.append(nb::cast(trace.add_input(meta, names[i])));
  }
  nb::object result = trace_call(fn, nb::tuple(args), nb::dict());
  KILN_CHECK_TYPE(nb::isinstance<Tensor>(result))
      << graph_name << " returned " << Py_TYPE(result.ptr())->tp_name
      << "; a pattern function returns one kiln.Tensor";
  return trace.finish({nb::cast<Tensor>(result)});
}

// What a Python check gets for one matched input: PatternValue(dtype, shape, value), value the
// tensor of a frozen constant or None. A constant the program still holds (a weight the function
// reads) gets None: a check deciding on today's values would bake them into the cached graph
// (Note [Frozen constants] in pass/builtin/builtin_passes.h).
nb::object pattern_value(const nb::handle& value_type, const NodePtr& node) {
  const Abstract& a = node->abstract();
  nb::object dtype = nb::none();
  nb::object shape = nb::none();
  if (a.is_tensor()) {  // a var may match a multi-output op's tuple
    dtype = nb::cast(a.dtype());
    shape = nb::tuple(nb::cast(std::vector<int64_t>(a.shape().begin(), a.shape().end())));
  }
  // A None constant (an absent optional input, such as layer_norm's weight) is an undefined tensor.
  const Tensor* constant = node->is_value() && pass::is_frozen_constant(*node)
                               ? &static_cast<const ValueNode&>(*node).value()
                               : nullptr;
  nb::object value = constant != nullptr && constant->defined() ? nb::cast(*constant) : nb::none();
  return value_type(dtype, shape, value);
}

GraphPatternCheckFunc python_check(const std::string& name, nb::object check,
                                   nb::object value_type) {
  if (check.is_none()) return nullptr;
  // The pass registry outlives the interpreter: a check declines every match once its objects are
  // released at exit.
  auto checker = std::make_shared<PythonOwned>(std::move(check));
  auto make_value = std::make_shared<PythonOwned>(std::move(value_type));
  return [checker, make_value, name](const std::vector<NodePtr>& vars) {
    if (!Py_IsInitialized()) return false;
    nb::gil_scoped_acquire gil;
    if (!checker->get().is_valid()) return false;  // released at exit
    try {
      nb::list args;
      for (const NodePtr& n : vars) args.append(pattern_value(make_value->get(), n));
      nb::object verdict = checker->get()(*args);
      const int truth = PyObject_IsTrue(verdict.ptr());
      if (truth < 0) throw nb::python_error();
      return truth == 1;
    } catch (nb::python_error& e) {
      KILN_FAIL(kValue) << "the check of pattern '" << name << "' raised "
                        << nb::str(e.type().attr("__name__")).c_str() << ": "
                        << nb::str(e.value()).c_str();
    }
  };
}

void register_pattern(const std::string& name, nb::object src, nb::object dst,
                      const std::vector<std::string>& src_names,
                      const std::vector<std::string>& dst_names, const Metas& metas,
                      const std::string& backend, const std::string& stage, int priority,
                      nb::object check, nb::object value_type, nb::object trace_call) {
  FuncGraphPtr src_graph =
      trace_pattern(src, "pattern '" + name + "': src", src_names, metas, trace_call);
  FuncGraphPtr dst_graph =
      trace_pattern(dst, "pattern '" + name + "': dst", dst_names, metas, trace_call);
  register_pass(
      make_graph_pattern_pass(name, std::move(src_graph), std::move(dst_graph),
                              python_check(name, std::move(check), std::move(value_type))),
      backend, stage, priority);
}

nb::list tensors(const std::vector<Tensor>& ts) {
  nb::list out;
  for (const Tensor& t : ts) out.append(nb::cast(t));
  return out;
}

nb::tuple verify_report(const PassVerifyReport& r) {
  nb::object failure = nb::none();
  if (r.first_failure) {
    const PassVerifyFailure& f = *r.first_failure;
    failure = nb::make_tuple(f.trial, f.reason, f.input_names, tensors(f.inputs),
                             tensors(f.expected), tensors(f.got), f.before, f.after);
  }
  return nb::make_tuple(r.pass, r.trials, r.rewrites, r.failures, r.ok(), r.refusals, failure,
                        r.str());
}

nb::list pass_infos() {
  nb::list out;
  for (const PassInfo& p : list_passes()) {
    out.append(
        nb::make_tuple(p.name, p.backend, stage_name(p.stage), p.priority, p.source, p.builtin));
  }
  return out;
}

}  // namespace

nb::tuple pass_report_to_python(const PassReport& report) {
  nb::list runs;
  for (const PassRunRecord& r : report.runs) {
    runs.append(nb::make_tuple(r.pass, stage_name(r.stage), r.changed, r.matches, r.refusals,
                               r.reasons, r.seconds));
  }
  return nb::make_tuple(runs, report.str());
}

void bind_passes(nb::module_& m) {
  nb::module_ graph = nb::borrow<nb::module_>(m.attr("graph"));
  graph.def(
      "register_custom_pass", &register_custom_pass, "pass_name"_a, "plugin_path"_a, "backend"_a,
      "stage"_a, "priority"_a,
      "Loads the pass plugin and registers its pass `pass_name` (kiln::register_custom_pass).");
  graph.def("unregister_custom_pass", &unregister_custom_pass, "name"_a,
            "Removes a registered pass.");
  graph.def("list_passes", &pass_infos,
            "(name, backend, stage, priority, source, builtin) per pass, in run order.");
  graph.def("register_pattern", &register_pattern, "name"_a, "src"_a, "dst"_a, "src_names"_a,
            "dst_names"_a, "metas"_a, "backend"_a, "stage"_a, "priority"_a, "check"_a.none(),
            "value_type"_a, "trace_call"_a,
            "Traces src and dst (input i a tracer of metas[i]) and registers the pattern pass they "
            "make.");
  graph.def(
      "verify_pass",
      [](const std::string& name, size_t trials, uint64_t seed) {
        PassVerifyReport report;
        {
          nb::gil_scoped_release release;  // a Python check takes it back
          report = verify_pass(name, trials, seed);
        }
        return verify_report(report);
      },
      "name"_a, "trials"_a, "seed"_a,
      "(pass, trials, rewrites, failures, ok, refusals, first failure or None, text)");
}

}  // namespace kiln::py
