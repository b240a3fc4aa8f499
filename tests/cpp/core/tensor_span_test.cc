// TensorSpan: a view of the caller's tensors, from a vector or a braced list, as op calls take
// their inputs.

#include "kiln/tensor_span.h"

#include <gtest/gtest.h>

#include <vector>

#include "kiln/functional.h"
#include "kiln/op.h"
#include "testing.h"

namespace kiln {
namespace {

// What a callee sees: the count and each tensor's identity.
std::vector<const TensorImpl*> impls_of(TensorSpan span) {
  std::vector<const TensorImpl*> impls;
  for (const Tensor& t : span) impls.push_back(t.impl());
  return impls;
}

TEST(TensorSpan, ShowsAVectorsTensorsInPlace) {
  const std::vector<Tensor> tensors{ones({2}), zeros({3}), ones({4})};
  const TensorSpan span(tensors);
  ASSERT_EQ(span.size(), 3u);
  EXPECT_FALSE(span.empty());
  EXPECT_EQ(span.data(), tensors.data());  // a view: nothing copied
  for (size_t i = 0; i < tensors.size(); ++i) EXPECT_TRUE(span[i].is_same(tensors[i]));
}

TEST(TensorSpan, ShowsABracedListForTheCallsDuration) {
  const Tensor a = ones({2}), b = zeros({2});
  EXPECT_EQ(impls_of({a, b}), (std::vector<const TensorImpl*>{a.impl(), b.impl()}));
  EXPECT_EQ(impls_of({}), std::vector<const TensorImpl*>{});
}

TEST(TensorSpan, ShowsATensorListsTensorsInPlace) {
  TensorList list{ones({2}), zeros({3})};
  const TensorSpan span(list);
  ASSERT_EQ(span.size(), 2u);
  EXPECT_EQ(span.data(), list.data());
  EXPECT_EQ(impls_of(list), (std::vector<const TensorImpl*>{list[0].impl(), list[1].impl()}));
}

TEST(TensorSpan, DefaultIsEmpty) {
  const TensorSpan span;
  EXPECT_TRUE(span.empty());
  EXPECT_EQ(span.size(), 0u);
  EXPECT_EQ(span.begin(), span.end());
  EXPECT_TRUE(span.vec().empty());
}

TEST(TensorSpan, VecCopiesTheHandlesSharingTheTensors) {
  const std::vector<Tensor> tensors{ones({2}), zeros({3})};
  const std::vector<Tensor> copy = TensorSpan(tensors).vec();
  ASSERT_EQ(copy.size(), 2u);
  EXPECT_NE(copy.data(), tensors.data());
  EXPECT_TRUE(copy[0].is_same(tensors[0]));
  EXPECT_TRUE(copy[1].is_same(tensors[1]));
}

TEST(TensorSpan, CallOpTakesABracedListOrAVector) {
  const Tensor a = full({3}, Scalar(2.0)), b = full({3}, Scalar(5.0));
  const std::vector<Tensor> inputs{a, b};
  testing::expect_close(call_op("Add", {a, b})[0], full({3}, Scalar(7.0)), 0);
  testing::expect_close(call_op("Mul", inputs)[0], full({3}, Scalar(10.0)), 0);
  // A span over part of a list: the first two of three.
  const std::vector<Tensor> three{a, b, a};
  testing::expect_close(call_op("Sub", TensorSpan(three.data(), 2))[0], full({3}, Scalar(-3.0)), 0);
}

TEST(TensorSpan, AWrongInputCountStillNamesTheOp) {
  const Tensor a = ones({2});
  testing::expect_error([&] { call_op("Add", {a}); }, ErrorKind::kType,
                        "Add: expected 2 inputs, got 1");
}

}  // namespace
}  // namespace kiln
