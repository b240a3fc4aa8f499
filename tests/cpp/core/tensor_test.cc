#include "kiln/tensor.h"

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <numeric>
#include <vector>

#include "testing.h"

namespace kiln {
namespace {

Tensor iota(const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::kFloat32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(i);
  return t;
}

float at(const Tensor& t, const std::vector<int64_t>& index) {
  int64_t offset = 0;
  for (size_t d = 0; d < index.size(); ++d) offset += index[d] * t.strides()[d];
  return t.data<float>()[offset];
}

TEST(Tensor, HasMetadataButNoMemory_WhenConstructedFromShape) {
  Tensor t(DType::kFloat16, {2, 3});
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.strides(), (Shape{3, 1}));
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.nbytes(), 12u);
  EXPECT_FALSE(t.has_storage());
  EXPECT_THROW(t.data_ptr(), Error);
  t.allocate();
  EXPECT_TRUE(t.has_storage());
  // 12 bytes: kept inside the Storage object, 16-byte aligned.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % 16, 0u);
  const auto* storage = reinterpret_cast<const char*>(t.storage().get());
  EXPECT_TRUE(static_cast<const char*>(t.data_ptr()) >= storage &&
              static_cast<const char*>(t.data_ptr()) < storage + sizeof(Storage));
  // Past Storage::kInlineBytes: a block from the allocator, kAlignment-aligned.
  Tensor big(DType::kFloat32, {17});
  big.allocate();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data_ptr()) % kAlignment, 0u);
}

TEST(Tensor, RejectsNegativeSizes) {
  try {
    Tensor t(DType::kFloat32, {2, -3});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kShape);
    EXPECT_NE(std::string(e.what()).find("non-negative"), std::string::npos);
  }
}

TEST(Tensor, RejectsShapesWhoseBytesWouldWrap_AndAcceptsEmptyOnes) {
  // 2^31 * 2^31 float32 elements are 2^64 bytes: the product wraps to 0 in 64 bits.
  const int64_t big = int64_t{1} << 31;
  testing::expect_error(
      [&] {
        Tensor(DType::kFloat32, {big, big});
      },
      ErrorKind::kShape,
      "Tensor: a float32 tensor of shape [2147483648, 2147483648] would take "
      "more than 2^63 - 1 bytes");
  testing::expect_error([&] { Tensor(DType::kFloat64, {int64_t{1} << 61}); }, ErrorKind::kShape,
                        "more than 2^63 - 1 bytes");
  EXPECT_EQ(checked_nbytes({big, 0, big}, DType::kFloat32, "x"), 0u);
  // a zero first does not hide a negative size after it
  testing::expect_error(
      [&] {
        checked_nbytes({0, -3}, DType::kFloat32, "x");
      },
      ErrorKind::kShape, "x: sizes must be non-negative, got [0, -3]");
  EXPECT_EQ(checked_nbytes({3, 5}, DType::kFloat64, "x"), 120u);
  EXPECT_EQ(Tensor(DType::kFloat32, {big, 0, big}).numel(), 0);
  // An op's result is checked when the op is planned.
  testing::expect_error([&] { zeros({big, big}); }, ErrorKind::kShape, "in Zeros()");
}

TEST(Tensor, AsStrided_RefusesViewsOutsideTheMemory) {
  const Tensor x = Tensor::empty({12});
  EXPECT_EQ(x.as_strided({2, 3}, {3, 1}, 6).shape(), (Shape{2, 3}));  // elements 6..11: inside
  EXPECT_EQ(x.as_strided({0, 5}, {100, 100}, 11).numel(), 0);         // empty: reaches nothing
  testing::expect_error([&] { x.as_strided({4}, {1}, 10); }, ErrorKind::kIndex,
                        "as_strided: a view of sizes [4], strides [1] and offset 10 reaches past "
                        "the 12 elements of the tensor's memory");
  testing::expect_error([&] { x.as_strided({2}, {int64_t{1} << 40}, 0); }, ErrorKind::kIndex,
                        "reaches past the 12 elements");
  // (size - 1) * stride wraps 64 bits: still refused
  testing::expect_error([&] { x.as_strided({3}, {int64_t{1} << 62}, 0); }, ErrorKind::kIndex,
                        "reaches past");
  testing::expect_error([&] { x.as_strided({3}, {-1}, 2); }, ErrorKind::kShape,
                        "strides must be non-negative");
  testing::expect_error([&] { x.as_strided({2}, {1}, -5); }, ErrorKind::kIndex,
                        "offset must be non-negative, got -5");
}

