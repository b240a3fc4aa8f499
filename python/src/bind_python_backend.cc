// Backends written in Python (kiln.graph.register_custom_backend(name, obj)): a BackendBase whose
// Build, Run, Supports and ClearGraph call the object's build / run / supports / clear methods,
// and the graph view they get (kiln/graph.py's Graph and Value, made from the records here).
//
// Note [Python backends]
// The jit calls Build and Run on the thread of the jitted call, which holds the GIL; a C++ caller
// on another thread (JitFunction) does not, so each method takes it. Every Python object the
// backend keeps (the user's backend, each built graph's object) is a PythonOwned: dropped with the
// GIL held, and released at the interpreter's exit, after which the backend refuses to run. None
// is dropped while the backend's mutex is held (a thread holding the GIL may be waiting for it).
// A Python exception is turned into a kiln::Error while the GIL is still held (the exception
// object must die under it); BackendManager then adds the backend's and the graph's names.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "bindings.h"
#include "convert.h"
#include "kiln/autograd.h"
#include "kiln/backend.h"
#include "kiln/ir.h"
#include "kiln/ir/text.h"
#include "python_owned.h"

namespace kiln::py {
namespace nb = nanobind;
using namespace nb::literals;

namespace {

nb::object attr_to_python(const AttrValue& value) {
  return std::visit(
      [](const auto& v) -> nb::object {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          return nb::none();
        } else if constexpr (std::is_same_v<T, Scalar>) {
          if (v.kind() == Scalar::Kind::kBool) return nb::bool_(v.to_bool());
          if (v.kind() == Scalar::Kind::kInt) return nb::int_(v.to_int());
          return nb::float_(v.to_double());
        } else {
          return nb::cast(v);
        }
      },
      value);
}

/// One op of a graph, callable from Python on tensors: what Value.call runs.
struct NodeOp {
  PrimitivePtr primitive;

  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const {
    return call_op(primitive->op(), inputs, primitive->normalized_attrs());
  }
};

nb::object shape_of(const Abstract& a) {
  if (!a.is_tensor()) return nb::none();
  nb::list dims;
  for (int64_t d : a.shape()) dims.append(d);
  return nb::tuple(dims);
}

nb::object dtype_of(const Abstract& a) { return a.is_tensor() ? nb::cast(a.dtype()) : nb::none(); }

/// A record of one node for kiln.graph's view: (kind, name, dtype, shape, op, inputs (record
/// indices), attrs, payload): payload is the parameter's index, the constant's tensor, or the
/// op's NodeOp.
nb::tuple node_record(const Node& n, const nb::list& inputs) {
  const Abstract& a = n.abstract();
  std::string name = "%" + std::to_string(n.id());
  if (n.is_parameter()) {
    const auto& p = static_cast<const Parameter&>(n);
    const std::vector<ParameterPtr>& params = p.graph()->parameters();
    int64_t index = 0;
    while (params[static_cast<size_t>(index)].get() != &p) ++index;
    if (!p.name().empty()) name = p.name();
    return nb::make_tuple("input", name, dtype_of(a), shape_of(a), nb::none(), inputs, nb::dict(),
                          index);
  }
  if (n.is_value()) {
    const Tensor& value = static_cast<const ValueNode&>(n).value();
    return nb::make_tuple("constant", name, dtype_of(a), shape_of(a), nb::none(), inputs,
                          nb::dict(), value.defined() ? nb::cast(value) : nb::none());
  }
  const auto& c = static_cast<const CNode&>(n);
  const Primitive& prim = *c.primitive();
  nb::dict attrs;
  for (const auto& [key, value] :
       prim.is_builtin() ? prim.attrs().items() : prim.normalized_attrs().items()) {
    attrs[key.c_str()] = attr_to_python(value);
  }
  return nb::make_tuple("node", name, dtype_of(a), shape_of(a), prim.name(), inputs, attrs,
                        prim.is_builtin() ? nb::none() : nb::cast(NodeOp{c.primitive()}));
}

/// The records of `nodes` (each node's inputs among the records before it, made on the way) and
/// the record index of each node; `order` lists the nodes to describe, inputs first.
nb::list records_of(const std::vector<NodePtr>& order,
                    std::unordered_map<const Node*, size_t>& index) {
  nb::list records;
  for (const NodePtr& n : order) {
    nb::list inputs;
    if (n->is_cnode()) {
      for (const NodePtr& in : static_cast<const CNode&>(*n).inputs()) {
        inputs.append(index.at(in.get()));
      }
    }
    index[n.get()] = records.size();
    records.append(node_record(*n, inputs));
  }
  return records;
}

/// Raises the Python exception `e` (caught with the GIL held) as a kiln::Error that names the
/// method, the exception, its message and where it was raised: the traceback's last frame outside
/// the kiln package (the backend's own line that called into Kiln wrongly, not Kiln's line that
/// raised), or its last frame when every frame is Kiln's.
[[noreturn]] void fail_with(const char* method, nb::python_error& e) {
  std::string raised =
      std::string(nb::type_name(e.type()).c_str()) + ": " + nb::str(e.value()).c_str();
  nb::handle tb = e.traceback();
  if (tb.is_valid() && !tb.is_none()) {
    const std::string package =
        nb::cast<std::string>(nb::module_::import_("kiln").attr("__path__")[0]) + "/";
    std::string where;
    for (; !tb.is_none(); tb = tb.attr("tb_next")) {
      const std::string file =
          nb::cast<std::string>(tb.attr("tb_frame").attr("f_code").attr("co_filename"));
      const bool kilns = file.compare(0, package.size(), package) == 0;
      if (!kilns || where.empty() || where.compare(0, package.size(), package) == 0) {
        where = file + ":" + std::to_string(nb::cast<int>(tb.attr("tb_lineno")));
      }
    }
    raised += " (at " + where + ")";
  }
  e.restore();  // the exception back to Python, where it is dropped now, under the GIL
  PyErr_Clear();
  KILN_FAIL(kGeneric) << "the Python backend's " << method << " raised " << raised;
}

using Owned = std::shared_ptr<PythonOwned>;

// The GIL for a call into Python: taken when this thread lacks it (a C++ caller), not again when
// it holds it (the jitted call's thread). Taking it again there, a daemon thread stopped inside
// the backend at the interpreter's exit aborted it (PyGILState_Release on a dead thread state).
class Gil {
 public:
  Gil() {
    if (!PyGILState_Check()) acquired_.emplace();
  }

