// Helpers for the graph IR tests: a generator of random well-formed graphs and a structural
// comparison of two graphs that does not go through the text format.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kiln/ir.h"

namespace kiln::testing {

/// A random graph: parameters of several dtypes and shapes (some unnamed, names needing
/// escapes), constants (tensors of every dtype, weak scalars with inf/nan/-0.0, None), ops with
/// broadcasting, attributes of every kind, multi-output ops taken apart with TupleGetItem, dead
/// nodes, erased nodes, and inputs rewired so that creation order is not topological order.
class RandomGraphBuilder {
 public:
  explicit RandomGraphBuilder(uint32_t seed) : rng_(seed) {}

  FuncGraphPtr build(int num_ops) {
    graph_ = std::make_shared<FuncGraph>(
        pick<std::string>({"f", "Net.forward.<locals>.g", "a \"quoted\"\n name", ""}));
    tensors_.clear();
    const int num_params = 1 + uniform(0, 3);
    for (int i = 0; i < num_params; ++i) {
      const DType d = pick<DType>({DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64,
                                   DType::kBool, DType::kFloat16, DType::kBFloat16});
      std::string name =
          uniform(0, 3) == 0 ? "" : "p" + std::to_string(i) + (i == 2 ? "\\\t\"" : "");
      tensors_.push_back(graph_->add_parameter(d, random_shape(), name));
    }
    for (int made = 0, tries = 0; made < num_ops && tries < num_ops * 20; ++tries) {
      if (add_random_node()) ++made;
      if (uniform(0, 15) == 0) rewire();
    }
    // A few dead nodes and erasures.
    for (int i = 0; i < 3; ++i) {
      if (!add_random_node()) continue;
      if (uniform(0, 1) == 0 && tensors_.back()->users().empty() &&
          !tensors_.back()->is_parameter()) {
        graph_->erase(tensors_.back());
        tensors_.pop_back();
      }
    }
    std::vector<NodePtr> outputs;
    const int num_outputs = uniform(0, 3);
    for (int i = 0; i < num_outputs; ++i) outputs.push_back(any_tensor());
    graph_->set_outputs(outputs);
    return graph_;
  }

 private:
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  template <typename T>
  T pick(std::initializer_list<T> items) {
    return *(items.begin() + uniform(0, static_cast<int>(items.size()) - 1));
  }
  Shape random_shape() {
    Shape s;
    const int rank = uniform(0, 3);
    for (int i = 0; i < rank; ++i) s.push_back(uniform(1, 3));
    return s;
  }
  NodePtr any_tensor() {
    return tensors_[static_cast<size_t>(uniform(0, static_cast<int>(tensors_.size()) - 1))];
  }

  double special_double() {
    return pick<double>({0.5, -0.0, 1e-300, 3.0, -2.5e17, 0.1,
                         std::numeric_limits<double>::infinity(),
                         -std::numeric_limits<double>::infinity(), std::nan(""),
                         std::numeric_limits<double>::denorm_min()});
  }

  NodePtr random_constant() {
    switch (uniform(0, 4)) {
      case 0: return graph_->add_value(Scalar(special_double()));
      case 1:
        return graph_->add_value(
            Scalar(static_cast<int64_t>(uniform(-5, 5) * int64_t{1000000007})));
      case 2: return graph_->add_value(Scalar(uniform(0, 1) == 1));
      default: {
        const DType d = pick<DType>({DType::kFloat32, DType::kFloat64, DType::kInt8, DType::kUInt8,
                                     DType::kInt16, DType::kInt32, DType::kInt64, DType::kBool,
                                     DType::kFloat16, DType::kBFloat16});
        Tensor t = Tensor::empty(random_shape(), d);
        for (int64_t i = 0; i < t.numel(); ++i) fill_element(t, i);
        return graph_->add_value(t);
      }
    }
  }