TEST(Tensor, NarrowExpandAndReshape_RefuseSizesWhoseArithmeticWraps) {
  const Tensor x = Tensor::empty({3, 4});
  testing::expect_error([&] { x.narrow(0, 1, INT64_MAX); }, ErrorKind::kIndex,
                        "narrow: range [1, 1 + 9223372036854775807) is out of bounds");
  testing::expect_error(
      [&] {
        x.expand({int64_t{1} << 62, 3, 4});
      },
      ErrorKind::kShape,
      "expand: a float32 tensor of shape [4611686018427387904, 3, 4] would take");
  testing::expect_error([&] { Tensor::empty({1}).expand({-5}); }, ErrorKind::kShape,
                        "sizes must be non-negative");
  // 4 * (2^62 + 3) wraps to 12, the element count: the shape is still no shape for 12 elements.
  testing::expect_error(
      [&] {
        x.reshape({4, (int64_t{1} << 62) + 3});
      },
      ErrorKind::kShape, "is invalid for 12 elements (it holds more than 2^63 - 1)");
}

TEST(Tensor, AnUndefinedTensor_IsAClearErrorOnEveryUse) {
  const Tensor t;
  EXPECT_FALSE(t.defined());
  for (const auto& use : std::vector<std::function<void()>>{
           [&] { t.shape(); }, [&] { t.dtype(); }, [&] { t.data_ptr(); },
           [&] { t.is_contiguous(); }, [&] { t.is_pending(); }, [&] { t.numel(); }}) {
    testing::expect_error(use, ErrorKind::kGeneric, "operation on an undefined tensor");
  }
}

TEST(Tensor, ViewSharesStorage_AndKeepsItAlive) {
  Tensor view;
  {
    Tensor base = iota({4, 5});
    view = base.select(0, 2);
    EXPECT_EQ(view.storage(), base.storage());
  }
  ASSERT_EQ(view.shape(), (Shape{5}));
  EXPECT_EQ(view.data<float>()[0], 10.0f);
  EXPECT_EQ(view.storage().use_count(), 1);
}

TEST(Tensor, Alias_IsANewHandleOnTheSameElements) {
  const Tensor base = iota({4, 5}).transpose(0, 1).slice(0, 1, 3);
  const Tensor alias = base.alias();
  EXPECT_FALSE(alias.is_same(base));
  EXPECT_EQ(alias.storage(), base.storage());
  EXPECT_EQ(alias.shape(), base.shape());
  EXPECT_EQ(alias.strides(), base.strides());
  EXPECT_EQ(alias.storage_offset(), base.storage_offset());
  EXPECT_EQ(alias.dtype(), base.dtype());
  alias.data<float>()[0] = -1;
  EXPECT_EQ(at(base, {0, 0}), -1.0f);
  auto failure = std::make_shared<OpFailure>(
      std::make_exception_ptr(Error(ErrorKind::kValue, "the op that wrote base failed")));
  base.impl()->set_failure(failure);
  EXPECT_EQ(base.alias().impl()->failure(), failure);
}

TEST(Tensor, TransposeAndPermute_SwapStrides) {
  Tensor t = iota({2, 3, 4});
  Tensor p = t.permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Shape{1, 12, 4}));
  EXPECT_FALSE(p.is_contiguous());
  EXPECT_EQ(at(p, {3, 1, 2}), at(t, {1, 2, 3}));
  Tensor tr = t.transpose(0, -1);
  EXPECT_EQ(tr.shape(), (Shape{4, 3, 2}));
  EXPECT_THROW(t.permute({0, 0, 1}), Error);
  EXPECT_THROW(t.permute({0, 1}), Error);
}