 private:
  std::optional<nb::gil_scoped_acquire> acquired_;
};

class PythonBackend final : public BackendBase {
 public:
  PythonBackend(Owned impl, Owned graph_class)
      : impl_(std::move(impl)), graph_class_(std::move(graph_class)) {}

  // Unregistered: the graphs still built are cleared (clear(built) may free a device's memory).
  ~PythonBackend() override {
    if (!Py_IsInitialized() || !impl_->get().is_valid()) return;
    Clear();
  }

  BackendGraphId Build(const FuncGraphPtr& graph, const BackendJitConfig& config) override {
    const Gil gil;
    check_alive();
    try {
      std::unordered_map<const Node*, size_t> index;
      std::vector<NodePtr> order;
      for (const NodePtr& n : graph->topological_order()) {
        if (n != graph->return_node()) order.push_back(n);
      }
      nb::list records = records_of(order, index);
      nb::list outputs;
      for (const NodePtr& out : graph->outputs()) outputs.append(index.at(out.get()));
      nb::dict options;
      for (const auto& [key, value] : config.options) options[key.c_str()] = value;
      nb::dict cfg;
      cfg["jit_level"] = config.jit_level;
      cfg["backend"] = config.backend;
      cfg["options"] = options;
      nb::object view = graph_class_->get().attr("_from_records")(graph->name(), records, outputs,
                                                                  ir::print(*graph));
      auto built = std::make_shared<PythonOwned>(impl_->get().attr("build")(view, cfg));
      std::lock_guard<std::mutex> lock(mutex_);
      const BackendGraphId id = next_id_++;
      built_.emplace(id, std::move(built));
      return id;
    } catch (nb::python_error& e) {
      fail_with("build", e);
    }
  }

  RunningStatus Run(BackendGraphId id, const std::vector<Tensor>& inputs,
                    std::vector<Tensor>* outputs) override {
    const Gil gil;
    check_alive();
    // A reference of its own, not the PythonOwned (whose last release takes the GIL: a thread
    // Python stops inside run at exit unwinds through here without it).
    nb::object built;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = built_.find(id);
      KILN_CHECK_VALUE(it != built_.end()) << "no graph was built with id " << id;
      built = it->second->get();
    }
    try {
      nb::list args;
      for (const Tensor& t : inputs) args.append(nb::cast(t));
      nb::object result = impl_->get().attr("run")(built, args);
      outputs->clear();
      if (nb::isinstance<Tensor>(result)) {
        outputs->push_back(nb::cast<Tensor>(result));
        detach_all(*outputs);
        return RunningStatus::kRunningSuccess;
      }
      KILN_CHECK_TYPE(nb::isinstance<nb::list>(result) || nb::isinstance<nb::tuple>(result))
          << "run must return a list (or tuple) of kiln.Tensor, one per graph output, or one "
          << "kiln.Tensor; got " << nb::type_name(result.type()).c_str();
      for (nb::handle item : result) {
        KILN_CHECK_TYPE(nb::isinstance<Tensor>(item))
            << "run must return kiln.Tensor outputs; output " << outputs->size() << " is a "
            << nb::type_name(item.type()).c_str();
        outputs->push_back(nb::cast<Tensor>(item));
      }
      detach_all(*outputs);
      return RunningStatus::kRunningSuccess;
    } catch (nb::python_error& e) {
      fail_with("run", e);
    }
  }

