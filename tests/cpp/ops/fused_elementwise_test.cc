// FusedElementwise (src/ops/fused_elementwise.h): program text (round trip, every parse error),
// plan_layout's classification of inputs, and the op against the same ops called one by one
// eagerly, bit for bit, on random float32 and float64 inputs of sizes across the tile, with full,
// row, column and scalar inputs, weak scalars and softmax epilogues; the op's infer errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kiln/functional.h"
#include "kiln/op.h"
#include "ops/fused_elementwise.h"
#include "testing.h"

namespace kiln {
namespace {

using fused::InputKind;
using fused::parse_program;
using fused::plan_layout;
using fused::program_text;
using testing::expect_close;
using testing::expect_error;

Attrs fused_attrs(const std::string& program, DType dtype) {
  return Attrs{{"program", program}, {"dtype", dtype}};
}

std::vector<std::string> split_instructions(const std::string& text) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = std::min(text.find(';', begin), text.size());
    parts.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return parts;
}

// ---- program text ----

TEST(FusedElementwiseProgram, TextRoundTrips) {
  const std::vector<std::string> programs = {
      "Exp(i0)",
      "Mul(i0,i1);Add(r0,i2);Exp(r1)",
      "Gelu(i0);GeluTanh(r0);Maximum(r1,i0);Pow(r2,i1);Softmax(r3)",
      "Neg(i2);Abs(r0);Sub(r1,r0);Div(i0,r2);LogSoftmax(r3)",
      "Mul(i0,i0);Add(r0,r0)",
  };
  for (const std::string& text : programs) {
    const fused::Program p = parse_program(text);
    EXPECT_EQ(program_text(p), text);
    EXPECT_EQ(p.instrs.size(), split_instructions(text).size()) << text;
    EXPECT_EQ(p.dest.size(), p.instrs.size()) << text;
    EXPECT_EQ(p.dest.back(), fused::Program::kOutput) << text;
  }
  EXPECT_EQ(parse_program("Mul(i0,i1);Add(r0,i2);Exp(r1)").num_inputs, 3u);
  EXPECT_EQ(parse_program("Exp(i3)").num_inputs, 4u);
}

TEST(FusedElementwiseProgram, EveryInstructionRoundTrips) {
  const char* unary[] = {"Neg",  "Abs",   "Sign",    "Exp",        "Expm1",  "Log",      "Log1p",
                         "Log2", "Sqrt",  "Rsqrt",   "Reciprocal", "Square", "Sin",      "Cos",
                         "Tan",  "Tanh",  "Sigmoid", "Relu",       "Gelu",   "GeluTanh", "Silu",
                         "Erf",  "Floor", "Ceil",    "Round",      "Trunc",  "Erfinv"};
  const char* binary[] = {"Add",          "Sub",          "Mul",          "Div",
                          "Maximum",      "Minimum",      "Pow",          "SigmoidBackward",
                          "TanhBackward", "ReluBackward", "SiluBackward", "FloorDivide",
                          "Remainder",    "TruncDivide"};
  std::string text = "Exp(i0)";
  int j = 1;
  for (const char* u : unary) text += ";" + std::string(u) + "(r" + std::to_string(j++ - 1) + ")";
  for (const char* b : binary) {
    text += ";" + std::string(b) + "(r" + std::to_string(j - 1) + ",i1)";
    ++j;
  }
  EXPECT_EQ(program_text(parse_program(text)), text);
}

TEST(FusedElementwiseProgram, RegistersAreReusedWithoutClobberingLiveResults) {
  // r0 is read by the last instruction, so r1 and r2 must not take its register.
  const fused::Program p = parse_program("Exp(i0);Neg(r0);Abs(r1);Add(r2,r0)");
  ASSERT_EQ(p.dest.size(), 4u);
  EXPECT_NE(p.dest[1], p.dest[0]);
  EXPECT_NE(p.dest[2], p.dest[0]);
  EXPECT_LE(p.num_registers, 2);
}

void expect_parse_error(const std::string& text, const std::string& instruction,
                        const std::string& needle) {
  SCOPED_TRACE(text);
  expect_error([&] { parse_program(text); }, ErrorKind::kValue, instruction);
  expect_error([&] { parse_program(text); }, ErrorKind::kValue, needle);
}

TEST(FusedElementwiseProgram, ParseErrorsNameTheInstruction) {
  expect_error([] { parse_program(""); }, ErrorKind::kValue, "the program is empty");
  expect_parse_error("Exp(i0);Frobnicate(r0)", "instruction 1 'Frobnicate(r0)'",
                     "unknown instruction 'Frobnicate'");
  expect_parse_error("Exp(x0)", "instruction 0 'Exp(x0)'", "operand 'x0' is not i<k>");
  expect_parse_error("Exp(i)", "instruction 0", "operand 'i' is not");
  expect_parse_error("Exp(i0);Add(r0,r-1)", "instruction 1", "operand 'r-1' is not");
  expect_parse_error("Exp(i0);Add(r0, i1)", "instruction 1", "operand ' i1' is not");
  expect_parse_error("Exp(r0)", "instruction 0 'Exp(r0)'", "does not exist yet");
  expect_parse_error("Exp(i0);Add(r0,r1)", "instruction 1 'Add(r0,r1)'",
                     "operand 'r1' reads a result that does not exist yet");
  expect_parse_error("Exp(i0);Exp(r5)", "instruction 1", "operand 'r5' reads a result");
  expect_parse_error("Exp(i0);Softmax(r0);Exp(r1)", "instruction 1 'Softmax(r0)'",
                     "a row epilogue (softmax, sum, mean) must be the last instruction");
  expect_parse_error("Softmax(i0)", "instruction 0", "a row epilogue (softmax, sum, mean) must be the last instruction");
  expect_parse_error("Exp(i0);LogSoftmax(r0,i1)", "instruction 1", "takes one operand");
  expect_parse_error("Add(i0)", "instruction 0 'Add(i0)'", "takes two operands");
  expect_parse_error("Add(i0,i1,i2)", "instruction 0", "takes two operands");
  expect_parse_error("Exp(i0,i1)", "instruction 0", "takes one operand");
  expect_parse_error("Exp()", "instruction 0", "takes one operand");
  expect_parse_error("Exp", "instruction 0 'Exp'", "is not Name(operands)");
  expect_parse_error("Exp(i0);;Exp(r0)", "instruction 1 ''", "is not Name(operands)");
}

// ---- plan_layout ----

TEST(FusedElementwiseLayout, ClassifiesInputs) {
  {
    const auto l = plan_layout({4, 8}, {{4, 8}, {4, 8}});
    ASSERT_TRUE(l);
    EXPECT_EQ(l->inputs, (std::vector<InputKind>{InputKind::kFull, InputKind::kFull}));
    EXPECT_EQ(l->outer * l->inner, 32);
    EXPECT_EQ(l->inner, 32);  // all full: one contiguous run
  }
  {
    const auto l = plan_layout({4, 8}, {{4, 8}, {}, {1, 1}});
    ASSERT_TRUE(l);
    EXPECT_EQ(l->inputs, (std::vector<InputKind>{InputKind::kFull, InputKind::kScalar,
                                                 InputKind::kScalar}));
    EXPECT_EQ(l->inner, 32);
  }
  for (const Shape& row : {Shape{8}, Shape{1, 8}}) {
    const auto l = plan_layout({4, 8}, {{4, 8}, row});
    ASSERT_TRUE(l);
    EXPECT_EQ(l->inputs, (std::vector<InputKind>{InputKind::kFull, InputKind::kRow}));
    EXPECT_EQ(l->outer, 4);
    EXPECT_EQ(l->inner, 8);
  }
  {
    const auto l = plan_layout({4, 8}, {{4, 8}, {4, 1}});
    ASSERT_TRUE(l);
    EXPECT_EQ(l->inputs, (std::vector<InputKind>{InputKind::kFull, InputKind::kColumn}));
    EXPECT_EQ(l->outer, 4);
    EXPECT_EQ(l->inner, 8);
  }
  {
    const auto l = plan_layout({4, 8}, {{4, 8}, {8}, {4, 1}, {}});
    ASSERT_TRUE(l);
    EXPECT_EQ(l->inputs, (std::vector<InputKind>{InputKind::kFull, InputKind::kRow,
                                                 InputKind::kColumn, InputKind::kScalar}));
    EXPECT_EQ(l->outer, 4);
    EXPECT_EQ(l->inner, 8);
  }
  {
    // A row over several leading dimensions, and a column of the leading ones.
    const auto l = plan_layout({2, 3, 4}, {{2, 3, 4}, {3, 4}});
    ASSERT_TRUE(l);
    EXPECT_EQ(l->inputs, (std::vector<InputKind>{InputKind::kFull, InputKind::kRow}));
    EXPECT_EQ(l->outer, 2);
    EXPECT_EQ(l->inner, 12);
    const auto c = plan_layout({2, 3, 4}, {{2, 3, 4}, {2, 3, 1}});
    ASSERT_TRUE(c);
    EXPECT_EQ(c->inputs, (std::vector<InputKind>{InputKind::kFull, InputKind::kColumn}));
    EXPECT_EQ(c->outer, 6);
    EXPECT_EQ(c->inner, 4);
  }
  {
    const auto l = plan_layout({0, 8}, {{0, 8}, {8}});
    ASSERT_TRUE(l);
    EXPECT_EQ(l->outer * l->inner, 0);
  }
}

TEST(FusedElementwiseLayout, RejectsOtherBroadcasts) {
  EXPECT_FALSE(plan_layout({4, 5, 8}, {{4, 5, 8}, {4, 1, 8}}));
  // [B, 1, N] and [M, 1] broadcast to [B, M, N]: neither is full, a row or a column of it.
  EXPECT_FALSE(plan_layout({2, 3, 4}, {{2, 1, 4}, {3, 1}}));
  EXPECT_FALSE(plan_layout({2, 3, 4}, {{1, 3, 1}}));
  // A row and a column that need different splits of the dimensions.
  EXPECT_FALSE(plan_layout({2, 3, 4}, {{3, 4}, {2, 3, 1}}));
  EXPECT_FALSE(plan_layout({4}, {{2, 4}}));  // more dimensions than the output
}

// ---- plan_folds (Note [scalar steps]) ----

fused::Layout layout_of(std::vector<InputKind> inputs) {
  fused::Layout l;
  l.inputs = std::move(inputs);
  return l;
}

// The instructions plan_folds folds, and each unary instruction's steps as "instr:scalar_input"
// (with a "^" when the scalar is the left operand) and its source.
std::string folds_text(const std::string& program, std::vector<InputKind> inputs) {
  const fused::Program p = parse_program(program);
  const std::vector<fused::FoldPlan> plan = fused::plan_folds(p, layout_of(std::move(inputs)));
  std::string text;
  for (size_t j = 0; j < plan.size(); ++j) {
    if (plan[j].folded) text += "folded " + std::to_string(j) + "; ";
    if (plan[j].steps.empty()) continue;
    text += std::to_string(j) + " <-";
    for (const fused::FoldStep& s : plan[j].steps) {
      text += " " + std::to_string(s.instr) + ":" + (s.scalar_first ? "^" : "") +
              std::to_string(s.scalar_input);
    }
    text += std::string(" from ") + (plan[j].source.is_input ? "i" : "r") +
            std::to_string(plan[j].source.index) + "; ";
  }
  return text;
}

TEST(FusedElementwiseFolds, ScalarStepsRightBeforeAUnaryInstructionJoinIt) {
  using K = InputKind;
  EXPECT_EQ(folds_text("Mul(i0,i1);Add(r0,i2);Gelu(r1)", {K::kFull, K::kScalar, K::kScalar}),
            "folded 0; folded 1; 2 <- 0:1 1:2 from i0; ");
  // Scalar on the left, a row as the source, a register as the source.
  EXPECT_EQ(folds_text("Sub(i1,i0);Exp(r0)", {K::kRow, K::kScalar}),
            "folded 0; 1 <- 0:^1 from i0; ");
  EXPECT_EQ(folds_text("Exp(i0);Mul(r0,i1);Tanh(r1)", {K::kFull, K::kScalar}),
            "folded 1; 2 <- 1:1 from r0; ");
  // At most four: the fifth instruction back runs as a pass of its own.
  EXPECT_EQ(folds_text("Add(i0,i1);Mul(r0,i1);Sub(r1,i1);Div(r2,i1);Maximum(r3,i1);Exp(r4)",
                       {K::kFull, K::kScalar}),
            "folded 1; folded 2; folded 3; folded 4; 5 <- 1:1 2:1 3:1 4:1 from r0; ");
}

TEST(FusedElementwiseFolds, NothingFolds_WhenAStepIsNotRightBeforeOrReadTwiceOrNotByAScalar) {
  using K = InputKind;
  const std::vector<K> full_scalar = {K::kFull, K::kScalar};
  EXPECT_EQ(folds_text("Mul(i0,i1);Exp(i0);Tanh(r0);Add(r1,r2)", full_scalar), "");
  EXPECT_EQ(folds_text("Mul(i0,i1);Exp(r0);Add(r0,r1)", full_scalar), "");  // r0 read twice
  EXPECT_EQ(folds_text("Pow(i0,i1);Exp(r0)", full_scalar), "");
  EXPECT_EQ(folds_text("SigmoidBackward(i0,i1);Exp(r0)", full_scalar), "");  // not a step
  EXPECT_EQ(folds_text("TanhBackward(i1,i0);Exp(r0)", full_scalar), "");
  EXPECT_EQ(folds_text("Mul(i0,i1);Exp(r0)", {K::kFull, K::kFull}), "");        // no scalar
  EXPECT_EQ(folds_text("Mul(i0,i1);Exp(r0)", {K::kFull, K::kColumn}), "");      // one value per row
  EXPECT_EQ(folds_text("Mul(i0,i1);Exp(r0)", {K::kScalar, K::kScalar}), "");    // no tile to read
  EXPECT_EQ(folds_text("Mul(i0,i1);Add(r0,i1);Softmax(r1)", full_scalar), "");  // not unary
}

// ---- the op against eager ops ----

// Runs the program instruction by instruction with the eager ops the instructions name.
Tensor run_eagerly(const std::string& text, const std::vector<Tensor>& inputs) {
  const fused::Program p = parse_program(text);
  const std::vector<std::string> parts = split_instructions(text);
  std::vector<Tensor> results;
  for (size_t j = 0; j < p.instrs.size(); ++j) {
    const fused::Instr& in = p.instrs[j];
    const auto operand = [&](const fused::Operand& o) {
      return o.is_input ? inputs[o.index] : results[o.index];
    };
    const std::string name = parts[j].substr(0, parts[j].find('('));
    Tensor r;
    switch (in.kind) {
      case fused::InstrKind::kSoftmax: r = softmax(operand(in.a), -1); break;
      case fused::InstrKind::kLogSoftmax: r = log_softmax(operand(in.a), -1); break;
      case fused::InstrKind::kUnary:
        r = name == "GeluTanh" ? gelu(operand(in.a), "tanh") : call_op(name, {operand(in.a)})[0];
        break;
      case fused::InstrKind::kBinary: r = call_op(name, {operand(in.a), operand(in.b)})[0]; break;
      case fused::InstrKind::kRowSum: r = sum(operand(in.a), {-1}, in.keepdim); break;
      case fused::InstrKind::kRowMean: r = mean(operand(in.a), {-1}, in.keepdim); break;
    }
    results.push_back(r);
  }
  return results.back();
}

enum class Arg { kFull, kPositive, kRow, kColumn, kScalar0d, kWeak };

struct Case {
  std::string program;
  std::vector<Arg> args;
};

Tensor random_tensor(std::mt19937& rng, const Shape& shape, DType dtype, double lo, double hi) {
  Tensor t = Tensor::empty(shape, dtype);
  std::uniform_real_distribution<double> real(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dtype == DType::kFloat32) {
      t.data<float>()[i] = static_cast<float>(real(rng));
    } else {
      t.data<double>()[i] = real(rng);
    }
  }
  return t;
}

