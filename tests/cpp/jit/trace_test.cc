// Tracing (src/jit/trace.cc): ops become CNodes, tracers carry no data, views made by Tensor
// methods become Reshape/Permute/AsStrided, constants, in-place updates, and the refusals.
#include "jit/trace.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "../backend/backend_testing.h"
#include "jit/jit_testing.h"
#include "kiln/functional.h"
#include "kiln/jit.h"
#include "ops/random.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::error_of;
using testing::expect_error;
using testing::expect_same_values;

// Runs the graph on the reference backend.
TEST(Trace, RecordsEachOpCallAsACNode) {
  const Tensor x = Tensor::empty({2, 3});
  const Tensor y = Tensor::empty({3});
  FuncGraphPtr g = trace(
      [](const std::vector<Tensor>& in) {
        const Tensor a = sin(in[0]);
        const Tensor b = in[1] * 2.0;
        return std::vector<Tensor>{add(a, b)};
      },
      {x, y}, "f");
  EXPECT_EQ(ir::print(*g),
            "graph \"f\"(%0 \"input0\": float32[2, 3], %1 \"input1\": float32[3]) {\n"
            "  %2 = Sin(%0) : float32[2, 3]\n"
            "  %3 = const float64[] weak [2.0]\n"
            "  %4 = Mul(%1, %3) : float32[3]\n"
            "  %5 = Add(%2, %4) : float32[2, 3]\n"
            "  return %5\n"
            "}\n");
  ir::verify(*g);
}

// Note [Random ops in graphs]: a traced random call reserves no counters and records its draw as
// None (each run draws anew); a draw given explicitly stays recorded.
TEST(Trace, RandomCallsRecordNoDraw_UnlessGivenOne) {
  manual_seed(5);
  const RngState before = get_rng_state();
  const OpDefPtr uniform = OpRegistry::Instance().get("RandUniform");
  FuncGraphPtr g = trace(
      [&](const std::vector<Tensor>& in) {
        const Tensor fresh = dropout(in[0], 0.5, true);
        const Tensor fixed = call_op(*uniform, {},
                                     {{"shape", std::vector<int64_t>{4}},
                                      {"seed", int64_t{9}},
                                      {"offset", int64_t{100}}})[0];
        return std::vector<Tensor>{fresh, fixed};
      },
      {Tensor::empty({4})}, "f");
  const RngState after = get_rng_state();
  EXPECT_EQ(after.offset, before.offset);
  const std::string text = ir::print(*g);
  EXPECT_NE(text.find("Dropout(%0) {p = 0.5, seed = None, offset = None}"), std::string::npos)
      << text;
  EXPECT_NE(text.find("RandUniform() {shape = [4], dtype = float32, seed = 9, offset = 100}"),
            std::string::npos)
      << text;
}

// A graph's random nodes draw from the default generator when it runs, so a call naming a
// generator of its own is refused rather than traced into one that ignores it.
TEST(Trace, RandomCallsWithAnOwnGeneratorAreRefused) {
  Generator g(1);
  expect_error(
      [&] {
        trace(
            [&](const std::vector<Tensor>& in) {
              return std::vector<Tensor>{add(in[0], rand({4}, DType::kFloat32, g))};
            },
            {Tensor::empty({4})}, "f");
      },
      ErrorKind::kNotImplemented,
      "RandUniform: a random op with a generator of its own cannot be traced");
  EXPECT_EQ(g.state().offset, 0u);
  // The default generator, named, traces as if it were left out.
  FuncGraphPtr graph = trace(
      [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{add(in[0], rand({4}, DType::kFloat32, default_generator()))};
      },
      {Tensor::empty({4})}, "f");
  EXPECT_NE(ir::print(*graph).find("seed = None"), std::string::npos);
}

