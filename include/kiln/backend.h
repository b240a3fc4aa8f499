// Backends: what compiles and runs graphs. A backend implements Build and Run, registers a name,
// and is picked per function with @kiln.jit(backend="name").
//
//   #include <kiln/backend.h>
//   class MyBackend : public kiln::BackendBase {
//    public:
//     kiln::BackendGraphId Build(const kiln::FuncGraphPtr& g,
//                                const kiln::BackendJitConfig& c) override {
//       return ref()->Build(g, c);                      // delegate to another backend
//     }
//     kiln::RunningStatus Run(kiln::BackendGraphId id, const std::vector<kiln::Tensor>& in,
//                             std::vector<kiln::Tensor>* out) override {
//       return ref()->Run(id, in, out);
//     }
//    private:
//     static kiln::BackendBase* ref() { return kiln::BackendManager::Instance().Get("reference"); }
//   };
//   KILN_REGISTER_BACKEND("my_backend", MyBackend);
//
//   kiln::register_custom_backend("my_backend", "libmy_backend.so");   // loads and registers it
//
// A backend plugin is a shared library linked to libkiln (kiln_add_plugin in CMake);
// KILN_REGISTER_BACKEND stamps it with KILN_ABI_VERSION, and register_custom_backend loads it
// through the core's plugin loader, which refuses another ABI version naming both. Built into
// libkiln: "kiln_cpu", the default (fusion passes, kernel selection, a static memory plan and a
// precomputed schedule; see docs/architecture.md, "kiln_cpu"), and "reference", which runs a graph
// op by op through eager dispatch (the oracle that other backends and passes are checked against).
//
// Thread-safety: the manager is thread-safe. A backend's Build, Run, ClearGraph and Clear may be
// called from several threads (Run concurrently with itself); built-in backends allow that.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/abi.h"
#include "kiln/export.h"
#include "kiln/ir.h"
#include "kiln/tensor.h"

namespace kiln {

/// A graph built by one backend; the backend decides the numbers.
using BackendGraphId = uint64_t;

/// What Run reports. A failure becomes a kiln::Error naming the backend and the graph when the
/// run goes through BackendManager::Run.
enum class RunningStatus : int { kRunningSuccess = 0, kRunningFailure = 1 };

/// How a graph is to be built: what @kiln.jit was given.
struct BackendJitConfig {
  std::string jit_level = "O1";
  std::string backend;
  /// The jit's extra keyword options, as text.
  std::map<std::string, std::string> options;
};

/// The interface a backend implements. Methods are PascalCase, as in MindSpore's BackendBase.
class KILN_API BackendBase {
 public:
  BackendBase() = default;
  BackendBase(const BackendBase&) = delete;
  BackendBase& operator=(const BackendBase&) = delete;
  virtual ~BackendBase();

  /// Compiles `graph` (verified, every abstract known) and returns an id for Run. May throw.
  virtual BackendGraphId Build(const FuncGraphPtr& graph, const BackendJitConfig& config) = 0;
  /// Runs a built graph on `inputs` (one per graph parameter, in order) and replaces *outputs
  /// with the graph's outputs. May throw, or return kRunningFailure. Through BackendManager::Run
  /// (every jitted call) a backend other than the built-in ones gets contiguous inputs, so that
  /// it may read them as flat buffers (a view the caller passed is copied first); a backend
  /// called directly by another gets what that one passes.
  virtual RunningStatus Run(BackendGraphId id, const std::vector<Tensor>& inputs,
                            std::vector<Tensor>* outputs) = 0;
  /// Forgets a built graph (optional; default: nothing).
  virtual void ClearGraph(BackendGraphId id);
  /// Forgets every built graph (optional; default: nothing).
  virtual void Clear();
  /// Whether this backend can run `node` (optional; default: every node). The jit runs the
  /// nodes a backend declines elsewhere.
  virtual bool Supports(const CNodePtr& node) const;
};

/// What a backend planned for the memory of one built graph (see BackendMemoryPlanner).
struct BackendMemoryPlan {
  /// The most one Run allocates at once: the arena plus the outputs.
  size_t peak_bytes = 0;
  /// One block per Run holding every intermediate value and kernel workspace.
  size_t arena_bytes = 0;
  /// The graph's outputs (allocated per Run, since they outlive it).
  size_t output_bytes = 0;
  /// What the intermediates and workspaces would take without sharing memory.
  size_t unshared_bytes = 0;
  /// Intermediate values placed in the arena, and how many of them reuse the memory of an input
  /// that dies where they are made (in place).
  size_t buffers = 0;
  size_t in_place = 0;
};

/// An interface a backend may implement besides BackendBase when it plans memory statically
/// ("kiln_cpu" does); the jit finds it with dynamic_cast, so backends without it are unaffected.
class KILN_API BackendMemoryPlanner {
 public:
  virtual ~BackendMemoryPlanner();
  /// The plan of a built graph; throws kValue for an unknown id.
  virtual BackendMemoryPlan GetMemoryPlan(BackendGraphId id) const = 0;
};

/// Makes a backend instance (called once, when the backend is first used).
using BackendFactory = std::function<std::unique_ptr<BackendBase>()>;

class BackendRegistration;
KILN_API void register_custom_backend(const std::string& name, const std::string& path);
KILN_API void unregister_custom_backend(const std::string& name);

/// The process-wide table of backends by name.
class KILN_API BackendManager {
 public:
  static BackendManager& Instance();