Tensor make_arg(std::mt19937& rng, Arg arg, const Shape& out, DType dtype) {
  switch (arg) {
    case Arg::kFull: return random_tensor(rng, out, dtype, -3, 3);
    case Arg::kPositive: return random_tensor(rng, out, dtype, 0.5, 3);
    case Arg::kRow: return random_tensor(rng, {out.back()}, dtype, -3, 3);
    case Arg::kColumn: {
      Shape s = out;
      s.back() = 1;
      return random_tensor(rng, s, dtype, -3, 3);
    }
    case Arg::kScalar0d: return random_tensor(rng, {}, dtype, -3, 3);
    case Arg::kWeak: return Tensor::scalar(std::uniform_real_distribution<double>(0.1, 2)(rng));
  }
  return {};
}

void expect_bitwise_equal(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.dtype(), want.dtype());
  ASSERT_EQ(got.shape(), want.shape());
  const Tensor g = got.contiguous();
  const Tensor w = want.contiguous();
  if (g.nbytes() == 0) return;
  if (std::memcmp(g.data_ptr(), w.data_ptr(), g.nbytes()) == 0) return;
  for (int64_t i = 0; i < g.numel(); ++i) {
    const bool same = got.dtype() == DType::kFloat32
                          ? std::memcmp(g.data<float>() + i, w.data<float>() + i, 4) == 0
                          : std::memcmp(g.data<double>() + i, w.data<double>() + i, 8) == 0;
    if (!same) {
      ADD_FAILURE() << "first difference at element " << i << ": "
                    << (got.dtype() == DType::kFloat32 ? g.data<float>()[i] : g.data<double>()[i])
                    << " vs "
                    << (got.dtype() == DType::kFloat32 ? w.data<float>()[i] : w.data<double>()[i]);
      return;
    }
  }
}


