// A jitted C++ function that writes in place into tensors from outside or into its inputs: the
// graph returns their new values as extra outputs and the call copies them back
// (jit_detail::write_back).
#include <gtest/gtest.h>

#include "jit/trace.h"
#include "kiln/functional.h"
#include "kiln/jit.h"
#include "testing.h"

namespace kiln {
namespace {

JitOptions on(const std::string& backend) {
  JitOptions options;
  options.backend = backend;
  return options;
}

TEST(JitState, WritesIntoOutsideTensorsLandAfterEachRun) {
  for (const char* backend : {"kiln_cpu", "reference"}) {
    SCOPED_TRACE(backend);
    const Tensor total = zeros({3});
    JitFunction f = jit(
        [&](const std::vector<Tensor>& in) {
          add(total, in[0], total);  // total += x
          return std::vector<Tensor>{total * 2.0};
        },
        on(backend), "accumulate");
    for (int i = 1; i <= 3; ++i) {
      const std::vector<Tensor> out = f({full({3}, static_cast<double>(i))});
      ASSERT_EQ(out.size(), 1u) << "the written values are not outputs of the call";
      testing::expect_close(out[0], full({3}, 2.0 * i * (i + 1) / 2), 0);
    }
    testing::expect_close(total, full({3}, 6.0), 0);
    EXPECT_EQ(f.cache_info().misses, 1u);
    // The traced graph shows the new value as an extra output.
    const std::string text = f.graph({ones({3})});
    EXPECT_NE(text.substr(text.find("  return")).find(", "), std::string::npos) << text;
  }
}

TEST(JitState, WriteBackCopiesTrailingOutputs) {
  const Tensor a = zeros({2}), b = zeros({2}, DType::kFloat64);
  std::vector<Tensor> outputs{ones({2}), full({2}, 3.0), full({2}, 4.0)};
  jit_detail::write_back({{a, b}, {}, {}}, {}, outputs);
  ASSERT_EQ(outputs.size(), 1u);
  testing::expect_close(a, full({2}, 3.0), 0);
  testing::expect_close(b, full({2}, 4.0, DType::kFloat64), 0);
  // Then the parameters written, by position.
  const Tensor p0 = zeros({2}), p1 = zeros({2});
  outputs = {ones({2}), full({2}, 5.0), full({2}, 6.0), full({2}, 7.0)};
  jit_detail::write_back({{a}, {{1, false}, {0, false}}, {}}, {p0, p1}, outputs);
  ASSERT_EQ(outputs.size(), 1u);
  testing::expect_close(a, full({2}, 5.0), 0);
  testing::expect_close(p1, full({2}, 6.0), 0);
  testing::expect_close(p0, full({2}, 7.0), 0);
}

// A jitted optimizer step: the parameter and the momentum buffer are arguments, written in place
// at every call into whatever tensors the call passes.
TEST(JitState, WritesIntoInputsLandInEachCallsArguments) {
  for (const char* backend : {"kiln_cpu", "reference"}) {
    SCOPED_TRACE(backend);
    JitFunction step = jit(
        [](const std::vector<Tensor>& in) {
          const Tensor &param = in[0], &grad = in[1], &velocity = in[2];
          mul(velocity, Tensor::scalar(0.5), velocity);  // velocity = 0.5 velocity + grad
          add(velocity, grad, velocity);
          sub(param, velocity, param);  // param -= velocity
          return std::vector<Tensor>{param * 1.0};
        },
        on(backend), "sgd");
    Tensor p1 = full({3}, 10.0), v1 = zeros({3}), p2 = full({3}, -1.0), v2 = full({3}, 2.0);
    for (int i = 0; i < 2; ++i) {
      const std::vector<Tensor> out = step({p1, ones({3}), v1});
      ASSERT_EQ(out.size(), 1u);
      testing::expect_close(out[0], p1, 0);
    }
    testing::expect_close(v1, full({3}, 1.5), 0);  // 1, then 0.5 + 1
    testing::expect_close(p1, full({3}, 7.5), 0);  // 10 - 1 - 1.5
    step({p2, full({3}, 2.0), v2});                // another call's arguments
    testing::expect_close(v2, full({3}, 3.0), 0);
    testing::expect_close(p2, full({3}, -4.0), 0);
    EXPECT_EQ(step.cache_info().misses, 1u);
  }
}

// A tensor the function reads from outside, passed as the argument it writes (or a written outside
// tensor passed as an argument): the graph read the old value where eager mode sees the write.
TEST(JitState, AWrittenTensorPassedAlsoAsAnotherValueIsRefusedBeforeTheRun) {
  const Tensor w = zeros({3});
  JitFunction reads_w = jit(
      [&](const std::vector<Tensor>& in) {
        add(in[0], Tensor::scalar(1.0), in[0]);  // x += 1
        return std::vector<Tensor>{w * 1.0};
      },
      on("kiln_cpu"), "reads_w");
  testing::expect_error([&] { reads_w({w}); }, ErrorKind::kValue,
                        "is one the function also reads from outside");
  testing::expect_close(w, zeros({3}), 0);
  const Tensor x = zeros({3});
  reads_w({x});
  testing::expect_close(x, ones({3}), 0);
  JitFunction writes_w = jit(
      [&](const std::vector<Tensor>& in) {
        add(w, Tensor::scalar(1.0), w);  // w += 1
        return std::vector<Tensor>{in[0] * 1.0};
      },
      on("kiln_cpu"), "writes_w");
  testing::expect_error([&] { writes_w({w}); }, ErrorKind::kValue,
                        "input 0 shares its memory with a tensor from outside that the function "
                        "writes in place");
  testing::expect_close(w, zeros({3}), 0);  // refused before the run: nothing written
}

TEST(JitState, AWrittenInputSharingMemoryWithAnotherInputIsRefused) {
  JitFunction f = jit(
      [](const std::vector<Tensor>& in) {
        add(in[0], in[1], in[0]);  // x += y
        return std::vector<Tensor>{in[1] * 1.0};
      },
      on("kiln_cpu"), "alias");
  const Tensor x = full({3}, 1.0);
  testing::expect_error(
      [&] {
        f({x, x});
      },
      ErrorKind::kValue, "writes into its input 0 in place, and input 1 shares its memory");
  testing::expect_close(x, full({3}, 1.0), 0);  // untouched
  const Tensor y = full({3}, 2.0);
  f({x, y});
  testing::expect_close(x, full({3}, 3.0), 0);
}

TEST(JitState, WritingPartOfAnOutsideTensorIsRefused) {
  const Tensor state = zeros({4});
  JitFunction f = jit(
      [&](const std::vector<Tensor>& in) {
        add(state.narrow(0, 1, 2), in[0], state.narrow(0, 1, 2));
        return std::vector<Tensor>{in[0]};
      },
      on("kiln_cpu"), "partial");
  testing::expect_error([&] { f({ones({2})}); }, ErrorKind::kNotImplemented,
                        "a view of a tensor from outside");
}

}  // namespace
}  // namespace kiln