  // A random value of the element's dtype; floats include the special values (the text format
  // keeps every bit of a float except a NaN's sign and payload: "nan" reads back as the
  // default NaN, which is what std::nan gives).
  void fill_element(const Tensor& t, int64_t i) {
    const double v = uniform(0, 2) == 0 ? special_double()
                                        : std::uniform_real_distribution<double>(-1e3, 1e3)(rng_);
    const auto k = static_cast<int64_t>(rng_());
    void* p = t.data_ptr();
    switch (t.dtype()) {
      case DType::kBool: static_cast<bool*>(p)[i] = k & 1; break;
      case DType::kInt8: static_cast<int8_t*>(p)[i] = static_cast<int8_t>(k); break;
      case DType::kUInt8: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(k); break;
      case DType::kInt16: static_cast<int16_t*>(p)[i] = static_cast<int16_t>(k); break;
      case DType::kInt32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(k); break;
      case DType::kInt64:
        static_cast<int64_t*>(p)[i] =
            static_cast<int64_t>(static_cast<uint64_t>(k) * 0x9E3779B97F4A7C15ULL);
        break;
      case DType::kFloat16: static_cast<Half*>(p)[i] = Half(static_cast<float>(v)); break;
      case DType::kBFloat16: static_cast<BFloat16*>(p)[i] = BFloat16(static_cast<float>(v)); break;
      case DType::kFloat32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
      case DType::kFloat64: static_cast<double*>(p)[i] = v; break;
    }
  }

  // Tries one random op on random inputs; false when the op's infer refuses them.
  bool add_random_node() {
    const NodePtr x = any_tensor();
    const int64_t rank =
        x->abstract().is_tensor() ? static_cast<int64_t>(x->abstract().shape().size()) : 0;
    try {
      NodePtr made;
      switch (uniform(0, 13)) {
        case 0: made = random_constant(); break;
        case 1:
          made = graph_->add_cnode(pick<std::string>({"Neg", "Abs", "Exp", "Sin", "Sqrt"}), {x});
          break;
        case 2:
        case 3:
          made = graph_->add_cnode(pick<std::string>({"Add", "Mul", "Sub", "Maximum", "Lt"}),
                                   {x, any_tensor()});
          break;
        case 4: made = graph_->add_cnode("Mul", {x, random_constant()}); break;
        case 5: {
          std::vector<int64_t> dims;
          for (int64_t d = 0; d < rank; ++d)
            if (uniform(0, 1)) dims.push_back(d);
          made = graph_->add_cnode("ReduceSum", {x},
                                   {{"dims", dims}, {"keepdim", uniform(0, 1) == 1}});
          break;
        }
        case 6:
          made = graph_->add_cnode(
              "Cast", {x},
              {{"dtype", pick<DType>({DType::kFloat64, DType::kInt32, DType::kFloat16})}});
          break;
        case 7:
          made = graph_->add_cnode("Clamp", {x},
                                   {{"min", Scalar(special_double())}, {"max", std::monostate{}}});
          break;
        case 8:
          made = graph_->add_cnode("Reshape", {x}, {{"shape", std::vector<int64_t>{-1}}});
          break;
        case 9: {
          if (rank == 0) return false;
          auto m = graph_->add_cnode(
              "MaxDim", {x},
              {{"dim", int64_t{uniform(0, static_cast<int>(rank) - 1)}}, {"keepdim", true}});
          made = graph_->tuple_get_item(m, uniform(0, 1));
          break;
        }
        case 10: {
          if (rank == 0 || x->abstract().shape()[0] < 2) return false;
          auto s = graph_->add_cnode(
              "Split", {x}, {{"sizes", std::vector<int64_t>{1, x->abstract().shape()[0] - 1}}});
          made = graph_->tuple_get_item(s, 1);
          break;
        }
        case 11: {
          if (rank == 0) return false;
          made = graph_->add_cnode(
              "LayerNorm", {x, graph_->add_value(Tensor()), graph_->add_value(Tensor())},
              {{"normalized_shape", std::vector<int64_t>{x->abstract().shape().back()}},
               {"eps", special_double()}});
          break;
        }
        case 12:
          made = graph_->add_cnode("Full", {},
                                   {{"shape", std::vector<int64_t>(random_shape())},
                                    {"value", Scalar(int64_t{7})},
                                    {"dtype", pick<DType>({DType::kInt16, DType::kFloat32})}});
          break;
        default: made = graph_->add_cnode("Softmax", {x}, {{"dim", int64_t{-1}}}); break;
      }
      tensors_.push_back(made);
      return true;
    } catch (const Error&) {
      return false;
    }
  }

