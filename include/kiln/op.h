// Operators: OpDef (the single description of an op), attributes, the registry and dispatch.
//
//   KILN_REGISTER_OP(kiln::OpDef("Scale")
//       .input("x")
//       .attr("factor", kiln::AttrKind::kFloat, 1.0)
//       .infer([](const kiln::InferContext& ctx) { return kiln::MetaList{ctx.input(0)}; })
//       .kernel(kiln::DeviceType::kCPU, [](kiln::KernelContext& ctx) { ... }));
//
//   kiln::TensorList out = kiln::call_op("Scale", {x}, {{"factor", 2.0}});
//   (the inputs are a kiln::TensorSpan: a braced list, a std::vector<kiln::Tensor> or a
//   kiln::TensorList; the results a TensorList, which converts to a std::vector<kiln::Tensor>)
//
// One OpDef serves eager dispatch, graph shape inference, passes, backends and autograd: its schema
// (named tensor inputs, typed attributes with defaults, a fixed or variable number of outputs),
// `infer` (output dtypes and shapes from input metadata only, never data), one kernel per device
// type, an optional workspace size, an optional view function (ops such as Reshape whose eager
// result aliases the input), and an optional gradient rule.
//
// Registration may happen at static-initialisation time in any shared library that links
// libkiln (KILN_REGISTER_OP), so custom ops and plugins register exactly like built-ins. The
// registry is thread-safe; registering a name twice is an error.
#pragma once

#include <array>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "kiln/device.h"
#include "kiln/export.h"
#include "kiln/tensor.h"
#include "kiln/tensor_span.h"

namespace kiln {

/// The value of an op attribute. std::monostate is "None" (an optional attribute left unset).
using AttrValue = std::variant<std::monostate, bool, int64_t, double, std::string,
                               std::vector<int64_t>, DType, Scalar>;

enum class AttrKind : uint8_t { kBool, kInt, kFloat, kString, kInts, kDType, kScalar };
KILN_API const char* attr_kind_name(AttrKind kind);

/// Named attribute values of one op call, in a small vector (ops have few attributes).
class KILN_API Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string, AttrValue>> items);

  Attrs& set(const std::string& name, AttrValue value);
  bool has(const std::string& name) const { return find(name) != nullptr; }
  /// The value, or nullptr when absent.
  const AttrValue* find(const std::string& name) const;
  /// The value as T; throws kValue when missing and kType when it holds another type. Integer
  /// attributes read as double and Scalar; a Scalar attribute reads as int64_t or double.
  template <typename T>
  T get(const std::string& name) const;
  /// get() when present and not None, else `fallback`.
  template <typename T>
  T get_or(const std::string& name, T fallback) const {
    const AttrValue* v = find(name);
    return v == nullptr || std::holds_alternative<std::monostate>(*v) ? fallback : get<T>(name);
  }
  /// True when the attribute is missing or None.
  bool is_none(const std::string& name) const {
    const AttrValue* v = find(name);
    return v == nullptr || std::holds_alternative<std::monostate>(*v);
  }
  const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }
  bool operator==(const Attrs& other) const { return items_ == other.items_; }

 private:
  std::vector<std::pair<std::string, AttrValue>> items_;
};

template <> KILN_API bool Attrs::get<bool>(const std::string& name) const;
template <> KILN_API int64_t Attrs::get<int64_t>(const std::string& name) const;
template <> KILN_API double Attrs::get<double>(const std::string& name) const;
template <> KILN_API std::string Attrs::get<std::string>(const std::string& name) const;
template <> KILN_API std::vector<int64_t> Attrs::get<std::vector<int64_t>>(
    const std::string& name) const;
template <> KILN_API DType Attrs::get<DType>(const std::string& name) const;
template <> KILN_API Scalar Attrs::get<Scalar>(const std::string& name) const;

/// "2", "0.5", "true", "'mean'", "[1, 2]", "float32", "None".
KILN_API std::string attr_str(const AttrValue& value);

/// Metadata of one tensor, as `infer` sees it.
struct KILN_API TensorMeta {
  DType dtype = DType::kFloat32;
  Shape shape;
  bool defined = true;  // false for an omitted optional input
  bool weak = false;    // a Python number (see kiln/scalar.h)

