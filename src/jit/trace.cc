// Trace: the tracing dispatcher (see trace.h and Note [Tracing]).
#include "jit/trace.h"

#include "kiln/autograd.h"

#include <algorithm>
#include <numeric>

namespace kiln::jit_detail {

// Note [Tracing]
// A Trace is the calling thread's dispatcher while it lives, so every op the traced function calls
// (kiln::sin, a Tensor operator in Python, a def_op custom op) reaches Trace::dispatch instead of
// the eager pipeline. dispatch adds a CNode (the op's name and its normalized attributes, with its
// abstract from the op's infer) and returns *tracers*: tensors with the node's dtype and shape, a
// storage of their own without memory, and a failure that every data read raises (a view made
// from a tracer inherits it), so `float(t)` or `t.numpy()` fails clearly instead of reading
// garbage.
//
// A tensor maps to a node through its storage: each tracer's storage is a key of `traced_`. A
// tensor with that storage and the tracer's own layout is the tracer's value; any other layout is
// a view made by a Tensor method (x.T, x[1:], x.select(0, 2)), recorded as Reshape, Permute or
// AsStrided of the value. A view op (kiln::reshape, transpose, split, ...) returns, as eagerly,
// views of its input's storage where the layout allows (OpDef::view_fn): they are its node until
// an in-place write moves their base on, then views of the new value. Tensors from outside the
// trace (weights, captured arrays) become constants (ValueNodes holding the same tensor, so the
// graph sees in-place updates of them), Python numbers weak 0-d constants. In-place ops and `out=`
// move a tracer's storage on to the new value, so later reads of the tracer and of its views see
// the update, as in eager mode. Writing into a whole tensor from outside (a weight or an
// optimizer's state updated by a jitted training step) makes its storage traced too, from then on
// holding the new value; finish() makes each such tensor's final value an extra output, which the
// front end copies into the tensor after every run (writes(), write_back). Writing into an input
// (in place, or through a view of it) moves its value on like any traced value's, and its final
// value is an extra output too, copied into whatever tensor that call passed at that position.
// So the graph stays a pure function and the update lands after the run, as it would eagerly;
// write_back refuses a call whose written input shares memory with another input or a written
// tensor, which the graph read as separate values. A write through a view of a traced
// value (y[0] = v, y.T.add_(1), an in-place op on a reshape) becomes the base's new value:
// AsStridedScatter of the written view's result into the old value at the view's elements (the
// functional form of the write, which autograd differentiates as eagerly); the view and every
// other view of the base then read the new value. Writing into part of a tensor from outside is
// refused with a message that says what to do instead. A
// custom op that runs an OpRunner brings a kernel object made per call, which cannot become a graph
// node: the error asks for an OpDef (m.def_op).

const char* const kTracedValueHasNoData = "a value traced by kiln.jit has no data";

void check_writes(const Writes& writes, const std::vector<Tensor>& params) {
  if (writes.size() == 0) return;
  // Tensors without memory yet share none.
  const auto storage_of = [](const Tensor& t) { return t.ready()->storage.get(); };
  const auto shares = [&](const Tensor& t, const Storage* storage) {
    return storage != nullptr && storage_of(t) == storage;
  };
  for (const Tensor& written : writes.tensors) {
    for (size_t i = 0; i < params.size(); ++i) {
      KILN_CHECK_VALUE(!shares(params[i], storage_of(written)))
          << "jit: input " << i << " shares its memory with a tensor from outside that the "
          << "function writes in place; the compiled graph read the input as it was before the "
          << "write, where eager mode would see the write. Pass a separate tensor (clone it)";
    }
  }
  for (const auto& [position, grad_enabled] : writes.inputs) {
    KILN_ASSERT(position < params.size())
        << "input " << position << " was written, but the call has " << params.size();
    const Storage* storage = storage_of(params[position]);
    for (size_t other = 0; other < params.size(); ++other) {
      KILN_CHECK_VALUE(other == position || !shares(params[other], storage))
          << "jit: the function writes into its input " << position << " in place, and input "
          << other << " shares its memory (the same tensor, or views of one); the compiled graph "
          << "read them as two values, where the write would change both eagerly. Pass separate "
          << "tensors (clone one), or return the new value instead of writing it";
    }
    KILN_CHECK_VALUE(std::none_of(writes.captured.begin(), writes.captured.end(),
                                  [&](const Tensor& t) { return shares(t, storage); }))
        << "jit: the function writes into its input " << position << " in place, and the tensor "
        << "passed there is one the function also reads from outside (a global or an "
        << "attribute), which the compiled graph read as it was before the write; pass a "
        << "separate tensor (clone it)";
    KILN_CHECK_VALUE(!grad_enabled || !autograd::requires_grad(params[position]))
        << "jit: the function writes into its input " << position << " in place with grad mode "
        << "on, and the tensor passed there requires grad, which autograd cannot track through a "
        << "compiled graph; write under kiln.no_grad() inside the function (as an optimizer's "
        << "step), or pass a tensor that does not require grad (x.detach())";
  }
}

void write_back(const Writes& writes, const std::vector<Tensor>& params,
                std::vector<Tensor>& outputs) {
  if (writes.size() == 0) return;
  KILN_ASSERT(outputs.size() >= writes.size())
      << "the graph has " << outputs.size() << " outputs, fewer than its " << writes.size()
      << " written tensors";
  std::vector<Tensor> targets = writes.tensors;
  for (const Writes::Input& input : writes.inputs) targets.push_back(params[input.position]);
  static const OpDefPtr cast = OpRegistry::Instance().get("Cast");
  const size_t first = outputs.size() - targets.size();
  // The update of a weight is no computation to differentiate (as an optimizer's step eagerly).
  autograd::NoGradGuard no_grad;
  for (size_t i = 0; i < targets.size(); ++i) {
    call_op(*cast, {outputs[first + i]}, {{"dtype", targets[i].dtype()}}, {targets[i]});
  }
  outputs.resize(first);
}

namespace {

thread_local Trace* t_trace = nullptr;

Attrs normalized(const std::string& op, Attrs attrs) {
  return OpRegistry::Instance().get(op)->normalize_attrs(attrs);
}

std::vector<int64_t> to_ints(const Shape& s) { return std::vector<int64_t>(s.begin(), s.end()); }

// True when `strides` lay `shape` out row-major (size-1 dimensions may have any stride).
bool row_major(const Shape& shape, const Shape& strides) {
  const Shape expected = contiguous_strides(shape);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] != 1 && strides[d] != expected[d]) return false;
  }
  return true;
}

}  // namespace

