// kiln._C.jit: the object behind kiln.jit (python/kiln/jit.py subclasses JitFunction).
//
// A call walks the arguments once in C++: kiln.Tensor values become graph inputs (their dtype and
// shape go into the signature), Python numbers, None, strings and any other objects become
// constants (their value, or an interned token, goes into the signature), tuples, lists, dicts
// and namedtuples are walked into (their kind and length go into the signature). A hit runs the
// built graph and rebuilds the function's result from the graph's outputs with the output tree
// kept beside it; only a miss calls Python code (the function itself, on tracers). The state the
// function's traces decided on ends the signature: grad mode, the training flags of the cells
// they read (kiln/nn/cell.py records them) and whether the tensors from outside they read require
// grad (see signature()).
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bindings.h"
#include "convert.h"
#include "jit/dynamic_graph.h"
#include "jit/graph_cache.h"
#include "jit/trace.h"
#include "kiln/autograd.h"
#include "kiln/jit.h"

namespace kiln::py {
namespace nb = nanobind;
using namespace nb::literals;
using jit_detail::SignatureKey;
using jit_detail::Trace;

namespace {

// Signature words of the Python front end (after the core's tensor and scalar tags).
enum Tag : int64_t {
  kTuple = SignatureKey::kFrontEndTags,
  kList,
  kDict,
  kNamedTuple,
  kToken,
};

// Set on this thread while kiln.grad / value_and_grad runs the function it differentiates, which
// cannot differentiate a jitted call inside (Note [Results carry no gradient]).
thread_local bool t_differentiating = false;

// A Python object held weakly where it takes a weak reference (a model, a function), else
// strongly.
class WeakObject {
 public:
  explicit WeakObject(nb::handle object)
      : weak_(PyType_SUPPORTS_WEAKREFS(Py_TYPE(object.ptr()))),
        held_(weak_ ? nb::steal(PyWeakref_NewRef(object.ptr(), nullptr)) : nb::borrow(object)) {
    if (!held_.is_valid()) throw nb::python_error();
  }
  /// The object (borrowed), or null once it died.
  PyObject* get() const {
    if (!weak_) return held_.ptr();
    PyObject* object = PyWeakref_GetObject(held_.ptr());
    return object == Py_None ? nullptr : object;
  }
  /// What is held (the weak reference, or the object), for the garbage collector.
  PyObject* held() const { return held_.ptr(); }

