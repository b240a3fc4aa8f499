// PassRegistry: the passes the jit runs, by name, backend, stage and priority (see kiln/pass.h).
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

#include "kiln/pass.h"
#include "pass/builtin/builtin_passes.h"

namespace kiln {

struct PassRegistry::State {
  struct Entry {
    PassPtr pass;
    PassInfo info;
    uint64_t order;
  };
  mutable std::mutex mutex;
  std::vector<Entry> entries;  // in registration order
  uint64_t next_order = 0;
  std::atomic<uint64_t> generation{0};
  std::map<std::string, uint64_t> changes;  // by backend ("all" included)
};

PassRegistry::PassRegistry() : state_(std::make_unique<State>()) {}

PassRegistry& PassRegistry::Instance() {
  // Never destroyed: plugin passes may outlive static destruction order. The built-in passes
  // are registered here, on first use, not by a static initializer: registering prepares their
  // patterns, which checks their primitives against the op registry, filled as libkiln loads.
  static PassRegistry* registry = [] {
    auto* r = new PassRegistry();
    pass::register_builtin_passes(*r);
    for (const pass::BuiltinPassSet set : pass::builtin_pass_sets()) set(*r);
    return r;
  }();
  return *registry;
}

void PassRegistry::add(PassPtr pass, PassInfo info) {
  KILN_CHECK_VALUE(pass != nullptr) << "cannot register a null pass as '" << info.name << "'";
  KILN_CHECK_VALUE(pass->name() == info.name)
      << "cannot register pass '" << pass->name() << "' under another name, '" << info.name
      << "'";
  KILN_CHECK_VALUE(!info.backend.empty()) << "pass '" << info.name << "': the backend is empty";
  // A bad pattern fails here, before any graph is compiled; a plugin's std::exception becomes a
  // KilnError naming the pass.
  detail::with_error_context([&] { pass->Prepare(); },
                             [&] { return "while preparing pass '" + pass->name() + "'"; });
  std::lock_guard<std::mutex> lock(state_->mutex);
  for (const State::Entry& e : state_->entries) {
    KILN_CHECK_VALUE(e.info.name != info.name)
        << "pass '" << info.name << "' is already registered"
        << (e.info.builtin ? " (a built-in pass)"
                           : " (for backend '" + e.info.backend + "', stage " +
                                 stage_name(e.info.stage) + "); unregister it first");
  }
  ++state_->changes[info.backend];
  state_->entries.push_back({std::move(pass), std::move(info), state_->next_order++});
  state_->generation.fetch_add(1, std::memory_order_release);
}

namespace {

// Fails for a name that is not registered, listing the registered passes (built-in ones when
// `builtins`).
template <typename Entries>
[[noreturn]] void unknown_pass(const std::string& name, const Entries& entries, bool builtins) {
  std::string names;
  for (const auto& e : entries) {
    if (builtins || !e.info.builtin) names += (names.empty() ? "'" : ", '") + e.info.name + "'";
  }
  KILN_FAIL(kValue) << "no pass named '" << name << "' is registered; registered passes: "
                    << (names.empty() ? "none" : names);
}

}  // namespace

PassPtr PassRegistry::get(const std::string& name) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  for (const State::Entry& e : state_->entries) {
    if (e.info.name == name) return e.pass;
  }
  unknown_pass(name, state_->entries, true);
}

void PassRegistry::remove(const std::string& name) {
  PassPtr removed;  // destroyed outside the lock
  std::lock_guard<std::mutex> lock(state_->mutex);
  auto it = std::find_if(state_->entries.begin(), state_->entries.end(),
                         [&](const State::Entry& e) { return e.info.name == name; });
  if (it == state_->entries.end()) unknown_pass(name, state_->entries, false);
  KILN_CHECK_VALUE(!it->info.builtin)
      << "pass '" << name << "' is built in and cannot be unregistered (jit_level=\"O0\" runs "
      << "without the built-in passes)";
  ++state_->changes[it->info.backend];
  removed = std::move(it->pass);
  state_->entries.erase(it);
  state_->generation.fetch_add(1, std::memory_order_release);
}

namespace {

bool runs_before(const PassInfo& a, uint64_t a_order, const PassInfo& b, uint64_t b_order) {
  if (a.stage != b.stage) return a.stage < b.stage;
  if (a.priority != b.priority) return a.priority < b.priority;
  return a_order < b_order;
}

}  // namespace

std::vector<PassInfo> PassRegistry::list() const {
  std::vector<State::Entry> entries;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    entries = state_->entries;
  }
  std::stable_sort(entries.begin(), entries.end(), [](const State::Entry& a, const State::Entry& b) {
    return runs_before(a.info, a.order, b.info, b.order);
  });
  std::vector<PassInfo> infos;
  infos.reserve(entries.size());
  for (State::Entry& e : entries) infos.push_back(std::move(e.info));
  return infos;
}

PassManager PassRegistry::manager(const std::string& backend, bool builtins) const {
  std::vector<State::Entry> entries;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    for (const State::Entry& e : state_->entries) {
      if (e.info.builtin && !builtins) continue;
      if (e.info.backend != "all" && e.info.backend != backend) continue;
      entries.push_back(e);
    }
  }
  // Outside the lock: PassManager::add calls each pass's Prepare, which may read the registry
  // (list_passes) and deadlocked here. Registration order is the entries' order, which
  // PassManager::add keeps among equals.
  PassManager manager;
  for (const State::Entry& e : entries) manager.add(e.pass, e.info.stage, e.info.priority);
  return manager;
}

uint64_t PassRegistry::generation(const std::string& backend) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  const auto changes = [&](const std::string& key) -> uint64_t {
    auto it = state_->changes.find(key);
    return it == state_->changes.end() ? 0 : it->second;
  };
  // Both counts only grow, so their sum changes whenever either does.
  return changes("all") + (backend == "all" ? 0 : changes(backend));
}

uint64_t PassRegistry::generation() const {
  return state_->generation.load(std::memory_order_acquire);
}

}  // namespace kiln