// A stale op object (its extension replaced or unloaded) cannot be recorded; the error says
// which of the two happened.
TEST(Trace, AnOpThatIsNotTheRegisteredOneSaysWhy) {
  const auto infer = [](const InferContext& ctx) { return MetaList{ctx.input(0)}; };
  const auto kernel = [](KernelContext&) {};
  const OpDef stale =
      OpDef("TraceStaleOp").input("x").infer(infer).kernel(DeviceType::kCPU, kernel);
  const auto trace_call = [&] {
    trace([&](const std::vector<Tensor>& in) { return call_op(stale, {in[0]}, {}); },
          {Tensor::empty({2})}, "f");
  };
  expect_error(
      trace_call, ErrorKind::kValue,
      "op 'TraceStaleOp' is no longer registered (its extension was replaced or unloaded)");
  OpRegistration newer(
      OpDef("TraceStaleOp").input("x").infer(infer).kernel(DeviceType::kCPU, kernel));
  expect_error(
      trace_call, ErrorKind::kValue,
      "op 'TraceStaleOp' is not the registered op of that name (a newer build replaced it)");
}

TEST(Trace, TracersHaveMetadataButReadingTheirDataThrows) {
  trace(
      [](const std::vector<Tensor>& in) {
        const Tensor y = exp(in[0]);
        EXPECT_EQ(y.dtype(), DType::kFloat32);
        EXPECT_EQ(y.shape(), Shape({4}));
        EXPECT_TRUE(is_tracer(y));
        EXPECT_TRUE(is_tracer(y.select(0, 1)));
        EXPECT_TRUE(is_tracing());
        for (const Tensor& t : {in[0], y, y.select(0, 2), y.transpose(0, 0)}) {
          const Error e = error_of([&] { t.data_ptr(); });
          EXPECT_EQ(e.kind(), ErrorKind::kType);
          EXPECT_NE(std::string(e.what()).find(jit_detail::kTracedValueHasNoData),
                    std::string::npos)
              << e.what();
          EXPECT_NE(std::string(e.what()).find("kiln.mint.where"), std::string::npos);
        }
        // Tensor's copying methods read data too; the message points C++ at the traced forms.
        const Error copy = error_of([&] { y.clone(); });
        EXPECT_NE(std::string(copy.what())
                      .find("clone() and contiguous(), read data too: use "
                            "kiln::contiguous"),
                  std::string::npos)
            << copy.what();
        return std::vector<Tensor>{y};
      },
      {Tensor::empty({4})});
  EXPECT_FALSE(is_tracing());
}

TEST(Trace, ViewsMadeByTensorMethodsBecomeViewPrimitives) {
  std::mt19937 rng(5);
  const Tensor x = testing::random_input(rng, {3, 4});
  const auto fn = [](const std::vector<Tensor>& in) {
    const Tensor y = exp(in[0]);
    return std::vector<Tensor>{
        neg(y.transpose(0, 1)),              // Permute
        neg(y.reshape({2, 6})),              // Reshape
        neg(y.select(1, 2)),                 // AsStrided
        neg(y.slice(0, 1, 3).transpose(0, 1)),  // AsStrided of an offset view
        neg(y.unsqueeze(0).permute({2, 0, 1})),  // Reshape, then Permute
    };
  };
  FuncGraphPtr g = trace(fn, {x});
  const std::string text = ir::print(*g);
  EXPECT_NE(text.find("Permute(%1) {dims = [1, 0]}"), std::string::npos) << text;
  EXPECT_NE(text.find("Reshape(%1) {shape = [2, 6]}"), std::string::npos) << text;
  EXPECT_NE(text.find("AsStrided(%1) {size = [3], stride = [4], offset = 2}"), std::string::npos)
      << text;
  EXPECT_NE(text.find("AsStrided(%1) {size = [4, 2], stride = [1, 4], offset = 4}"),
            std::string::npos)
      << text;
  const std::vector<Tensor> got = testing::run_on_reference(g, {x});
  const std::vector<Tensor> want = fn({x});
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) expect_same_values(got[i], want[i]);
}

