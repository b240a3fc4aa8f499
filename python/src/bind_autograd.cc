// kiln._C.autograd: grad mode, backward/grad, the gradient state of tensors (Tensor.requires_grad,
// .grad, .grad_fn, .is_leaf, .detach(), .backward()) and the recording of Python custom functions
// (python/kiln/autograd.py builds kiln.autograd on these).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "convert.h"
#include "kiln/autograd.h"
#include "kiln/jit.h"
#include "python_owned.h"

namespace kiln::py {
namespace nb = nanobind;
using namespace nb::literals;

namespace {

std::vector<Tensor> tensors_or_undefined(const std::vector<std::optional<Tensor>>& items) {
  std::vector<Tensor> out;
  out.reserve(items.size());
  for (const std::optional<Tensor>& t : items) out.push_back(t ? *t : Tensor());
  return out;
}

// backward's `inputs`: a tensor or an iterable of tensors.
std::vector<Tensor> backward_inputs(nb::handle obj) {
  if (nb::isinstance<Tensor>(obj)) return {nb::cast<Tensor>(obj)};
  KILN_CHECK_TYPE(PyIter_Check(obj.ptr()) ||
                  (PySequence_Check(obj.ptr()) && !nb::isinstance<nb::str>(obj)))
      << "backward: expected inputs to be a kiln.Tensor or a sequence of them, got "
      << nb::type_name(obj.type()).c_str();
  std::vector<Tensor> inputs;
  for (nb::handle item : obj) {
    KILN_CHECK_TYPE(nb::isinstance<Tensor>(item))
        << "backward: expected inputs to hold kiln.Tensors, got "
        << nb::type_name(item.type()).c_str() << " at position " << inputs.size();
    inputs.push_back(nb::cast<Tensor>(item));
  }
  return inputs;
}

// autograd::backward into every leaf, or into `inputs` (None: every leaf).
void backward_into(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
                   bool retain_graph, bool create_graph, nb::handle inputs) {
  if (inputs.is_none()) {
    autograd::backward(outputs, grad_outputs, retain_graph, create_graph);
  } else {
    autograd::backward(outputs, grad_outputs, retain_graph, create_graph, backward_inputs(inputs));
  }
}

nb::list none_for_undefined(const std::vector<Tensor>& tensors) {
  nb::list out;
  for (const Tensor& t : tensors) {
    if (t.defined()) {
      out.append(nb::cast(t));
    } else {
      out.append(nb::none());
    }
  }
  return out;
}

// What Tensor.register_post_accumulate_grad_hook returns.
struct PostAccumulateGradHookHandle {
  Tensor leaf;
  uint64_t handle;
  void remove() const { autograd::remove_post_accumulate_grad_hook(leaf, handle); }
};

// What Tensor.register_hook returns. Weak: a hook that refers to its handle (one that removes
// itself) would otherwise keep the tensor and its graph alive through C++, out of the collector's
// sight. A non-leaf's hooks live on its grad_fn, which may outlive the tensor.
struct GradHookHandle {
  std::weak_ptr<autograd::Node> grad_fn;
  std::weak_ptr<TensorImpl> leaf;
  uint64_t handle;
  void remove() const {
    if (const std::shared_ptr<autograd::Node> node = grad_fn.lock()) {
      autograd::remove_hook(*node, handle);
    } else if (std::shared_ptr<TensorImpl> impl = leaf.lock()) {
      autograd::remove_hook(Tensor(std::move(impl)), handle);
    }
  }
};

}  // namespace

void bind_autograd(nb::module_& m) {
  nb::module_ ag = m.def_submodule("autograd", "Gradients (kiln.autograd)");
  ag.def("is_grad_enabled", &autograd::is_grad_enabled,
         "True when ops are recorded for backward on this thread.");
  ag.def("set_grad_enabled", &autograd::set_grad_enabled, "enabled"_a);
  nb::class_<PostAccumulateGradHookHandle>(ag, "PostAccumulateGradHookHandle",
                                           "A registered hook; remove() unregisters it.")
      .def("remove", &PostAccumulateGradHookHandle::remove,
           "Unregisters the hook (again is harmless).");
  nb::class_<GradHookHandle>(ag, "GradHookHandle", "A registered hook; remove() unregisters it.")
      .def("remove", &GradHookHandle::remove, "Unregisters the hook (again is harmless).");

  nb::class_<autograd::Node>(ag, "Node",
                             "One recorded call of the backward graph (Tensor.grad_fn).")
      .def("name", &autograd::Node::name)
      .def_prop_ro(
          "next_functions",
          [](const autograd::Node& n) {
            nb::list out;
            for (const autograd::Node::Edge& e : n.next_edges()) {
              out.append(nb::make_tuple(e.node ? nb::cast(e.node) : nb::none(), e.input_nr));
            }
            return nb::tuple(out);
          },
          "(node, input_nr) for each input of the call; node is None where no gradient "
          "flows.")
      .def_prop_ro(
          "variable",
          [](const autograd::Node& n) -> std::optional<Tensor> {
            Tensor leaf = autograd::accumulated_leaf(n);
            if (!leaf.defined()) return std::nullopt;
            return leaf;
          },
          "The leaf tensor this node accumulates gradients into (AccumulateGrad), else None.")
      .def("__repr__", [](const autograd::Node& n) { return "<" + n.name() + " backward>"; });

  ag.def(
      "backward",
      [](const std::vector<Tensor>& outputs, const std::vector<std::optional<Tensor>>& grad_outputs,
         bool retain_graph, bool create_graph, nb::handle inputs) {
        backward_into(outputs, tensors_or_undefined(grad_outputs), retain_graph, create_graph,
                      inputs);
      },
      "outputs"_a, "grad_outputs"_a, "retain_graph"_a, "create_graph"_a, "inputs"_a = nb::none());
  ag.def(
      "grad",
      [](const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
         const std::vector<std::optional<Tensor>>& grad_outputs, bool retain_graph,
         bool create_graph, bool allow_unused) {
        return none_for_undefined(autograd::grad(outputs, inputs,
                                                 tensors_or_undefined(grad_outputs),
                                                 retain_graph, create_graph, allow_unused));
      },
      "outputs"_a, "inputs"_a, "grad_outputs"_a, "retain_graph"_a, "create_graph"_a,
      "allow_unused"_a);
  ag.def(
      "record_function",
      [](const std::string& name, const std::vector<Tensor>& inputs,
         const std::vector<Tensor>& outputs, const std::vector<Tensor>& saved,
         const std::vector<Tensor>& non_differentiable, nb::object backward) {
        auto ctx = std::make_shared<AutogradContext>();
        ctx->SaveForBackward(saved);
        ctx->MarkNonDifferentiable(non_differentiable);
        auto callable = std::make_shared<PythonOwned>(std::move(backward));
        const size_t num_inputs = inputs.size();
        return autograd::detail::record_function(
            name, ctx, inputs, outputs,
            [callable, num_inputs](AutogradContext* c, const std::vector<Tensor>& grads) {
              nb::gil_scoped_acquire gil;
              KILN_CHECK_VALUE(callable->get().is_valid())
                  << "backward of a Python Function after the interpreter's exit began";
              nb::object result =
                  callable->get()(nb::cast(c->GetSavedTensors()), none_for_undefined(grads));
              std::vector<Tensor> out;
              for (nb::handle item : result) {
                out.push_back(item.is_none() ? Tensor() : nb::cast<Tensor>(item));
              }
              KILN_CHECK_VALUE(out.size() == num_inputs)
                  << "backward returned " << out.size() << " gradients, expected one per tensor "
                  << "argument of forward (" << num_inputs << ")";
              return out;
            });
      },
      "name"_a, "inputs"_a, "outputs"_a, "saved"_a, "non_differentiable"_a, "backward"_a,
      "Gives `outputs` (computed without recording) a node whose gradients come from "
      "`backward(saved, grads) -> sequence`, one per input; returns the outputs to hand out. "
      "The node keeps `saved` (outputs among them as untracked aliases) until a backward that "
      "does not retain the graph.");
}

void bind_tensor_autograd(nb::class_<Tensor>& cls) {
  cls.def_prop_rw(
         "requires_grad", [](const Tensor& t) { return autograd::requires_grad(t); },
         [](const Tensor& t, bool value) { autograd::set_requires_grad(t, value); },
         "True when gradients are computed for this tensor (set it on leaves).")
      .def(
          "requires_grad_",
          [](nb::handle self, bool value) -> nb::typed<nb::object, Tensor> {
            autograd::set_requires_grad(nb::cast<const Tensor&>(self), value);
            return nb::borrow(self);  // the object itself, subclass (a Parameter) and all
          },
          "requires_grad"_a = true, "Sets requires_grad in place and returns this tensor.")
      .def_prop_rw(
          "grad",
          [](const Tensor& t) -> std::optional<Tensor> {
            Tensor g = autograd::get_grad(t);
            return g.defined() ? std::optional<Tensor>(g) : std::nullopt;
          },
          [](const Tensor& t, std::optional<Tensor> g) {
            // A traced gradient has no data, and no later call would update it.
            KILN_CHECK_KIND(ErrorKind::kNotImplemented, !g || !is_tracer(*g))
                << "setting .grad to a value traced inside a jitted function would leave it "
                << "there, without data, after the trace; give the gradients to the optimizer "
                << "(opt(grads)) or return them from the function";
            autograd::set_grad(t, g ? *g : Tensor());
          },
          nb::arg("value").none(), "The gradient backward() accumulated into this leaf, or None.")
      .def_prop_ro("grad_fn", &autograd::grad_fn,
                   "The recorded call that made this tensor, or None for a leaf.")
      .def_prop_ro("is_leaf", &autograd::is_leaf, "True unless a recorded op made this tensor.")
      .def("detach", &autograd::detach,
           "The same data as a new tensor that autograd does not track.")
      .def(
          "detach_",
          [](nb::handle self) -> nb::typed<nb::object, Tensor> {
            autograd::detach_in_place(nb::cast<const Tensor&>(self));
            return nb::borrow(self);
          },
          "Makes this tensor a leaf that does not require grad (its history is forgotten) and "
          "returns it; refused for a view autograd tracks (use detach()).")
      .def(
          "backward",
          [](const Tensor& t, std::optional<Tensor> gradient, std::optional<bool> retain_graph,
             bool create_graph, nb::handle inputs) {
            backward_into({t}, gradient ? std::vector<Tensor>{*gradient} : std::vector<Tensor>{},
                          retain_graph.value_or(create_graph), create_graph, inputs);
          },
          "gradient"_a = nb::none(), "retain_graph"_a = nb::none(), "create_graph"_a = false,
          "inputs"_a = nb::none(),
          "Accumulates the gradient of this tensor into the .grad of the leaves it depends on "
          "(`gradient` is required unless it has one element); with `inputs` (a tensor or a "
          "sequence), into theirs only, leaves or not.")
      .def(
          "register_post_accumulate_grad_hook",
          [](const Tensor& t, nb::object hook) {
            auto callable = std::make_shared<PythonOwned>(std::move(hook));
            const uint64_t handle = autograd::register_post_accumulate_grad_hook(
                t, [callable](const Tensor& leaf) {
                  nb::gil_scoped_acquire gil;
                  if (callable->get().is_valid()) callable->get()(leaf);  // else: exit began
                });
            return PostAccumulateGradHookHandle{t, handle};
          },
          "hook"_a,
          "Calls hook(tensor) each time backward() has accumulated a gradient into this leaf's "
          ".grad. Returns a handle whose remove() unregisters it.")
      .def(
          "register_hook",
          [](const Tensor& t, nb::object hook) {
            KILN_CHECK_TYPE(PyCallable_Check(hook.ptr()))
                << "register_hook: expected a callable, got " << nb::type_name(hook.type()).c_str();
            auto callable = std::make_shared<PythonOwned>(std::move(hook));
            const uint64_t handle = autograd::register_hook(t, [callable](const Tensor& grad) {
              nb::gil_scoped_acquire gil;
              if (!callable->get().is_valid()) return Tensor();  // the interpreter's exit began
              nb::object result = callable->get()(grad);
              if (result.is_none()) return Tensor();
              const Tensor* replaced = tensor_ptr(result.ptr());
              KILN_CHECK_TYPE(replaced != nullptr)
                  << "a gradient hook (register_hook) must return a kiln.Tensor or None, got "
                  << nb::type_name(result.type()).c_str();
              return *replaced;
            });
            const std::shared_ptr<autograd::Node> node = autograd::grad_fn(t);
            return node != nullptr ? GradHookHandle{node, {}, handle}
                                   : GradHookHandle{{}, t.impl_ptr(), handle};
          },
          "hook"_a,
          "Calls hook(grad) with this tensor's gradient each time backward() or grad() computes "
          "it (a leaf's before it is accumulated); a tensor returned replaces the gradient. "
          "Returns a handle whose remove() unregisters it.")
      .def("retain_grad", &autograd::retain_grad,
           "Makes backward() fill this tensor's .grad although a recorded op made it.")
      .def_prop_ro("retains_grad", &autograd::retains_grad,
                   "True for a leaf that requires grad, or after retain_grad().");
}

}  // namespace kiln::py
