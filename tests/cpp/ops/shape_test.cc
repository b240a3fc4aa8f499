#include "kiln/functional/shape.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/op.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::expect_error;

Tensor iota(const Shape& shape, DType dtype = DType::kFloat32) {
  Tensor f = Tensor::empty(shape, DType::kFloat32);
  float* p = f.data<float>();
  for (int64_t i = 0; i < f.numel(); ++i) p[i] = static_cast<float>(i);
  if (dtype == DType::kFloat32) return f;
  Tensor t = Tensor::empty(shape, dtype);
  copy_into(t, f);
  return t;
}

Tensor ints(const std::vector<int64_t>& values, Shape shape = {}) {
  if (shape.empty()) shape = {static_cast<int64_t>(values.size())};
  Tensor t = Tensor::empty(shape, DType::kInt64);
  for (size_t i = 0; i < values.size(); ++i) t.data<int64_t>()[i] = values[i];
  return t;
}

// The elements of any tensor in row-major order, as float.
std::vector<float> values(const Tensor& t) {
  Tensor f = Tensor::empty(t.shape(), DType::kFloat32);
  copy_into(f, t);
  return std::vector<float>(f.data<float>(), f.data<float>() + f.numel());
}

TEST(ShapeViews, ShareStorage_WhenEager) {
  const Tensor x = iota({2, 3, 4});
  for (const Tensor& v : {reshape(x, {6, -1}), transpose(x, 0, 2), permute(x, {1, 2, 0}),
                          unsqueeze(x, 1), squeeze(unsqueeze(x, 0)), flatten(x, 1),
                          expand(unsqueeze(x, 0), {5, 2, 3, 4}), contiguous(x)}) {
    EXPECT_EQ(v.storage(), x.storage());
  }
  EXPECT_EQ(reshape(x, {6, -1}).shape(), (Shape{6, 4}));
  EXPECT_EQ(permute(x, {1, 2, 0}).shape(), (Shape{3, 4, 2}));
  EXPECT_EQ(flatten(x, 1).shape(), (Shape{2, 12}));
  EXPECT_EQ(squeeze(reshape(x, {1, 24, 1}), 0).shape(), (Shape{24, 1}));
}

TEST(ShapeViews, InferMatchesTheEagerView_ForEveryPrimitive) {
  const Tensor x = iota({2, 1, 3});
  const std::vector<std::pair<std::string, Attrs>> calls = {
      {"Reshape", {{"shape", Shape{3, -1}}}},
      {"Transpose", {{"dim0", 0}, {"dim1", -1}}},
      {"Permute", {{"dims", Shape{2, 0, 1}}}},
      {"Expand", {{"shape", Shape{4, 2, 5, 3}}}},
      {"Squeeze", {}},
      {"Squeeze", {{"dim", 1}}},
      {"Unsqueeze", {{"dim", -1}}},
      {"Flatten", {{"start_dim", 1}}},
      {"Contiguous", {}}};
  for (const auto& [name, attrs] : calls) {
    const OpDefPtr op = OpRegistry::Instance().get(name);
    EXPECT_TRUE(op->has_trait(kTraitView)) << name;
    const Attrs normalized = op->normalize_attrs(attrs);
    const MetaList metas = op->infer_outputs({TensorMeta(x.dtype(), x.shape())}, normalized);
    const Tensor view = call_op(*op, {x}, attrs)[0];
    EXPECT_EQ(metas[0].shape, view.shape()) << name;
    // With `out` the CPU kernel runs (as in graph mode) and writes a contiguous copy.
    Tensor out = Tensor::empty(metas[0].shape, x.dtype());
    call_op(*op, {x}, attrs, {out});
    EXPECT_NE(out.storage(), x.storage()) << name;
    EXPECT_EQ(values(out), values(view)) << name;
  }
}

TEST(ShapeViews, KernelCopiesNonContiguousInput_ForReshape) {
  const Tensor x = transpose(iota({3, 4}), 0, 1);
  const Tensor eager = reshape(x, {12});
  EXPECT_NE(eager.storage(), x.storage());  // strides cannot express it: a copy
  Tensor out = Tensor::empty({2, 6});
  call_op("Reshape", {x}, {{"shape", Shape{2, 6}}}, {out});
  EXPECT_EQ(values(out), values(eager));
  EXPECT_EQ(values(out)[1], 4.0f);
}

