#include <algorithm>
#include <atomic>
#include <cctype>
#include <map>
#include <mutex>
#include <shared_mutex>

#include "kiln/op.h"

namespace kiln {

struct OpRegistry::State {
  mutable std::shared_mutex mutex;
  std::map<std::string, OpDefPtr> ops;
  std::atomic<uint64_t> generation{1};
};

OpRegistry::OpRegistry() : state_(std::make_unique<State>()) {}

OpRegistry& OpRegistry::Instance() {
  // Never destroyed: registrations in other libraries may unload after static destructors run.
  static OpRegistry* registry = new OpRegistry();
  return *registry;
}

OpRegistration OpRegistry::add(OpDef def) {
  return add(std::make_shared<const OpDef>(std::move(def)));
}

OpRegistration OpRegistry::add(OpDefPtr def) {
  KILN_CHECK_VALUE(def != nullptr) << "cannot register a null op";
  KILN_CHECK_VALUE(!def->name().empty()) << "cannot register an op without a name";
  KILN_CHECK_VALUE(def->infer_fn() != nullptr)
      << "cannot register op '" << def->name() << "': it has no infer function";
  std::unique_lock<std::shared_mutex> lock(state_->mutex);
  std::string name = def->name();
  const bool inserted = state_->ops.emplace(name, std::move(def)).second;
  KILN_CHECK_VALUE(inserted) << "op '" << name << "' is already registered";
  state_->generation.fetch_add(1, std::memory_order_seq_cst);
  return OpRegistration(OpRegistration::Adopt{}, std::move(name));
}

namespace {
void (*g_removal_hook)(const OpDef&) = nullptr;
}  // namespace

void detail::set_op_removal_hook(void (*hook)(const OpDef& op)) { g_removal_hook = hook; }

// Note [Removing an op that is being called]
// A queued call points at its OpDef, so the definition must outlive every call queued on it.
// remove() takes the op out of the table first and then waits for the queued calls (the hook),
// keeping the definition alive meanwhile. A call by name that looked the op up before it was
// taken out may queue after that wait, so it reads the generation before the lookup and again
// once queued: either the removal's step of the generation comes after that second reading, and
// so its wait after the call is queued, or the caller sees the step and waits itself, while it
// still holds the definition. (The step and a fence before the reading are sequentially
// consistent, so that no order of the two is missed.)
void OpRegistry::remove(const std::string& name) {
  OpDefPtr op;
  {
    std::unique_lock<std::shared_mutex> lock(state_->mutex);
    auto it = state_->ops.find(name);
    if (it == state_->ops.end()) return;
    op = std::move(it->second);
    state_->ops.erase(it);
    state_->generation.fetch_add(1, std::memory_order_seq_cst);
  }
  // Outside the lock: the hook waits for queued calls, which may look ops up.
  if (g_removal_hook != nullptr) g_removal_hook(*op);
}

TensorList call_op(const std::string& name, TensorSpan inputs, const Attrs& attrs,
                   const std::vector<Tensor>& out) {
  OpRegistry& registry = OpRegistry::Instance();
  const uint64_t generation = registry.generation();
  const OpDefPtr op = registry.get(name);
  TensorList results = call_op(*op, inputs, attrs, out);
  // The call's queueing is not ordered before the generation's reading otherwise.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const bool changed = registry.generation() != generation;
  if (changed && registry.find(name) != op && g_removal_hook != nullptr) g_removal_hook(*op);
  return results;
}

uint64_t OpRegistry::generation() const {
  return state_->generation.load(std::memory_order_acquire);
}

OpDefPtr OpRegistry::find(const std::string& name) const {
  std::shared_lock<std::shared_mutex> lock(state_->mutex);
  auto it = state_->ops.find(name);
  return it == state_->ops.end() ? nullptr : it->second;
}

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      const bool same = std::tolower(a[i - 1]) == std::tolower(b[j - 1]);
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

OpDefPtr OpRegistry::get(const std::string& name) const {
  if (OpDefPtr op = find(name)) return op;
  std::vector<std::pair<size_t, std::string>> near;
  for (const std::string& candidate : list()) {
    near.emplace_back(edit_distance(name, candidate), candidate);
  }
  std::sort(near.begin(), near.end());
  std::string suggestions;
  for (size_t i = 0; i < near.size() && i < 3 && near[i].first <= 3; ++i) {
    suggestions += (i ? ", " : "") + near[i].second;
  }
  KILN_FAIL(kValue) << "unknown op '" << name << "'"
                    << (suggestions.empty() ? "" : "; did you mean: " + suggestions + "?");
}

std::vector<std::string> OpRegistry::list() const {
  std::shared_lock<std::shared_mutex> lock(state_->mutex);
  std::vector<std::string> names;
  names.reserve(state_->ops.size());
  for (const auto& entry : state_->ops) names.push_back(entry.first);
  return names;
}

OpRegistration::OpRegistration(OpDef def) : OpRegistration(OpRegistry::Instance().add(std::move(def))) {}

OpRegistration& OpRegistration::operator=(OpRegistration&& other) noexcept {
  if (this != &other) {
    if (!name_.empty()) OpRegistry::Instance().remove(name_);
    name_ = std::move(other.name_);
    other.name_.clear();
  }
  return *this;
}

OpRegistration::~OpRegistration() {
  if (!name_.empty()) OpRegistry::Instance().remove(name_);
}

}  // namespace kiln