const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"Mul(i0,i1);Add(r0,i2);Exp(r1)", {Arg::kFull, Arg::kWeak, Arg::kRow}},
      {"Gelu(i0);Mul(r0,i1);Sub(r1,i2);Tanh(r2)", {Arg::kFull, Arg::kColumn, Arg::kScalar0d}},
      {"Exp(i0);Neg(i0);Maximum(r0,r1);Div(r2,i1);Mul(r3,r0);GeluTanh(r4);Silu(r5)",
       {Arg::kFull, Arg::kPositive}},
      {"Mul(i0,i0);Add(r0,r0);Sigmoid(r1)", {Arg::kFull}},
      // A training graph's activation gradients: g and a row-broadcast y, a scalar g.
      {"Sigmoid(i1);SigmoidBackward(i0,r0);TanhBackward(r1,i2)",
       {Arg::kFull, Arg::kRow, Arg::kColumn}},
      {"Tanh(i1);TanhBackward(i0,r0)", {Arg::kWeak, Arg::kFull}},
      {"ReluBackward(i0,i1);Mul(r0,i2)", {Arg::kFull, Arg::kRow, Arg::kWeak}},
      {"Abs(i0);Pow(r0,i1);Sqrt(r1);Minimum(i2,r2)", {Arg::kFull, Arg::kWeak, Arg::kRow}},
      {"Sub(i1,i0);Log(i2);Add(r0,r1)", {Arg::kFull, Arg::kWeak, Arg::kPositive}},
      {"Mul(i0,i1);Add(r0,i2);Softmax(r1)", {Arg::kFull, Arg::kWeak, Arg::kRow}},
      {"Sub(i0,i1);Relu(r0);LogSoftmax(r1)", {Arg::kFull, Arg::kColumn}},
      {"Mul(i0,i1);Exp(r0);Sum(r1)", {Arg::kFull, Arg::kWeak}},
      {"Sub(i0,i1);Square(r0);MeanKeepdim(r1)", {Arg::kFull, Arg::kRow}},
      {"Abs(i0);SumKeepdim(r0)", {Arg::kFull}},
      {"Add(i0,i1);Mean(r0)", {Arg::kFull, Arg::kColumn}},
      // Scalar steps folded into the unary op after them (Note [scalar steps]): a multiply and
      // an add (one merged step); four of five steps, every op, scalar on either side; a row as
      // the steps' source; steps run in a pass of their own (relu, sin; float64 gelu).
      {"Mul(i0,i1);Add(r0,i2);Gelu(r1)", {Arg::kFull, Arg::kWeak, Arg::kScalar0d}},
      {"Sub(i1,i0);Div(i2,r0);Maximum(r1,i3);Minimum(i4,r2);Mul(r3,i5);Sigmoid(r4)",
       {Arg::kFull, Arg::kWeak, Arg::kWeak, Arg::kScalar0d, Arg::kWeak, Arg::kWeak}},
      {"Mul(i1,i2);Erf(r0);Add(r1,i0)", {Arg::kFull, Arg::kRow, Arg::kWeak}},
      {"Add(i0,i1);Relu(r0);Mul(i1,r1);Sin(r2)", {Arg::kFull, Arg::kWeak}},
      // Not folded: a step's result read twice; a step not right before the unary op.
      {"Mul(i0,i1);Exp(r0);Add(r0,r1)", {Arg::kFull, Arg::kWeak}},
      {"Mul(i0,i1);Exp(i0);Tanh(r0);Add(r1,r2)", {Arg::kFull, Arg::kWeak}},
  };
  return all;
}