TEST(AsStrided, ViewsAContiguousInput_AndReadsOthersInRowMajorOrder) {
  const Tensor x = iota({3, 4});
  const Tensor view = as_strided(x.slice(0, 1, 3), {4, 2}, {1, 4});  // relative to the slice
  EXPECT_EQ(view.storage(), x.storage());
  EXPECT_EQ(values(view), (std::vector<float>{4, 8, 5, 9, 6, 10, 7, 11}));
  // A transposed input is read as its row-major elements: 0 4 8 1 5 9 2 6 10 3 7 11. A window
  // of whole steps within its dimensions is still a view of x's memory...
  const Tensor xt = transpose(x, 0, 1);
  const Tensor window = as_strided(xt, {2, 2}, {3, 1}, 1);
  EXPECT_EQ(window.storage(), x.storage());
  EXPECT_EQ(values(window), (std::vector<float>{4, 8, 5, 9}));
  EXPECT_EQ(values(as_strided(xt, {3}, {3}, 2)), (std::vector<float>{8, 9, 10}));  // a column
  // ... one whose steps carry from one dimension into the next is a copy.
  const Tensor copied = as_strided(xt, {4}, {2}, 0);
  EXPECT_NE(copied.storage(), x.storage());
  EXPECT_EQ(values(copied), (std::vector<float>{0, 8, 5, 2}));
  EXPECT_NE(as_strided(xt, {2, 2}, {3, 1}, 2).storage(), x.storage());  // 8 1 / 9 2: wraps
  Tensor out = Tensor::empty({2, 2});  // the kernel (graph mode) on a contiguous input
  call_op("AsStrided", {x}, {{"size", Shape{2, 2}}, {"stride", Shape{0, 2}}}, {out});
  EXPECT_EQ(values(out), (std::vector<float>{0, 2, 0, 2}));
  expect_error([&] { as_strided(x, {2, 2}, {6, 1}, 5); }, ErrorKind::kShape,
               "reach element 12 of an input with 12 elements");
  expect_error([&] { as_strided(x, {2}, {1, 1}); }, ErrorKind::kShape, "as many strides");
  EXPECT_EQ(as_strided(x, {0, 5}, {100, 100}, 0).numel(), 0);
}

