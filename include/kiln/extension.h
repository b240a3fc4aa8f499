// Custom operators: the one header a custom op includes.
//
//   #include <kiln/extension.h>
//   class CustomAdd3 : public kiln::OpRunner {
//    public:
//     using OpRunner::OpRunner;
//     size_t CalcWorkspace() override { return inputs()[0].numel() * sizeof(float); }
//     void LaunchKernel() override {  // inputs may be views: contiguous() makes them flat
//       ... inputs()[0].contiguous().data<float>() ... workspace_ptr() ...
//     }
//   };
//   kiln::Tensor add3(const kiln::Tensor& x, const kiln::Tensor& y, const kiln::Tensor& z) {
//     kiln::Tensor out(x.dtype(), x.shape());          // metadata only
//     std::make_shared<CustomAdd3>("Add3")->Run({x, y, z}, {out});
//     return out;
//   }
//   KILN_EXTENSION(m) { m.def("add3", &add3, {"x", "y", "z"}, "x + y + z"); }
//
// Python: `ops = kiln.ops.CustomOpBuilder("my_ops", ["add3.cpp"]).load(); ops.add3(x, y, z)`.
//
// - OpRunner runs a kernel the way a built-in op runs, through the eager pipeline: the function
//   that makes the outputs' metadata (add3 above) is the FrontendTask; Run() queues the rest, so
//   the DeviceTask allocates the outputs that have no memory yet and CalcWorkspace() bytes of
//   workspace, and the LaunchTask calls LaunchKernel(). Run() returns at once (in the "sync"
//   pipeline mode, after the kernel ran); reading an output's data waits for it, and a failure
//   raises at that read or at the next synchronize(), naming the op. Create runners with
//   std::make_shared: the pipeline keeps a runner alive until its kernel has run.
// - KILN_EXTENSION(m) { ... } is run when the library loads; `m.def` exposes a C++ function to
//   Python. Parameters may be Tensor (by value or const&), std::optional<Tensor> (None in
//   Python), int64_t, int, double, float, bool, std::string and std::vector<int64_t>; the return
//   type decides the outputs: Tensor, std::tuple<Tensor, ...> (a Python tuple),
//   std::vector<Tensor> (a list of any length) or void (None); an undefined Tensor among them is
//   None, as an omitted optional argument is. Every source file of a library may
//   hold KILN_EXTENSION blocks (each on its own line); they run in link order. Autograd sees what
//   the function computes with kiln:: ops or a kiln::Function (kiln/autograd.h); an OpRunner's
//   output made from inputs that require grad has a gradient node that raises at backward, so
//   give such an op a gradient through m.def_op (OpDef::grad) or a kiln::Function. An exception
//   the function throws reaches Python as a KilnError naming it.
// - `m.def_op(op)` registers a full kiln::OpDef (include <kiln/op.h> to build one) so that the op
//   is called through kiln::call_op like a built-in, by name from C++ and as a Python function.
//   Loading a new build of the same extension replaces its ops; see docs/architecture.md.
//
// This header includes only kiln/tensor.h, kiln/abi.h, kiln/extension_signature.h,
// kiln/dtype_dispatch.h (dispatch_floating and the like, for kernels of several dtypes) and a few
// std headers, so that a small op compiles in about a second, and in half that with the builder's
// precompiled header (bench/RESULTS.md, "Custom operators").
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/abi.h"
#include "kiln/dtype_dispatch.h"
#include "kiln/export.h"
#include "kiln/extension_signature.h"
#include "kiln/tensor.h"

namespace kiln {

class OpDef;

namespace detail {
class RunnerKernel;  // how the pipeline runs an OpRunner (src/extension/op_runner.cc)
}  // namespace detail

/// The base of a custom op's kernel. Subclasses override LaunchKernel() and, when the kernel needs
/// scratch memory, CalcWorkspace(). A runner runs one call at a time: Run() again before its kernel
/// has run is an error (make one runner per call).
class KILN_API OpRunner : public std::enable_shared_from_this<OpRunner> {
 public:
  /// `op_name` names the op in error messages ("Add3(float32[4], ...)").
  explicit OpRunner(std::string op_name);
  virtual ~OpRunner();
  OpRunner(const OpRunner&) = delete;
  OpRunner& operator=(const OpRunner&) = delete;