TEST(FusedElementwiseOp, EqualsTheOpsOneByOne) {
  // 2048 float32 (1024 float64) elements make a tile: sizes below, at, across and far past it.
  const std::vector<Shape> shapes = {{1},       {5000},     {3, 1000},  {7, 2049},
                                     {2, 3, 700}, {2048},   {4, 1024},  {0, 8}};
  std::mt19937 rng(7);
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    for (const Shape& shape : shapes) {
      for (const Case& c : cases()) {
        SCOPED_TRACE(c.program + " " + shape_str(shape) + " " + dtype_name(dtype));
        std::vector<Tensor> inputs;
        for (Arg a : c.args) inputs.push_back(make_arg(rng, a, shape, dtype));
        const Tensor got =
            call_op(fused::kOpName, inputs, fused_attrs(c.program, dtype))[0];
        const Tensor want = run_eagerly(c.program, inputs);
        // Two places where eager does not run the same kernel on the same run: a one-element
        // result, whose strided loop calls the C library's function instead of the SIMD one,
        // and a row sum that its parallel loop splits between threads. Within an ulp or two
        // there; bitwise everywhere else.
        const bool reduction = c.program.find("Sum") != std::string::npos ||
                               c.program.find("Mean") != std::string::npos;
        if (reduction || shape_numel(shape) == 1) {
          expect_close(got, want, dtype == DType::kFloat32 ? 1e-6 : 1e-14);
        } else {
          expect_bitwise_equal(got, want);
        }
        if (HasFailure()) return;
      }
    }
  }
}