  /// Adds a backend under `name`; throws kValue when the name is taken. The returned handle
  /// removes it (and destroys its instance) when destroyed.
  BackendRegistration Register(const std::string& name, BackendFactory factory);
  /// The backend, made on first use; throws kValue listing the registered names when unknown.
  /// The pointer is valid while the backend stays registered (Build, Run and ClearGraph hold the
  /// instance for the length of the call, so unregistering a backend waits for no one).
  BackendBase* Get(const std::string& name);
  /// Get, holding the instance: it lives while the pointer is kept, registered or not.
  std::shared_ptr<BackendBase> Acquire(const std::string& name);
  /// The backend, or null when unknown.
  BackendBase* Find(const std::string& name);
  /// Registered names, sorted.
  std::vector<std::string> List() const;

  /// Builds `graph` on backend `backend` (a backend may delegate to another this way). Errors
  /// get the backend's and the graph's names as context.
  BackendGraphId Build(const FuncGraphPtr& graph, const BackendJitConfig& config,
                       const std::string& backend);
  /// Runs a graph built by Build. A kRunningFailure or an exception from the backend becomes a
  /// kiln::Error naming the backend and the graph.
  void Run(const std::string& backend, BackendGraphId id, const std::vector<Tensor>& inputs,
           std::vector<Tensor>* outputs);
  /// Forgets a graph built by Build.
  void ClearGraph(const std::string& backend, BackendGraphId id);
  /// Run and ClearGraph for a holder of graph ids that noted RegistrationId(backend) at Build
  /// (`registration`; 0 takes any): a backend registered again since then is another instance,
  /// which may hold other graphs under the same ids. Run refuses it (kValue, saying to build the
  /// graph again); ClearGraph does nothing, the graph having gone with its registration.
  void Run(const std::string& backend, uint64_t registration, BackendGraphId id,
           const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs);
  void ClearGraph(const std::string& backend, uint64_t registration, BackendGraphId id);

  /// A number naming the registration `name` has now (0 when none). A graph id belongs to one
  /// registration: a backend unregistered and registered again is a new instance that knows none
  /// of the graphs the earlier one built, so a holder of ids checks this before using them.
  uint64_t RegistrationId(const std::string& name) const;
  /// A number that changes whenever a backend is registered or unregistered, so that holders of
  /// graph ids may look at RegistrationId only then.
  uint64_t Generation() const;

 private:
  friend class BackendRegistration;
  friend void register_custom_backend(const std::string& name, const std::string& path);
  friend void unregister_custom_backend(const std::string& name);
  BackendManager();
  void Unregister(const std::string& name);
  struct State;
  std::unique_ptr<State> state_;
};

/// RAII handle of one registration.
class KILN_API BackendRegistration {
 public:
  BackendRegistration() = default;
  BackendRegistration(BackendRegistration&& other) noexcept : name_(std::move(other.name_)) {
    other.name_.clear();
  }
  BackendRegistration& operator=(BackendRegistration&& other) noexcept;
  BackendRegistration(const BackendRegistration&) = delete;
  BackendRegistration& operator=(const BackendRegistration&) = delete;
  ~BackendRegistration();
  const std::string& name() const { return name_; }
  /// Gives up the handle: the backend stays registered for the life of the process.
  void release() { name_.clear(); }

