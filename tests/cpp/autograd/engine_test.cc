// The autograd engine on ops registered here (so that the engine is tested apart from the
// built-in gradient rules): recording, backward and grad, accumulation, retain/create graph,
// grad mode, errors, custom Functions and the absence of reference cycles.
#include <gtest/gtest.h>
#include <pthread.h>

#include <functional>

#include "kiln/autograd.h"
#include "kiln/functional.h"
#include "testing.h"

namespace kiln {
namespace {

using autograd::backward;
using autograd::get_grad;
using autograd::requires_grad;
using autograd::set_requires_grad;

// Elementwise product of two float64 tensors of one shape, with a rule written with itself (so
// it can be differentiated again).
void mul_kernel(KernelContext& ctx) {
  const Tensor a = ctx.inputs[0].contiguous(), b = ctx.inputs[1].contiguous();
  double* out = ctx.outputs[0].data<double>();
  for (int64_t i = 0; i < a.numel(); ++i) out[i] = a.data<double>()[i] * b.data<double>()[i];
}

std::vector<Tensor> test_mul(const Tensor& a, const Tensor& b) {
  return call_op("AutogradTestMul", {a, b});
}

OpDef test_mul_def() {
  return OpDef("AutogradTestMul")
      .input("a")
      .input("b")
      .infer([](const InferContext& ctx) { return MetaList{ctx.input(0)}; })
      .kernel(DeviceType::kCPU, mul_kernel)
      .grad([](const std::vector<Tensor>& in, const std::vector<Tensor>&, const Attrs&,
               const std::vector<Tensor>& g) {
        return std::vector<Tensor>{test_mul(g[0], in[1])[0], test_mul(g[0], in[0])[0]};
      });
}

// Same kernel, no gradient rule.
OpDef no_rule_def() {
  return OpDef("AutogradTestNoRule")
      .input("a")
      .input("b")
      .infer([](const InferContext& ctx) { return MetaList{ctx.input(0)}; })
      .kernel(DeviceType::kCPU, mul_kernel);
}

// Same kernel, outputs carry no gradient.
OpDef not_differentiable_def() {
  return OpDef("AutogradTestNotDifferentiable")
      .input("a")
      .input("b")
      .traits(kTraitNotDifferentiable)
      .infer([](const InferContext& ctx) { return MetaList{ctx.input(0)}; })
      .kernel(DeviceType::kCPU, mul_kernel);
}

class AutogradEngine : public ::testing::Test {
 protected:
  AutogradEngine()
      : mul_(test_mul_def()), no_rule_(no_rule_def()), not_diff_(not_differentiable_def()) {}
  static Tensor leaf(const Shape& shape) {
    Tensor t = randn(shape, DType::kFloat64);
    set_requires_grad(t);
    return t;
  }
  static Tensor mul(const Tensor& a, const Tensor& b) { return test_mul(a, b)[0]; }
  static Tensor ones64(const Shape& s) { return ones(s, DType::kFloat64); }