  /// Queues the op: every output without memory gets a contiguous allocation of its shape and
  /// dtype, then CalcWorkspace() bytes of workspace, then LaunchKernel() runs; outputs with memory
  /// are written in place. Outputs must be defined tensors (make them with `Tensor(dtype, shape)`);
  /// inputs may be undefined (omitted optional inputs). Errors of any step carry the op and its
  /// input types. Throws kValue at once when the runner was not made by std::make_shared or is
  /// still queued.
  void Run(std::vector<Tensor> inputs, std::vector<Tensor> outputs);

  /// Bytes of scratch memory LaunchKernel needs, computed from the metadata of inputs() and
  /// outputs() (optional; default: 0). Runs in the DeviceTask, before the inputs' data is ready.
  virtual size_t CalcWorkspace();
  /// Computes outputs() from inputs(). Runs when both have memory; may use workspace_ptr().
  virtual void LaunchKernel() = 0;

  /// The tensors passed to Run(), from Run() until the kernel has run.
  const std::vector<Tensor>& inputs() const { return inputs_; }
  const std::vector<Tensor>& outputs() const { return outputs_; }
  /// CalcWorkspace() bytes, 64-byte aligned, valid during LaunchKernel (null when 0 bytes).
  void* workspace_ptr() const { return workspace_; }
  size_t workspace_size() const { return workspace_size_; }
  const std::string& op_name() const { return op_name_; }

 private:
  friend class detail::RunnerKernel;
  std::string op_name_;
  std::vector<Tensor> inputs_;
  std::vector<Tensor> outputs_;
  void* workspace_ = nullptr;
  size_t workspace_size_ = 0;
  std::atomic<bool> queued_{false};  // between Run() and the end of the kernel
};

class ExtensionModule;
/// Loads the extension library at `path` built by CustomOpBuilder (or by hand with
/// KILN_EXTENSION), runs its KILN_EXTENSION blocks and activates it: its def_op ops are
/// registered, replacing those of an earlier load of an extension with the same `name`. Throws
/// kiln::Error for every failure (missing file, not a Kiln extension, ABI mismatch naming both
/// versions, an exception from a KILN_EXTENSION block, an op name already taken).
KILN_API std::shared_ptr<const ExtensionModule> load_extension(const std::string& path,
                                                               const std::string& name);

/// The functions and ops one extension library exposes, filled by its KILN_EXTENSION blocks.
class KILN_API ExtensionModule {
 public:
  /// `name` is the extension's name (CustomOpBuilder's `name`).
  explicit ExtensionModule(std::string name);
  ~ExtensionModule();
  ExtensionModule(const ExtensionModule&) = delete;
  ExtensionModule& operator=(const ExtensionModule&) = delete;

  const std::string& name() const;

  /// Exposes `fn` (a function pointer or a captureless lambda) as `name`, with one name per
  /// parameter in `arg_names` (Python keyword names; "arg0", "arg1", ... when empty) and a
  /// docstring. Throws kValue for an invalid or repeated name or a wrong count of arg_names.
  template <typename F>
  ExtensionModule& def(const char* name, F fn, std::initializer_list<const char*> arg_names = {},
                       const char* doc = "") {
    return def_erased(name, detail::erase_function(+fn), arg_names, doc);
  }

  /// Registers `op` in the op registry (as kiln::call_op sees it) when the extension is
  /// activated, and exposes it as `python_name` (default: the op name in snake_case, "FusedAdd"
  /// -> "fused_add"). Throws kValue for a repeated name.
  ExtensionModule& def_op(const OpDef& op, const std::string& python_name = "");

  /// def without the template: `signature` describes the function (see detail::erase_function).
  ExtensionModule& def_erased(const char* name, const detail::ErasedSignature& signature,
                              std::initializer_list<const char*> arg_names, const char* doc);