 private:
  bool weak_;
  nb::object held_;
};

bool is_namedtuple(PyObject* o) {
  return PyTuple_Check(o) && !PyTuple_CheckExact(o) &&
         PyObject_HasAttrString(reinterpret_cast<PyObject*>(Py_TYPE(o)), "_fields");
}

// How to rebuild the function's result from the graph's outputs.
struct OutputTree {
  enum class Kind : uint8_t { kTensor, kConstant, kTuple, kList, kDict, kNamedTuple };
  Kind kind = Kind::kConstant;
  size_t index = 0;    // kTensor: which output
  nb::object object;   // kConstant: the value; kDict: the keys (a tuple); kNamedTuple: the type
  std::vector<OutputTree> children;
  jit_detail::Writes writes;    // the root's: what the function writes into (Trace::writes)
  bool size_decisions = false;  // the root's: Trace::size_decisions
};

OutputTree output_tree(nb::handle result, std::vector<Tensor>& outputs) {
  PyObject* o = result.ptr();
  OutputTree tree;
  if (const Tensor* t = tensor_ptr(o)) {
    tree.kind = OutputTree::Kind::kTensor;
    tree.index = outputs.size();
    outputs.push_back(*t);
    return tree;
  }
  if (PyTuple_CheckExact(o) || PyList_CheckExact(o) || is_namedtuple(o)) {
    tree.kind = PyList_CheckExact(o)    ? OutputTree::Kind::kList
                : PyTuple_CheckExact(o) ? OutputTree::Kind::kTuple
                                        : OutputTree::Kind::kNamedTuple;
    if (tree.kind == OutputTree::Kind::kNamedTuple) tree.object = nb::borrow(result.type());
    for (nb::handle item : result) tree.children.push_back(output_tree(item, outputs));
    return tree;
  }
  if (PyDict_CheckExact(o)) {
    tree.kind = OutputTree::Kind::kDict;
    nb::dict d = nb::borrow<nb::dict>(result);
    nb::list keys;
    for (auto [key, value] : d) {
      keys.append(key);
      tree.children.push_back(output_tree(value, outputs));
    }
    tree.object = nb::tuple(keys);
    return tree;
  }
  tree.object = nb::borrow(result);
  return tree;
}

// Equal kinds, output indices and constants (by ==, or identity where == fails).
bool same_tree(const OutputTree& a, const OutputTree& b) {
  if (a.kind != b.kind || a.index != b.index || a.children.size() != b.children.size()) {
    return false;
  }
  if (a.object.is_valid() != b.object.is_valid()) return false;
  if (a.object.is_valid()) {
    const int equal = PyObject_RichCompareBool(a.object.ptr(), b.object.ptr(), Py_EQ);
    if (equal < 0) PyErr_Clear();
    if (equal != 1) return false;
  }
  for (size_t i = 0; i < a.children.size(); ++i) {
    if (!same_tree(a.children[i], b.children[i])) return false;
  }
  return true;
}

nb::object rebuild(const OutputTree& tree, std::vector<Tensor>& outputs) {
  switch (tree.kind) {
    case OutputTree::Kind::kTensor: return nb::cast(std::move(outputs[tree.index]));
    case OutputTree::Kind::kConstant: return tree.object;
    case OutputTree::Kind::kDict: {
      nb::dict d;
      for (size_t i = 0; i < tree.children.size(); ++i) {
        d[tree.object[i]] = rebuild(tree.children[i], outputs);
      }
      return std::move(d);
    }
    default: break;
  }
  nb::list items;
  for (const OutputTree& child : tree.children) items.append(rebuild(child, outputs));
  if (tree.kind == OutputTree::Kind::kList) return std::move(items);
  if (tree.kind == OutputTree::Kind::kTuple) return nb::tuple(items);
  return tree.object(*items);  // a namedtuple
}

class JitFunctionObject {
 public:
  JitFunctionObject(nb::object fn, nb::object trace_call, std::vector<std::string> arg_names,
                    std::string name, JitOptions options)
      : fn_(std::move(fn)),
        trace_call_(std::move(trace_call)),
        arg_names_(std::move(arg_names)),
        name_(std::move(name)),
        options_(std::move(options)) {
    validate(options_);
  }

  nb::object call(nb::args args, nb::kwargs kwargs) {
    if (Trace::active()) {  // part of the enclosing trace
      return nb::steal(PyObject_Call(fn_.ptr(), args.ptr(), kwargs.ptr()));
    }
    std::vector<Tensor> inputs;
    std::shared_ptr<const Guards> guards;
    const jit_detail::Lookup found = lookup(args, kwargs, inputs, guards);
    if (t_differentiating && autograd::is_grad_enabled()) check_not_differentiated(inputs, *guards);
    const OutputTree& tree = *static_cast<const OutputTree*>(found.entry->front_end.get());
    jit_detail::check_writes(tree.writes, inputs);
    std::vector<Tensor> outputs;
    found.graph->run(inputs, &outputs);
    jit_detail::write_back(tree.writes, inputs, outputs);
    return rebuild(tree, outputs);
  }

  std::string graph(nb::args args, nb::kwargs kwargs) {
    std::vector<Tensor> outputs;
    Guards unkept;
    return ir::print(*trace(args, kwargs, outputs, unkept).first);
  }

  std::string optimized_graph(nb::args args, nb::kwargs kwargs) {
    std::vector<Tensor> outputs;
    Guards unkept;
    FuncGraphPtr graph = trace(args, kwargs, outputs, unkept).first;
    PassReport report;
    jit_detail::optimize(graph, options_, &report);
    // The most recent build's report: pass_report() after optimized_graph() shows it.
    last_report_ = std::move(report);
    return ir::print(*graph);
  }

