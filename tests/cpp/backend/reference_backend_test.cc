// The "reference" backend: results equal eager op calls (bit for bit), on hand-written and on
// random graphs; input checks; graph ids; ops unregistered after Build.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <unordered_map>

#include "../ir/ir_testing.h"
#include "backend_testing.h"
#include "kiln/backend.h"
#include "kiln/functional.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::expect_error;

void expect_same_tensor(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.dtype(), b.dtype());
  ASSERT_EQ(a.shape(), b.shape());
  const Tensor ca = a.contiguous();
  const Tensor cb = b.contiguous();
  if (ca.nbytes() > 0) {
    EXPECT_EQ(std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()), 0);
  }
}

Tensor random_tensor(std::mt19937& rng, const TensorMeta& meta) {
  Tensor t = Tensor::empty(meta.shape, meta.dtype);
  std::uniform_real_distribution<double> real(-3, 3);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = real(rng);
    void* p = t.data_ptr();
    switch (meta.dtype) {
      case DType::kBool: static_cast<bool*>(p)[i] = v > 0; break;
      case DType::kInt8: static_cast<int8_t*>(p)[i] = static_cast<int8_t>(v * 10); break;
      case DType::kUInt8: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v * 10 + 40); break;
      case DType::kInt16: static_cast<int16_t*>(p)[i] = static_cast<int16_t>(v * 100); break;
      case DType::kInt32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v * 1000); break;
      case DType::kInt64: static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v * 1e6); break;
      case DType::kFloat16: static_cast<Half*>(p)[i] = Half(static_cast<float>(v)); break;
      case DType::kBFloat16: static_cast<BFloat16*>(p)[i] = BFloat16(static_cast<float>(v)); break;
      case DType::kFloat32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
      case DType::kFloat64: static_cast<double*>(p)[i] = v; break;
    }
  }
  return t;
}

// An evaluation written apart from the backend: node by node, each op looked up by name and
// called with the primitive's own attributes, tuples kept whole.
std::vector<Tensor> run_eager(const FuncGraph& g, const std::vector<Tensor>& inputs) {
  std::unordered_map<const Node*, std::vector<Tensor>> values;
  for (size_t i = 0; i < g.parameters().size(); ++i) values[g.parameters()[i].get()] = {inputs[i]};
  for (const NodePtr& n : g.topological_order()) {
    if (n->is_value()) values[n.get()] = {static_cast<const ValueNode&>(*n).value()};
    if (!n->is_cnode() || n == g.return_node()) continue;
    const auto& c = static_cast<const CNode&>(*n);
    if (c.primitive()->name() == "TupleGetItem") {
      values[n.get()] = {
          values.at(c.input(0).get()).at(c.primitive()->attrs().get<int64_t>("index"))};
      continue;
    }
    std::vector<Tensor> args;
    for (const NodePtr& in : c.inputs()) args.push_back(values.at(in.get()).at(0));
    values[n.get()] = call_op(c.primitive()->name(), args, c.primitive()->attrs());
  }
  std::vector<Tensor> out;
  for (const NodePtr& o : g.outputs()) out.push_back(values.at(o.get()).at(0));
  return out;
}

TEST(ReferenceBackend, MatchesEagerCallsOnAHandWrittenGraph) {
  // (values, indices) = max(layer_norm(x) * 0.5 + y, dim=1); returns values, indices, x, 2.0.
  auto g = std::make_shared<FuncGraph>("hand");
  auto x = g->add_parameter(DType::kFloat32, {2, 4}, "x");
  auto y = g->add_parameter(DType::kFloat32, {4}, "y");
  auto none = g->add_value(Tensor());
  auto ln =
      g->add_cnode("LayerNorm", {x, none, none}, {{"normalized_shape", std::vector<int64_t>{4}}});
  auto half = g->add_value(Scalar(0.5));
  auto z = g->add_cnode("Add", {g->add_cnode("Mul", {ln, half}), y});
  auto max = g->add_cnode("MaxDim", {z}, {{"dim", int64_t{1}}});
  auto two = g->add_value(Scalar(2.0));
  g->add_cnode("Exp", {x});  // dead
  g->set_outputs({g->tuple_get_item(max, 0), g->tuple_get_item(max, 1), x, two});

  std::mt19937 rng(3);
  const Tensor xv = random_tensor(rng, TensorMeta(DType::kFloat32, {2, 4}));
  const Tensor yv = random_tensor(rng, TensorMeta(DType::kFloat32, {4}));
  const std::vector<Tensor> out = testing::run_on_reference(g, {xv, yv});
  ASSERT_EQ(out.size(), 4u);
  const auto [values, indices] =
      kiln::max(add(mul(layer_norm(xv, {4}), Tensor::scalar(0.5)), yv), 1);
  expect_same_tensor(out[0], values);
  expect_same_tensor(out[1], indices);
  EXPECT_EQ(out[2].data_ptr(), xv.data_ptr());  // an input returned as is
  EXPECT_EQ(*out[3].data<double>(), 2.0);
}