Trace::Trace(std::string graph_name) : graph_(std::make_shared<FuncGraph>(std::move(graph_name))) {
  KILN_CHECK_VALUE(t_trace == nullptr)
      << "this thread is already tracing graph \"" << t_trace->graph_->name()
      << "\"; a trace cannot start inside another (a jitted function called while tracing runs "
         "inline instead)";
  const std::string message =
      std::string(kTracedValueHasNoData) +
      ": while a function is traced its tensors have a dtype and a shape but no values (those "
      "exist only when the compiled graph runs), so control flow that depends on a tensor's "
      "values (`if t > 0:`, `float(t)`, `t.item()`, `t.numpy()`) cannot be traced. Select "
      "between values with kiln.mint.where(cond, a, b) (kiln::where in C++), or call the "
      "function without jit. (In C++, Tensor's own copying methods, clone() and contiguous(), "
      "read data too: use kiln::contiguous / kiln::reshape, which are traced.) If no function "
      "is being traced now, this is a value a jitted function kept after its trace ended (in an "
      "attribute, a global or a .grad): state kept across calls must be updated in place "
      "(x.mul_(0.9).add_(y)) or returned by the function.";
  no_data_ = std::make_shared<OpFailure>(std::make_exception_ptr(Error(ErrorKind::kType, message)));
  previous_ = set_thread_dispatcher(this);
  // A leaf's .grad would keep a traced gradient, unusable after the trace, which the graph would
  // not update at later calls either.
  previous_refusal_ = autograd::set_grad_accumulation_refused(
      "backward() inside a function kiln.jit traces would leave a traced value, with no data, in "
      "a leaf's .grad; compute the gradients with kiln.grad / kiln.value_and_grad inside the "
      "function and give them to the optimizer (opt(grads)), or call backward() outside the "
      "jitted function");
  t_trace = this;
  recording_ = true;
}