  // The memory plan of the graph built for these arguments (building it on a miss), as a dict.
  nb::dict memory_plan(nb::args args, nb::kwargs kwargs) {
    std::vector<Tensor> inputs;
    std::shared_ptr<const Guards> guards;
    const BackendMemoryPlan plan = lookup(args, kwargs, inputs, guards).graph->memory_plan();
    nb::dict d;
    d["peak_bytes"] = plan.peak_bytes;
    d["arena_bytes"] = plan.arena_bytes;
    d["output_bytes"] = plan.output_bytes;
    d["unshared_bytes"] = plan.unshared_bytes;
    d["buffers"] = plan.buffers;
    d["in_place"] = plan.in_place;
    return d;
  }

  // Calls that build run with the GIL held, so the report needs no lock.
  nb::tuple pass_report() const { return pass_report_to_python(last_report_); }

  nb::tuple cache_info() const {
    const JitCacheInfo info = cache_.info();
    return nb::make_tuple(info.hits, info.misses, info.size);
  }

  // Drops the graphs and everything kept to key them.
  void clear_cache() {
    cache_.clear();
    guards_.clear();
    PyDict_Clear(tokens_.ptr());
    identities_.clear();
    dead_tokens_.clear();
  }

  const JitOptions& options() const { return options_; }

  int traverse(visitproc visit, void* arg) {
    Py_VISIT(fn_.ptr());
    Py_VISIT(trace_call_.ptr());
    for (const auto& [key, guards] : guards_) {
      Py_VISIT(guards->reading.ptr());
      for (const WeakObject& cell : guards->cells) Py_VISIT(cell.held());
    }
    Py_VISIT(tokens_.ptr());
    for (const auto& [address, identity] : identities_) Py_VISIT(identity.second.held());
    return 0;
  }

  void clear() {
    cache_.clear();
    fn_.reset();
    trace_call_.reset();
    guards_.clear();
    tokens_.reset();
    identities_.clear();
  }

 private:
  // What the traces of one signature of the arguments read besides them, whose state ends the
  // key (guarded_key): the cells whose training flag they read (kiln/nn/cell.py adds them to
  // `reading` through trace_call_ while a trace runs; kept in `cells`) and the tensors from
  // outside they read (Trace::captured), both weakly: the jit keeps no model alive, and once
  // dead, no graph holds them.
  struct Guards {
    nb::list reading;
    std::vector<WeakObject> cells;
    std::vector<std::weak_ptr<TensorImpl>> tensors;
    std::set<std::weak_ptr<TensorImpl>, std::owner_less<std::weak_ptr<TensorImpl>>> seen;
    size_t size() const { return cells.size() + tensors.size(); }
  };

  // Whether a guarded tensor requires grad: 1 or 0. A dead one reads 0, as one that did not: no
  // graph holds it, so it cannot decide anything. Reading 2 made a tensor the function creates
  // and the build folds away (x * (kiln.tensor(2.0) / 3)) miss the key on every later call.
  static int requires_grad_word(const std::weak_ptr<TensorImpl>& weak) {
    std::shared_ptr<TensorImpl> impl = weak.lock();
    return impl != nullptr && autograd::requires_grad(Tensor(std::move(impl)));
  }

  // Under kiln.grad / value_and_grad (t_differentiating): a call whose result should depend on a
  // tensor that requires grad (an argument, or a weight its trace read) would give a gradient of
  // zeros, since a jitted function's results carry none.
  void check_not_differentiated(const std::vector<Tensor>& inputs, const Guards& guards) const {
    const bool tracked =
        std::any_of(inputs.begin(), inputs.end(),
                    [](const Tensor& t) { return autograd::requires_grad(t); }) ||
        std::any_of(guards.tensors.begin(), guards.tensors.end(),
                    [](const auto& weak) { return requires_grad_word(weak) == 1; });
    KILN_CHECK_VALUE(!tracked)
        << "kiln.jit: " << name_ << " was called inside kiln.grad / value_and_grad with a tensor "
        << "that requires grad, which it cannot differentiate: a jitted function's results carry "
        << "no gradient (the gradients would be zeros). Differentiate inside the jitted function "
        << "instead: kiln.jit(kiln.grad(f)), or jit the whole training step";
  }