  OpRegistration mul_, no_rule_, not_diff_;
};

TEST_F(AutogradEngine, BackwardAccumulatesIntoLeaves) {
  const Tensor x = leaf({2, 3}), w = leaf({2, 3});
  const Tensor y = mul(x, w);
  EXPECT_TRUE(requires_grad(y));
  EXPECT_FALSE(autograd::is_leaf(y));
  EXPECT_EQ(autograd::grad_fn(y)->name(), "AutogradTestMul");
  const Tensor gy = randn({2, 3}, DType::kFloat64);
  backward({y}, {gy});
  testing::expect_close(get_grad(x), kiln::mul(gy, w), 1e-12);
  testing::expect_close(get_grad(w), kiln::mul(gy, x), 1e-12);
  // A second graph adds to .grad.
  backward({mul(x, w)}, {gy});
  testing::expect_close(get_grad(x), kiln::mul(gy, w) * 2.0, 1e-12);
}

TEST_F(AutogradEngine, AccumulatedLeaf_IsTheLeafOfAnAccumulator_AndUndefinedElsewhere) {
  const Tensor x = leaf({2, 3}), w = leaf({2, 3});
  const Tensor y = mul(x, w);
  const std::shared_ptr<autograd::Node> node = autograd::grad_fn(y);
  EXPECT_FALSE(autograd::accumulated_leaf(*node).defined());
  const std::vector<autograd::Node::Edge>& edges = node->next_edges();
  ASSERT_EQ(edges.size(), 2u);
  EXPECT_TRUE(autograd::accumulated_leaf(*edges[0].node).is_same(x));
  EXPECT_TRUE(autograd::accumulated_leaf(*edges[1].node).is_same(w));
  EXPECT_TRUE(autograd::accumulated_leaf(*autograd::gradient_edge(x).node).is_same(x));
}

TEST_F(AutogradEngine, BackwardWithInputs_AccumulatesIntoThoseOnly) {
  const Tensor x = leaf({2, 3}), w = leaf({2, 3});
  const Tensor h = mul(x, w);
  const Tensor y = mul(h, h);
  const Tensor gy = randn({2, 3}, DType::kFloat64);
  int accumulations = 0;
  autograd::register_post_accumulate_grad_hook(w, [&](const Tensor&) { ++accumulations; });
  backward({y}, {gy}, /*retain_graph=*/true, false, {w});
  const Tensor dh = kiln::mul(gy, h) * 2.0;
  testing::expect_close(get_grad(w), kiln::mul(dh, x), 1e-12);
  EXPECT_FALSE(get_grad(x).defined());  // not asked for
  EXPECT_EQ(accumulations, 1);          // through the leaf's accumulator, hooks included
  // Named twice, a leaf still gets its gradient once.
  autograd::set_grad(w, {});
  backward({y}, {gy}, /*retain_graph=*/true, false, {w, w});
  testing::expect_close(get_grad(w), kiln::mul(dh, x), 1e-12);
  EXPECT_EQ(accumulations, 2);
  // A non-leaf input retains its gradient from then on, as PyTorch's: the next backward adds to
  // its .grad though it names x alone.
  backward({y}, {gy}, true, false, {h});
  EXPECT_TRUE(autograd::retains_grad(h));
  backward({y}, {gy}, false, false, {x});
  testing::expect_close(get_grad(h), dh * 2.0, 1e-12);
  testing::expect_close(get_grad(x), kiln::mul(dh, w), 1e-12);
  // An input the outputs do not reach keeps its .grad; no input, or one that does not require
  // grad, is an error.
  const Tensor other = leaf({1});
  backward({mul(x, w)}, {gy}, false, false, {other});
  EXPECT_FALSE(get_grad(other).defined());
  testing::expect_error([&] { backward({mul(x, w)}, {gy}, false, false, {}); }, ErrorKind::kValue,
                        "backward: expected at least one input");
  testing::expect_error([&] { backward({mul(x, w)}, {gy}, false, false, {ones64({1})}); },
                        ErrorKind::kValue, "backward: input 0 does not require grad");
}

TEST_F(AutogradEngine, PostAccumulateGradHooksRunAfterEachAccumulation) {
  Tensor x = leaf({3});
  const Tensor w = randn({3}, DType::kFloat64);
  std::vector<double> seen;  // x.grad[0] as each call saw it
  const uint64_t handle = autograd::register_post_accumulate_grad_hook(x, [&](const Tensor& t) {
    EXPECT_EQ(t.impl(), x.impl());
    seen.push_back(get_grad(t).contiguous().data<double>()[0]);
  });
  backward({mul(x, w)}, {ones64({3})});
  backward({mul(x, w)}, {ones64({3})});
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_DOUBLE_EQ(seen[0], w.data<double>()[0]);
  EXPECT_DOUBLE_EQ(seen[1], 2 * w.data<double>()[0]);  // after the second add
  // Used twice in one graph, x gets one accumulation (the engine sums first), so one call.
  backward({mul(mul(x, w), x)}, {ones64({3})});
  EXPECT_EQ(seen.size(), 3u);
  autograd::remove_post_accumulate_grad_hook(x, handle);
  autograd::remove_post_accumulate_grad_hook(x, handle);  // again: harmless
  backward({mul(x, w)}, {ones64({3})});
  EXPECT_EQ(seen.size(), 3u);
  // grad() does not accumulate, so it calls no hooks.
  autograd::register_post_accumulate_grad_hook(x, [&](const Tensor&) { seen.push_back(0); });
  autograd::grad({mul(x, w)}, {x}, {ones64({3})});
  EXPECT_EQ(seen.size(), 3u);
  testing::expect_error(
      [&] { autograd::register_post_accumulate_grad_hook(mul(x, w), [](const Tensor&) {}); },
      ErrorKind::kValue, "expected a leaf tensor that requires grad");
  testing::expect_error(
      [&] { autograd::register_post_accumulate_grad_hook(ones64({2}), [](const Tensor&) {}); },
      ErrorKind::kValue, "one that does not require grad");
}

TEST_F(AutogradEngine, GradientHooksSeeAndReplaceSummedGradients) {
  const Tensor x = leaf({3});
  const Tensor w = randn({3}, DType::kFloat64);
  const Tensor y = mul(x, w);
  std::vector<Tensor> seen;
  const uint64_t on_y = autograd::register_hook(y, [&](const Tensor& g) {
    seen.push_back(g);
    return g * 2.0;
  });
  autograd::register_hook(x, [&](const Tensor& g) { return g + 1.0; });  // before accumulation
  autograd::retain_grad(y);
  EXPECT_TRUE(autograd::retains_grad(y));
  EXPECT_FALSE(autograd::retains_grad(x));  // a leaf: kept anyway, as in PyTorch
  backward({add(y, y)}, {ones64({3})}, /*retain_graph=*/true);  // y used twice: hooks see the sum
  ASSERT_EQ(seen.size(), 1u);
  testing::expect_close(seen[0], ones64({3}) * 2.0, 1e-12);
  testing::expect_close(get_grad(y), ones64({3}) * 4.0, 1e-12);  // after y's hook
  testing::expect_close(get_grad(x), w * 4.0 + 1.0, 1e-12);
  // grad() runs them too, and leaves .grad alone.
  const Tensor dx = autograd::grad({y}, {x}, {ones64({3})})[0];
  testing::expect_close(dx, w * 2.0 + 1.0, 1e-12);
  autograd::remove_hook(y, on_y);
  autograd::remove_hook(y, on_y);  // again: harmless
  backward({mul(x, w)}, {ones64({3})});
  EXPECT_EQ(seen.size(), 2u);  // the grad() call's; none from a removed hook
  testing::expect_error(
      [&] { autograd::register_hook(ones64({2}), [](const Tensor& g) { return g; }); },
      ErrorKind::kValue, "expected a tensor that requires grad");
  const Tensor z = mul(x, w);
  autograd::register_hook(z, [](const Tensor& g) { return reshape(g, {3, 1}); });
  testing::expect_error([&] { backward({z}, {ones64({3})}); }, ErrorKind::kShape,
                        "returned a gradient of shape [3, 1], expected [3]");
}

TEST_F(AutogradEngine, GradientsOfSharedValuesAreSummed) {
  const Tensor x = leaf({4});
  const Tensor y = mul(x, x);          // x used twice by one call
  const Tensor z = mul(mul(y, x), y);  // y used twice: z = x^5
  const std::vector<Tensor> g = autograd::grad({z}, {x}, {ones64({4})});
  const Tensor x4 = kiln::mul(kiln::mul(x, x), kiln::mul(x, x));
  testing::expect_close(g[0], x4 * 5.0, 1e-12);
  EXPECT_FALSE(get_grad(x).defined()) << "grad() must not touch .grad";
}

TEST_F(AutogradEngine, GradOfNonLeafInputsAndUnusedInputs) {
  const Tensor x = leaf({3}), unused = leaf({3});
  const Tensor y = mul(x, x);
  const Tensor z = mul(y, y);
  const Tensor gz = randn({3}, DType::kFloat64);
  const std::vector<Tensor> g = autograd::grad({z}, {y, x}, {gz}, /*retain_graph=*/true);
  testing::expect_close(g[0], kiln::mul(gz, y) * 2.0, 1e-12);
  testing::expect_close(g[1], kiln::mul(kiln::mul(gz, y), x) * 4.0, 1e-12);
  testing::expect_error([&] { autograd::grad({z}, {unused}, {gz}, true); }, ErrorKind::kValue,
                        "not used");
  const std::vector<Tensor> allowed = autograd::grad({z}, {unused}, {gz}, true, false, true);
  EXPECT_FALSE(allowed[0].defined());
}

TEST_F(AutogradEngine, SecondBackwardNeedsRetainGraph) {
  const Tensor x = leaf({2});
  const Tensor y = mul(x, x);
  backward({y}, {ones64({2})}, /*retain_graph=*/true);
  backward({y}, {ones64({2})});
  testing::expect_close(get_grad(x), x * 4.0, 1e-12);
  testing::expect_error([&] { backward({y}, {ones64({2})}); }, ErrorKind::kValue,
                        "retain_graph");
}

TEST_F(AutogradEngine, CreateGraphGivesHigherOrderGradients) {
  const Tensor x = leaf({5});
  const Tensor y = mul(mul(x, x), x);  // x^3
  const Tensor dy = autograd::grad({y}, {x}, {ones64({5})}, false, /*create_graph=*/true)[0];
  testing::expect_close(dy, kiln::mul(x, x) * 3.0, 1e-12);
  ASSERT_TRUE(requires_grad(dy));
  const Tensor d2y = autograd::grad({dy}, {x}, {ones64({5})}, false, true)[0];
  testing::expect_close(d2y, x * 6.0, 1e-12);
  const Tensor d3y = autograd::grad({d2y}, {x}, {ones64({5})})[0];
  testing::expect_close(d3y, full({5}, 6.0, DType::kFloat64), 1e-12);
}

TEST_F(AutogradEngine, ImpliedGradientOnlyForOneElementOutputs) {
  const Tensor x = leaf({1});
  backward({mul(x, x)});
  testing::expect_close(get_grad(x), x * 2.0, 1e-12);
  const Tensor v = leaf({3});
  testing::expect_error([&] { backward({mul(v, v)}); }, ErrorKind::kValue,
                        "one-element outputs");
  testing::expect_error([&] { backward({mul(v, v)}, {ones64({2})}); }, ErrorKind::kShape,
                        "expected [3]");
  // An undefined gradient beside given ones is implied the same way.
  const Tensor w = leaf({1});
  backward({mul(w, w), mul(v, v)}, {Tensor(), ones64({3})});
  testing::expect_close(get_grad(w), w * 2.0, 1e-12);
  testing::expect_close(get_grad(v), v * 2.0, 1e-12);
  testing::expect_error(
      [&] {
        backward({mul(v, v), mul(w, w)}, {Tensor(), ones64({1})});
      },
      ErrorKind::kValue, "output 0 has shape [3]");
}

TEST_F(AutogradEngine, GradModeAndDetach) {
  const Tensor x = leaf({3});
  {
    autograd::NoGradGuard no_grad;
    EXPECT_FALSE(autograd::is_grad_enabled());
    EXPECT_FALSE(requires_grad(mul(x, x)));
    autograd::GradModeGuard enable(true);
    EXPECT_TRUE(requires_grad(mul(x, x)));
  }
  EXPECT_TRUE(autograd::is_grad_enabled());
  const Tensor d = autograd::detach(x);
  EXPECT_FALSE(requires_grad(d));
  EXPECT_FALSE(requires_grad(mul(d, d)));
  EXPECT_EQ(d.data_ptr(), x.data_ptr());
  testing::expect_error([&] { backward({mul(d, d)}, {ones64({3})}); }, ErrorKind::kValue,
                        "does not require grad");
}

TEST_F(AutogradEngine, NotDifferentiableOpsAreNotRecorded) {
  const Tensor x = leaf({3});
  EXPECT_FALSE(requires_grad(call_op("AutogradTestNotDifferentiable", {x, x})[0]));
}

TEST_F(AutogradEngine, OpWithoutRuleFailsAtBackwardNamingIt) {
  const Tensor x = leaf({3});
  const Tensor y = call_op("AutogradTestNoRule", {x, x})[0];
  EXPECT_TRUE(requires_grad(y));
  testing::expect_error([&] { backward({y}, {ones64({3})}); }, ErrorKind::kNotImplemented,
                        "AutogradTestNoRule has no gradient rule");
}

TEST_F(AutogradEngine, WritingIntoALeafThatRequiresGradIsRefusedOutsideNoGrad) {
  const Tensor x = leaf({3});
  const Tensor plain = randn({3}, DType::kFloat64);
  testing::expect_error(
      [&] {
        call_op("AutogradTestMul", {plain, plain}, {}, {x});
      },
      ErrorKind::kValue, "writes into a leaf tensor that requires grad");
  autograd::NoGradGuard no_grad;
  call_op("AutogradTestMul", {plain, plain}, {}, {x});  // an optimizer's update
  testing::expect_close(x, kiln::mul(plain, plain), 1e-12);
}

TEST_F(AutogradEngine, RequiresGradOnlyOnFloatingLeaves) {
  const Tensor x = leaf({2});
  const Tensor y = mul(x, x);
  set_requires_grad(y);  // it does already: nothing changes, as in PyTorch
  EXPECT_TRUE(autograd::requires_grad(y) && !autograd::is_leaf(y));
  testing::expect_error([&] { set_requires_grad(y, false); }, ErrorKind::kValue,
                        "only a leaf tensor");
  testing::expect_error([&] { set_requires_grad(zeros({2}, DType::kInt64)); }, ErrorKind::kDType,
                        "floating-point");
  testing::expect_error([&] { autograd::set_grad(x, ones({3}, DType::kFloat64)); },
                        ErrorKind::kShape, "expected [2]");
  autograd::set_grad(x, ones64({2}));
  testing::expect_close(get_grad(x), ones64({2}), 0);
  autograd::set_grad(x, Tensor());
  EXPECT_FALSE(get_grad(x).defined());
}

TEST_F(AutogradEngine, GraphHoldsNoCycles) {
  std::weak_ptr<TensorImpl> output;
  std::weak_ptr<autograd::Node> node;
  const Tensor x = leaf({3});
  {
    const Tensor y = mul(x, x);
    output = y.impl_ptr();
    node = autograd::grad_fn(y);
  }
  runtime::synchronize();
  EXPECT_TRUE(output.expired());
  EXPECT_TRUE(node.expired());
}

// Runs `body` on a thread with a stack of `bytes` and waits for it.
void run_on_stack_of(size_t bytes, std::function<void()> body) {
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, bytes), 0);
  pthread_t thread;
  const auto run = [](void* f) -> void* {
    (*static_cast<std::function<void()>*>(f))();
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&thread, &attr, run, &body), 0);
  ASSERT_EQ(pthread_join(thread, nullptr), 0);
  pthread_attr_destroy(&attr);
}