Trace::~Trace() { stop(); }

void Trace::stop() {
  if (!recording_) return;
  recording_ = false;
  t_trace = nullptr;
  autograd::set_grad_accumulation_refused(previous_refusal_);
  set_thread_dispatcher(previous_);
}

bool Trace::active() { return t_trace != nullptr; }

Trace* Trace::current() { return t_trace; }

bool Trace::is_tracer(const Tensor& t) const {
  return t.defined() && t.impl()->storage != nullptr &&
         traced_.count(t.impl()->storage.get()) != 0;
}

Tensor Trace::make_tracer(const TensorMeta& meta, const NodePtr& node, int64_t input) {
  Tensor t(meta.dtype, meta.shape);
  TensorImpl* impl = t.impl();
  impl->weak = meta.weak;
  auto storage = Storage::deferred(t.nbytes(), impl->device);
  // A queued use sends data reads through the wait, where the failure is raised.
  storage->note_queued();
  impl->storage = storage;
  impl->set_failure(no_data_);
  const Storage* key = storage.get();
  traced_[key] = Traced{node, std::move(storage), input};
  return t;
}

Tensor Trace::add_input(const TensorMeta& meta, const std::string& name) {
  KILN_CHECK(recording_) << "graph \"" << graph_->name() << "\": the trace has finished";
  const int64_t position = static_cast<int64_t>(input_storages_.size());
  Tensor tracer = make_tracer(meta, graph_->add_parameter(meta.dtype, meta.shape, name), position);
  input_storages_.push_back(tracer.impl()->storage.get());
  return tracer;
}

FuncGraphPtr Trace::finish(const std::vector<Tensor>& outputs) {
  KILN_CHECK(recording_) << "graph \"" << graph_->name() << "\": the trace has finished";
  std::vector<NodePtr> nodes;
  nodes.reserve(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    KILN_CHECK_TYPE(outputs[i].defined())
        << "graph \"" << graph_->name() << "\": output " << i << " is an undefined tensor";
    nodes.push_back(node_of(outputs[i]));
  }
  for (const Tensor& t : writes_.tensors) {
    nodes.push_back(traced_.at(t.impl()->storage.get()).node);
  }
  for (const Writes::Input& input : writes_.inputs) {
    nodes.push_back(traced_.at(input_storages_[input.position]).node);
  }
  if (!writes_.inputs.empty()) writes_.captured = captured_;  // for check_writes
  graph_->set_outputs(nodes);
  stop();
  return graph_;
}

namespace {

// Whether `failure` is a trace's "no data" one: the tensor is a tracer.
bool is_traced_value_failure(const OpFailure& failure) {
  try {
    std::rethrow_exception(failure.error);
  } catch (const Error& e) {
    return std::string(e.what()).rfind(kTracedValueHasNoData, 0) == 0;
  } catch (...) {  // NOLINT: any other failure is not a trace's
    return false;
  }
}

}  // namespace