  // The built graph for these arguments (traced and built first on a miss); fills `inputs` and
  // `kept` (the guards of the arguments' signature, which outlive a clear_cache() meanwhile).
  jit_detail::Lookup lookup(const nb::args& args, const nb::kwargs& kwargs,
                            std::vector<Tensor>& inputs, std::shared_ptr<const Guards>& kept) {
    const SignatureKey arguments = arguments_key(args, kwargs, inputs);
    std::shared_ptr<Guards>& slot = guards_[arguments];
    if (slot == nullptr) slot = std::make_shared<Guards>();
    // Held here: the traced function may call clear_cache(), which drops the map's entries.
    const std::shared_ptr<Guards> held = slot;
    Guards& guards = *held;
    kept = held;
    SignatureKey key = guarded_key(arguments, guards);
    jit_detail::Lookup found = jit_detail::lookup(
        cache_, key, options_,
        [&] {
          const size_t known = guards.size();
          std::vector<Tensor> outputs;
          auto [graph, tree] = trace(args, kwargs, outputs, guards);
          if (guards.size() != known) key = guarded_key(arguments, guards);  // what it read first
          const bool size_decisions = tree.size_decisions;
          return jit_detail::Traced{std::move(graph), std::make_shared<OutputTree>(std::move(tree)),
                                    size_decisions};
        },
        [&](const void* first, const void* second) {
          KILN_CHECK_VALUE(same_tree(*static_cast<const OutputTree*>(first),
                                     *static_cast<const OutputTree*>(second)))
              << "jit (dynamic=True): " << name_ << " returns a result of another structure, or "
              << "other constants in it, at another batch size; its result may depend on the "
              << "batch size only through its tensors. Use dynamic=False for this function";
        });
    if (found.built) {
      last_report_ = found.graph->pass_report();
      drop_dead_identities();
    }
    return found;
  }

  // The arguments' part of a call's key (filling `inputs`), grad mode, the default floating dtype
  // and the autocast state: a trace records the dtypes of its time (int * 2.5, zeros(n), the
  // casts autocast makes), so a call after set_default_dtype or inside kiln.autocast traces
  // again, as eager would give other dtypes (torch.compile guards on them too), and the graph
  // traced before keeps serving calls in the old state.
  SignatureKey arguments_key(const nb::args& args, const nb::kwargs& kwargs,
                             std::vector<Tensor>& inputs) {
    SignatureKey key;
    if (options_.dynamic) key.set_dynamic();
    add(args, key, inputs);
    if (kwargs.size() != 0) add(kwargs, key, inputs);
    key.add(autograd::is_grad_enabled());
    key.add(static_cast<int64_t>(default_float_dtype()));
    key.add(jit_detail::autocast_word());
    return key;
  }

  // `arguments` and the state the traces decided on: each guarded cell's training flag and
  // whether each guarded tensor requires grad (kiln.grad's weights: a frozen weight has no
  // gradient). A graph traced in training mode is not the one for eval mode, nor one traced
  // before a weight was frozen.
  static SignatureKey guarded_key(const SignatureKey& arguments, const Guards& guards) {
    SignatureKey key = arguments;
    for (const WeakObject& weak : guards.cells) {
      PyObject* cell = weak.get();
      if (cell == nullptr) {
        key.add(2);  // dead
        continue;
      }
      // The flag itself, not the `training` property, which would look for a running trace.
      const int training = PyObject_IsTrue(nb::getattr(cell, "_training").ptr());
      if (training < 0) throw nb::python_error();
      key.add(training);
    }
    for (const std::weak_ptr<TensorImpl>& weak : guards.tensors) key.add(requires_grad_word(weak));
    return key;
  }