  TensorMeta() {}  // user-provided: value-initialization need not zero the shape's buffer
  TensorMeta(DType d, Shape s) : dtype(d), shape(std::move(s)) {}
  static TensorMeta of(const Tensor& t);
  int64_t ndim() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const { return shape_numel(shape); }
  bool operator==(const TensorMeta& o) const { return dtype == o.dtype && shape == o.shape; }
};
/// The tensors an op call returns, inline up to two (no allocation for the common one result).
using TensorList = SmallVector<Tensor, 2>;

/// The metadata of an op's inputs or outputs. Inline up to two tensors: `infer` returns one on
/// every eager op call, and most ops have one or two outputs.
using MetaList = SmallVector<TensorMeta, 2>;

/// The MetaList of one output, taking the shape over (MetaList{{dtype, shape}} copies it out of
/// the initializer list): for the infer functions of small, frequent ops.
inline MetaList single_output(DType dtype, Shape shape) {
  MetaList out;
  out.emplace_back(dtype, std::move(shape));
  return out;
}

/// The dtype a set of operands promotes to, treating weak scalars as NumPy 2 does.
KILN_API DType result_type(const MetaList& operands);
/// result_type of two operands (no list to build: the binary ops' hot path).
KILN_API DType result_type(const TensorMeta& a, const TensorMeta& b);

class OpDef;

/// What `infer` gets: the op, its input metadata and its attributes (defaults filled in).
struct InferContext {
  const OpDef& op;
  const MetaList& inputs;
  const Attrs& attrs;
  const TensorMeta& input(size_t i) const { return inputs.at(i); }
  size_t num_inputs() const { return inputs.size(); }
};

/// What a kernel gets. Outputs are allocated (contiguous) before the kernel runs; inputs may be
/// any strided layout. `workspace` holds workspace_size bytes (null when 0).
struct KernelContext {
  const OpDef& op;
  const std::vector<Tensor>& inputs;
  const std::vector<Tensor>& outputs;
  const Attrs& attrs;
  void* workspace = nullptr;
  size_t workspace_size = 0;
};

using InferFn = std::function<MetaList(const InferContext&)>;
using KernelFn = std::function<void(KernelContext&)>;
using WorkspaceFn = std::function<size_t(const InferContext&)>;
/// The eager results of a view op: tensors sharing their input's storage (one per output), or an
/// empty list when the inputs' layout needs a copy (then the op's kernel computes the result).
/// It must not read data: the pipeline calls it before the inputs are computed.
using ViewFn = std::function<TensorList(const std::vector<Tensor>& inputs, const Attrs& attrs)>;
/// A gradient rule (kiln/autograd.h): the gradients of the inputs from the op's inputs, outputs,
/// normalized attributes and the gradients of its outputs (an undefined one means zero). It
/// returns one tensor per input, with that input's shape and dtype, or undefined where no gradient
/// flows (integer and bool inputs, Python numbers, omitted optional inputs). It is written with
/// other ops and reads shapes and dtypes, never data, so that eager backward runs it through the
/// pipeline, the jit traces it, and autograd differentiates it again for higher orders.
using GradFn = std::function<std::vector<Tensor>(
    const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs, const Attrs& attrs,
    const std::vector<Tensor>& grad_outputs)>;

/// Properties passes and backends read.
enum OpTrait : uint32_t {
  kTraitElementwise = 1u << 0,  // output[i] depends only on input[i] (after broadcasting)
  kTraitView = 1u << 1,         // eager result aliases an input (has a ViewFn)
  kTraitRandom = 1u << 2,       // reads the global generator: never fold or CSE
  kTraitReduction = 1u << 3,
  kTraitSideEffect = 1u << 4,  // writes an input or the outside world: never remove
  kTraitNotDifferentiable =
      1u << 5,  // outputs carry no gradient (comparisons, argmax, random ints)
  // The kernel is right when an output is exactly an input's memory (same dtype and shape: each
  // element read before it is written): kiln_cpu may then give an elementwise op's output the
  // buffer of an input that dies there. Not implied by kTraitElementwise: a kernel that writes
  // its output before reading every input (out = y; out += x) is elementwise but not in place.
  kTraitInPlace = 1u << 6,
  // The gradient rule never reads input 0's values, only its shape and dtype (Add's, Sub's): an
  // in-place call under autograd (`y += b`) need not keep a copy of the values it writes over.
  kTraitGradIgnoresFirstInput = 1u << 7,
};

struct InputSpec {
  std::string name;
  bool optional = false;
  bool variadic = false;  // the last input may take any number of tensors (cat, stack)
};
struct AttrSpec {
  std::string name;
  AttrKind kind;
  std::optional<AttrValue> default_value;  // nullopt: required; monostate: optional, None
};