NodePtr Trace::node_of(const Tensor& t) {
  if (!t.defined()) return graph_->add_value(Tensor());  // an omitted optional input
  // A tracer of an earlier trace (kept in an attribute by the function's last trace): reading
  // it would raise its trace's error, which speaks of control flow.
  const std::shared_ptr<const OpFailure> failure = t.impl()->failure();
  KILN_CHECK_TYPE(failure == nullptr || failure == no_data_ || !is_traced_value_failure(*failure))
      << "graph \"" << graph_->name() << "\" uses a tensor that an earlier trace of a jitted "
      << "function made and kept (in an attribute or a global, say self.running_mean = ... "
      << "inside the function): it is no value of this call. State kept across calls must be "
      << "updated in place (self.running_mean.mul_(0.9).add_(0.1 * m)) or returned by the "
      << "function";
  const TensorImpl* impl = t.ready();
  if (impl->storage != nullptr) {
    auto traced = traced_.find(impl->storage.get());
    if (traced != traced_.end()) {
      const NodePtr& value = traced->second.node;
      if (impl->offset == 0 && impl->shape == value->abstract().shape() &&
          row_major(impl->shape, impl->strides)) {
        return value;
      }
      auto memo = memo_.find(impl);
      if (memo != memo_.end() && memo->second.base == value) return memo->second.node;
      NodePtr view = view_node(t, value);
      memo_[impl] = Memo{t, view, value};
      return view;
    }
  }
  if (impl->weak) return graph_->add_value(t);  // a Python number: a fresh tensor every call
  auto memo = memo_.find(impl);
  if (memo != memo_.end()) return memo->second.node;
  if (const Memo* same = same_outside_view(*impl)) return same->node;
  NodePtr constant = constant_node(t);
  remember_outside(t, constant);
  captured_.push_back(t);
  return constant;
}

// Notes t, a tensor of memory from outside the trace (a constant, or a view op's result on one),
// as `node`.
void Trace::remember_outside(const Tensor& t, NodePtr node) {
  const TensorImpl* impl = t.impl();
  memo_[impl] = Memo{t, std::move(node), nullptr};
  if (impl->storage != nullptr) outside_by_storage_.emplace(impl->storage.get(), impl);
}

// The memo of a tensor of outside memory that `impl` is another handle of (the same storage,
// dtype and layout), or null.
const Trace::Memo* Trace::same_outside_view(const TensorImpl& impl) const {
  if (impl.storage == nullptr) return nullptr;
  const auto [first, last] = outside_by_storage_.equal_range(impl.storage.get());
  for (auto it = first; it != last; ++it) {
    const TensorImpl& seen = *it->second;
    if (seen.dtype == impl.dtype && seen.offset == impl.offset && seen.shape == impl.shape &&
        seen.strides == impl.strides) {
      return &memo_.at(it->second);
    }
  }
  return nullptr;
}

// The node for t, a view of `value`'s memory (a traced value made by a Tensor method rather than
// an op, or a strided constant's storage), with t's offset counted from value's first element:
// Reshape when it keeps the elements in order, Permute (after a Reshape) when it reorders whole
// dimensions, else AsStrided.
NodePtr Trace::view_node(const Tensor& t, const NodePtr& value) {
  const Shape& shape = t.shape();
  const Shape& strides = t.strides();
  const Shape& base_shape = value->abstract().shape();
  // The strides decide, size-1 dims' included: x.T of a [1, 4] x is a Permute as it is at
  // [2, 4], not a Reshape (equal there), so that a dynamic=True trace at batch size 1 has the
  // structure of one at any other (Note [Dynamic batch size]).
  const auto strictly_row_major = [](const Shape& s, const Shape& st) {
    return st == contiguous_strides(s);
  };
  if (t.storage_offset() == 0 && shape_numel(shape) == shape_numel(base_shape)) {
    // An empty view too: x.T of a batch of 0 is the Permute it is at every other batch size.
    if (strictly_row_major(shape, strides)) {
      return graph_->add_cnode("Reshape", {value}, normalized("Reshape", {{"shape", to_ints(shape)}}));
    }
    std::vector<int64_t> order(shape.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return strides[a] > strides[b]; });
    Shape permuted;
    for (int64_t d : order) permuted.push_back(shape[d]);
    Shape permuted_strides;
    for (int64_t d : order) permuted_strides.push_back(strides[d]);
    if (strictly_row_major(permuted, permuted_strides)) {
      NodePtr source = value;
      if (permuted != base_shape) {
        source = graph_->add_cnode("Reshape", {value},
                                   normalized("Reshape", {{"shape", to_ints(permuted)}}));
      }
      // Output dimension order[k] is dimension k of `permuted`.
      std::vector<int64_t> dims(shape.size());
      for (size_t k = 0; k < order.size(); ++k) dims[static_cast<size_t>(order[k])] = int64_t(k);
      return graph_->add_cnode("Permute", {source}, normalized("Permute", {{"dims", dims}}));
    }
  }
  return graph_->add_cnode("AsStrided", {value},
                           normalized("AsStrided", {{"size", to_ints(shape)},
                                                    {"stride", to_ints(strides)},
                                                    {"offset", t.storage_offset()}}));
}