// A chain of 20k recorded calls (or views) is freed with a stack of 512 KiB, where destructors
// that recursed through the chain would need several MiB (Note [Freeing deep graphs]).
TEST_F(AutogradEngine, FreeingADeepGraphDoesNotRecurse) {
  constexpr int kDepth = 20000;
  const Tensor x = leaf({2}), one = ones64({2});
  for (const bool views : {false, true}) {
    Tensor y = mul(x, one);
    const std::weak_ptr<TensorImpl> start = y.impl_ptr();
    for (int i = 0; i < kDepth; ++i) y = views ? reshape(y, {2}) : mul(y, one);
    runtime::synchronize();
    const std::weak_ptr<autograd::Node> last_node = autograd::grad_fn(y);
    run_on_stack_of(512 * 1024, [&y] { y = Tensor(); });
    runtime::synchronize();
    EXPECT_TRUE(last_node.expired());
    EXPECT_TRUE(start.expired());
  }
}

struct ScaledExp : Function<ScaledExp> {
  static Tensor Forward(AutogradContext* ctx, const Tensor& x, double s) {
    EXPECT_FALSE(autograd::is_grad_enabled());
    Tensor y = kiln::exp(x) * s;
    ctx->SaveForBackward({y});
    ctx->saved_data.set("needs_x", ctx->NeedsInputGrad(0));
    return y;
  }
  static std::vector<Tensor> Backward(AutogradContext* ctx, const std::vector<Tensor>& grads) {
    EXPECT_TRUE(ctx->saved_data.get<bool>("needs_x"));
    return {kiln::mul(grads[0], ctx->GetSavedTensors()[0])};
  }
};

