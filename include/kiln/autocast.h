// Automatic mixed precision (PyTorch's torch.autocast on the CPU): while autocast is enabled on a
// thread, every call of an op listed as lower-precision (the matrix products and convolutions)
// takes its float32 and 16-bit floating inputs in the autocast dtype (bfloat16 or float16), and
// every call of an op listed as float32 (the losses, the matrix factorizations, prod) takes its
// 16-bit ones in float32. Integer and bool inputs, calls with a float64 input or out= tensors, and
// other ops are left as they are.
//
//   {
//     kiln::AutocastGuard amp(kiln::DType::kBFloat16);
//     kiln::Tensor y = kiln::linear(x, w);  // bfloat16, from float32 x and w
//     kiln::Tensor loss = kiln::cross_entropy(y, target);  // float32, from bfloat16 y
//   }
//
// The casts are ops (Cast) made where the op is called, so autograd differentiates them (a
// float32 weight gets a float32 gradient) and kiln::jit's tracer records them; a jitted function
// keys its graphs on the autocast state. Gradient rules run with autocast off: backward computes
// in the dtypes the forward pass chose. Custom ops join a list with set_autocast_policy.
#pragma once

#include <optional>
#include <string>

#include "kiln/dtype.h"
#include "kiln/export.h"

namespace kiln {

/// What autocast does to an op's floating inputs (other than float64).
enum class AutocastPolicy : uint8_t {
  kLowerPrecision,  ///< cast to the autocast dtype
  kFloat32,         ///< cast to float32
};

/// The calling thread's autocast state.
struct AutocastState {
  bool enabled = false;
  DType dtype = DType::kBFloat16;  ///< bfloat16 or float16
};

/// The calling thread's autocast state (off unless a guard or set_autocast_state turned it on).
KILN_API AutocastState autocast_state();
/// Sets the calling thread's autocast state; returns the previous one. Throws kValue, changing
/// nothing, for a dtype other than bfloat16 and float16.
KILN_API AutocastState set_autocast_state(AutocastState state);

/// Autocast on (or off, with enabled = false) in `dtype` for this scope, on the calling thread;
/// the previous state comes back at its end. Throws what set_autocast_state throws.
class KILN_API AutocastGuard {
 public:
  explicit AutocastGuard(DType dtype, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  AutocastState previous_;
};

/// Lists the op named `op_name` (a registered op, or one registered later: a custom op) under
/// `policy`, or removes it from the lists (nullopt); "Cast" (autocast's own conversion) is a
/// kValue error. The built-in lists: kLowerPrecision MatMul,
/// BatchMatMul, Linear, AddMM, Conv2D, Conv3D, Conv2DBackwardInput and Conv3DBackwardInput (the
/// transposed convolutions) and LstmCell (an LSTM's step); kFloat32 GruCell (a GRU's step: its
/// projections run in the lower precision, its state in float32, as PyTorch's GRU does under
/// autocast), CrossEntropy, NLLLoss, MSELoss, ReduceProd, Cholesky, LuFactor, LuSolve, Solve,
/// TriangularSolve, Det, SlogDet, Qr, Eigh and Svd.
KILN_API void set_autocast_policy(const std::string& op_name, std::optional<AutocastPolicy> policy);
/// The list `op_name` is on, or nullopt.
KILN_API std::optional<AutocastPolicy> autocast_policy(const std::string& op_name);

}  // namespace kiln