NodePtr Trace::constant_node(const Tensor& t) {
  // A failed eager result, or a tracer of an earlier trace that escaped it: its failure says why.
  if (const std::shared_ptr<const OpFailure> failure = t.impl()->failure()) failure->raise();
  if (t.numel() == 0 || t.is_contiguous()) return graph_->add_value(t);
  // Note [Strided constants]
  // A graph's constants are contiguous. A strided view (w.T, w[:, ::2]) is a view node of a
  // constant holding its storage's elements up to the last it reaches: the graph then reads the
  // tensor's memory at every run and sees in-place updates, as it does for a contiguous tensor,
  // where a contiguous copy would keep the values of the trace. (kiln_cpu makes such a view a
  // constant again at Build, over the same memory.)
  const int64_t extent = view_extent(t.shape(), t.strides(), t.storage_offset());
  return view_node(t, graph_->add_value(t.as_strided({extent}, {1}, 0)));
}

TensorList Trace::dispatch(const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                           const std::vector<Tensor>& out,
                           const std::shared_ptr<BoundKernel>& bound_kernel) {
  KILN_CHECK_KIND(ErrorKind::kNotImplemented, bound_kernel == nullptr)
      << "custom op '" << op.name() << "' runs an OpRunner, a kernel object made for each call, "
      << "which graph \"" << graph_->name() << "\" cannot record as a node. Register the op with "
      << "m.def_op(kiln::OpDef(\"" << op.name() << "\").input(...).infer(...).kernel(...)) in "
      << "its KILN_EXTENSION block: an op registered with def_op traces like a built-in op";
  const OpDefPtr registered = OpRegistry::Instance().find(op.name());
  KILN_CHECK_VALUE(registered.get() == &op)
      << "op '" << op.name() << "' is "
      << (registered == nullptr ? "no longer registered (its extension was replaced or unloaded)"
                                : "not the registered op of that name (a newer build replaced it)")
      << ", so graph \"" << graph_->name() << "\" cannot record it (call the op through the "
      << "loaded module, or register it with KILN_REGISTER_OP or m.def_op)";
  std::vector<NodePtr> nodes;
  nodes.reserve(inputs.size());
  for (const Tensor& t : inputs) nodes.push_back(node_of(t));
  const CNodePtr node = graph_->add_cnode(std::make_shared<Primitive>(op.name(), attrs), nodes);
  if (!out.empty()) return record_inplace(op, node, out);
  if (op.view_fn()) {
    TensorList views = op.view_fn()(std::vector<Tensor>(inputs.begin(), inputs.end()), attrs);
    if (!views.empty()) return record_views(node, std::move(views));
  }
  const Abstract& abstract = node->abstract();
  if (abstract.is_tensor()) return {make_tracer(abstract.tensor(), node, -1)};
  TensorList results;
  const std::vector<TensorMeta>& elements = abstract.elements();
  results.reserve(elements.size());
  for (size_t i = 0; i < elements.size(); ++i) {
    results.push_back(
        make_tracer(elements[i], graph_->tuple_get_item(node, static_cast<int64_t>(i)), -1));
  }
  return results;
}

// A view op's results where its inputs' layout let eager mode make views: the views themselves,
// sharing their input's storage as they would eagerly, so that a later in-place write into the
// input is seen through them and a write into them is refused like one into a Tensor method's
// view (see Note [Tracing]). Each is the op's node while its base holds the value it was made
// from (node_of), else a view node of the base's new value.
TensorList Trace::record_views(const CNodePtr& node, TensorList views) {
  const Abstract& abstract = node->abstract();
  for (size_t i = 0; i < views.size(); ++i) {
    const TensorImpl* impl = views[i].impl();
    if (memo_.count(impl) != 0) continue;  // an input returned as it is (Contiguous)
    const auto traced = traced_.find(impl->storage.get());
    NodePtr result =
        abstract.is_tuple() ? NodePtr(graph_->tuple_get_item(node, static_cast<int64_t>(i))) : node;
    if (traced == traced_.end()) {
      remember_outside(views[i], std::move(result));
    } else {
      memo_[impl] = Memo{views[i], std::move(result), traced->second.node};
    }
  }
  return views;
}