class KILN_API OpDef {
 public:
  static constexpr int kVariableOutputs = -1;
  static constexpr size_t kNumDeviceTypes = 2;

  explicit OpDef(std::string name) : name_(std::move(name)) {}

  // Builder methods; each returns *this.
  OpDef& input(std::string name, bool optional = false);
  OpDef& variadic_input(std::string name);
  /// An attribute; without `default_value` it is required. Pass std::monostate{} for None.
  OpDef& attr(std::string name, AttrKind kind, std::optional<AttrValue> default_value = {});
  /// Number of outputs, or kVariableOutputs when `infer` decides (default 1).
  OpDef& outputs(int n);
  OpDef& infer(InferFn fn);
  OpDef& kernel(DeviceType device, KernelFn fn);
  OpDef& workspace(WorkspaceFn fn);
  OpDef& view(ViewFn fn);
  OpDef& grad(GradFn fn);
  OpDef& traits(uint32_t traits);
  OpDef& doc(std::string text);

  const std::string& name() const { return name_; }
  const std::vector<InputSpec>& input_specs() const { return inputs_; }
  const std::vector<AttrSpec>& attr_specs() const { return attrs_; }
  int num_outputs() const { return num_outputs_; }
  const InferFn& infer_fn() const { return infer_; }
  const KernelFn* find_kernel(DeviceType device) const;
  const WorkspaceFn& workspace_fn() const { return workspace_; }
  const ViewFn& view_fn() const { return view_; }
  const GradFn& grad_fn() const { return grad_; }
  uint32_t traits() const { return traits_; }
  bool has_trait(OpTrait t) const { return (traits_ & t) != 0; }
  const std::string& doc() const { return doc_; }

  /// Attributes checked against the schema (unknown names and wrong kinds are kType/kValue
  /// errors naming the op) with defaults filled in.
  Attrs normalize_attrs(const Attrs& attrs) const;
  /// Checks the number of inputs and that required ones are present.
  void check_inputs(const MetaList& inputs) const;
  /// check_inputs + `infer`, with the op's name and input types added to any error.
  MetaList infer_outputs(const MetaList& inputs, const Attrs& normalized) const;
  /// "Add(x, y, *, alpha: float = 1)"
  std::string signature() const;

 private:
  std::string name_;
  std::vector<InputSpec> inputs_;
  std::vector<AttrSpec> attrs_;
  int num_outputs_ = 1;
  InferFn infer_;
  std::array<KernelFn, kNumDeviceTypes> kernels_;
  WorkspaceFn workspace_;
  ViewFn view_;
  GradFn grad_;
  uint32_t traits_ = 0;
  std::string doc_;
};

using OpDefPtr = std::shared_ptr<const OpDef>;

class OpRegistration;

/// The process-wide table of ops by name.
class KILN_API OpRegistry {
 public:
  static OpRegistry& Instance();

  /// Adds `def`; throws kValue when the name is taken or the def has no infer function.
  OpRegistration add(OpDef def);
  /// Adds `def` itself (not a copy), so that holders of the pointer hold the registered op, also
  /// after it is removed and added again (an extension's ops after a failed reload).
  OpRegistration add(OpDefPtr def);
  /// Removes an op (used by OpRegistration); unknown names are ignored.
  void remove(const std::string& name);
  /// The op, or null.
  OpDefPtr find(const std::string& name) const;
  /// The op; throws kValue naming the closest registered names when absent.
  OpDefPtr get(const std::string& name) const;
  /// Every registered name, sorted.
  std::vector<std::string> list() const;
  /// A number that changes whenever an op is added or removed, so that callers may cache
  /// find() results (the graph IR's primitives do) and notice when the cache is stale.
  uint64_t generation() const;

 private:
  OpRegistry();
  struct State;
  std::unique_ptr<State> state_;
};

/// RAII handle of one registration: the op is removed when the handle is destroyed.
class KILN_API OpRegistration {
 public:
  OpRegistration() = default;
  explicit OpRegistration(OpDef def);
  OpRegistration(OpRegistration&& other) noexcept : name_(std::move(other.name_)) {
    other.name_.clear();
  }
  OpRegistration& operator=(OpRegistration&& other) noexcept;
  OpRegistration(const OpRegistration&) = delete;
  OpRegistration& operator=(const OpRegistration&) = delete;
  ~OpRegistration();
  const std::string& name() const { return name_; }

