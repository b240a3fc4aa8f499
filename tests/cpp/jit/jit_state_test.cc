// A jitted C++ function that writes into tensors from outside in place: the graph returns their
// new values as extra outputs and the call copies them back (jit_detail::write_back).
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
  jit_detail::write_back({a, b}, outputs);
  ASSERT_EQ(outputs.size(), 1u);
  testing::expect_close(a, full({2}, 3.0), 0);
  testing::expect_close(b, full({2}, 4.0, DType::kFloat64), 0);
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