TEST(Trace, OutsideTensorsAreConstantsThatShareMemory) {
  const Tensor w = Tensor::empty({2});
  w.data<float>()[0] = 1.0f;
  w.data<float>()[1] = 2.0f;
  FuncGraphPtr g =
      trace([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * w + w}; },
            {Tensor::empty({2})});
  // One constant for both uses, holding w itself: an in-place update of w is seen.
  size_t constants = 0;
  for (const NodePtr& n : g->nodes()) {
    if (!n->is_value()) continue;
    ++constants;
    EXPECT_TRUE(static_cast<const ValueNode&>(*n).value().is_same(w));
  }
  EXPECT_EQ(constants, 1u);
}

TEST(Trace, InPlaceUpdatesMoveTheValueOn) {
  std::mt19937 rng(9);
  const Tensor x = testing::random_input(rng, {2, 3});
  const auto fn = [](const std::vector<Tensor>& in) {
    Tensor y = exp(in[0]);
    const Tensor row = y.select(0, 1);   // a view made before the update sees it
    const Tensor before = neg(y);        // a use before the update does not
    add(y, in[0], y);                    // y += x
    return std::vector<Tensor>{y, row * 1.0, before};
  };
  const std::vector<Tensor> got = testing::run_on_reference(trace(fn, {x}), {x});
  const std::vector<Tensor> want = fn({x});
  for (size_t i = 0; i < got.size(); ++i) expect_same_values(got[i], want[i]);
}

TEST(Trace, ResultsOfViewOpsShareTheirInputsValueAsEagerly) {
  // They were values of their own: an in-place update of the input was lost through them.
  std::mt19937 rng(10);
  const Tensor x = testing::random_input(rng, {2, 3});
  const auto fn = [](const std::vector<Tensor>& in) {
    Tensor y = exp(in[0]);
    const Tensor flat = reshape(y, {6});
    const Tensor turned = transpose(y, 0, 1);
    const std::vector<Tensor> rows = split(y, 1, 0);
    const Tensor copied = reshape(turned, {6});  // a copy eagerly too: keeps the old values
    add(y, in[0], y);                            // y += x
    return std::vector<Tensor>{flat * 1.0, turned * 1.0, rows[1] * 1.0, copied * 1.0};
  };
  const std::vector<Tensor> got = testing::run_on_reference(trace(fn, {x}), {x});
  const std::vector<Tensor> want = fn({x});
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) expect_same_values(got[i], want[i]);
}

TEST(Trace, WritesThroughViewsOfTracedValuesScatterIntoTheBase) {
  std::mt19937 rng(6);
  const Tensor x = testing::random_input(rng, {3, 4});
  const auto fn = [](const std::vector<Tensor>& in) {
    Tensor y = exp(in[0]);
    const Tensor before = y * 1.0;
    add(transpose(y, 0, 1), Tensor::scalar(1.0), transpose(y, 0, 1));  // all of y, transposed
    const Tensor column = y.select(1, 2);
    mul(column, Tensor::scalar(3.0), column);     // one column
    neg(in[0].slice(0, 0, 2), y.slice(0, 1, 3));  // two rows, from another value
    const Tensor flat = reshape(y, {12});
    return std::vector<Tensor>{before, y, flat, column};  // the views read the final value
  };
  FuncGraphPtr g = trace(fn, {x});
  EXPECT_NE(ir::print(*g).find("AsStridedScatter("), std::string::npos);
  const std::vector<Tensor> got = testing::run_on_reference(g, {x});
  const std::vector<Tensor> want = fn({x});
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) expect_same_values(got[i], want[i]);
}