  // One argument (depth first); the order of `inputs` is the order of the graph's parameters.
  void add(nb::handle value, SignatureKey& key, std::vector<Tensor>& inputs) {
    PyObject* o = value.ptr();
    if (const Tensor* t = tensor_ptr(o)) {
      key.add_input(*t);
      if (!SignatureKey::is_constant_input(*t)) inputs.push_back(*t);
    } else if (PyTuple_CheckExact(o) || PyList_CheckExact(o) || is_namedtuple(o)) {
      key.add(PyList_CheckExact(o) ? kList : PyTuple_CheckExact(o) ? kTuple : kNamedTuple);
      if (!PyTuple_CheckExact(o) && !PyList_CheckExact(o)) {
        key.add(kToken);
        key.add(token(value.type()));
      }
      key.add(static_cast<int64_t>(PySequence_Fast_GET_SIZE(o)));
      for (nb::handle item : value) add(item, key, inputs);
    } else if (PyDict_CheckExact(o)) {
      key.add(kDict);
      key.add(static_cast<int64_t>(PyDict_GET_SIZE(o)));
      for (auto [k, v] : nb::borrow<nb::dict>(value)) {
        add_constant(k, key);
        add(v, key, inputs);
      }
    } else {
      add_constant(value, key);
    }
  }

  void add_constant(nb::handle value, SignatureKey& key) {
    PyObject* o = value.ptr();
    if (o == Py_None) {
      key.add(SignatureKey::kNone);
    } else if (PyBool_Check(o)) {
      key.add_scalar(Scalar(o == Py_True));
    } else if (PyFloat_CheckExact(o)) {
      key.add_scalar(Scalar(PyFloat_AS_DOUBLE(o)));
    } else if (PyLong_CheckExact(o)) {
      int overflow = 0;
      const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
      if (overflow == 0) {
        key.add_scalar(Scalar(static_cast<int64_t>(v)));
      } else {
        key.add(kToken);
        key.add(token(value));
      }
    } else {
      key.add(kToken);
      key.add(token(value));
    }
  }

  // A number standing for a constant. Objects compared by value (strings, big ints, tuples,
  // objects of classes with an __eq__ of their own) share one per value and type: the type is
  // part of the key because equal objects of other types make other graphs (np.float32(3.0) ==
  // np.float16(3.0), but x * s has another dtype); they are kept. Objects compared by identity
  // (of classes without __eq__: a model whose jitted method this is, a function) and unhashable
  // ones have one each, held weakly where they take a weak reference: the jit keeps no dropped
  // model alive, and the graphs keyed by its token go at the next build (drop_dead_identities).
  int64_t token(nb::handle value) {
    PyTypeObject* type = Py_TYPE(value.ptr());
    const bool by_identity = type->tp_richcompare == PyBaseObject_Type.tp_richcompare &&
                             type->tp_hash == PyBaseObject_Type.tp_hash;
    if (!by_identity) {
      const nb::object key = nb::make_tuple(value.type(), value);
      PyObject* found = PyDict_GetItemWithError(tokens_.ptr(), key.ptr());
      if (found != nullptr) return PyLong_AsLongLong(found);
      if (!PyErr_Occurred()) {
        tokens_[key] = next_token_;
        return next_token_++;
      }
      if (!PyErr_ExceptionMatches(PyExc_TypeError)) throw nb::python_error();
      PyErr_Clear();  // unhashable: by identity
    }
    auto found = identities_.find(value.ptr());
    if (found != identities_.end()) {
      if (found->second.second.get() == value.ptr()) return found->second.first;
      dead_tokens_.push_back(found->second.first);  // it died; another object has its address
      identities_.erase(found);
    }
    identities_.emplace(value.ptr(), std::make_pair(next_token_, WeakObject(value)));
    return next_token_++;
  }

  // Forgets the identities whose objects died, and the graphs and guards keyed by their tokens
  // (which no call can name again).
  void drop_dead_identities() {
    for (auto it = identities_.begin(); it != identities_.end();) {
      if (it->second.second.get() != nullptr) {
        ++it;
        continue;
      }
      dead_tokens_.push_back(it->second.first);
      it = identities_.erase(it);
    }
    if (dead_tokens_.empty()) return;
    const auto keyed_by_dead = [&](const SignatureKey& key) {
      return std::any_of(dead_tokens_.begin(), dead_tokens_.end(),
                         [&](int64_t token) { return key.has_pair(kToken, token); });
    };
    cache_.erase_if(keyed_by_dead);
    for (auto it = guards_.begin(); it != guards_.end();) {
      it = keyed_by_dead(it->first) ? guards_.erase(it) : std::next(it);
    }
    dead_tokens_.clear();
  }