struct SplitHalves : Function<SplitHalves> {  // two outputs, the second not differentiable
  static std::tuple<Tensor, Tensor> Forward(AutogradContext* ctx, const Tensor& x) {
    Tensor a = x * 2.0, mask = gt(x, Tensor::scalar(0.0));
    ctx->MarkNonDifferentiable({mask});
    return {a, mask};
  }
  static std::vector<Tensor> Backward(AutogradContext*, const std::vector<Tensor>& grads) {
    EXPECT_FALSE(grads[1].defined());
    return {grads[0] * 2.0};
  }
};

TEST_F(AutogradEngine, CustomFunction) {
  const Tensor x = leaf({4});
  const Tensor y = ScaledExp::apply(x, 3.0);
  EXPECT_EQ(autograd::grad_fn(y)->name(), "kiln::(anonymous namespace)::ScaledExp");
  const Tensor gy = randn({4}, DType::kFloat64);
  backward({y}, {gy});
  testing::expect_close(get_grad(x), kiln::mul(gy, kiln::exp(x) * 3.0), 1e-12);
  testing::expect_error([&] { backward({y}, {gy}); }, ErrorKind::kValue, "freed");

  const auto [a, mask] = SplitHalves::apply(x);
  EXPECT_TRUE(requires_grad(a));
  EXPECT_FALSE(requires_grad(mask));
  const std::vector<Tensor> g = autograd::grad({a}, {x}, {gy});
  testing::expect_close(g[0], gy * 2.0, 1e-12);

  const Tensor plain = randn({4}, DType::kFloat64);
  EXPECT_FALSE(requires_grad(ScaledExp::apply(plain, 2.0)));
}

