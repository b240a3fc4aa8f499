// SmallVector: std::vector's behaviour with the first N elements inline, for trivially copyable
// elements (shape extents) and for elements with constructors and destructors (tensor metadata,
// tensors), inline and on the heap. A counting element type checks that every element made is
// destroyed exactly once.

#include "kiln/small_vector.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "kiln/functional.h"
#include "kiln/op.h"

namespace kiln {
namespace {

using Ints = SmallVector<int64_t, 3>;

std::vector<int64_t> vec(const Ints& v) { return v; }

TEST(SmallVector, TrivialElements_StayInlineUpToN_ThenMoveToTheHeap) {
  Ints v{1, 2, 3};
  const int64_t* inline_data = v.data();
  EXPECT_EQ(v.capacity(), 3u);
  v.push_back(4);
  EXPECT_NE(v.data(), inline_data);
  EXPECT_GE(v.capacity(), 4u);
  EXPECT_EQ(vec(v), (std::vector<int64_t>{1, 2, 3, 4}));
  v.push_back(v[0]);  // an element of the vector itself, while it may grow
  EXPECT_EQ(vec(v), (std::vector<int64_t>{1, 2, 3, 4, 1}));
}

TEST(SmallVector, TrivialElements_CopyAndMove_InlineAndOnTheHeap) {
  for (size_t n : {2u, 3u, 7u}) {
    Ints source;
    for (size_t i = 0; i < n; ++i) source.push_back(static_cast<int64_t>(i * 10));
    const std::vector<int64_t> expected = source;
    Ints copy = source;
    EXPECT_EQ(vec(copy), expected);
    Ints assigned{9, 9, 9, 9, 9};  // heap before the assignment
    assigned = source;
    EXPECT_EQ(vec(assigned), expected);
    Ints moved = std::move(copy);
    EXPECT_EQ(vec(moved), expected);
    EXPECT_TRUE(copy.empty());  // NOLINT: a moved-from SmallVector is empty
    Ints move_assigned{5};
    move_assigned = std::move(moved);
    EXPECT_EQ(vec(move_assigned), expected);
    EXPECT_EQ(vec(source), expected);
  }
}

TEST(SmallVector, TrivialElements_InsertEraseResizeAssign) {
  Ints v{1, 4};
  v.insert(v.begin() + 1, {2, 3});
  EXPECT_EQ(vec(v), (std::vector<int64_t>{1, 2, 3, 4}));
  v.insert(v.begin(), v.begin() + 2, v.end());  // a range of the vector itself
  EXPECT_EQ(vec(v), (std::vector<int64_t>{3, 4, 1, 2, 3, 4}));
  v.insert(v.end(), size_t{2}, v[0]);
  EXPECT_EQ(vec(v), (std::vector<int64_t>{3, 4, 1, 2, 3, 4, 3, 3}));
  EXPECT_EQ(*v.erase(v.begin() + 1, v.begin() + 4), 3);
  EXPECT_EQ(vec(v), (std::vector<int64_t>{3, 3, 4, 3, 3}));
  v.erase(v.end() - 1);
  v.pop_back();
  EXPECT_EQ(vec(v), (std::vector<int64_t>{3, 3, 4}));
  v.resize(5);
  EXPECT_EQ(vec(v), (std::vector<int64_t>{3, 3, 4, 0, 0}));
  v.resize(2, 7);
  EXPECT_EQ(vec(v), (std::vector<int64_t>{3, 3}));
  v.assign(size_t{4}, 8);
  EXPECT_EQ(vec(v), (std::vector<int64_t>{8, 8, 8, 8}));
  v = {6};
  EXPECT_EQ(vec(v), (std::vector<int64_t>{6}));
}

TEST(SmallVector, EdgeCases_EmptyErase_SelfAssignment_HeapToInline) {
  Ints v{1, 2};
  EXPECT_EQ(v.erase(v.begin() + 1, v.begin() + 1), v.begin() + 1);  // an empty range: no change
  EXPECT_EQ(vec(v), (std::vector<int64_t>{1, 2}));
  const Ints& same = v;
  v = same;
  EXPECT_EQ(vec(v), (std::vector<int64_t>{1, 2}));
  v = std::move(v);  // NOLINT: self-move keeps the elements
  EXPECT_EQ(vec(v), (std::vector<int64_t>{1, 2}));
  Ints shrunk{1, 2, 3, 4, 5};  // on the heap, then back to N elements or fewer
  shrunk.erase(shrunk.begin() + 1, shrunk.end());
  const Ints copy = shrunk;  // inline again
  EXPECT_EQ(vec(copy), (std::vector<int64_t>{1}));
  EXPECT_EQ(copy.capacity(), 3u);
}

TEST(SmallVector, AtChecksTheIndex_ComparisonsMatchStdVector) {
  const Ints v{1, 2};
  EXPECT_EQ(v.at(1), 2);
  EXPECT_THROW(v.at(2), std::out_of_range);
  EXPECT_TRUE(v == (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE((std::vector<int64_t>{1, 3}) != v);
  EXPECT_TRUE(v < (Ints{1, 3}));
  EXPECT_FALSE(v < (Ints{1, 2}));
  EXPECT_EQ(std::vector<int64_t>(v.rbegin(), v.rend()), (std::vector<int64_t>{2, 1}));
}

// An element that counts the live instances, and can be told to throw on a later copy.
struct Counted {
  static inline int live = 0;
  static inline int copies_until_throw = -1;  // < 0: never
  std::string value;

  explicit Counted(std::string v = "") : value(std::move(v)) { ++live; }
  Counted(const Counted& other) : value(other.value) {
    if (copies_until_throw == 0) throw std::runtime_error("copy failed");
    if (copies_until_throw > 0) --copies_until_throw;
    ++live;
  }
  Counted(Counted&& other) noexcept : value(std::move(other.value)) { ++live; }
  Counted& operator=(const Counted&) = default;
  Counted& operator=(Counted&&) noexcept = default;
  ~Counted() { --live; }
  bool operator==(const Counted& o) const { return value == o.value; }
};

using Strings = SmallVector<Counted, 2>;

std::vector<std::string> values(const Strings& v) {
  std::vector<std::string> out;
  for (const Counted& c : v) out.push_back(c.value);
  return out;
}

class SmallVectorOfObjects : public ::testing::Test {
 protected:
  void SetUp() override {
    Counted::live = 0;
    Counted::copies_until_throw = -1;
  }
  void TearDown() override { EXPECT_EQ(Counted::live, 0) << "elements leaked or destroyed twice"; }
};

TEST_F(SmallVectorOfObjects, ConstructsOnlyTheElementsItHolds) {
  Strings v;
  EXPECT_EQ(Counted::live, 0);  // the inline buffer holds no constructed elements
  v.emplace_back("a");
  EXPECT_EQ(Counted::live, 1);
  v.emplace_back("b");
  v.emplace_back("c");  // to the heap: the inline elements move and are destroyed
  EXPECT_EQ(Counted::live, 3);
  EXPECT_EQ(values(v), (std::vector<std::string>{"a", "b", "c"}));
  v.pop_back();
  EXPECT_EQ(Counted::live, 2);
  v.clear();
  EXPECT_EQ(Counted::live, 0);
}

TEST_F(SmallVectorOfObjects, CopyMoveAndAssign_InlineAndOnTheHeap) {
  for (size_t n : {1u, 2u, 5u}) {
    Strings source;
    for (size_t i = 0; i < n; ++i) source.emplace_back(std::string(20, static_cast<char>('a' + i)));
    const std::vector<std::string> expected = values(source);
    {
      Strings copy = source;
      EXPECT_EQ(values(copy), expected);
      Strings moved = std::move(copy);
      EXPECT_EQ(values(moved), expected);
      EXPECT_TRUE(copy.empty());  // NOLINT: a moved-from SmallVector is empty
      Strings assigned(size_t{3}, Counted("x"));
      assigned = moved;
      EXPECT_EQ(values(assigned), expected);
      Strings move_assigned{Counted("y")};
      move_assigned = std::move(assigned);
      EXPECT_EQ(values(move_assigned), expected);
    }
    EXPECT_EQ(Counted::live, static_cast<int>(n));  // only the source's elements remain
  }
}

TEST_F(SmallVectorOfObjects, InsertEraseResize) {
  Strings v{Counted("a"), Counted("d")};
  v.insert(v.begin() + 1, {Counted("b"), Counted("c")});
  EXPECT_EQ(values(v), (std::vector<std::string>{"a", "b", "c", "d"}));
  v.insert(v.begin(), v.begin() + 2, v.end());  // a range of the vector itself
  EXPECT_EQ(values(v), (std::vector<std::string>{"c", "d", "a", "b", "c", "d"}));
  v.insert(v.begin() + 1, size_t{1}, v.back());
  EXPECT_EQ(values(v), (std::vector<std::string>{"c", "d", "d", "a", "b", "c", "d"}));
  v.erase(v.begin(), v.begin() + 3);
  EXPECT_EQ(values(v), (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(Counted::live, 4);
  v.resize(6);
  EXPECT_EQ(values(v), (std::vector<std::string>{"a", "b", "c", "d", "", ""}));
  v.resize(1, Counted("z"));
  EXPECT_EQ(values(v), (std::vector<std::string>{"a"}));
  v.assign(size_t{3}, v[0]);  // an element of the vector itself
  EXPECT_EQ(values(v), (std::vector<std::string>{"a", "a", "a"}));
  EXPECT_EQ(Counted::live, 3);
}

TEST_F(SmallVectorOfObjects, ACopyThatThrowsHalfWay_LeavesNothingBehind) {
  const std::vector<Counted> source{Counted("a"), Counted("b"), Counted("c")};
  Counted::copies_until_throw = 2;  // the third copy throws, once the list is on the heap
  EXPECT_THROW(Strings(source.begin(), source.end()), std::runtime_error);
  EXPECT_EQ(Counted::live, 3);  // the source's elements, nothing of the half-made list

  Counted::copies_until_throw = -1;
  Strings kept{Counted("k")};
  Counted::copies_until_throw = 0;
  EXPECT_THROW(kept.push_back(source[0]), std::runtime_error);
  EXPECT_EQ(values(kept), (std::vector<std::string>{"k"}));  // unchanged
  Counted::copies_until_throw = -1;
}

TEST(SmallVector, OfTensors_SharesAndReleasesTheirHandles) {
  const Tensor t = ones({4});
  const long before = t.impl_ptr().use_count();
  {
    SmallVector<Tensor, 1> list{t};
    list.push_back(t);  // to the heap
    SmallVector<Tensor, 1> copy = list;
    EXPECT_TRUE(copy[1].is_same(t));
    EXPECT_EQ(t.impl_ptr().use_count(), before + 4);
  }
  EXPECT_EQ(t.impl_ptr().use_count(), before);
}

TEST(SmallVector, ADyingListMovesItsElementsIntoAStdVector) {
  const Tensor t = ones({2});
  const long before = t.impl_ptr().use_count();
  TensorList list{t, t, t};                 // on the heap
  const std::vector<Tensor> copied = list;  // a copy: the handles are shared
  EXPECT_EQ(t.impl_ptr().use_count(), before + 6);
  const std::vector<Tensor> moved = std::move(list);
  EXPECT_EQ(t.impl_ptr().use_count(), before + 6);  // moved, not copied
  EXPECT_TRUE(moved[2].is_same(t));
}

TEST(SmallVector, MetaListHoldsTwoTensorsMetadataInline) {
  MetaList metas{TensorMeta(DType::kFloat32, {2, 3}), TensorMeta(DType::kInt64, {4})};
  EXPECT_EQ(metas.capacity(), 2u);
  const MetaList copy = metas;
  EXPECT_EQ(copy[0], TensorMeta(DType::kFloat32, {2, 3}));
  EXPECT_EQ(copy[1].dtype, DType::kInt64);
  EXPECT_EQ(copy[1].shape, (Shape{4}));
}

}  // namespace
}  // namespace kiln