TEST(Trace, WritesIntoOutsideTensorsBecomeExtraOutputs) {
  const Tensor state = full({3}, 1.0);
  const Tensor x = full({3}, 2.0);
  jit_detail::Trace trace("step");
  const Tensor in = trace.add_input(TensorMeta::of(x), "x");
  const Tensor before = state * 1.0;   // reads the old value
  add(state, in, state);               // state += x
  mul(state, Tensor::scalar(3.0), state);// state *= 3: the same storage, moved on again
  const Tensor after = state + 0.0;    // reads the new value
  FuncGraphPtr g = trace.finish({before, after});
  ASSERT_EQ(trace.writes().tensors.size(), 1u);
  EXPECT_TRUE(trace.writes().tensors[0].is_same(state));
  EXPECT_TRUE(trace.writes().inputs.empty());
  ASSERT_EQ(g->outputs().size(), 3u);  // before, after, the new state
  const std::vector<Tensor> got = testing::run_on_reference(g, {x});
  expect_same_values(got[0], full({3}, 1.0));
  expect_same_values(got[1], full({3}, 9.0));
  expect_same_values(got[2], full({3}, 9.0));
  expect_same_values(state, full({3}, 1.0));  // tracing itself wrote nothing
}

TEST(Trace, InPlaceIntoAnOutTensorOfAnotherDTypeCasts) {
  std::mt19937 rng(2);
  const Tensor x = testing::random_input(rng, {3});
  const auto fn = [](const std::vector<Tensor>& in) {
    Tensor y = to(in[0], DType::kFloat64);
    add(in[0], in[0], y);  // a float32 result into a float64 tensor
    return std::vector<Tensor>{y};
  };
  FuncGraphPtr g = trace(fn, {x});
  EXPECT_NE(ir::print(*g).find("Cast("), std::string::npos);
  expect_same_values(testing::run_on_reference(g, {x})[0], fn({x})[0]);
}

TEST(Trace, RefusesWritesIntoPartsOfOutsideTensors) {
  const Tensor outside = Tensor::empty({3});
  expect_error(
      [&] {
        trace(
            [&](const std::vector<Tensor>& in) {
              add(in[0].slice(0, 0, 2), in[0].slice(0, 0, 2), outside.slice(0, 0, 2));
              return std::vector<Tensor>{in[0]};
            },
            {Tensor::empty({3})});
      },
      ErrorKind::kNotImplemented, "writes through a view of a tensor from outside");
}

// Writes into inputs, whole or through a view, move the input's value on and add its final value
// as an extra output (after the written outside tensors'), once per input in order of first write.
TEST(Trace, WritesIntoInputsBecomeExtraOutputs) {
  const auto body = [](const Tensor& x, const Tensor& y, const Tensor& state) {
    neg(y.slice(0, 1, 3), y.slice(0, 1, 3));  // y[1:] = -y[1:]
    const Tensor read = y * 1.0;              // reads the new value
    add(x, y, x);                             // x += y
    add(state, x, state);                     // state += x
    mul(y, Tensor::scalar(2.0), y);           // y *= 2: the second write, no second output
    return read;
  };
  const Tensor x = full({3}, 2.0), y = arange(3, 6, 1, DType::kFloat32);
  const Tensor state = full({3}, 1.0);
  jit_detail::Trace trace("step");
  const Tensor tx = trace.add_input(TensorMeta::of(x), "x");
  const Tensor ty = trace.add_input(TensorMeta::of(y), "y");
  FuncGraphPtr g = trace.finish({body(tx, ty, state)});
  ASSERT_EQ(trace.writes().tensors.size(), 1u);
  using Input = jit_detail::Writes::Input;
  EXPECT_EQ(trace.writes().inputs, (std::vector<Input>{{1, true}, {0, true}}));
  ASSERT_EQ(g->outputs().size(), 4u);  // read, the new state, y, x
  const std::vector<Tensor> got = testing::run_on_reference(g, {x, y});
  // Eagerly, on copies: the graph's outputs are the read value and the final x, y and state.
  const Tensor ex = x * 1.0, ey = y * 1.0, estate = state * 1.0;
  expect_same_values(got[0], body(ex, ey, estate));
  expect_same_values(got[1], estate);
  expect_same_values(got[2], ey);
  expect_same_values(got[3], ex);
  expect_same_values(x, full({3}, 2.0));  // the graph changed none of them
  expect_same_values(state, full({3}, 1.0));
}