TEST(Tensor, SliceFollowsPythonSemantics) {
  Tensor t = iota({10});
  Tensor s = t.slice(0, 1, 8, 3);
  EXPECT_EQ(s.shape(), (Shape{3}));
  EXPECT_EQ(s.strides(), (Shape{3}));
  EXPECT_EQ(at(s, {2}), 7.0f);
  EXPECT_EQ(t.slice(0, -3, 100).shape(), (Shape{3}));
  EXPECT_EQ(t.slice(0, 8, 2).shape(), (Shape{0}));
  EXPECT_THROW(t.slice(0, 0, 5, 0), Error);
  // Steps near int64's end: the size's formula overflowed (-1 and 0 elements).
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(t.slice(0, 5, 9, kMax - 1).shape(), (Shape{1}));
  const Tensor first = t.slice(0, 0, 10, kMax);
  EXPECT_EQ(first.shape(), (Shape{1}));
  EXPECT_EQ(at(first, {0}), 0.0f);
}

TEST(Tensor, NarrowAndSelect_CheckBounds) {
  Tensor t = iota({3, 4});
  EXPECT_EQ(t.narrow(1, 1, 2).shape(), (Shape{3, 2}));
  EXPECT_THROW(t.narrow(1, 3, 2), Error);
  EXPECT_EQ(at(t.select(1, -1), {2}), 11.0f);
  try {
    t.select(0, 3);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIndex);
    EXPECT_NE(std::string(e.what()).find("out of bounds for dimension 0 with size 3"),
              std::string::npos);
  }
}

TEST(Tensor, ViewInfersMinusOne_AndRefusesIncompatibleStrides) {
  Tensor t = iota({4, 6});
  EXPECT_EQ(t.view({2, -1, 3}).shape(), (Shape{2, 4, 3}));
  EXPECT_THROW(t.view({5, -1}), Error);
  EXPECT_THROW(t.view({-1, -1}), Error);
  Tensor tr = t.transpose(0, 1);
  EXPECT_THROW(tr.view({24}), Error);
  Tensor r = tr.reshape({24});  // copies
  EXPECT_NE(r.storage(), t.storage());
  EXPECT_EQ(r.data<float>()[1], 6.0f);
  // A view that only splits a contiguous dimension works on a non-contiguous tensor.
  Tensor split = tr.view({2, 3, 4});
  EXPECT_EQ(split.storage(), t.storage());
  EXPECT_EQ(at(split, {1, 0, 2}), at(tr, {3, 2}));
}

TEST(Tensor, ExpandUsesZeroStrides) {
  Tensor t = iota({3, 1});
  Tensor e = t.expand({2, 3, 4});
  EXPECT_EQ(e.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(e.strides(), (Shape{0, 1, 0}));
  EXPECT_EQ(at(e, {1, 2, 3}), 2.0f);
  EXPECT_EQ(t.expand({-1, 5}).shape(), (Shape{3, 5}));
  EXPECT_THROW(t.expand({2, 4}), Error);
  EXPECT_THROW(t.expand({3}), Error);
}

TEST(Tensor, SqueezeUnsqueezeFlatten) {
  Tensor t = iota({1, 3, 1, 2});
  EXPECT_EQ(t.squeeze().shape(), (Shape{3, 2}));
  EXPECT_EQ(t.squeeze(2).shape(), (Shape{1, 3, 2}));
  EXPECT_EQ(t.squeeze(1).shape(), (Shape{1, 3, 1, 2}));
  EXPECT_EQ(t.unsqueeze(-1).shape(), (Shape{1, 3, 1, 2, 1}));
  EXPECT_EQ(t.unsqueeze(0).shape(), (Shape{1, 1, 3, 1, 2}));
  EXPECT_EQ(t.flatten().shape(), (Shape{6}));
  EXPECT_EQ(t.flatten(1, 2).shape(), (Shape{1, 3, 2}));
  EXPECT_THROW(t.unsqueeze(6), Error);
  EXPECT_THROW(t.flatten(2, 1), Error);
  // A 0-d tensor takes dims 0 and -1 only (flatten(5) of one gave [1]).
  const Tensor scalar = Tensor::scalar(2.0f);
  EXPECT_EQ(scalar.flatten(0, -1).shape(), (Shape{1}));
  EXPECT_THROW(scalar.flatten(5), Error);
  EXPECT_THROW(scalar.flatten(0, -7), Error);
}

TEST(Tensor, FlattenShape_RefusesAProductPastInt64AndKeepsEmptyShapesEmpty) {
  const int64_t big = int64_t{1} << 62;
  EXPECT_THROW(flatten_shape({big, 4}, 0, 1), Error);
  EXPECT_EQ(flatten_shape({big, 4, 0}, 0, 2), (Shape{0}));
  EXPECT_EQ(flatten_shape({2, big, 4}, 0, 0), (Shape{2, big, 4}));
}

TEST(Tensor, BroadcastShapes_RefusesNegativeSizes) {
  EXPECT_EQ(broadcast_shapes({2, 1, 3}, {4, 1}), (Shape{2, 4, 3}));
  EXPECT_THROW(broadcast_shapes({-1, 3}, {1, 3}), Error);
  EXPECT_THROW(broadcast_shapes({3}, {-1}), Error);
}

TEST(Tensor, Unfold_MakesSlidingWindows) {
  Tensor t = iota({7});
  Tensor u = t.unfold(0, 3, 2);
  EXPECT_EQ(u.shape(), (Shape{3, 3}));
  EXPECT_EQ(at(u, {2, 1}), 5.0f);
  EXPECT_THROW(t.unfold(0, 8, 1), Error);
}

TEST(Tensor, ContiguousCopiesOnlyWhenNeeded) {
  Tensor t = iota({3, 4});
  EXPECT_TRUE(t.contiguous().is_same(t));
  Tensor c = t.transpose(0, 1).contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.data<float>()[1], 4.0f);
}