  // The argument with its tensors replaced by tracers, walked in add()'s order.
  nb::object traced(nb::handle value, Trace& trace, const std::string& path) {
    PyObject* o = value.ptr();
    if (const Tensor* t = tensor_ptr(o)) {
      if (SignatureKey::is_constant_input(*t)) return nb::borrow(value);
      return nb::cast(trace.add_input(TensorMeta(t->dtype(), t->shape()), path));
    }
    if (PyTuple_CheckExact(o) || PyList_CheckExact(o) || is_namedtuple(o)) {
      nb::list items;
      size_t i = 0;
      for (nb::handle item : value) {
        items.append(traced(item, trace, path + "[" + std::to_string(i++) + "]"));
      }
      if (PyList_CheckExact(o)) return std::move(items);
      if (PyTuple_CheckExact(o)) return nb::tuple(items);
      return value.type()(*items);
    }
    if (PyDict_CheckExact(o)) {
      nb::dict d;
      for (auto [k, v] : nb::borrow<nb::dict>(value)) {
        d[k] = traced(v, trace, path + "[" + nb::repr(k).c_str() + "]");
      }
      return std::move(d);
    }
    return nb::borrow(value);
  }

  // Traces the function on these arguments; the graph, and the tree of its result. What the trace
  // reads besides the arguments goes into `guards`.
  std::pair<FuncGraphPtr, OutputTree> trace(const nb::args& args, const nb::kwargs& kwargs,
                                            std::vector<Tensor>& outputs, Guards& guards) {
    Trace trace(name_);
    nb::list traced_args;
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string path =
          i < arg_names_.size() ? arg_names_[i] : "args[" + std::to_string(i) + "]";
      traced_args.append(traced(args[i], trace, path));
    }
    nb::dict traced_kwargs;
    for (auto [k, v] : kwargs) traced_kwargs[k] = traced(v, trace, nb::str(k).c_str());
    nb::object result = trace_call_(fn_, nb::tuple(traced_args), traced_kwargs, guards.reading);
    for (nb::handle cell : guards.reading) {
      const bool known = std::any_of(guards.cells.begin(), guards.cells.end(),
                                     [&](const WeakObject& w) { return w.get() == cell.ptr(); });
      if (!known) guards.cells.emplace_back(cell);
    }
    PyList_SetSlice(guards.reading.ptr(), 0, PY_SSIZE_T_MAX, nullptr);
    OutputTree tree = output_tree(result, outputs);
    FuncGraphPtr graph = trace.finish(outputs);
    for (const Tensor& t : trace.captured()) {
      if (guards.seen.insert(t.impl_ptr()).second) guards.tensors.push_back(t.impl_ptr());
    }
    tree.writes = trace.writes();
    tree.size_decisions = trace.size_decisions();
    return {std::move(graph), std::move(tree)};
  }

  nb::object fn_;
  nb::object trace_call_;
  std::vector<std::string> arg_names_;
  std::string name_;
  JitOptions options_;
  PassReport last_report_;  // of the most recent build
  jit_detail::GraphCache cache_;
  std::unordered_map<SignatureKey, std::shared_ptr<Guards>, jit_detail::SignatureKeyHash> guards_;
  nb::dict tokens_;  // (type, constant compared by value) -> token
  // The address of a constant compared by identity -> its token and the object.
  std::unordered_map<const PyObject*, std::pair<int64_t, WeakObject>> identities_;
  std::vector<int64_t> dead_tokens_;  // of identities found dead, whose graphs are still kept
  int64_t next_token_ = 0;
};

int jit_function_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;
  return nb::inst_ptr<JitFunctionObject>(self)->traverse(visit, arg);
}

int jit_function_clear(PyObject* self) {
  if (nb::inst_ready(self)) nb::inst_ptr<JitFunctionObject>(self)->clear();
  return 0;
}

PyType_Slot kJitFunctionSlots[] = {
    {Py_tp_traverse, reinterpret_cast<void*>(jit_function_traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(jit_function_clear)},
    {0, nullptr},
};

}  // namespace

