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
  // The graph IR's built-in node kinds (src/ir/infer.h): a traced call of an op of that name
  // would be read as one of them.
  for (const char* reserved : {"Return", "TupleGetItem"}) {
    KILN_CHECK_VALUE(def->name() != reserved)
        << "cannot register op '" << reserved << "': the name is the graph IR's own";
  }
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
void (*g_removed_call_hook)(const OpDef&) = nullptr;
}  // namespace

void detail::set_op_removal_hook(void (*hook)(const OpDef& op)) { g_removal_hook = hook; }
void detail::set_removed_op_call_hook(void (*hook)(const OpDef& op)) { g_removed_call_hook = hook; }

// Note [Removing an op that is being called]
// A queued call points at its OpDef, so the definition must outlive every call queued on it.
// remove() waits for the queued calls (the hook) first, since a queued kernel may call the op by
// name; then it takes the op out of the table and waits again, keeping the definition alive
// meanwhile. A call by name that looked the op up before it was taken out may queue after the
// second wait, so it reads the generation before the lookup and again once queued: either the
// removal's step of the generation comes after that second reading, and so its wait after the
// call is queued, or the caller sees the step and waits itself (the removed-call hook), while it
// still holds the definition. Both sides put a sequentially consistent fence between their write
// (queueing the call, stepping the generation) and their read (the generation, the queue), so
// that one of them sees the other. The caller's wait returns at once on a pipeline worker, whose
// calls run inline; it may block another thread's caller, which must hold no lock a queued kernel
// takes.
void OpRegistry::remove(const std::string& name) {
  OpDefPtr op = find(name);
  if (op == nullptr) return;
  // Outside the lock: the hook waits for queued calls, which may look ops up.
  if (g_removal_hook != nullptr) g_removal_hook(*op);
  {
    std::unique_lock<std::shared_mutex> lock(state_->mutex);
    auto it = state_->ops.find(name);
    if (it == state_->ops.end()) return;  // removed by another thread meanwhile
    op = std::move(it->second);
    state_->ops.erase(it);
    state_->generation.fetch_add(1, std::memory_order_seq_cst);
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (g_removal_hook != nullptr) g_removal_hook(*op);
}

namespace {

// Holds a call by name's op until the call is queued, and waits for the queued calls when the op
// was removed meanwhile; on every way out, as a call may throw after it was queued.
class HeldForCall {
 public:
  HeldForCall(OpRegistry& registry, const std::string& name)
      : registry_(registry),
        name_(name),
        generation_(registry.generation()),
        op_(registry.get(name)) {}
  ~HeldForCall() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (registry_.generation() == generation_ || g_removed_call_hook == nullptr) return;
    if (registry_.find(name_) != op_) g_removed_call_hook(*op_);
  }
  HeldForCall(const HeldForCall&) = delete;
  HeldForCall& operator=(const HeldForCall&) = delete;
  const OpDef& op() const { return *op_; }

 private:
  OpRegistry& registry_;
  const std::string& name_;
  const uint64_t generation_;  // read before the lookup
  const OpDefPtr op_;
};

}  // namespace

TensorList call_op(const std::string& name, TensorSpan inputs, const Attrs& attrs,
                   const std::vector<Tensor>& out) {
  const HeldForCall held(OpRegistry::Instance(), name);
  return call_op(held.op(), inputs, attrs, out);
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