TEST(AsStridedScatter, WritesTheViewOfACopy_ReadingItsInputInRowMajorOrder) {
  const Tensor x = iota({3, 4});
  // Elements 1, 5, 2, 6 of x's row-major sequence (a transposed 2x2 block) become 100..103.
  const Tensor src = iota({2, 2}, DType::kFloat64) + 100.0;
  const Tensor out = as_strided_scatter(x, src, {2, 2}, {1, 4}, 1);
  EXPECT_EQ(out.dtype(), DType::kFloat32);
  EXPECT_TRUE(out.is_contiguous());
  EXPECT_EQ(values(out), (std::vector<float>{0, 100, 102, 3, 4, 101, 103, 7, 8, 9, 10, 11}));
  EXPECT_EQ(values(x)[1], 1.0f);  // x is not written
  // A transposed x is read in its row-major order: 0 4 8 1 5 9 2 6 10 3 7 11.
  const Tensor t = as_strided_scatter(transpose(x, 0, 1), iota({2}) - 1.0f, {2}, {2}, 0);
  EXPECT_EQ(values(t), (std::vector<float>{-1, 4, 0, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  expect_error([&] { as_strided_scatter(x, iota({3}), {2}, {1}); }, ErrorKind::kShape,
               "expected src of the view's shape [2], got [3]");
  expect_error([&] { as_strided_scatter(x, iota({2}), {2}, {6}, 7); }, ErrorKind::kShape,
               "reach element 13 of an input with 12 elements");
  expect_error(
      [&] {
        as_strided_scatter(x, iota({2, 3}), {2, 3}, {1, 1});
      },
      ErrorKind::kShape,
      "a view that reaches each element of x at most once, got size [2, 3] and stride "
      "[1, 1]");
  expect_error([&] { as_strided_scatter(x, iota({2}), {2}, {0}); }, ErrorKind::kShape,
               "reaches each element of x at most once");
}

TEST(ShapeViews, ReportBadArguments_WithTheOpName) {
  const Tensor x = iota({2, 3});
  expect_error([&] { reshape(x, {4, 2}); }, ErrorKind::kShape, "in Reshape(float32[2, 3])");
  expect_error([&] { permute(x, {0, 0}); }, ErrorKind::kIndex, "appears twice");
  expect_error([&] { transpose(x, 0, 2); }, ErrorKind::kIndex, "out of range");
  expect_error([&] { expand(x, {4, 3}); }, ErrorKind::kShape, "cannot broadcast");
  expect_error([&] { flatten(iota({2, 3, 4}), 2, 1); }, ErrorKind::kIndex, "comes after");
}

TEST(Concat, JoinsAlongADim_AndPromotes) {
  const Tensor a = iota({2, 2}, DType::kInt32);
  const Tensor b = iota({2, 1});
  const Tensor c = cat({a, b}, 1);
  EXPECT_EQ(c.dtype(), DType::kFloat32);
  EXPECT_EQ(c.shape(), (Shape{2, 3}));
  EXPECT_EQ(values(c), (std::vector<float>{0, 1, 0, 2, 3, 1}));
  // A non-contiguous input goes through the strided path.
  const Tensor t = transpose(iota({2, 2}), 0, 1);
  EXPECT_EQ(values(cat({t, iota({1, 2})}, 0)), (std::vector<float>{0, 2, 1, 3, 0, 1}));
}

TEST(Concat, NamesTheTensorAndDim_WhenShapesDiffer) {
  expect_error(
      [] {
        cat({iota({2, 3}), iota({2, 3}), iota({3, 3})}, 1);
      },
      ErrorKind::kShape, "expected tensor 2 to have size 2 in dimension 0");
  expect_error(
      [] {
        cat({iota({2}), iota({2, 1})});
      },
      ErrorKind::kShape, "expected tensor 1 to have 1 dimensions");
  expect_error([] { cat({iota({})}); }, ErrorKind::kShape, "0-d tensor at index 0");
  expect_error([] { cat({}); }, ErrorKind::kValue, "at least one tensor");
}

TEST(Stack, AddsADim_AtNegativePositions) {
  const Tensor s = stack({iota({2}), iota({2}, DType::kInt64)}, -1);
  EXPECT_EQ(s.shape(), (Shape{2, 2}));
  EXPECT_EQ(s.dtype(), DType::kFloat32);
  EXPECT_EQ(values(s), (std::vector<float>{0, 0, 1, 1}));
  EXPECT_EQ(stack({iota({}), iota({})}).shape(), (Shape{2}));
  expect_error(
      [] {
        stack({iota({2, 3}), iota({2, 4})});
      },
      ErrorKind::kShape, "expected tensor 1 to have shape [2, 3]");
}

TEST(Split, ReturnsViews_AndTheKernelCopies) {
  const Tensor x = iota({5, 2});
  const std::vector<Tensor> parts = split(x, 2);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2].shape(), (Shape{1, 2}));
  EXPECT_EQ(parts[1].storage(), x.storage());
  EXPECT_EQ(values(parts[1]), (std::vector<float>{4, 5, 6, 7}));
  const std::vector<Tensor> sized = split(x, std::vector<int64_t>{1, 0, 4}, 0);
  EXPECT_EQ(sized[1].shape(), (Shape{0, 2}));
  std::vector<Tensor> outs = {Tensor::empty({2, 1}), Tensor::empty({2, 1})};
  call_op("Split", {transpose(iota({2, 2}), 0, 1)}, {{"sizes", Shape{1, 1}}, {"dim", 1}}, outs);
  EXPECT_EQ(values(outs[1]), (std::vector<float>{2, 3}));
  expect_error([&] { split(x, std::vector<int64_t>{2, 2}); }, ErrorKind::kShape, "summing to 5");
  expect_error([&] { split(x, 0); }, ErrorKind::kValue, "positive split_size");
}

TEST(Chunk, GivesFewerPieces_WhenTheDimIsSmall) {
  std::vector<int64_t> sizes;
  for (const Tensor& t : chunk(iota({5}), 4)) sizes.push_back(t.size(0));
  EXPECT_EQ(sizes, (std::vector<int64_t>{2, 2, 1}));
  EXPECT_EQ(chunk(iota({0, 3}), 3).size(), 3u);
  expect_error([] { chunk(iota({3}), 0); }, ErrorKind::kValue, "positive number of chunks");
}

TEST(IndexSelect, PicksRows_WithNegativeIndices) {
  const Tensor out = index_select(iota({3, 2}), 0, ints({2, -3, 2}));
  EXPECT_EQ(values(out), (std::vector<float>{4, 5, 0, 1, 4, 5}));
  const Tensor cols = index_select(transpose(iota({2, 3}), 0, 1), 1, ints({1}));
  EXPECT_EQ(values(cols), (std::vector<float>{3, 4, 5}));
  expect_error(
      [] {
        index_select(iota({3, 2}), 0, ints({3}));
      },
      ErrorKind::kIndex, "index 3 is out of bounds for dimension 0 with size 3");
  expect_error([] { index_select(iota({3}), 0, iota({1})); }, ErrorKind::kDType, "int64 or int32");
}

TEST(Gather, FollowsTorchGather) {
  const Tensor x = iota({2, 3});
  const Tensor out = gather(x, 1, ints({2, 0, 1, 1}, {2, 2}));
  EXPECT_EQ(values(out), (std::vector<float>{2, 0, 4, 4}));
  expect_error([&] { gather(x, 0, ints({0, 5}, {1, 2})); }, ErrorKind::kIndex, "index 5");
  expect_error(
      [&] {
        gather(x, 0, ints({0, 0, 0, 0}, {1, 4}));
      },
      ErrorKind::kShape, "expected index size <= 3 in dimension 1");
}

TEST(Scatter, AddsDuplicates_AndRoundsHalfOnce) {
  const Tensor x = iota({3});
  const Tensor idx = ints({0, 0, 2});
  EXPECT_EQ(values(scatter(x, 0, idx, iota({3}), "add")), (std::vector<float>{1, 1, 4}));
  EXPECT_EQ(values(scatter(x, 0, idx, Tensor::scalar(Scalar(2.0)), "multiply")),
            (std::vector<float>{0, 1, 4}));
  EXPECT_EQ(values(scatter(x, 0, ints({1}), iota({3}))), (std::vector<float>{0, 0, 2}));
  // 2048 + 1 + 1 in float16 is 2050 when accumulated in float32, 2048 step by step.
  Tensor h = Tensor::empty({1}, DType::kFloat16);
  copy_into(h, Tensor::scalar(Scalar(2048.0)));
  Tensor ones = Tensor::empty({2}, DType::kFloat16);
  copy_into(ones, Tensor::scalar(Scalar(1.0)));
  EXPECT_EQ(values(scatter(h, 0, ints({0, 0}), ones, "add"))[0], 2050.0f);
  expect_error([&] { scatter(x, 0, idx, iota({3}), "max"); }, ErrorKind::kValue, "'max'");
  expect_error([&] { scatter(x, 0, ints({-4}), iota({1})); }, ErrorKind::kIndex, "index -4");
  // A tensor src of another dtype is refused (a number is converted), for C++ callers too.
  const Tensor i8 = zeros({3}, DType::kInt8);
  expect_error([&] { scatter(i8, 0, idx, iota({3}), "add"); }, ErrorKind::kDType,
               "scatter: expected src of the input's dtype int8, got float32");
  EXPECT_EQ(values(scatter(i8, 0, ints({1}), Tensor::scalar(Scalar(int64_t{5})))),
            (std::vector<float>{0, 5, 0}));
}

TEST(MaskedFill, BroadcastsTheMask) {
  Tensor mask = Tensor::empty({2, 1}, DType::kBool);
  mask.data<bool>()[0] = true;
  mask.data<bool>()[1] = false;
  const Tensor out = masked_fill(iota({2, 2}, DType::kInt32), mask, Scalar(7));
  EXPECT_EQ(out.dtype(), DType::kInt32);
  EXPECT_EQ(values(out), (std::vector<float>{7, 7, 2, 3}));
  expect_error([&] { masked_fill(iota({2}), iota({2}), Scalar(1)); }, ErrorKind::kDType,
               "bool mask");
  expect_error([&] { masked_fill(iota({1}), mask, Scalar(1)); }, ErrorKind::kShape, "broadcasts");
}

TEST(Index, BroadcastsIndexTensors) {
  const Tensor x = iota({3, 4});
  const Tensor out = index(x, {ints({0, 2}, {2, 1}), ints({-1, 1})});
  EXPECT_EQ(out.shape(), (Shape{2, 2}));
  EXPECT_EQ(values(out), (std::vector<float>{3, 1, 11, 9}));
  EXPECT_EQ(index(x, {ints({1})}).shape(), (Shape{1, 4}));
  expect_error(
      [&] {
        index(x, {ints({0}), ints({0}), ints({0})});
      },
      ErrorKind::kIndex, "too many indices");
  expect_error(
      [&] {
        index(x, {ints({0, 1}), ints({0, 1, 2})});
      },
      ErrorKind::kShape, "do not broadcast");
}

TEST(IndexPut, WritesInPlace_AndLeavesXIntact_OnError) {
  Tensor x = iota({3, 2});
  index_put_(x, {ints({2, 0})}, iota({2}));
  EXPECT_EQ(values(x), (std::vector<float>{0, 1, 2, 3, 0, 1}));
  // A non-contiguous target is written through.
  Tensor y = iota({2, 3});
  index_put_(transpose(y, 0, 1), {ints({1})}, Tensor::scalar(Scalar(-1.0)));
  EXPECT_EQ(values(y), (std::vector<float>{0, -1, 2, 3, -1, 5}));
  const std::vector<float> before = values(x);
  expect_error(
      [&] {
        index_put_(x, {ints({0, 3})}, Tensor::scalar(Scalar(9.0)));
      },
      ErrorKind::kIndex, "index 3 is out of bounds for dimension 0 with size 3");
  EXPECT_EQ(values(x), before);
  expect_error([&] { index_put_(x, {ints({0})}, iota({3})); }, ErrorKind::kShape,
               "broadcast to the indexed shape [1, 2]");
  EXPECT_TRUE(OpRegistry::Instance().get("IndexPut")->has_trait(kTraitSideEffect));
}

TEST(Pad, SupportsEachMode) {
  const Tensor x = iota({1, 3});
  EXPECT_EQ(values(pad(x, {2, 1}, "reflect")), (std::vector<float>{2, 1, 0, 1, 2, 1}));
  EXPECT_EQ(values(pad(x, {1, 2}, "replicate")), (std::vector<float>{0, 0, 1, 2, 2, 2}));
  EXPECT_EQ(values(pad(x, {1, -1, 0, 1}, "constant", 5)), (std::vector<float>{5, 0, 1, 5, 5, 5}));
  expect_error([&] { pad(x, {3, 0}, "reflect"); }, ErrorKind::kValue, "less than");
  expect_error([&] { pad(x, {1}); }, ErrorKind::kValue, "odd number");
  expect_error([&] { pad(x, {0, 0}, "wrap"); }, ErrorKind::kValue, "'wrap'");
  expect_error([&] { pad(x, {-2, -2}); }, ErrorKind::kShape, "negative size");
}

TEST(Triangles, KeepTheRequestedPart) {
  const Tensor x = iota({2, 3});
  EXPECT_EQ(values(tril(x)), (std::vector<float>{0, 0, 0, 3, 4, 0}));
  EXPECT_EQ(values(triu(x, 1)), (std::vector<float>{0, 1, 2, 0, 0, 5}));
  EXPECT_EQ(values(tril(x, -5)), (std::vector<float>(6, 0.0f)));
  expect_error([] { tril(iota({3})); }, ErrorKind::kShape, "at least 2 dimensions");
}

}  // namespace
}  // namespace kiln