void bind_jit(nb::module_& m) {
  nb::module_ jit = m.def_submodule("jit", "kiln.jit's C++ side (use kiln.jit)");
  jit.attr("TRACED_VALUE_HAS_NO_DATA") = jit_detail::kTracedValueHasNoData;
  nb::class_<JitFunctionObject>(jit, "JitFunction", nb::type_slots(kJitFunctionSlots),
                                "A jitted function (see kiln.jit)")
      .def(
          "__init__",
          [](JitFunctionObject* self, nb::object fn, nb::object trace_call,
             std::vector<std::string> arg_names, std::string name, std::string backend,
             std::string jit_level, std::string capture_mode, bool dynamic, bool fullgraph,
             std::string dump_ir, bool debug, std::map<std::string, std::string> options) {
            JitOptions o;
            o.backend = std::move(backend);
            o.jit_level = std::move(jit_level);
            o.capture_mode = std::move(capture_mode);
            o.dynamic = dynamic;
            o.fullgraph = fullgraph;
            o.dump_ir = std::move(dump_ir);
            o.debug = debug;
            o.options = std::move(options);
            new (self) JitFunctionObject(std::move(fn), std::move(trace_call), std::move(arg_names),
                                         std::move(name), std::move(o));
          },
          "fn"_a, "trace_call"_a, "arg_names"_a, "name"_a, "backend"_a, "jit_level"_a,
          "capture_mode"_a, "dynamic"_a, "fullgraph"_a, "dump_ir"_a, "debug"_a, "options"_a)
      .def("__call__", &JitFunctionObject::call,
           "Runs the graph built for these arguments' signature, tracing and building it first.")
      .def("graph", &JitFunctionObject::graph,
           "The graph the function gives for these arguments, as traced (IR text).")
      .def("optimized_graph", &JitFunctionObject::optimized_graph,
           "The graph for these arguments after every pass, as the backend receives it (IR "
           "text); builds nothing.")
      .def("memory_plan", &JitFunctionObject::memory_plan,
           "The memory plan of the graph built for these arguments (building it first): a dict "
           "with peak_bytes (the most one call allocates: arena + outputs), arena_bytes, "
           "output_bytes, unshared_bytes (the intermediates without sharing), buffers and "
           "in_place. Raises KilnValueError when the backend does not plan memory.")
      .def("_pass_report", &JitFunctionObject::pass_report,
           "(runs, text) of the most recent build's passes")
      .def("_cache_info", &JitFunctionObject::cache_info, "(hits, misses, size)")
      .def("clear_cache", &JitFunctionObject::clear_cache,
           "Forgets every built graph (the next call traces again).")
      .def_prop_ro("backend", [](const JitFunctionObject& f) { return f.options().backend; })
      .def_prop_ro("jit_level", [](const JitFunctionObject& f) { return f.options().jit_level; })
      .def_prop_ro("debug", [](const JitFunctionObject& f) { return f.options().debug; });
  jit.def("is_tracing", &is_tracing, "True while this thread traces a function.");
  jit.def(
      "_set_differentiating", [](bool on) { return std::exchange(t_differentiating, on); }, "on"_a,
      "Marks this thread as running a function kiln.grad differentiates; returns the old mark.");
  jit.def("is_tracer", &is_tracer, "t"_a, "True for a tensor of the trace running on this thread.");
  jit.def("note_size_decision", &note_size_decision,
          "Tells the trace running on this thread that the function decided something from a "
          "dimension's size in a way not linear in it (a slice bound clamped to the dimension): "
          "a dynamic=True function then traces every batch size.");

  nb::module_ graph = m.def_submodule("graph", "Graph backends (kiln.graph)");
  graph.def("register_custom_backend", &register_custom_backend, "name"_a, "path"_a,
            "Loads the backend plugin at `path` and registers its backend `name`.");
  graph.def("unregister_custom_backend", &unregister_custom_backend, "name"_a,
            "Unregisters a backend register_custom_backend registered.");
  graph.def("is_builtin_backend", &is_builtin_backend, "name"_a,
            "True for the backends built into libkiln (kiln_cpu, reference).");
  graph.def("list_backends", &list_backends, "Registered backend names, sorted.");
}

}  // namespace kiln::py
