// BackendManager: the table of backends, the Build/Run entry points that name the backend and the
// graph in errors, and loading backend plugins through the core's plugin loader.
#include <algorithm>
#include <atomic>
#include <iterator>
#include <map>
#include <mutex>

#include "core/plugin.h"
#include "kiln/backend.h"

namespace kiln {

BackendBase::~BackendBase() = default;
BackendMemoryPlanner::~BackendMemoryPlanner() = default;
void BackendBase::ClearGraph(BackendGraphId) {}
void BackendBase::Clear() {}
bool BackendBase::Supports(const CNodePtr&) const { return true; }

struct BackendManager::State {
  struct Entry {
    BackendFactory factory;
    uint64_t registration = 0;              // BackendManager::RegistrationId
    std::shared_ptr<BackendBase> instance;  // made on first use
  };
  // The instance registered as `name`, made on first use, or null when none is registered; with
  // `registration`, also the registration it belongs to.
  std::shared_ptr<BackendBase> instance(const std::string& name, uint64_t* registration = nullptr);
  // The instance; throws kValue listing the registered names when none is, and when it is not
  // of `registration` (0: any).
  std::shared_ptr<BackendBase> acquire(const std::string& name, uint64_t registration = 0);
  std::vector<std::string> names() const;

  mutable std::mutex mutex;
  std::map<std::string, Entry> backends;
  uint64_t registrations = 0;  // made so far
  std::atomic<uint64_t> generation{1};
  // Names of the graphs built through Build, for error messages.
  std::map<std::pair<std::string, BackendGraphId>, std::string> graph_names;
  // Registrations made by register_custom_backend: plugins stay loaded and registered.
  std::vector<BackendRegistration> plugin_registrations;
};

BackendManager::BackendManager() : state_(std::make_unique<State>()) {}

BackendManager& BackendManager::Instance() {
  // Never destroyed: registrations in other libraries may unregister after static destructors.
  static BackendManager* manager = new BackendManager();
  return *manager;
}

BackendRegistration BackendManager::Register(const std::string& name, BackendFactory factory) {
  KILN_CHECK_VALUE(!name.empty()) << "cannot register a backend without a name";
  KILN_CHECK_VALUE(factory != nullptr) << "backend '" << name << "': the factory is empty";
  std::lock_guard<std::mutex> lock(state_->mutex);
  const uint64_t registration = state_->registrations + 1;
  const bool inserted =
      state_->backends.emplace(name, State::Entry{std::move(factory), registration, nullptr})
          .second;
  KILN_CHECK_VALUE(inserted) << "backend '" << name << "' is already registered";
  state_->registrations = registration;
  state_->generation.fetch_add(1, std::memory_order_release);
  return BackendRegistration(name);
}

void BackendManager::Unregister(const std::string& name) {
  std::shared_ptr<BackendBase> instance;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    auto it = state_->backends.find(name);
    if (it == state_->backends.end()) return;
    instance = std::move(it->second.instance);
    state_->backends.erase(it);
    state_->generation.fetch_add(1, std::memory_order_release);
    for (auto g = state_->graph_names.begin(); g != state_->graph_names.end();) {
      g = g->first.first == name ? state_->graph_names.erase(g) : std::next(g);
    }
  }
  // Outside the lock: the backend's destructor may use the manager (to clear what it delegated).
  // A Build, Run or ClearGraph still inside it holds it until it returns.
  instance.reset();
}

namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

}  // namespace

std::shared_ptr<BackendBase> BackendManager::State::instance(const std::string& name,
                                                             uint64_t* registration) {
  BackendFactory factory;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = backends.find(name);
    if (it == backends.end()) return nullptr;
    if (registration != nullptr) *registration = it->second.registration;
    if (it->second.instance != nullptr) return it->second.instance;
    factory = it->second.factory;
  }
  // Made outside the lock (a backend's constructor may look up the backend it delegates to);
  // when two threads race, the first instance stored wins.
  // A constructor's exception is a plugin's: raised as a kiln::Error naming the backend (and made
  // again at the next use).
  std::shared_ptr<BackendBase> made = detail::with_error_context(
      factory, [&] { return "while making backend '" + name + "' (its constructor failed)"; });
  KILN_CHECK_VALUE(made != nullptr) << "backend '" << name << "': the factory returned null";
  std::lock_guard<std::mutex> lock(mutex);
  auto it = backends.find(name);
  KILN_CHECK_VALUE(it != backends.end())
      << "backend '" << name << "' was unregistered while it was being made";
  if (it->second.instance == nullptr) it->second.instance = std::move(made);
  if (registration != nullptr) *registration = it->second.registration;
  return it->second.instance;
}

