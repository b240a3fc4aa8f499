// Autocast (kiln/autocast.h): the thread's state, the op lists, and the casts call_op makes
// (detail::autocast_inputs, declared in ops/autocast_inputs.h).
#include "kiln/autocast.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "kiln/error.h"
#include "kiln/functional/elementwise.h"
#include "ops/autocast_inputs.h"

namespace kiln {
namespace {

thread_local AutocastState t_state;

// The op lists, by op name: read by every call made under autocast, written rarely.
struct Policies {
  std::shared_mutex mutex;
  std::unordered_map<std::string, AutocastPolicy> by_op;
  std::atomic<int64_t> generation{0};  // changes of by_op (autocast_policies_generation)
};

Policies& policies() {
  static Policies* p = [] {
    auto* made = new Policies;  // never destroyed: calls may run during static destruction
    for (const char* op : {"MatMul", "BatchMatMul", "Linear", "AddMM", "Conv2D", "Conv3D",
                           "Conv2DBackwardInput", "Conv3DBackwardInput", "LstmCell"}) {
      made->by_op.emplace(op, AutocastPolicy::kLowerPrecision);
    }
    // GruCell: PyTorch's GRU gives float32 under autocast, where its LSTM gives bfloat16.
    for (const char* op :
         {"GruCell", "CrossEntropy", "NLLLoss", "MSELoss", "ReduceProd", "Cholesky", "LuFactor",
          "LuSolve", "Solve", "TriangularSolve", "Det", "SlogDet", "Qr", "Eigh", "Svd"}) {
      made->by_op.emplace(op, AutocastPolicy::kFloat32);
    }
    return made;
  }();
  return *p;
}

}  // namespace

AutocastState autocast_state() { return t_state; }

AutocastState set_autocast_state(AutocastState state) {
  KILN_CHECK_VALUE(state.dtype == DType::kBFloat16 || state.dtype == DType::kFloat16)
      << "autocast: expected dtype bfloat16 or float16 (the lower precision that the matrix "
         "products and convolutions run in), got "
      << state.dtype;
  const AutocastState previous = t_state;
  t_state = state;
  return previous;
}

AutocastGuard::AutocastGuard(DType dtype, bool enabled)
    : previous_(set_autocast_state({enabled, dtype})) {}

AutocastGuard::~AutocastGuard() { t_state = previous_; }

void set_autocast_policy(const std::string& op_name, std::optional<AutocastPolicy> policy) {
  KILN_CHECK_VALUE(!op_name.empty()) << "set_autocast_policy: expected an op name, got \"\"";
  KILN_CHECK_VALUE(op_name != "Cast")
      << "set_autocast_policy: Cast is how autocast converts inputs; it cannot be on a list";
  Policies& p = policies();
  std::unique_lock<std::shared_mutex> lock(p.mutex);
  if (policy) {
    p.by_op[op_name] = *policy;
  } else {
    p.by_op.erase(op_name);
  }
  p.generation.fetch_add(1, std::memory_order_relaxed);
}

int64_t detail::autocast_policies_generation() {
  return policies().generation.load(std::memory_order_relaxed);
}

std::optional<AutocastPolicy> autocast_policy(const std::string& op_name) {
  Policies& p = policies();
  std::shared_lock<std::shared_mutex> lock(p.mutex);
  const auto found = p.by_op.find(op_name);
  if (found == p.by_op.end()) return std::nullopt;
  return found->second;
}

std::optional<std::vector<Tensor>> detail::autocast_inputs(const std::string& op_name,
                                                           TensorSpan inputs) {
  if (!t_state.enabled) return std::nullopt;
  const std::optional<AutocastPolicy> policy = autocast_policy(op_name);
  if (!policy) return std::nullopt;
  const DType target = *policy == AutocastPolicy::kLowerPrecision ? t_state.dtype : DType::kFloat32;
  // Python numbers (weak scalars) adapt to the other operands already; a float64 operand keeps
  // the call as it is (the others would be rounded before joining it in float64).
  const auto cast_one = [](const Tensor& t) {
    return t.defined() && !t.is_weak_scalar() && is_floating_point(t.dtype());
  };
  const auto eligible = [&](const Tensor& t) { return cast_one(t) && t.dtype() != target; };
  if (std::none_of(inputs.begin(), inputs.end(), eligible) ||
      std::any_of(inputs.begin(), inputs.end(),
                  [&](const Tensor& t) { return cast_one(t) && t.dtype() == DType::kFloat64; })) {
    return std::nullopt;
  }
  const AutocastGuard off(t_state.dtype, /*enabled=*/false);  // the casts themselves as they are
  std::vector<Tensor> cast(inputs.begin(), inputs.end());
  for (Tensor& t : cast) {
    if (eligible(t)) t = to(t, target);
  }
  return cast;
}

}  // namespace kiln
