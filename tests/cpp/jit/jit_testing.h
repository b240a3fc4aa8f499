// Helpers for the jit tests: random programs (C++ functions of tensors, run eagerly or traced),
// random inputs, comparisons, and the test backend plugin.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kiln/backend.h"
#include "kiln/functional.h"
#include "kiln/jit.h"

namespace kiln::testing {

/// The jit's test plugin (tests/cpp/jit/plugins/jit_test_backends.cc), registered once per
/// process: "jit_plugin_backend" runs every node (delegating to "reference"),
/// "jit_plugin_elementwise" only elementwise ones.
inline void register_jit_test_backends() {
  const std::string path = std::string(KILN_TEST_PLUGIN_DIR) + "/libjit_test_backends.so";
  for (const char* name : {"jit_plugin_backend", "jit_plugin_elementwise"}) {
    if (BackendManager::Instance().Find(name) == nullptr) register_custom_backend(name, path);
  }
}

/// A float32 tensor of `shape` with values uniform in [-2, 2).
inline Tensor random_input(std::mt19937& rng, const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::kFloat32);
  std::uniform_real_distribution<float> real(-2.0f, 2.0f);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = real(rng);
  return t;
}

/// Same dtype and shape, and values equal (floats within a relative 1e-5: a graph may compute a
/// view's consumer from a contiguous copy, which can change a reduction's rounding).
inline void expect_same_values(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.dtype(), want.dtype());
  ASSERT_EQ(got.shape(), want.shape());
  const Tensor g = to(got, DType::kFloat64).contiguous();
  const Tensor w = to(want, DType::kFloat64).contiguous();
  const double* a = g.data<double>();
  const double* b = w.data<double>();
  for (int64_t i = 0; i < g.numel(); ++i) {
    if (std::isnan(b[i])) {
      EXPECT_TRUE(std::isnan(a[i])) << "element " << i;
      continue;
    }
    EXPECT_NEAR(a[i], b[i], 1e-5 * std::max(1.0, std::abs(b[i]))) << "element " << i;
  }
}

/// A random straight-line program over float32 [n, n] and [n] tensors: elementwise ops with
/// broadcasting and Python-style scalars, where, reductions with keepdim, softmax, matmul, casts
/// to float64 and back, a multi-output op, views made by Tensor methods (transpose, select,
/// reshape) and by view ops, and in-place updates of values no view shares. The same program
/// runs eagerly or under the jit, so their results can be compared.
class RandomProgram {
 public:
  RandomProgram(uint32_t seed, int num_ops) : seed_(seed), num_ops_(num_ops) {
    std::mt19937 rng(seed);
    n_ = std::uniform_int_distribution<int64_t>(1, 4)(rng);
    const int num_inputs = std::uniform_int_distribution<int>(1, 3)(rng);
    for (int i = 0; i < num_inputs; ++i) {
      shapes_.push_back(rng() % 3 == 0 ? Shape{n_} : Shape{n_, n_});
    }
  }

  std::vector<Tensor> inputs(std::mt19937& rng) const {
    std::vector<Tensor> out;
    for (const Shape& s : shapes_) out.push_back(random_input(rng, s));
    return out;
  }

  /// Runs the program; the choices depend only on the seed, never on values.
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const {
    std::mt19937 rng(seed_ * 7919u + 1u);
    std::vector<Value> values;
    for (const Tensor& t : inputs) values.push_back({t, false});
    const auto any = [&]() -> Value& { return values[rng() % values.size()]; };
    const auto square = [&]() -> Value* {
      for (size_t tries = 0; tries < values.size() * 2; ++tries) {
        Value& v = any();
        if (v.tensor.shape() == Shape{n_, n_}) return &v;
      }
      return nullptr;
    };
    for (int op = 0; op < num_ops_; ++op) {
      Value& a = any();
      Value& b = any();
      switch (rng() % 16) {
        case 0: values.push_back({sin(a.tensor), true}); break;
        case 1: values.push_back({add(a.tensor, b.tensor), true}); break;
        case 2: values.push_back({mul(a.tensor, b.tensor), true}); break;
        case 3: values.push_back({a.tensor * 1.5 - 0.25, true}); break;
        case 4: values.push_back({where(gt(a.tensor, b.tensor), a.tensor, neg(b.tensor)), true});
          break;
        case 5: values.push_back({tanh(maximum(a.tensor, b.tensor)), true}); break;
        case 6: values.push_back({sum(a.tensor, {-1}, true), true}); break;
        case 7: values.push_back({to(to(a.tensor, DType::kFloat64) * 0.5, DType::kFloat32), true});
          break;
        case 8:
          if (Value* s = square()) values.push_back({softmax(s->tensor, -1), true});
          break;
        case 9: {
          Value* s = square();
          Value* t = square();
          if (s != nullptr && t != nullptr) values.push_back({matmul(s->tensor, t->tensor), true});
          break;
        }
        case 10:  // Tensor-method views: no op is called
          if (Value* s = square()) {
            const Tensor base = s->tensor;  // push_back may move the values
            values.push_back({base.transpose(0, 1), false});
            values.push_back({base.select(0, static_cast<int64_t>(rng() % n_)), false});
          }
          break;
        case 11:
          if (a.fresh) {  // contiguous both eagerly and traced: Tensor::reshape makes views
            values.push_back({a.tensor.reshape({a.tensor.numel()}).reshape(a.tensor.shape()), false});
          } else {  // a view op: its result shares a's memory eagerly (a is not fresh)
            values.push_back({reshape(reshape(a.tensor, {a.tensor.numel()}), a.tensor.shape()),
                              false});
          }
          break;
        case 12:  // view ops: their results and inputs share memory eagerly
          if (Value* s = square()) {
            s->fresh = false;
            values.push_back({transpose(s->tensor, 0, 1), false});
          }
          break;
        case 13:
          if (Value* s = square()) {
            auto [m, index] = kiln::max(s->tensor, 1, true);
            values.push_back({m, true});
            values.push_back({to(index, DType::kFloat32), true});
          }
          break;
        case 14:  // in place, into a value that no view shares
          if (a.fresh && a.tensor.shape() == broadcast_shapes(a.tensor.shape(), b.tensor.shape())) {
            add(a.tensor, exp(neg(abs(b.tensor))), a.tensor);
          }
          break;
        default: values.push_back({abs(a.tensor) + 1.0, true}); break;
      }
    }
    std::vector<Tensor> out{values.back().tensor};
    for (int i = 0; i < 2; ++i) out.push_back(values[rng() % values.size()].tensor);
    return out;
  }

 private:
  struct Value {
    Tensor tensor;
    bool fresh;  // memory of its own that no view shares: may be updated in place
  };
  uint32_t seed_;
  int num_ops_;
  int64_t n_ = 1;
  std::vector<Shape> shapes_;
};

}  // namespace kiln::testing