 private:
  friend class OpRegistry;
  struct Adopt {};
  OpRegistration(Adopt, std::string name) : name_(std::move(name)) {}
  std::string name_;
};

/// A kernel object bound to one call: the kernel of an op whose state is made per call (a custom
/// op's OpRunner, kiln/extension.h) instead of an OpDef's kernel function. A bound call has no
/// `infer`: its outputs are tensors the caller made with their metadata (see call_bound_kernel).
class KILN_API BoundKernel {
 public:
  virtual ~BoundKernel();
  /// Bytes of workspace the kernel needs; asked by the DeviceTask.
  virtual size_t workspace_size() = 0;
  /// Computes the outputs, which have memory by now, into ctx.outputs.
  virtual void launch(const KernelContext& ctx) = 0;
};

/// Runs ops eagerly. The synchronous dispatcher is built in; the runtime installs the pipeline.
class KILN_API Dispatcher {
 public:
  virtual ~Dispatcher();
  /// Runs `op` on `inputs`; `attrs` are already normalized. When `out` is non-empty the results
  /// are written into those tensors (which must have the inferred shapes) and returned. With a
  /// `bound_kernel`, `out` holds the outputs (see call_bound_kernel) and `op` only names the call.
  virtual TensorList dispatch(const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                              const std::vector<Tensor>& out,
                              const std::shared_ptr<BoundKernel>& bound_kernel) = 0;
};
/// The dispatcher call_op uses now.
KILN_API Dispatcher* current_dispatcher();
/// Installs a dispatcher (must outlive its use); returns the previous one.
KILN_API Dispatcher* set_dispatcher(Dispatcher* dispatcher);
/// Installs a dispatcher for the calling thread only, in front of the process-wide one (null
/// removes it); returns the thread's previous one, or null. The jit's tracer uses it, so that the
/// ops a traced function calls become graph nodes while other threads keep running eagerly.
KILN_API Dispatcher* set_thread_dispatcher(Dispatcher* dispatcher);
/// The calling thread's own dispatcher (set_thread_dispatcher), or null.
KILN_API Dispatcher* thread_dispatcher();

/// Runs `op` eagerly through the current dispatcher. Errors carry the op's name and input types.
/// `op` must stay alive until the call has run (registered ops do: unregistering one waits for
/// the calls queued on it). Called by name, the op is looked up in the registry; when another
/// thread unregisters it while the call is being made, the call waits for the calls queued so far
/// before it returns (so a caller must not hold a lock a queued kernel takes).
KILN_API TensorList call_op(const OpDef& op, TensorSpan inputs, const Attrs& attrs = {},
                            const std::vector<Tensor>& out = {});
KILN_API TensorList call_op(const std::string& name, TensorSpan inputs, const Attrs& attrs = {},
                            const std::vector<Tensor>& out = {});
/// Runs `kernel` eagerly through the current dispatcher, as the call `op` (whose name and the
/// inputs' types appear in errors; `op` must outlive the call, as the kernel object may ensure).
/// `outputs` must be defined; those without memory get it, contiguous, in the DeviceTask, and any
/// failure of the call stays on them. Outputs that have memory are written in place. Returns
/// once the call is queued, or has run in sync mode.
KILN_API void call_bound_kernel(const OpDef& op, TensorSpan inputs,
                                const std::vector<Tensor>& outputs,
                                std::shared_ptr<BoundKernel> kernel);

/// One eager op call as it moves through the steps of execution (see Note [Dispatch] in
/// src/ops/dispatch.cc). Every dispatcher runs the same three steps: plan_op (the FrontendTask),
/// allocate_op (the DeviceTask) and launch_op (the LaunchTask); run_op_sync runs them in a row.
struct KILN_API OpCall {
  const OpDef* op = nullptr;
  std::vector<Tensor> inputs;
  Attrs attrs;               // normalized
  std::vector<Tensor> out;   // the caller's out tensors; empty for new results
  /// The call's own kernel, replacing `op`'s infer and kernel (see BoundKernel); null for most.
  std::shared_ptr<BoundKernel> bound_kernel;
  /// What the call returns. Before plan_op either empty (plan_op creates the results) or one
  /// metadata-less handle per output, which plan_op fills (the pipeline's pending tensors).
  TensorList results;