TEST_F(AutogradEngine, DifferentiableViewRefusesAMakeViewThatReturnsAnotherTensor) {
  // Its layout was read as one over the base's elements: a wrong gradient.
  const Tensor x = leaf({4});
  const Tensor other = randn({2}, DType::kFloat64);
  testing::expect_error(
      [&] { autograd::differentiable_view(x, [&](const Tensor&) { return other; }); },
      ErrorKind::kValue, "make_view must return a view of its argument");
  EXPECT_TRUE(requires_grad(
      autograd::differentiable_view(x, [](const Tensor& t) { return t.slice(0, 1, 3); })));
}

struct PassThrough : Function<PassThrough> {  // returns its inputs as they are
  static std::tuple<Tensor, Tensor, Tensor> Forward(AutogradContext* ctx, const Tensor& data,
                                                    const Tensor& w, const Tensor& marked) {
    ctx->MarkNonDifferentiable({marked});
    return {data, data * w, marked};
  }
  static std::vector<Tensor> Backward(AutogradContext*, const std::vector<Tensor>& grads) {
    return {grads[0] + 100.0, grads[1], Tensor()};  // + 100: gradient that went through here
  }
};

TEST_F(AutogradEngine, AFunctionReturningACallersTensorLeavesItsGradientStateAlone) {
  // `data` (no grad) became a non-leaf of PassThrough, so a later use of it sent gradient through
  // PassThrough's Backward; `marked` (non-differentiable) was returned still requiring grad.
  const Tensor data = randn({2}, DType::kFloat64);
  const Tensor w = leaf({2}), marked = leaf({2});
  const auto [same, product, not_differentiable] = PassThrough::apply(data, w, marked);
  EXPECT_FALSE(requires_grad(data));
  EXPECT_TRUE(requires_grad(same));
  EXPECT_EQ(same.storage(), data.storage());
  EXPECT_FALSE(requires_grad(not_differentiable));
  EXPECT_TRUE(requires_grad(marked));
  const std::vector<Tensor> g =
      autograd::grad({kiln::add(data, w)}, {w}, {ones({2}, DType::kFloat64)});
  testing::expect_close(g[0], ones({2}, DType::kFloat64), 0.0);
}

