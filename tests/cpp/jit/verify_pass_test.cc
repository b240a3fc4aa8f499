// verify_pass: right rewrites pass, wrong ones are caught with the failing input shown; constants
// found through conditions and ExampleConstants; passes that rewrite nothing; the errors.
#include "kiln/verify_pass.h"

#include <gtest/gtest.h>

#include "kiln/jit.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::expect_error;

PrimitivePtr prim(const std::string& name) { return std::make_shared<Primitive>(name); }

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Add(x, Neg(y)) -> Sub(x, y), or the wrong Add(x, y).
class AddNeg : public PatternToPatternPass {
 public:
  AddNeg(std::string name, std::string dst_op)
      : PatternToPatternPass(std::move(name)), dst_op_(std::move(dst_op)) {}
  void DefineSrcPattern(SrcPattern* src) override {
    src->AddVar("x")
        .AddVar("y")
        .AddCNode("neg", {prim("Neg"), "y"})
        .AddCNode("add", {prim("Add"), "x", "neg"});
  }
  void DefineDstPattern(DstPattern* dst) override {
    dst->AddCNode("out", {prim(dst_op_), "x", "y"});
  }

 private:
  std::string dst_op_;
};

// Mul(x, c) -> x for a constant c equal to `value` (right for 1, wrong for 0).
class MulByConstant : public PatternToPatternPass {
 public:
  explicit MulByConstant(double value)
      : PatternToPatternPass("MulBy" + std::to_string(static_cast<int>(value))), value_(value) {}
  void DefineSrcPattern(SrcPattern* src) override {
    src->AddVar("x")
        .AddVar("c", pattern::IsConstantEqual(value_))
        .AddCNode("mul", {prim("Mul"), "x", "c"});
  }
  void DefineDstPattern(DstPattern* dst) override { dst->SetRoot("x"); }

 private:
  double value_;
};

// Mul(x, 3) -> Add(Add(x, x), x): 3 is no constant verify_pass tries unless told.
class TimesThree : public PatternToPatternPass {
 public:
  explicit TimesThree(bool examples) : PatternToPatternPass("TimesThree"), examples_(examples) {}
  void DefineSrcPattern(SrcPattern* src) override {
    src->AddVar("x")
        .AddVar("three", pattern::IsConstantEqual(3.0))
        .AddCNode("mul", {prim("Mul"), "x", "three"});
  }
  void DefineDstPattern(DstPattern* dst) override {
    dst->AddCNode("twice", {prim("Add"), "x", "x"}).AddCNode("thrice", {prim("Add"), "twice", "x"});
  }
  std::vector<Tensor> ExampleConstants(const std::string& var) const override {
    if (!examples_ || var != "three") return {};
    return {Tensor::scalar(Scalar(3.0))};
  }

 private:
  bool examples_;
};

TEST(VerifyPass, ARightRewritePasses) {
  AddNeg pass("AddNegToSub", "Sub");
  const PassVerifyReport report = verify_pass(pass);
  EXPECT_TRUE(report.ok()) << report.str();
  EXPECT_EQ(report.pass, "AddNegToSub");
  EXPECT_EQ(report.trials, 100u);
  EXPECT_EQ(report.rewrites, 100u);  // every instance the ops accept is rewritten
  EXPECT_EQ(report.failures, 0u);
  EXPECT_FALSE(report.first_failure.has_value());
  EXPECT_TRUE(contains(report.str(),
                       "verify_pass('AddNegToSub'): 100 trials, 100 rewritten, "
                       "0 failed: ok"))
      << report.str();
}

TEST(VerifyPass, AWrongRewriteIsCaughtWithTheFailingInput) {
  AddNeg pass("AddNegToAdd", "Add");
  const PassVerifyReport report = verify_pass(pass, 20, 7);
  EXPECT_FALSE(report.ok());
  EXPECT_EQ(report.trials, 20u);
  EXPECT_GT(report.failures, 15u) << report.str();  // all but instances of y == 0
  ASSERT_TRUE(report.first_failure.has_value());
  const PassVerifyFailure& f = *report.first_failure;
  EXPECT_EQ(f.input_names, (std::vector<std::string>{"x", "y"}));
  ASSERT_EQ(f.inputs.size(), 2u);
  ASSERT_EQ(f.expected.size(), 1u);
  ASSERT_EQ(f.got.size(), 1u);
  EXPECT_TRUE(contains(f.reason, "before the rewrite")) << f.reason;
  EXPECT_TRUE(contains(f.before, "Neg(")) << f.before;
  EXPECT_FALSE(contains(f.after, "Neg(")) << f.after;
  const std::string text = report.str();
  EXPECT_TRUE(contains(text, "FAILED")) << text;
  EXPECT_TRUE(contains(text, "inputs:\n  x = ")) << text;
  EXPECT_TRUE(contains(text, "results before the rewrite:")) << text;
  EXPECT_TRUE(contains(text, "graph after the rewrite:")) << text;

  // The same seed gives the same instances and inputs.
  const PassVerifyReport again = verify_pass(pass, 20, 7);
  EXPECT_EQ(again.str(), text);
  EXPECT_NE(verify_pass(pass, 20, 8).str(), text);
}

