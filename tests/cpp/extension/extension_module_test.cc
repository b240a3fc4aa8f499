#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/extension.h"
#include "kiln/op.h"
#include "testing.h"

namespace kiln {
namespace {

std::string plugin(const std::string& name) {
  return std::string(KILN_TEST_PLUGIN_DIR) + "/lib" + name + ".so";
}

Tensor filled(std::vector<float> values) {
  Tensor t = Tensor::empty({static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) t.data<float>()[i] = values[i];
  return t;
}

// A function taking every supported parameter kind; it reports what it received.
std::vector<Tensor> every_kind(Tensor t, const Tensor& cref, std::optional<Tensor> opt,
                               int64_t i64, int i32, double d, float f, bool b,
                               const std::string& s, std::vector<int64_t> ints) {
  const double sum = static_cast<double>(i64 + i32) + d + f + (b ? 1 : 0) +
                     static_cast<double>(s.size() + ints.size());
  return {t, cref, opt.has_value() ? *opt : Tensor(), Tensor::scalar(sum)};
}

std::tuple<Tensor, Tensor> pair(const Tensor& a, const Tensor& b) { return {b, a}; }
int g_calls = 0;
void count_call() { ++g_calls; }

TEST(ExtensionModule, ErasesEverySupportedSignature) {
  ExtensionModule m("sig");
  m.def("every_kind", &every_kind, {"t", "cref", "opt", "i64", "i32", "d", "f", "b", "s", "ints"});
  const ExtensionFunction* fn = m.find_function("every_kind");
  ASSERT_NE(fn, nullptr);
  EXPECT_EQ(fn->arg_kinds,
            (std::vector<ArgKind>{ArgKind::kTensor, ArgKind::kTensor, ArgKind::kOptionalTensor,
                                  ArgKind::kInt64, ArgKind::kInt32, ArgKind::kFloat,
                                  ArgKind::kFloat, ArgKind::kBool, ArgKind::kString,
                                  ArgKind::kInts}));
  EXPECT_EQ(fn->result_kind, ResultKind::kList);
  const Tensor t = filled({1}), none;
  const int64_t i64 = 5, i32 = 7;
  const double d = 0.5, f = 0.25;
  const bool b = true;
  const std::string s = "abc";
  const std::vector<int64_t> ints{1, 2};
  const void* args[] = {&t, &t, &none, &i64, &i32, &d, &f, &b, &s, &ints};
  CallResults results;
  fn->invoke(args, &results);
  ASSERT_EQ(results.tensors.size(), 4u);
  EXPECT_TRUE(results.tensors[0].is_same(t));
  EXPECT_FALSE(results.tensors[2].defined());  // None arrived as std::nullopt
  EXPECT_DOUBLE_EQ(results.tensors[3].data<double>()[0], 5 + 7 + 0.5 + 0.25 + 1 + 3 + 2);
}

TEST(ExtensionModule, ReturnTypeDecidesTheOutputs) {
  ExtensionModule m("results");
  m.def("pair", &pair, {"a", "b"});
  m.def("count_call", &count_call);
  m.def(
      "identity", +[](const Tensor& x) { return x; });
  EXPECT_EQ(m.find_function("pair")->result_kind, ResultKind::kTuple);
  EXPECT_EQ(m.find_function("pair")->num_results, 2u);
  EXPECT_EQ(m.find_function("count_call")->result_kind, ResultKind::kNone);
  EXPECT_EQ(m.find_function("identity")->result_kind, ResultKind::kTensor);
  EXPECT_EQ(m.find_function("identity")->arg_names, std::vector<std::string>{"arg0"});
  const Tensor a = filled({1}), b = filled({2});
  const void* args[] = {&a, &b};
  CallResults results;
  m.find_function("pair")->invoke(args, &results);
  ASSERT_EQ(results.tensors.size(), 2u);
  EXPECT_TRUE(results.tensors[0].is_same(b));
  g_calls = 0;
  m.find_function("count_call")->invoke(nullptr, &results);
  EXPECT_EQ(g_calls, 1);
}

void expect_value_error(const std::function<void()>& f, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "expected an error containing: " << text;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kValue);
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(ExtensionModule, RejectsBadNames) {
  ExtensionModule m("names");
  m.def("pair", &pair, {"a", "b"});
  expect_value_error([&] { m.def("pair", &pair, {"a", "b"}); }, "defines 'pair' twice");
  expect_value_error([&] { m.def("other", &pair, {"a"}); },
                     "def('other') got 1 argument names for a function of 2 parameters");
  expect_value_error([&] { m.def("1st", &pair, {"a", "b"}); },
                     "expected a Python name (letters, digits and _) for a function, got '1st'");
  expect_value_error([&] { m.def("dup", &pair, {"a", "a"}); }, "names two parameters 'a'");
  expect_value_error([&] { m.def("bad arg", &pair, {"a", "b c"}); }, "got 'bad arg'");
  expect_value_error(
      [&] {
        m.def("import", &pair, {"a", "b"});
      },
      "expected a Python name that is not a keyword for a function, got 'import'");
  expect_value_error(
      [&] {
        m.def("pair2", &pair, {"x", "lambda"});
      },
      "not a keyword for a parameter of pair2, got 'lambda'");
}

TEST(ExtensionModule, DefOpNamesInSnakeCase) {
  ExtensionModule m("ops");
  auto infer = [](const InferContext& ctx) { return MetaList{ctx.input(0)}; };
  m.def_op(OpDef("FusedAdd").input("x").infer(infer));
  m.def_op(OpDef("LinearGELU").input("x").infer(infer));
  m.def_op(OpDef("FFT2d").input("x").infer(infer), "fft_2d");
  ASSERT_EQ(m.ops().size(), 3u);
  EXPECT_EQ(m.ops()[0].first, "fused_add");
  EXPECT_EQ(m.ops()[1].first, "linear_gelu");
  EXPECT_EQ(m.ops()[2].first, "fft_2d");
  expect_value_error([&] { m.def_op(OpDef("NoInfer").input("x")); }, "needs an infer function");
}

// A custom op's schema is checked as it is written: a name used twice (an input and an attribute
// are both keyword arguments of one call), or a default of another kind than its attribute, was
// accepted and failed at every call instead.
TEST(OpDefSchema, RefusesNamesUsedTwiceAndDefaultsOfAnotherKind) {
  using testing::expect_error;
  expect_error([] { OpDef("DupInput").input("x").input("x"); }, ErrorKind::kValue,
               "DupInput: input 'x' has the name of an input");
  expect_error([] { OpDef("AttrLikeInput").input("x").attr("x", AttrKind::kInt, int64_t{1}); },
               ErrorKind::kValue, "AttrLikeInput: attribute 'x' has the name of an input");
  expect_error([] { OpDef("InputLikeAttr").attr("k", AttrKind::kInt, int64_t{1}).input("k"); },
               ErrorKind::kValue, "InputLikeAttr: input 'k' has the name of an attribute");
  expect_error(
      [] { OpDef("BadDefault").input("x").attr("k", AttrKind::kInt, std::string("oops")); },
      ErrorKind::kValue, "BadDefault: attribute 'k' is int, but its default is 'oops'");
  // The graph IR's own node kinds are no op names.
  auto infer = [](const InferContext& ctx) { return MetaList{ctx.input(0)}; };
  for (const char* reserved : {"Return", "TupleGetItem"}) {
    expect_error([&] { OpRegistration(OpDef(reserved).input("x").infer(infer)); },
                 ErrorKind::kValue, "the name is the graph IR's own");
  }
  // What may be: a None default of any kind, an int for a float, no default (required).
  EXPECT_NO_THROW(OpDef("Fine")
                      .input("x")
                      .attr("a", AttrKind::kString, std::monostate{})
                      .attr("b", AttrKind::kFloat, int64_t{2})
                      .attr("c", AttrKind::kInts));
}

// None is a value only of an attribute whose default is None: given for a required attribute (or
// one with a value as default) it used to pass the schema and fail in the kernel, at the read.
TEST(OpDefSchema, NoneIsRefusedForAttributesThatAreNotOptional) {
  using testing::expect_error;
  const OpDef op = OpDef("NoneCheck")
                       .input("x")
                       .attr("scale", AttrKind::kFloat)
                       .attr("bias", AttrKind::kFloat, 0.0)
                       .attr("label", AttrKind::kString, std::monostate{});
  expect_error(
      [&] {
        op.normalize_attrs({{"scale", std::monostate{}}});
      },
      ErrorKind::kType, "NoneCheck: attribute 'scale' expects float (it is required), got None");
  expect_error(
      [&] {
        op.normalize_attrs({{"scale", 1.0}, {"bias", std::monostate{}}});
      },
      ErrorKind::kType, "NoneCheck: attribute 'bias' expects float, got None");
  const Attrs fine = op.normalize_attrs({{"scale", 2.0}, {"label", std::monostate{}}});
  EXPECT_TRUE(fine.is_none("label"));
  EXPECT_EQ(fine.get<double>("bias"), 0.0);
  // A kernel reading an attribute of the wrong kind says what it got once.
  const Error e = testing::error_of([&] { fine.get<double>("label"); });
  EXPECT_EQ(e.kind(), ErrorKind::kType);
  const std::string message = e.what();
  EXPECT_NE(message.find("attribute 'label': expected float, got None"), std::string::npos);
  EXPECT_EQ(message.find("None None"), std::string::npos) << message;
}

TEST(ExtensionModule, LoadRunsEveryBlockOfEverySource_InLinkOrder) {
  auto m = load_extension(plugin("good_extension"), "fixture");
  std::vector<std::string> names;
  for (const ExtensionFunction& f : m->functions()) names.push_back(f.name);
  EXPECT_EQ(names, (std::vector<std::string>{"identity", "answer", "nothing"}));
  EXPECT_EQ(m->find_function("identity")->doc, "returns x");
  CallResults results;
  m->find_function("answer")->invoke(nullptr, &results);
  EXPECT_EQ(results.tensor.data<int64_t>()[0], 42);
}

TEST(ExtensionModule, NewBuildReplacesTheOps_AndAConflictKeepsTheOldOnes) {
  const Tensor x = filled({1, 2});
  auto first = load_extension(plugin("good_extension"), "fixture");
  EXPECT_FLOAT_EQ(call_op("FixtureScale", {x})[0].data<float>()[1], 4.0f);
  auto second = load_extension(plugin("replacement_extension"), "fixture");
  EXPECT_FLOAT_EQ(call_op("FixtureScale", {x})[0].data<float>()[1], 40.0f);
  // Another extension may not take the name; the registered build stays.
  try {
    load_extension(plugin("good_extension"), "another_extension");
    ADD_FAILURE() << "expected a conflict";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("op 'FixtureScale' is already registered"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("while activating extension 'another_extension'"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FLOAT_EQ(call_op("FixtureScale", {x})[0].data<float>()[1], 40.0f);
  // The first build's own function still runs its own code (its library stays loaded).
  EXPECT_FLOAT_EQ(call_op(*first->ops()[0].second, {x})[0].data<float>()[1], 4.0f);
}

TEST(ExtensionModule, ReportsABlocksError_WithItsKindAndThePath) {
  try {
    load_extension(plugin("throwing_extension"), "fixture_throwing");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kValue);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("libthrowing_extension.so failed to initialise"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("this block refuses to load"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace kiln