struct DoubleBackward : Function<DoubleBackward> {  // a float64 gradient for a float32 input
  static Tensor Forward(AutogradContext*, const Tensor& x) { return x * 2.0; }
  static std::vector<Tensor> Backward(AutogradContext*, const std::vector<Tensor>& grads) {
    return {to(grads[0], DType::kFloat64) * 2.0};
  }
};

TEST_F(AutogradEngine, AFunctionsGradientTakesItsInputsDtype) {
  // As PyTorch casts it; it reached grad() as float64.
  Tensor x = Tensor::empty({3}, DType::kFloat32);
  for (int i = 0; i < 3; ++i) x.data<float>()[i] = static_cast<float>(i);
  autograd::set_requires_grad(x, true);
  const std::vector<Tensor> g =
      autograd::grad({DoubleBackward::apply(x)}, {x}, {ones({3}, DType::kFloat32)});
  EXPECT_EQ(g[0].dtype(), DType::kFloat32);
  testing::expect_close(g[0], ones({3}, DType::kFloat32) * 2.0, 0.0);
}

struct ThrowingBackward : Function<ThrowingBackward> {
  static Tensor Forward(AutogradContext*, const Tensor& x) { return x * 2.0; }
  static std::vector<Tensor> Backward(AutogradContext*, const std::vector<Tensor>&) {
    throw std::runtime_error("no gradient today");
  }
};

TEST_F(AutogradEngine, AStdExceptionOfABackwardIsAKilnErrorNamingIt) {
  // It passed as the user's std::runtime_error, which Python sees as a bare RuntimeError.
  const Tensor y = ThrowingBackward::apply(leaf({2}));
  testing::expect_error([&] { backward({y}, {ones({2}, DType::kFloat64)}); }, ErrorKind::kGeneric,
                        "no gradient today\n  in the Backward of "
                        "kiln::(anonymous namespace)::ThrowingBackward");
}

}  // namespace
}  // namespace kiln