TEST(VerifyPass, ConstantsComeFromTheConditions) {
  MulByConstant one(1.0);
  const PassVerifyReport right = verify_pass(one, 30);
  EXPECT_TRUE(right.ok()) << right.str();
  MulByConstant zero(0.0);
  const PassVerifyReport wrong = verify_pass(zero, 30);
  EXPECT_FALSE(wrong.ok());
  ASSERT_TRUE(wrong.first_failure.has_value()) << wrong.str();
  EXPECT_TRUE(contains(wrong.first_failure->before, "Mul(")) << wrong.first_failure->before;
}

TEST(VerifyPass, ExampleConstantsGiveOtherConstants) {
  TimesThree with_examples(true);
  const PassVerifyReport report = verify_pass(with_examples, 30);
  EXPECT_TRUE(report.ok()) << report.str();
  TimesThree without(false);
  expect_error([&] { verify_pass(without, 3); }, ErrorKind::kValue,
               "no instance of the source pattern of pass 'TimesThree' could be built");
  expect_error([&] { verify_pass(without, 3); }, ErrorKind::kValue, "override ExampleConstants");
}

TEST(VerifyPass, ShapeDependentRewritesAreCaught) {
  // sum(x, dims=[0], keepdim) -> mean(x, dims=[0], keepdim) * 3 holds only when x.shape[0] == 3.
  const Attrs keep{{"dims", std::vector<int64_t>{0}}, {"keepdim", true}};
  auto src = std::make_shared<FuncGraph>("src");
  src->set_output(
      src->add_cnode("ReduceSum", {src->add_parameter(DType::kFloat32, {3}, "x")}, keep));
  auto dst = std::make_shared<FuncGraph>("dst");
  dst->set_output(dst->add_cnode(
      "Mul", {dst->add_cnode("ReduceMean", {dst->add_parameter(DType::kFloat32, {3}, "x")}, keep),
              dst->add_value(Scalar(3.0))}));
  auto pass = make_graph_pattern_pass("SumIsThreeMeans", src, dst);
  const PassVerifyReport report = verify_pass(*pass, 40);
  EXPECT_FALSE(report.ok()) << report.str();
  EXPECT_GT(report.rewrites, 0u);
}

TEST(VerifyPass, APassThatRewritesNothingIsNotChecked) {
  class Declining : public AddNeg {
   public:
    Declining() : AddNeg("Declining", "Sub") {}
    bool CheckMatchedDAG(const PatternMap&, const FuncGraphPtr&, const NodePtr&) const override {
      return false;
    }
  };
  Declining pass;
  const PassVerifyReport report = verify_pass(pass, 3);
  EXPECT_EQ(report.trials, 3u);
  EXPECT_EQ(report.rewrites, 0u);
  EXPECT_FALSE(report.ok());
  EXPECT_TRUE(contains(report.str(), "NOT CHECKED")) << report.str();
  EXPECT_TRUE(contains(report.str(), "CheckMatchedDAG returned false")) << report.str();
}

TEST(VerifyPass, AFailingRewriteIsAFailure) {
  class Throwing : public AddNeg {
   public:
    Throwing() : AddNeg("Throwing", "Sub") {}
    void DefineDstPattern(DstPattern* dst) override {
      dst->AddCNode("out", {prim("Sub"), "x", "y"},
                    [](const PatternMap&, const NodePtr&) -> NodePtr {
                      KILN_FAIL(kValue) << "the callback gave up";
                    });
    }
  };
  Throwing pass;
  const PassVerifyReport report = verify_pass(pass, 2);
  EXPECT_EQ(report.failures, 2u);
  ASSERT_TRUE(report.first_failure.has_value());
  EXPECT_TRUE(contains(report.first_failure->reason, "the rewrite failed")) << report.str();
  EXPECT_TRUE(contains(report.first_failure->reason, "the callback gave up")) << report.str();
  // Nothing was rewritten, but nothing went unchecked either: the trials failed.
  EXPECT_TRUE(contains(report.str(), "2 trials, 0 rewritten, 2 failed: FAILED")) << report.str();
}

TEST(VerifyPass, ByNameFindsRegisteredPatternPassesOnly) {
  register_pass(std::make_shared<AddNeg>("RegisteredAddNeg", "Sub"), "reference");
  EXPECT_TRUE(verify_pass("RegisteredAddNeg", 5).ok());
  unregister_custom_pass("RegisteredAddNeg");
  expect_error([] { verify_pass("RegisteredAddNeg"); }, ErrorKind::kValue,
               "no pass named 'RegisteredAddNeg' is registered");
  class Whole : public Pass {
   public:
    Whole() : Pass("WholeGraphPass") {}
    bool Run(const FuncGraphPtr&) override { return false; }
  };
  register_pass(std::make_shared<Whole>(), "reference");
  expect_error([] { verify_pass("WholeGraphPass"); }, ErrorKind::kValue,
               "pass 'WholeGraphPass' is not a PatternToPatternPass");
  unregister_custom_pass("WholeGraphPass");
}

}  // namespace
}  // namespace kiln
