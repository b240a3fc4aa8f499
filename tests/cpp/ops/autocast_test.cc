// Autocast (kiln/autocast.h): which ops' inputs it casts and to what, the thread's state and its
// guard, custom op lists, gradients through the casts (backward with autocast off), and the jit
// keying its graphs on the state.
#include "kiln/autocast.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "kiln/autograd.h"
#include "kiln/functional.h"
#include "kiln/jit.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::expect_error;

TEST(Autocast, LowerPrecisionOpsTakeFloat32InputsInTheAutocastDtype) {
  const Tensor x = randn({4, 8}), w = randn({3, 8}), b = randn({3});
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const AutocastGuard amp(dtype);
    const Tensor y = linear(x, w, b);
    EXPECT_EQ(y.dtype(), dtype);
    {
      const AutocastGuard off(dtype, /*enabled=*/false);  // the same op on the cast inputs
      testing::expect_close(y, linear(to(x, dtype), to(w, dtype), to(b, dtype)), 0);
    }
    EXPECT_EQ(matmul(x, transpose(w, 0, 1)).dtype(), dtype);
    EXPECT_EQ(conv2d(randn({1, 2, 5, 5}), randn({3, 2, 3, 3})).dtype(), dtype);
    // float64 and the ops on no list are left alone.
    EXPECT_EQ(matmul(to(x, DType::kFloat64), to(transpose(w, 0, 1), DType::kFloat64)).dtype(),
              DType::kFloat64);
    EXPECT_EQ(exp(x).dtype(), DType::kFloat32);
    // One float64 operand keeps the call as it is (no rounding before promoting to float64).
    EXPECT_EQ(matmul(to(x, DType::kFloat64), transpose(w, 0, 1)).dtype(), DType::kFloat64);
    // A transposed convolution's bias joins its lower-precision result.
    EXPECT_EQ(conv_transpose2d(randn({1, 2, 4, 4}), randn({2, 3, 3, 3}), randn({3})).dtype(),
              dtype);
  }
}

TEST(Autocast, Float32OpsTake16BitInputsInFloat32) {
  const Tensor logits = to(randn({4, 5}), DType::kBFloat16);
  const Tensor target = arange(0, 4, 1, DType::kInt64);
  const AutocastGuard amp(DType::kBFloat16);
  const Tensor loss = cross_entropy(logits, target);
  EXPECT_EQ(loss.dtype(), DType::kFloat32);
  const AutocastGuard off(DType::kBFloat16, false);
  testing::expect_close(loss, cross_entropy(to(logits, DType::kFloat32), target), 0);
  EXPECT_EQ(cross_entropy(logits, target).dtype(), DType::kBFloat16);  // off: as given
}

TEST(Autocast, GuardsNestAndRestoreTheThreadsState) {
  EXPECT_FALSE(autocast_state().enabled);
  {
    const AutocastGuard outer(DType::kFloat16);
    EXPECT_TRUE(autocast_state().enabled);
    EXPECT_EQ(autocast_state().dtype, DType::kFloat16);
    {
      const AutocastGuard inner(DType::kBFloat16, /*enabled=*/false);
      EXPECT_FALSE(autocast_state().enabled);
      EXPECT_EQ(matmul(randn({2, 2}), randn({2, 2})).dtype(), DType::kFloat32);
    }
    EXPECT_EQ(autocast_state().dtype, DType::kFloat16);
    // Another thread has its own state.
    bool other_enabled = true;
    std::thread([&] { other_enabled = autocast_state().enabled; }).join();
    EXPECT_FALSE(other_enabled);
  }
  EXPECT_FALSE(autocast_state().enabled);
  expect_error([] { AutocastGuard bad(DType::kFloat32); }, ErrorKind::kValue,
               "autocast: expected dtype bfloat16 or float16");
  EXPECT_FALSE(autocast_state().enabled);  // the refused guard changed nothing
}