// Note [16-bit programs]: a float16 / bfloat16 program computes in float32 and rounds once: the
// float32 program on the widened inputs (the weak scalars with their float32 values, Note
// [Scalars of 16-bit ops]), rounded to the 16-bit type. Bitwise, but for a row reduction, whose
// float64 sum the 16-bit program rounds once where the float32 one rounds it to float first.
TEST(FusedElementwiseOp, SixteenBitProgramsAreTheFloat32ProgramRoundedOnce) {
  const std::vector<Shape> shapes = {{5000}, {7, 2049}, {2, 3, 700}};
  std::mt19937 rng(8);
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (const Shape& shape : shapes) {
      for (const Case& c : cases()) {
        SCOPED_TRACE(c.program + " " + shape_str(shape) + " " + dtype_name(dtype));
        std::vector<Tensor> narrow, wide;
        for (Arg a : c.args) {
          const Tensor t = make_arg(rng, a, shape, DType::kFloat32);
          if (a == Arg::kWeak) {
            narrow.push_back(t);
            wide.push_back(t);
          } else {
            narrow.push_back(to(t, dtype));
            wide.push_back(to(narrow.back(), DType::kFloat32));
          }
        }
        const Tensor got = call_op(fused::kOpName, narrow, fused_attrs(c.program, dtype))[0];
        const Tensor want =
            to(call_op(fused::kOpName, wide, fused_attrs(c.program, DType::kFloat32))[0], dtype);
        const bool reduction = c.program.find("Sum") != std::string::npos ||
                               c.program.find("Mean") != std::string::npos;
        if (reduction) {
          expect_close(got, want, dtype == DType::kFloat16 ? 1e-3 : 8e-3);
        } else {
          expect_bitwise_equal(got, want);
        }
        if (HasFailure()) return;
      }
    }
  }
}