class PerCallKernel final : public BoundKernel {
 public:
  size_t workspace_size() override { return 0; }
  void launch(const KernelContext&) override {}
};

TEST(Trace, RefusesOpsWithAPerCallKernelObject) {
  const OpDef op("PerCall");
  expect_error(
      [&] {
        trace(
            [&](const std::vector<Tensor>& in) {
              Tensor out(DType::kFloat32, {2});
              call_bound_kernel(op, {in[0]}, {out}, std::make_shared<PerCallKernel>());
              return std::vector<Tensor>{out};
            },
            {Tensor::empty({2})});
      },
      ErrorKind::kNotImplemented, "m.def_op(kiln::OpDef(\"PerCall\")");
}

TEST(Trace, OpsRegisteredLikeCustomDefOpsTrace) {
  OpRegistration reg(OpDef("TraceTestTwice")
                         .input("x")
                         .infer([](const InferContext& ctx) { return MetaList{ctx.input(0)}; })
                         .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
                           copy_into(ctx.outputs[0], ctx.inputs[0] * 2.0);
                         }));
  const auto fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{call_op("TraceTestTwice", {sin(in[0])})[0]};
  };
  std::mt19937 rng(1);
  const Tensor x = testing::random_input(rng, {5});
  FuncGraphPtr g = trace(fn, {x});
  EXPECT_NE(ir::print(*g).find("TraceTestTwice(%1)"), std::string::npos);
  expect_same_values(testing::run_on_reference(g, {x})[0], fn({x})[0]);
}

TEST(Trace, LeakedTracersFailClearlyLater) {
  Tensor leaked;
  trace(
      [&](const std::vector<Tensor>& in) {
        leaked = exp(in[0]);
        return std::vector<Tensor>{leaked};
      },
      {Tensor::empty({2})});
  EXPECT_FALSE(is_tracer(leaked));
  expect_error([&] { leaked.data_ptr(); }, ErrorKind::kType, jit_detail::kTracedValueHasNoData);
  // Captured by a later trace, it is refused as a tensor an earlier trace kept (its own reason
  // speaks of control flow, which misled).
  expect_error(
      [&] {
        trace([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] + leaked}; },
              {Tensor::empty({2})});
      },
      ErrorKind::kType, "uses a tensor that an earlier trace of a jitted function made and kept");
}

TEST(Trace, OneTraceAtATimePerThreadOthersRunEagerly) {
  expect_error(
      [] {
        trace(
            [](const std::vector<Tensor>& in) {
              trace([](const std::vector<Tensor>& i) { return i; }, in);
              return in;
            },
            {Tensor::empty({1})});
      },
      ErrorKind::kValue, "already tracing graph");
  // While this thread traces, another thread's ops run eagerly.
  trace(
      [](const std::vector<Tensor>& in) {
        Tensor eager;
        std::thread other([&] {
          const Tensor a = Tensor::empty({2});
          a.data<float>()[0] = 1.0f;
          a.data<float>()[1] = -1.0f;
          eager = abs(a);
          EXPECT_FALSE(is_tracing());
        });
        other.join();
        EXPECT_EQ(eager.data<float>()[1], 1.0f);
        return in;
      },
      {Tensor::empty({1})});
}

TEST(Trace, ErrorsInsideTheFunctionStopTheTrace) {
  expect_error(
      [] {
        trace(
            [](const std::vector<Tensor>& in) {
              return std::vector<Tensor>{add(in[0], Tensor::empty({3}))};
            },
            {Tensor::empty({2})});
      },
      ErrorKind::kShape, "Add(float32[2], float32[3])");
  EXPECT_FALSE(is_tracing());
  const Tensor a = Tensor::empty({1});
  a.data<float>()[0] = -3.0f;
  EXPECT_EQ(abs(a).data<float>()[0], 3.0f);  // eager again
}

}  // namespace
}  // namespace kiln