 private:
  friend class BackendManager;
  explicit BackendRegistration(std::string name) : name_(std::move(name)) {}
  std::string name_;
};

/// Loads the backend plugin at `path` and registers its backend `name` (the name its
/// KILN_REGISTER_BACKEND gives). Throws kValue saying which of these went wrong: no such file,
/// not a shared library, not a backend plugin (no entry point), another ABI version (both
/// named), a library that registers no backend, a name other than the one registered (listing
/// those), a name already registered. Loading the same library for another of its backends is
/// fine.
KILN_API void register_custom_backend(const std::string& name, const std::string& path);
/// Unregisters a backend that register_custom_backend registered, so that a rebuilt plugin (a
/// new file: a loaded library stays loaded, Note [Plugins stay loaded] in src/core/plugin.cc)
/// can be registered under the name again. Jitted functions built on it build again at their
/// next call (on the new registration, or failing as an unknown backend while there is none).
/// Throws kValue for a name it did not register: a built-in backend, one registered in-process,
/// or an unknown name.
KILN_API void unregister_custom_backend(const std::string& name);
/// True for the backends built into libkiln: kiln_cpu and reference (which read strides and take
/// no options).
KILN_API bool is_builtin_backend(const std::string& name);
/// BackendManager::Instance().List().
KILN_API std::vector<std::string> list_backends();

namespace detail {

/// What a backend plugin's init fills: its KILN_REGISTER_BACKEND entries.
struct BackendPluginHost {
  std::vector<std::pair<std::string, BackendFactory>> backends;
};

/// One KILN_REGISTER_BACKEND. In libkiln itself it registers at load time; in a plugin it joins
/// the library's list, which the plugin's entry point hands to register_custom_backend.
struct BackendRegistrar;

#if defined(KILN_BUILDING_LIBRARY)
struct BackendRegistrar {
  // Built-in backends stay registered until the process ends (unregistering them during static
  // destruction would destroy their graphs' tensors after the allocator is gone).
  BackendRegistrar(const char* name, BackendFactory factory) {
    BackendManager::Instance().Register(name, std::move(factory)).release();
  }
};
#else
// Hidden, so that each library has its own list (as for KILN_EXTENSION blocks).
__attribute__((visibility("hidden"))) inline BackendRegistrar*& backend_registrars() {
  static BackendRegistrar* head = nullptr;
  return head;
}
__attribute__((visibility("hidden"))) inline void collect_backends(BackendPluginHost& host);
__attribute__((visibility("hidden"))) inline int init_backend_plugin(void* host,
                                                                     KilnPluginReportFn report,
                                                                     void* context) noexcept {
  return run_plugin_init<BackendPluginHost>(&collect_backends, host, report, context);
}
__attribute__((visibility("hidden"))) inline const KilnPluginEntry kBackendEntry{
    KILN_ABI_VERSION, "backend", &init_backend_plugin};
#endif

}  // namespace detail
}  // namespace kiln

#if !defined(KILN_BUILDING_LIBRARY)
/// The entry point of a backend plugin, emitted once per library by KILN_REGISTER_BACKEND.
KILN_PLUGIN_EXPORT inline const KilnPluginEntry* kiln_plugin_backend_entry() {
  return &kiln::detail::kBackendEntry;
}

namespace kiln::detail {

struct BackendRegistrar {
  const char* name;
  BackendFactory factory;
  BackendRegistrar* next;
  // Holding the entry point's address makes every library with a registration emit it.
  KilnPluginEntryFn entry = &kiln_plugin_backend_entry;
  BackendRegistrar(const char* n, BackendFactory f)
      : name(n), factory(std::move(f)), next(backend_registrars()) {
    backend_registrars() = this;
  }
};

// The list holds the last registration first; the host gets them in registration order.
inline void collect_backends(BackendPluginHost& host) {
  for (const BackendRegistrar* r = backend_registrars(); r != nullptr; r = r->next) {
    host.backends.emplace(host.backends.begin(), r->name, r->factory);
  }
}

}  // namespace kiln::detail
#endif

#define KILN_BACKEND_CONCAT_INNER(a, b) a##b
#define KILN_BACKEND_CONCAT(a, b) KILN_BACKEND_CONCAT_INNER(a, b)
/// Registers `Class` (a BackendBase with a default constructor) as backend `name`: in a plugin,
/// when register_custom_backend loads the library; in libkiln, when libkiln loads.
#define KILN_REGISTER_BACKEND(name, Class)                                             \
  static ::kiln::detail::BackendRegistrar KILN_BACKEND_CONCAT(kiln_backend_registrar_, \
                                                              __COUNTER__)(            \
      name, []() -> std::unique_ptr<::kiln::BackendBase> { return std::make_unique<Class>(); })