  const std::vector<ExtensionFunction>& functions() const;
  /// The function named `name`, or null.
  const ExtensionFunction* find_function(const std::string& name) const;
  /// The ops added with def_op, with their Python names, in order.
  const std::vector<std::pair<std::string, std::shared_ptr<const OpDef>>>& ops() const;

 private:
  friend std::shared_ptr<const ExtensionModule> load_extension(const std::string& path,
                                                               const std::string& name);
  // Registers the module's ops, replacing those of the previous module of the same name.
  static void activate(const std::shared_ptr<ExtensionModule>& module);
  struct State;
  std::unique_ptr<State> state_;
};

namespace detail {

// Each library gets its own list of KILN_EXTENSION blocks: the functions below are hidden, so
// their statics are not merged across libraries (Note [One entry point per library] in
// src/extension/extension_module.cc).
using ExtensionBody = void (*)(ExtensionModule&);
struct ExtensionBodyRegistrar;
__attribute__((visibility("hidden"))) inline const ExtensionBodyRegistrar*& extension_bodies() {
  static const ExtensionBodyRegistrar* head = nullptr;
  return head;
}
__attribute__((visibility("hidden"))) inline void run_extension_bodies(ExtensionModule& m);
__attribute__((visibility("hidden"))) inline void run_extension_bodies_from(
    const ExtensionBodyRegistrar* r, ExtensionModule& m);
__attribute__((visibility("hidden"))) inline int init_extension(void* host,
                                                                 KilnPluginReportFn report,
                                                                 void* context) noexcept {
  return run_plugin_init<ExtensionModule>(&run_extension_bodies, host, report, context);
}

// Hidden and constant-initialised: a function-local static in the exported entry function would
// be a process-wide unique symbol, shared by every extension loaded.
__attribute__((visibility("hidden"))) inline const KilnPluginEntry kExtensionEntry{
    KILN_ABI_VERSION, "extension", &init_extension};

}  // namespace detail
}  // namespace kiln

/// The entry point of an extension library, emitted once per library by KILN_EXTENSION.
KILN_PLUGIN_EXPORT inline const KilnPluginEntry* kiln_plugin_extension_entry() {
  return &kiln::detail::kExtensionEntry;
}

namespace kiln::detail {

struct ExtensionBodyRegistrar {
  ExtensionBody body;
  const ExtensionBodyRegistrar* next;
  // Holding the entry point's address makes every library with a block emit (and export) it.
  KilnPluginEntryFn entry = &kiln_plugin_extension_entry;
  explicit ExtensionBodyRegistrar(ExtensionBody b) noexcept : body(b), next(extension_bodies()) {
    extension_bodies() = this;
  }
};

// The list holds the blocks last-registered first; they run first-registered first.
inline void run_extension_bodies_from(const ExtensionBodyRegistrar* r, ExtensionModule& m) {
  if (r == nullptr) return;
  run_extension_bodies_from(r->next, m);
  r->body(m);
}
inline void run_extension_bodies(ExtensionModule& m) {
  run_extension_bodies_from(extension_bodies(), m);
}

}  // namespace kiln::detail

#define KILN_EXTENSION_CONCAT_INNER(a, b) a##b
#define KILN_EXTENSION_CONCAT(a, b) KILN_EXTENSION_CONCAT_INNER(a, b)
/// Defines a block that fills the extension's module `m` when the library loads:
/// `KILN_EXTENSION(m) { m.def("add3", &add3, {"x", "y", "z"}); }`. Stamps KILN_ABI_VERSION.
#define KILN_EXTENSION(m)                                                                   \
  static void KILN_EXTENSION_CONCAT(kiln_extension_body_, __LINE__)(::kiln::ExtensionModule&); \
  static const ::kiln::detail::ExtensionBodyRegistrar KILN_EXTENSION_CONCAT(                 \
      kiln_extension_registrar_, __LINE__)(&KILN_EXTENSION_CONCAT(kiln_extension_body_, __LINE__)); \
  static void KILN_EXTENSION_CONCAT(kiln_extension_body_, __LINE__)(::kiln::ExtensionModule & m)