  void ClearGraph(BackendGraphId id) override {
    const Gil gil;
    Owned built;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = built_.find(id);
      if (it == built_.end()) return;
      built = std::move(it->second);
      built_.erase(it);
    }
    call_clear(*built);
  }

  void Clear() override {
    const Gil gil;
    std::map<BackendGraphId, Owned> all;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      all.swap(built_);
    }
    for (auto& [id, built] : all) call_clear(*built);
  }

  bool Supports(const CNodePtr& node) const override {
    const Gil gil;
    check_alive();
    if (!nb::hasattr(impl_->get(), "supports")) return true;
    try {
      // The node and its inputs (records without inputs of their own), as build's view has them.
      std::unordered_map<const Node*, size_t> index;
      nb::list records;
      nb::list inputs;
      for (const NodePtr& in : node->inputs()) {
        auto [it, added] = index.emplace(in.get(), records.size());
        if (added) records.append(node_record(*in, nb::list()));
        inputs.append(it->second);
      }
      records.append(node_record(*node, inputs));
      nb::object view = graph_class_->get().attr("_node_from_records")(records);
      nb::object answer = impl_->get().attr("supports")(view);
      const int truth = PyObject_IsTrue(answer.ptr());  // a NumPy bool as well as a bool
      if (truth < 0) throw nb::python_error();
      return truth == 1;
    } catch (nb::python_error& e) {
      fail_with("supports", e);
    }
  }

 private:
  // A jitted function's results carry no gradient (Note [Results carry no gradient]), even
  // tensors a backend made from ones that require grad.
  static void detach_all(std::vector<Tensor>& outputs) {
    for (Tensor& t : outputs) {
      if (autograd::requires_grad(t)) t = autograd::detach(t);
    }
  }

  // Refuses a call after the interpreter's exit released the backend's objects.
  void check_alive() const {
    KILN_CHECK_VALUE(impl_->get().is_valid())
        << "the Python backend was released when the interpreter exited";
  }

  // The backend's optional clear(built): a graph the jit no longer needs. An exception pending
  // (a jitted function dropped while its error propagates) waits aside: Python code run with it
  // set replaced it with a SystemError.
  void call_clear(const PythonOwned& built) {
    const nb::error_scope pending;
    const nb::object& impl = impl_->get();
    if (!impl.is_valid() || !built.get().is_valid() || !nb::hasattr(impl, "clear")) return;
    try {
      impl.attr("clear")(built.get());
    } catch (nb::python_error& e) {
      e.discard_as_unraisable("kiln: a Python backend's clear");
    }
  }

  const Owned impl_;
  const Owned graph_class_;  // kiln.graph.Graph, which makes the views from records
  std::mutex mutex_;
  std::map<BackendGraphId, Owned> built_;
  BackendGraphId next_id_ = 1;
};

/// The registrations of Python backends, by name: unregistering drops the handle.
std::map<std::string, BackendRegistration>& python_backends() {
  static auto* registrations = new std::map<std::string, BackendRegistration>();
  return *registrations;  // never destroyed: kiln.graph empties it at exit
}

}  // namespace

void bind_python_backend(nb::module_& graph) {
  nb::class_<NodeOp>(graph, "_NodeOp", "One op of a graph, run eagerly on tensors.")
      .def(
          "__call__",
          [](const NodeOp& op, const nb::sequence& inputs) {
            std::vector<Tensor> tensors;  // None: a missing optional input
            for (nb::handle item : inputs) {
              tensors.push_back(item.is_none() ? Tensor() : nb::cast<Tensor>(item));
            }
            return op(tensors);
          },
          "inputs"_a);
  graph.def(
      "_register_python_backend",
      [](const std::string& name, nb::object backend, nb::object graph_class) {
        auto impl = std::make_shared<PythonOwned>(std::move(backend));
        auto views = std::make_shared<PythonOwned>(std::move(graph_class));
        BackendRegistration registration = BackendManager::Instance().Register(
            name, [impl, views] { return std::make_unique<PythonBackend>(impl, views); });
        python_backends().emplace(name, std::move(registration));
      },
      "name"_a, "backend"_a, "graph_class"_a,
      "Registers a backend written in Python (kiln.graph.register_custom_backend).");
  graph.def(
      "_unregister_python_backend",
      [](const std::string& name) {
        auto it = python_backends().find(name);
        if (it == python_backends().end()) return false;
        BackendRegistration registration = std::move(it->second);
        python_backends().erase(it);
        return true;  // the registration goes here, taking the backend's instance with it
      },
      "name"_a, "Unregisters a Python backend; False when `name` is none.");
  graph.def(
      "_python_backends",
      [] {
        std::vector<std::string> names;
        for (const auto& [name, registration] : python_backends()) names.push_back(name);
        return names;
      },
      "Names of the registered Python backends.");
}

}  // namespace kiln::py