TEST(ReferenceBackend, MatchesEagerOnRandomGraphs) {
  for (uint32_t seed = 1; seed <= 120; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    FuncGraphPtr g = testing::RandomGraphBuilder(seed).build(static_cast<int>(5 + seed % 30));
    std::mt19937 rng(seed);
    std::vector<Tensor> inputs;
    for (const ParameterPtr& p : g->parameters())
      inputs.push_back(random_tensor(rng, p->abstract().tensor()));
    const std::vector<Tensor> expected = run_eager(*g, inputs);
    const std::vector<Tensor> got = testing::run_on_reference(g, inputs);
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i) expect_same_tensor(got[i], expected[i]);
    if (HasFatalFailure()) return;
  }
}

TEST(ReferenceBackend, KilnCpuIsTheOpByOpBackendForNow) {
  FuncGraphPtr g = testing::RandomGraphBuilder(11).build(20);
  std::mt19937 rng(11);
  std::vector<Tensor> inputs;
  for (const ParameterPtr& p : g->parameters())
    inputs.push_back(random_tensor(rng, p->abstract().tensor()));
  BackendManager& m = BackendManager::Instance();
  EXPECT_NE(m.Get("kiln_cpu"), m.Get("reference"));
  const BackendGraphId id = m.Build(g, {}, "kiln_cpu");
  std::vector<Tensor> out;
  m.Run("kiln_cpu", id, inputs, &out);
  const std::vector<Tensor> expected = testing::run_on_reference(g, inputs);
  ASSERT_EQ(out.size(), expected.size());
  for (size_t i = 0; i < out.size(); ++i) expect_same_tensor(out[i], expected[i]);
}

TEST(ReferenceBackend, ChecksInputsAgainstTheParameters) {
  auto g = std::make_shared<FuncGraph>("checked");
  auto x = g->add_parameter(DType::kFloat32, {2, 3}, "x");
  g->set_output(g->add_cnode("Neg", {x}));
  BackendManager& m = BackendManager::Instance();
  const BackendGraphId id = m.Build(g, {}, "reference");
  std::vector<Tensor> out;
  expect_error([&] { m.Run("reference", id, {}, &out); }, ErrorKind::kValue,
               "graph \"checked\" takes 1 inputs, got 0");
  expect_error(
      [&] {
        m.Run("reference", id, {Tensor::empty({2, 3}, DType::kInt32)}, &out);
      },
      ErrorKind::kDType, "input 0 (%0 (parameter x)) must be float32, got int32");
  expect_error(
      [&] {
        m.Run("reference", id, {Tensor::empty({3, 2})}, &out);
      },
      ErrorKind::kShape, "input 0 (%0 (parameter x)) must have shape [2, 3], got [3, 2]");
  const Error e = testing::error_of([&] { m.Run("reference", id, {Tensor::empty({3, 2})}, &out); });
  EXPECT_NE(std::string(e.what()).find("in backend 'reference' running graph \"checked\""),
            std::string::npos);
}

TEST(ReferenceBackend, ForgetsClearedGraphs) {
  auto g = std::make_shared<FuncGraph>("cleared");
  auto x = g->add_parameter(DType::kFloat32, {1});
  g->set_output(x);
  BackendBase* ref = BackendManager::Instance().Get("reference");
  const BackendGraphId a = ref->Build(g, {});
  const BackendGraphId b = ref->Build(g, {});
  EXPECT_NE(a, b);
  std::vector<Tensor> out;
  ref->ClearGraph(a);
  expect_error([&] { ref->Run(a, {Tensor::empty({1})}, &out); }, ErrorKind::kValue,
               "no graph with id " + std::to_string(a) + " (never built, or cleared)");
  EXPECT_EQ(ref->Run(b, {Tensor::empty({1})}, &out), RunningStatus::kRunningSuccess);
  ref->ClearGraph(b);
}

TEST(ReferenceBackend, RefusesOpsUnregisteredAfterBuild) {
  auto g = std::make_shared<FuncGraph>("stale");
  auto x = g->add_parameter(DType::kFloat32, {2});
  BackendGraphId id = 0;
  {
    OpRegistration reg(OpDef("RefTestIdentity")
                           .input("x")
                           .infer([](const InferContext& ctx) { return MetaList{ctx.input(0)}; })
                           .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
                             std::memcpy(ctx.outputs[0].data_ptr(), ctx.inputs[0].data_ptr(),
                                         ctx.inputs[0].nbytes());
                           }));
    g->set_output(g->add_cnode("RefTestIdentity", {x}));
    id = BackendManager::Instance().Build(g, {}, "reference");
    std::vector<Tensor> out;
    BackendManager::Instance().Run("reference", id, {Tensor::empty({2})}, &out);
  }
  std::vector<Tensor> out;
  expect_error([&] { BackendManager::Instance().Run("reference", id, {Tensor::empty({2})}, &out); },
               ErrorKind::kValue,
               "op 'RefTestIdentity' was unregistered or replaced after graph \"stale\" was built");
}

}  // namespace
}  // namespace kiln