TEST(FusedElementwiseOp, BFloat16RowSumsPastFloatsRangeAreEagersFloat64Sums) {
  // bfloat16 has float's range: float block sums overflow where eager's float64 sum does not.
  const Tensor x = to(full({2, 64}, 3e38, DType::kFloat32), DType::kBFloat16);
  for (const char* program : {"Relu(i0);Mean(r0)", "Relu(i0);Sum(r0)"}) {
    SCOPED_TRACE(program);
    const Tensor got = call_op(fused::kOpName, {x}, fused_attrs(program, DType::kBFloat16))[0];
    expect_bitwise_equal(got, run_eagerly(program, {x}));
  }
}

TEST(FusedElementwiseOp, StridedInputs) {
  std::mt19937 rng(3);
  const Tensor x = random_tensor(rng, {300, 17}, DType::kFloat32, -3, 3).transpose(0, 1);
  const Tensor b = random_tensor(rng, {300}, DType::kFloat32, -3, 3);
  const std::string program = "Add(i0,i1);Tanh(r0);Softmax(r1)";
  const Tensor got = call_op(fused::kOpName, {x, b}, fused_attrs(program, DType::kFloat32))[0];
  expect_bitwise_equal(got, run_eagerly(program, {x, b}));
}

TEST(FusedElementwiseOp, InferErrors) {
  const Tensor x32 = Tensor::empty({4, 8}, DType::kFloat32);
  const Tensor x64 = Tensor::empty({4, 8}, DType::kFloat64);
  expect_error([&] { call_op(fused::kOpName, {x32, x64}, fused_attrs("Add(i0,i1)", DType::kFloat32)); },
               ErrorKind::kDType, "input 1 must be float32");
  expect_error([&] { call_op(fused::kOpName, {x32}, fused_attrs("Exp(i0)", DType::kInt32)); },
               ErrorKind::kDType, "dtype must be a floating-point type, got int32");
  expect_error([&] { call_op(fused::kOpName, {x32}, fused_attrs("Add(i0,i1)", DType::kFloat32)); },
               ErrorKind::kValue, "the program reads 2 inputs, got 1");
  expect_error(
      [&] { call_op(fused::kOpName, {x32, x32, x32}, fused_attrs("Add(i0,i1)", DType::kFloat32)); },
      ErrorKind::kValue, "the program reads 2 inputs, got 3");
  expect_error(
      [&] {
        call_op(fused::kOpName,
                {Tensor::empty({4, 5, 8}, DType::kFloat32), Tensor::empty({4, 1, 8}, DType::kFloat32)},
                fused_attrs("Add(i0,i1)", DType::kFloat32));
      },
      ErrorKind::kShape, "does not run");
  expect_error(
      [&] {
        call_op(fused::kOpName, {Tensor::empty({}, DType::kFloat32)},
                fused_attrs("Exp(i0);Softmax(r0)", DType::kFloat32));
      },
      ErrorKind::kShape, "a row epilogue (softmax, sum, mean) needs at least one dimension");
  expect_error([&] { call_op(fused::kOpName, {x32}, fused_attrs("Exp(i0);Nope(r0)", DType::kFloat32)); },
               ErrorKind::kValue, "unknown instruction 'Nope'");
}

}  // namespace
}  // namespace kiln