// A tensor from outside the trace that an op writes into: its storage is traced from now on,
// holding its current value (a constant) until the write moves it on (see Note [Tracing]).
std::unordered_map<const Storage*, Trace::Traced>::iterator Trace::adopt_written(
    const OpDef& op, const Tensor& target) {
  const TensorImpl* impl = target.ready();
  KILN_CHECK_KIND(ErrorKind::kNotImplemented, !impl->weak && impl->storage != nullptr &&
                                                  impl->offset == 0 &&
                                                  row_major(impl->shape, impl->strides) &&
                                                  target.nbytes() == impl->storage->nbytes())
      << op.name() << " writes through a view of a tensor from outside the traced function (a "
      << "part, a transpose or a reshape of it; in place or with out=), which graph \""
      << graph_->name() << "\" cannot do; write whole tensors as they are, or return the new "
      << "value instead";
  const NodePtr current = node_of(target);
  writes_.tensors.push_back(target);
  return traced_.emplace(impl->storage.get(), Traced{current, impl->storage}).first;
}

// An op writing into existing tensors (in place, or out=): the tensors' storages hold the new
// values from now on (see Note [Tracing]).
TensorList Trace::record_inplace(const OpDef& op, const CNodePtr& node,
                                 const std::vector<Tensor>& out) {
  const Abstract& abstract = node->abstract();
  const size_t n = abstract.is_tuple() ? abstract.elements().size() : 1;
  KILN_CHECK_VALUE(out.size() == n)
      << op.name() << ": expected " << n << " out tensors, got " << out.size();
  for (size_t i = 0; i < n; ++i) {
    const Tensor& target = out[i];
    const TensorImpl* impl = target.ready();
    auto traced = impl->storage != nullptr ? traced_.find(impl->storage.get()) : traced_.end();
    if (traced == traced_.end()) traced = adopt_written(op, target);
    Traced& value = traced->second;
    const bool whole = impl->offset == 0 && impl->shape == value.node->abstract().shape() &&
                       row_major(impl->shape, impl->strides);
    const TensorMeta& meta = abstract.is_tuple() ? abstract.elements()[i] : abstract.tensor();
    KILN_CHECK_SHAPE(impl->shape == meta.shape)
        << op.name() << ": out tensor " << i << " has shape " << shape_str(impl->shape)
        << ", expected " << shape_str(meta.shape);
    if (value.input >= 0) {  // its final value is copied into the call's argument (write_back)
      const auto position = static_cast<size_t>(value.input);
      const bool grad_enabled = autograd::is_grad_enabled();
      std::vector<Writes::Input>& inputs = writes_.inputs;
      const auto known = std::find_if(inputs.begin(), inputs.end(), [&](const Writes::Input& w) {
        return w.position == position;
      });
      if (known == inputs.end()) {
        inputs.push_back({position, grad_enabled});
      } else {
        known->grad_enabled = known->grad_enabled || grad_enabled;
      }
    }
    NodePtr result =
        abstract.is_tuple() ? NodePtr(graph_->tuple_get_item(node, static_cast<int64_t>(i))) : node;
    if (impl->dtype != meta.dtype) {
      result = graph_->add_cnode("Cast", {result}, normalized("Cast", {{"dtype", impl->dtype}}));
    }
    if (!whole) {  // a write through a view: the base's new value (Note [Tracing])
      result = graph_->add_cnode("AsStridedScatter", {value.node, result},
                                 normalized("AsStridedScatter", {{"size", to_ints(impl->shape)},
                                                                 {"stride", to_ints(impl->strides)},
                                                                 {"offset", impl->offset}}));
    }
    value.node = std::move(result);
  }
  return TensorList(out.begin(), out.end());
}

}  // namespace kiln::jit_detail