// A source running along another dim than the destination goes in tiles (Note [Transposing
// copies] in src/core/copy.cc): partial tiles, a batch dim around the two, a destination with a
// row pitch of its own, and a conversion on the way.
TEST(Tensor, TransposingCopyInTilesMatchesTheElementwiseCopy) {
  const Tensor src = iota({3, 130, 200});  // element (b, j, i) = (b * 130 + j) * 200 + i
  const Tensor moved = src.permute({0, 2, 1}).contiguous();
  ASSERT_EQ(moved.shape(), (Shape{3, 200, 130}));
  const float* m = moved.data<float>();
  for (int64_t b = 0; b < 3; ++b) {
    for (int64_t i = 0; i < 200; ++i) {
      for (int64_t j = 0; j < 130; ++j) {
        ASSERT_EQ(m[(b * 200 + i) * 130 + j], static_cast<float>((b * 130 + j) * 200 + i))
            << b << ", " << i << ", " << j;
      }
    }
  }
  // Into the first 130 columns of a [200, 300] double matrix: its own row pitch, and a cast.
  const Tensor wide = zeros({200, 300}, DType::kFloat64);
  copy_into(wide.slice(1, 0, 130), src.select(0, 1).transpose(0, 1));
  const double* w = wide.data<double>();
  for (int64_t i = 0; i < 200; ++i) {
    for (int64_t j = 0; j < 300; ++j) {
      const double want = j < 130 ? static_cast<double>((130 + j) * 200 + i) : 0.0;
      ASSERT_EQ(w[i * 300 + j], want) << i << ", " << j;
    }
  }
  // The mirror case: a contiguous source into a transposed view of the destination.
  const Tensor back = Tensor::empty({3, 130, 200}, DType::kFloat32);
  copy_into(back.permute({0, 2, 1}), moved);
  testing::expect_close(back, src, 0);
}

TEST(Tensor, DataChecksDType) {
  Tensor t = Tensor::empty({2}, DType::kInt32);
  EXPECT_THROW(t.data<float>(), Error);
  EXPECT_NO_THROW(t.data<int32_t>());
}

TEST(Tensor, CopyIntoConvertsAndBroadcasts) {
  Tensor src = iota({3});
  Tensor dst = Tensor::empty({2, 3}, DType::kInt16);
  copy_into(dst, src);
  const int16_t* d = dst.data<int16_t>();
  EXPECT_EQ(d[0], 0);
  EXPECT_EQ(d[5], 2);
  Tensor half = Tensor::empty({3}, DType::kFloat16);
  copy_into(half, src.slice(0, 0, 3));
  Tensor back = Tensor::empty({3}, DType::kFloat64);
  copy_into(back, half);
  EXPECT_EQ(back.data<double>()[2], 2.0);
}

TEST(Tensor, CopyOfOneValueFillsAPermutedOrStridedDestinationInMemoryOrder) {
  // One value broadcast into a permuted view and into a strided one: a fill in dst's memory
  // order, converting, leaving what the view does not reach alone.
  Tensor base = Tensor::empty({4, 3, 5}, DType::kFloat64);
  copy_into(base, Tensor::scalar(Scalar(-1.0)));
  copy_into(base.permute({2, 0, 1}).slice(1, 1, 4, 2), Tensor::scalar(Scalar(int64_t{7})));
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 15; ++j) {
      EXPECT_EQ(base.data<double>()[i * 15 + j], i == 1 || i == 3 ? 7.0 : -1.0) << i << " " << j;
    }
  }
}