std::shared_ptr<BackendBase> BackendManager::State::acquire(const std::string& name,
                                                            uint64_t registration) {
  uint64_t current = 0;
  std::shared_ptr<BackendBase> b = instance(name, &current);
  KILN_CHECK_VALUE(b != nullptr) << "unknown backend '" << name
                                 << "'; registered backends: " << joined(names());
  KILN_CHECK_VALUE(registration == 0 || registration == current)
      << "backend '" << name << "' was registered again after the graph was built; the new "
      << "registration holds none of the earlier one's graphs (build the graph again)";
  return b;
}

std::vector<std::string> BackendManager::State::names() const {
  std::lock_guard<std::mutex> lock(mutex);
  std::vector<std::string> out;
  for (const auto& entry : backends) out.push_back(entry.first);
  return out;
}

BackendBase* BackendManager::Find(const std::string& name) { return state_->instance(name).get(); }

BackendBase* BackendManager::Get(const std::string& name) { return state_->acquire(name).get(); }

std::shared_ptr<BackendBase> BackendManager::Acquire(const std::string& name) {
  return state_->acquire(name);
}

std::vector<std::string> BackendManager::List() const { return state_->names(); }

uint64_t BackendManager::RegistrationId(const std::string& name) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  auto it = state_->backends.find(name);
  return it == state_->backends.end() ? 0 : it->second.registration;
}

uint64_t BackendManager::Generation() const {
  return state_->generation.load(std::memory_order_acquire);
}

BackendGraphId BackendManager::Build(const FuncGraphPtr& graph, const BackendJitConfig& config,
                                     const std::string& backend) {
  KILN_CHECK_VALUE(graph != nullptr) << "backend '" << backend << "': Build got a null graph";
  const std::shared_ptr<BackendBase> b = state_->acquire(backend);
  BackendGraphId id = 0;
  try {
    id = b->Build(graph, config);
  } catch (Error& e) {
    e.add_context("in backend '" + backend + "' building graph \"" + graph->name() + "\"");
    throw;
  } catch (const std::exception& e) {
    KILN_FAIL(kGeneric) << "backend '" << backend << "' failed to build graph \"" << graph->name()
                        << "\": " << e.what();
  }
  KILN_LET_FORCED_UNWIND_THROUGH
  catch (...) {
    KILN_FAIL(kGeneric) << "backend '" << backend << "' failed to build graph \"" << graph->name()
                        << "\": an unknown exception";
  }
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->graph_names[{backend, id}] = graph->name();
  return id;
}

namespace {

// Note [Backends read contiguous inputs]
// A graph's parameters say dtype and shape, not layout, and a jitted call's inputs (or a part's,
// when the jit splits a graph between backends) may be views: a transpose, a slice, a view
// kiln_cpu made inside its part. A backend written against flat buffers read such an input as if
// it were dense and returned wrong numbers without a word, so every backend but the built-in
// ones, which read strides, gets contiguous inputs: a copy of each view, nothing for the rest.
// Returns `inputs` itself for a built-in backend (a jitted call's path), else `dense` filled.
const std::vector<Tensor>& inputs_for(const std::string& backend, const std::vector<Tensor>& inputs,
                                      std::vector<Tensor>& dense) {
  if (is_builtin_backend(backend)) return inputs;
  dense = inputs;
  for (Tensor& t : dense) {
    if (t.defined() && !t.is_contiguous()) t = t.contiguous();
  }
  return dense;
}

}  // namespace

void BackendManager::Run(const std::string& backend, BackendGraphId id,
                         const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) {
  Run(backend, 0, id, inputs, outputs);
}