  // Points an earlier unary node at a later node of the same abstract, so that the graph's
  // creation order stops being a topological order.
  void rewire() {
    const NodePtr later = tensors_.back();
    for (const NodePtr& n : tensors_) {
      if (n == later || !n->is_cnode()) continue;
      auto c = std::static_pointer_cast<CNode>(n);
      if (c->num_inputs() != 1 || c->primitive()->name() != "Neg") continue;
      if (c->input(0)->abstract() != later->abstract()) continue;
      // Only when `later` does not depend on c (no cycle).
      std::vector<Node*> stack{later.get()};
      bool depends = false;
      while (!stack.empty() && !depends) {
        Node* m = stack.back();
        stack.pop_back();
        depends = m == c.get();
        if (m->is_cnode())
          for (const NodePtr& in : static_cast<CNode*>(m)->inputs()) stack.push_back(in.get());
      }
      if (!depends) c->set_input(0, later);
      return;
    }
  }

  std::mt19937 rng_;
  FuncGraphPtr graph_;
  std::vector<NodePtr> tensors_;
};

inline bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

inline bool same_attr(const AttrValue& a, const AttrValue& b) {
  if (a.index() != b.index()) return false;
  if (const auto* d = std::get_if<double>(&a)) return same_bits(*d, std::get<double>(b));
  if (const auto* s = std::get_if<Scalar>(&a)) {
    const Scalar& t = std::get<Scalar>(b);
    if (s->kind() != t.kind()) return false;
    return s->is_floating_point() ? same_bits(s->to_double(), t.to_double())
                                  : s->to_int() == t.to_int();
  }
  return a == b;
}

/// Compares two graphs node by node in topological order: ids, kinds, names, primitives,
/// attributes (floats bit for bit), inputs, abstracts, constants (byte for byte), users, outputs.
inline void expect_same_structure(const FuncGraph& a, const FuncGraph& b) {
  EXPECT_EQ(a.name(), b.name());
  const std::vector<NodePtr> na = a.topological_order();
  const std::vector<NodePtr> nb = b.topological_order();
  ASSERT_EQ(na.size(), nb.size());
  ASSERT_EQ(a.parameters().size(), b.parameters().size());
  for (size_t i = 0; i < a.parameters().size(); ++i) {
    EXPECT_EQ(a.parameters()[i]->id(), b.parameters()[i]->id());
  }
  const auto users_of = [](const Node& n) {
    std::vector<std::pair<uint64_t, uint32_t>> u;
    for (const Use& use : n.users()) u.emplace_back(use.user->id(), use.index);
    std::sort(u.begin(), u.end());
    return u;
  };
  for (size_t i = 0; i < na.size(); ++i) {
    const Node& x = *na[i];
    const Node& y = *nb[i];
    SCOPED_TRACE(x.debug_string());
    ASSERT_EQ(x.id(), y.id());
    ASSERT_EQ(x.kind(), y.kind());
    EXPECT_EQ(x.abstract(), y.abstract());
    EXPECT_EQ(users_of(x), users_of(y));
    if (x.is_parameter()) {
      EXPECT_EQ(static_cast<const Parameter&>(x).name(), static_cast<const Parameter&>(y).name());
    } else if (x.is_value()) {
      const Tensor& u = static_cast<const ValueNode&>(x).value();
      const Tensor& v = static_cast<const ValueNode&>(y).value();
      ASSERT_EQ(u.defined(), v.defined());
      if (!u.defined()) continue;
      ASSERT_EQ(u.dtype(), v.dtype());
      ASSERT_EQ(u.shape(), v.shape());
      EXPECT_EQ(u.is_weak_scalar(), v.is_weak_scalar());
      if (u.nbytes() > 0) {
        EXPECT_EQ(std::memcmp(u.data_ptr(), v.data_ptr(), u.nbytes()), 0);
      }
    } else {
      const auto& c = static_cast<const CNode&>(x);
      const auto& d = static_cast<const CNode&>(y);
      EXPECT_EQ(c.primitive()->name(), d.primitive()->name());
      const auto& ia = c.primitive()->attrs().items();
      const auto& ib = d.primitive()->attrs().items();
      ASSERT_EQ(ia.size(), ib.size());
      for (size_t k = 0; k < ia.size(); ++k) {
        EXPECT_EQ(ia[k].first, ib[k].first);
        EXPECT_TRUE(same_attr(ia[k].second, ib[k].second)) << ia[k].first;
      }
      ASSERT_EQ(c.num_inputs(), d.num_inputs());
      for (size_t k = 0; k < c.num_inputs(); ++k) EXPECT_EQ(c.input(k)->id(), d.input(k)->id());
    }
  }
}

}  // namespace kiln::testing