TEST(Tensor, FromBlobRunsDeleterOnce) {
  int calls = 0;
  std::vector<float> buffer(6, 1.0f);
  {
    Tensor t = Tensor::from_blob(buffer.data(), {2, 3}, DType::kFloat32, {},
                                 [&](void*) { ++calls; });
    Tensor v = t.transpose(0, 1);
    EXPECT_EQ(v.data<float>()[0], 1.0f);
  }
  EXPECT_EQ(calls, 1);
}

TEST(Tensor, FromBlobRefusesAViewReachingPastTheAddressSpace) {
  // Each size fits, but the strides reach 2^62 elements: 2^64 bytes of float32, which wrapped to 0.
  std::vector<float> buffer(4);
  const int64_t huge = int64_t{1} << 61;
  EXPECT_THROW(Tensor::from_blob(buffer.data(), {3}, DType::kFloat32, {huge}), Error);
  EXPECT_THROW(Tensor::from_blob(buffer.data(), {2, 2}, DType::kInt8, {INT64_MAX, 1}), Error);
  EXPECT_EQ(Tensor::from_blob(buffer.data(), {2}, DType::kFloat32, {2}).storage()->nbytes(), 12u);
}

TEST(Tensor, FromBlobRefusesNullDataUnlessEmpty) {
  // It was accepted, and the first op read address 0.
  testing::expect_error([] { Tensor::from_blob(nullptr, {3}, DType::kFloat32); }, ErrorKind::kValue,
                        "from_blob: data is null for a tensor of shape [3]");
  EXPECT_EQ(Tensor::from_blob(nullptr, {0, 3}, DType::kFloat32).numel(), 0);
}

TEST(Storage, OwnsMemoryFromAnAllocator_NotWrappedMemory) {
  EXPECT_TRUE(Storage::allocate(64)->owns_memory());
  EXPECT_TRUE(Tensor::empty({2}).storage()->owns_memory());
  std::vector<float> outside(2);
  EXPECT_FALSE(Tensor::from_blob(outside.data(), {2}, DType::kFloat32).storage()->owns_memory());
  const std::shared_ptr<Storage> deferred = Storage::deferred(64);
  EXPECT_FALSE(deferred->owns_memory());
  deferred->materialize();
  EXPECT_TRUE(deferred->owns_memory());
}

TEST(Tensor, ScalarIsWeakZeroDim) {
  Tensor s = Tensor::scalar(Scalar(2.5));
  EXPECT_EQ(s.ndim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_TRUE(s.is_weak_scalar());
  EXPECT_EQ(s.dtype(), DType::kFloat64);
  EXPECT_EQ(*s.data<double>(), 2.5);
  EXPECT_EQ(Tensor::scalar(Scalar(int64_t{3})).dtype(), DType::kInt64);
}

TEST(Tensor, ViewsOfAFailedTensorCarryItsFailure) {
  const Tensor base = iota({2, 3});
  auto failure = std::make_shared<OpFailure>(
      std::make_exception_ptr(Error(ErrorKind::kValue, "the op that wrote base failed")));
  base.impl()->set_failure(failure);
  for (const Tensor& view : {base.transpose(0, 1), base.select(0, 1), base.view({6})}) {
    EXPECT_EQ(view.impl()->failure(), failure);
  }
  // A transient failure (an out= tensor) is inherited only until a sync point raised it.
  const Tensor out = iota({4});
  auto transient = std::make_shared<OpFailure>(
      std::make_exception_ptr(Error(ErrorKind::kValue, "writing out failed")));
  out.impl()->set_failure(transient, /*transient=*/true);
  const Tensor early = out.slice(0, 1, 3);
  EXPECT_THROW(transient->raise(), Error);
  EXPECT_EQ(early.impl()->failure(), nullptr);  // raised: healthy again, as out itself
  EXPECT_EQ(out.slice(0, 0, 2).impl()->failure(), nullptr);
  EXPECT_EQ(iota({2}).select(0, 0).impl()->failure(), nullptr);
}

}  // namespace
}  // namespace kiln