  // Filled by plan_op.
  MetaList input_metas;
  bool aliased = false;                 // the results are views of the inputs: no kernel to run
  std::vector<Tensor> kernel_outputs;   // where the kernel writes
  std::vector<std::pair<Tensor, Tensor>> convert_back;  // (out tensor, kernel output) pairs
  size_t workspace_size = 0;
  std::shared_ptr<Storage> workspace;

  /// Drops every tensor reference (keeping vector capacity, so a reused OpCall allocates nothing).
  void clear();
};

/// For a bound call, on the caller's thread before it is queued: `outputs` become the results;
/// those with memory are also `out` (written in place), the others get deferred storage.
KILN_API void bind_outputs(OpCall& call, const std::vector<Tensor>& outputs);
/// The FrontendTask: checks the inputs, infers the results' metadata and fills `results` (with
/// deferred storage) or, for a view op whose inputs allow it, makes them views. Reads no data.
KILN_API void plan_op(OpCall& call);
/// The DeviceTask: memory for the kernel outputs and the workspace.
KILN_API void allocate_op(OpCall& call);
/// The LaunchTask: runs the kernel and converts results into out tensors of another dtype.
KILN_API void launch_op(OpCall& call);
/// plan_op, allocate_op and launch_op in a row; returns the results.
KILN_API TensorList run_op_sync(const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                                const std::vector<Tensor>& out,
                                const std::shared_ptr<BoundKernel>& bound_kernel = {});
/// "Add(float32[2, 3], float32[3])": an op call as error messages print it.
KILN_API std::string op_call_str(const OpDef& op, const MetaList& inputs);

namespace detail {
/// Autograd's entry into eager dispatch, installed by the autograd layer (kiln/autograd.h):
/// call_op hands it every call that has an input or out tensor autograd has seen
/// (TensorImpl::autograd set); the hook dispatches the call itself (dispatch_counting_writes)
/// and records it for backward.
using AutogradCallHook = TensorList (*)(const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                                        const std::vector<Tensor>& out);
KILN_API void set_autograd_call_hook(AutogradCallHook hook);
/// The current dispatcher's call, then a write counted into each `out` tensor's memory
/// (Storage::write_version): what call_op does without autograd. A refused call counts none.
KILN_API TensorList dispatch_counting_writes(const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                                             const std::vector<Tensor>& out);

/// A check of the inputs of every op call one thread makes while it is installed: autograd's
/// refusal of saved tensors changed in place, while a gradient rule runs (Note [Saved tensors
/// changed in place] in src/autograd/nodes.h). call_op runs it first; it throws to refuse.
class KILN_API CallInputCheck {
 public:
  virtual void check(const OpDef& op, TensorSpan inputs) const = 0;

 protected:
  ~CallInputCheck() = default;
};
/// Installs `check` (null: none) for this thread's calls; returns the one it replaces.
KILN_API const CallInputCheck* set_call_input_check(const CallInputCheck* check);

/// While one is alive, call_op counts a write into a pending out tensor (Storage::write_version)
/// too, waiting for its metadata (which names its storage); otherwise such writes are not
/// counted, since a result still being made has nothing derived from it yet. Autograd's nodes
/// hold one while they keep saved tensors, whose every change must be seen.
class KILN_API CountPendingWrites {
 public:
  CountPendingWrites();
  ~CountPendingWrites();
  CountPendingWrites(const CountPendingWrites&) = delete;
  CountPendingWrites& operator=(const CountPendingWrites&) = delete;
};

/// Runs before an op leaves the registry and again after (Note [Removing an op that is being
/// called] in src/ops/registry.cc); the runtime installs a wait for the calls queued on it.
KILN_API void set_op_removal_hook(void (*hook)(const OpDef& op));
/// Runs when call_op(name) finds, once its call is queued, that the op was removed meanwhile
/// (while it still holds the op); the runtime installs a wait for the queued calls that returns
/// at once on a pipeline worker, whose calls run inline.
KILN_API void set_removed_op_call_hook(void (*hook)(const OpDef& op));
}  // namespace detail

}  // namespace kiln

#define KILN_OP_CONCAT_INNER(a, b) a##b
#define KILN_OP_CONCAT(a, b) KILN_OP_CONCAT_INNER(a, b)
/// Registers an OpDef when the enclosing library loads; removes it when the library unloads.
#define KILN_REGISTER_OP(def)                                                            \
  static ::kiln::OpRegistration KILN_OP_CONCAT(kiln_op_registration_, __COUNTER__)(def)