TEST(Autocast, GradientsFlowThroughTheCastsInTheForwardsDtypes) {
  const Tensor x = randn({4, 8});
  Tensor w = randn({3, 8});
  autograd::set_requires_grad(w);
  Tensor loss;
  {
    const AutocastGuard amp(DType::kBFloat16);
    loss = sum(to(linear(x, w), DType::kFloat32));
  }
  const Tensor dw = autograd::grad({loss}, {w})[0];
  EXPECT_EQ(dw.dtype(), DType::kFloat32);
  // d sum(x w^T) / dw = the column sums of x, as bfloat16 x gives them (in bfloat16, then cast).
  const Tensor want = to(expand(sum(to(x, DType::kBFloat16), {0}, true), {3, 8}), DType::kFloat32);
  testing::expect_close(dw, want, 1e-2);
  // backward inside the block computes as outside it: its rules run with autocast off.
  Tensor inside;
  {
    const AutocastGuard amp(DType::kBFloat16);
    const Tensor z = matmul(to(x, DType::kFloat64), to(transpose(w, 0, 1), DType::kFloat64));
    inside = autograd::grad({sum(z)}, {w})[0];
  }
  const Tensor z = matmul(to(x, DType::kFloat64), to(transpose(w, 0, 1), DType::kFloat64));
  testing::expect_close(inside, autograd::grad({sum(z)}, {w})[0], 0);
}

TEST(Autocast, CustomListsAddAndRemoveOps) {
  EXPECT_EQ(autocast_policy("MatMul"), AutocastPolicy::kLowerPrecision);
  EXPECT_EQ(autocast_policy("CrossEntropy"), AutocastPolicy::kFloat32);
  EXPECT_EQ(autocast_policy("Exp"), std::nullopt);
  set_autocast_policy("Exp", AutocastPolicy::kLowerPrecision);
  {
    const AutocastGuard amp(DType::kBFloat16);
    EXPECT_EQ(exp(randn({3})).dtype(), DType::kBFloat16);
  }
  set_autocast_policy("Exp", std::nullopt);
  EXPECT_EQ(autocast_policy("Exp"), std::nullopt);
  const AutocastGuard amp(DType::kBFloat16);
  EXPECT_EQ(exp(randn({3})).dtype(), DType::kFloat32);
  expect_error([] { set_autocast_policy("", AutocastPolicy::kFloat32); }, ErrorKind::kValue,
               "expected an op name");
  // Cast is autocast's own conversion (listing it would recurse).
  expect_error([] { set_autocast_policy("Cast", AutocastPolicy::kFloat32); }, ErrorKind::kValue,
               "Cast is how autocast converts inputs");
}

// A graph replayed op by op (the reference backend) keeps its trace's dtypes: the gradient
// rules traced with autocast off are not cast on replay under the caller's autocast.
TEST(Autocast, AGraphReplayedThroughCallOpKeepsItsTracesCasts) {
  JitOptions reference;
  reference.backend = "reference";
  // inv is on no list: its rule's float32 products would be cast to bfloat16 on replay.
  const auto gradient = [](const Tensor& a) {
    Tensor x = to(a, DType::kFloat32);
    autograd::set_requires_grad(x);
    return autograd::grad({sum(linalg::inv(x))}, {x});
  };
  JitFunction f = jit([&](const std::vector<Tensor>& in) { return gradient(in[0]); }, reference);
  const Tensor a = add(randn({4, 4}, DType::kFloat64), eye(4, 4, DType::kFloat64) * 4.0);
  const AutocastGuard amp(DType::kBFloat16);
  const Tensor want = gradient(a)[0];
  const Tensor got = f({a})[0];
  EXPECT_EQ(got.dtype(), want.dtype());
  testing::expect_close(got, want, 0);
}

TEST(Autocast, AJittedFunctionTracesOncePerAutocastState) {
  JitFunction f =
      jit([](const std::vector<Tensor>& in) { return std::vector<Tensor>{matmul(in[0], in[1])}; });
  const Tensor a = randn({2, 3}), b = randn({3, 4});
  EXPECT_EQ(f({a, b})[0].dtype(), DType::kFloat32);
  {
    const AutocastGuard amp(DType::kBFloat16);
    const Tensor y = f({a, b})[0];
    EXPECT_EQ(y.dtype(), DType::kBFloat16);
    const AutocastGuard off(DType::kBFloat16, false);
    testing::expect_close(y, matmul(to(a, DType::kBFloat16), to(b, DType::kBFloat16)), 0);
  }
  EXPECT_EQ(f({a, b})[0].dtype(), DType::kFloat32);
  EXPECT_EQ(f.cache_info().misses, 2u);
  EXPECT_EQ(f.cache_info().hits, 1u);
  // A change of the lists traces again: MatMul off them, the call runs in float32.
  set_autocast_policy("MatMul", std::nullopt);
  {
    const AutocastGuard amp(DType::kBFloat16);
    EXPECT_EQ(f({a, b})[0].dtype(), DType::kFloat32);
  }
  set_autocast_policy("MatMul", AutocastPolicy::kLowerPrecision);
  EXPECT_EQ(f.cache_info().misses, 3u);
}

}  // namespace
}  // namespace kiln