void BackendManager::Run(const std::string& backend, uint64_t registration, BackendGraphId id,
                         const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) {
  KILN_CHECK_VALUE(outputs != nullptr) << "backend '" << backend << "': Run needs an output vector";
  const std::shared_ptr<BackendBase> b = state_->acquire(backend, registration);
  // How errors name the graph; made only for an error (Run is on every jitted call's path).
  const auto graph = [&] {
    std::lock_guard<std::mutex> lock(state_->mutex);
    auto it = state_->graph_names.find({backend, id});
    return it != state_->graph_names.end()
               ? "graph \"" + it->second + "\" (id " + std::to_string(id) + ")"
               : "graph id " + std::to_string(id);
  };
  RunningStatus status = RunningStatus::kRunningFailure;
  std::vector<Tensor> dense;
  try {
    status = b->Run(id, inputs_for(backend, inputs, dense), outputs);
  } catch (Error& e) {
    e.add_context("in backend '" + backend + "' running " + graph());
    throw;
  } catch (const std::exception& e) {
    KILN_FAIL(kGeneric) << "backend '" << backend << "' failed running " << graph() << ": "
                        << e.what();
  }
  KILN_LET_FORCED_UNWIND_THROUGH
  catch (...) {
    KILN_FAIL(kGeneric) << "backend '" << backend << "' failed running " << graph()
                        << ": an unknown exception";
  }
  KILN_CHECK(status == RunningStatus::kRunningSuccess)
      << "backend '" << backend << "' failed running " << graph()
      << ": Run returned kRunningFailure";
}

void BackendManager::ClearGraph(const std::string& backend, BackendGraphId id) {
  ClearGraph(backend, 0, id);
}

void BackendManager::ClearGraph(const std::string& backend, uint64_t registration,
                                BackendGraphId id) {
  uint64_t current = 0;
  const std::shared_ptr<BackendBase> b = state_->instance(backend, &current);
  if (b != nullptr && registration != 0 && registration != current) return;  // gone with it
  (b != nullptr ? b : state_->acquire(backend))->ClearGraph(id);  // acquire: "unknown backend"
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->graph_names.erase({backend, id});
}

BackendRegistration& BackendRegistration::operator=(BackendRegistration&& other) noexcept {
  if (this != &other) {
    if (!name_.empty()) BackendManager::Instance().Unregister(name_);
    name_ = std::move(other.name_);
    other.name_.clear();
  }
  return *this;
}

BackendRegistration::~BackendRegistration() {
  if (!name_.empty()) BackendManager::Instance().Unregister(name_);
}

void register_custom_backend(const std::string& name, const std::string& path) {
  const std::shared_ptr<const PluginLibrary> library =
      load_plugin(path, "kiln_plugin_backend_entry", "backend");
  detail::BackendPluginHost host;
  library->init(&host);
  const std::string what = "backend plugin " + path + ": ";
  KILN_CHECK_VALUE(!host.backends.empty())
      << what << "it registers no backend (KILN_REGISTER_BACKEND)";
  std::vector<std::string> names;
  for (const auto& [registered, factory] : host.backends) {
    if (registered != name) {
      names.push_back("'" + registered + "'");
      continue;
    }
    BackendManager& manager = BackendManager::Instance();
    BackendRegistration registration;
    try {
      registration = manager.Register(name, factory);
    } catch (Error& e) {
      e.add_context("while loading backend plugin " + path);
      throw;
    }
    std::lock_guard<std::mutex> lock(manager.state_->mutex);
    manager.state_->plugin_registrations.push_back(std::move(registration));
    return;
  }
  KILN_FAIL(kValue) << what << "it registers " << joined(names) << ", not '" << name << "'";
}

void unregister_custom_backend(const std::string& name) {
  BackendManager& manager = BackendManager::Instance();
  BackendRegistration registration;  // unregisters when it goes, outside the lock
  {
    std::lock_guard<std::mutex> lock(manager.state_->mutex);
    std::vector<BackendRegistration>& held = manager.state_->plugin_registrations;
    const auto it = std::find_if(held.begin(), held.end(),
                                 [&](const BackendRegistration& r) { return r.name() == name; });
    if (it != held.end()) {
      registration = std::move(*it);
      held.erase(it);
    }
  }
  KILN_CHECK_VALUE(!registration.name().empty())
      << "unregister_custom_backend: '" << name << "' is "
      << (manager.Find(name) != nullptr
              ? "not a backend register_custom_backend registered (built in, or registered in "
                "this process's code)"
              : "no registered backend; registered: " + joined(manager.List()));
}

bool is_builtin_backend(const std::string& name) {
  return name == "kiln_cpu" || name == "reference";
}

std::vector<std::string> list_backends() { return BackendManager::Instance().List(); }

}  // namespace kiln
