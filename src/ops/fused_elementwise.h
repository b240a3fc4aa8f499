// FusedElementwise: one op that runs a whole chain or tree of float elementwise ops, optionally
// ending in a softmax over the last dimension, as a tile interpreter (private to libkiln; the
// kiln_cpu backend's fusion pass makes these nodes, and any backend can run them; KILN_API for
// the tests).
//
//   // exp(x * 2 + b) with x: float32[64, 256] and b: float32[256]:
//   FusedElementwise(x, 2.0, b) {program = "Mul(i0,i1);Add(r0,i2);Exp(r1)", dtype = float32}
//
// The program is a list of instructions separated by ';'. Each names a simd::UnaryOp or
// simd::BinaryOp by its op's name ("Exp", "Gelu" (erf form), "GeluTanh", "Add", "Pow", ...) and
// takes operands `i<k>` (input k of the node) or `r<j>` (the result of instruction j < this one).
// The last instruction's result is the op's output. A row epilogue over the last dimension may end
// the program: "Softmax(r<j>)", "LogSoftmax(r<j>)", or a reduction "Sum(r<j>)" / "Mean(r<j>)"
// (the output drops the last dimension) or "SumKeepdim" / "MeanKeepdim" (it keeps it as 1). Every
// input has the op's dtype (any floating-point type; float16 and bfloat16 compute in float32 and
// round once, at the output) or is a weak scalar (a Python number), and the output has the
// broadcast shape of all inputs.
//
// Why an interpreter over tiles (see docs/architecture.md, "kiln_cpu"): every instruction runs the
// same Highway kernel that the eager op runs, on a tile of a few KiB that stays in L1, so a chain
// of n ops reads its inputs and writes its output once instead of n times, and its results are
// bitwise those of the ops run one by one (16-bit programs: rounded once instead of per op). An
// input may be full (the output's shape), a scalar, a row (broadcast along the leading dimensions)
// or a column (one value per row); plan_layout says whether the inputs' shapes fit that scheme.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/op.h"
#include "kiln/small_vector.h"
#include "ops/simd/float_kernels.h"

namespace kiln::fused {

inline constexpr const char* kOpName = "FusedElementwise";

enum class InstrKind : uint8_t { kUnary, kBinary, kSoftmax, kLogSoftmax, kRowSum, kRowMean };

/// An operand: input `index` of the node, or the result of instruction `index`.
struct Operand {
  bool is_input = true;
  uint32_t index = 0;
};

struct Instr {
  InstrKind kind = InstrKind::kUnary;
  int op = 0;  // a simd::UnaryOp or simd::BinaryOp
  Operand a;
  Operand b;  // kBinary only
  bool keepdim = false;  // kRowSum / kRowMean
};

struct Program {
  std::vector<Instr> instrs;
  uint32_t num_inputs = 0;  // 1 + the largest input index used
  /// The tile register each instruction writes (kOutput: straight into the output); filled by
  /// parse_program.
  std::vector<int> dest;
  int num_registers = 0;
  static constexpr int kOutput = -1;
};

/// Parses and checks program text (see the top of this file); throws kValue naming the
/// instruction that is wrong (unknown op, bad operand, a result used before it exists, a softmax
/// that is not last, an empty program).
KILN_API Program parse_program(const std::string& text);
/// The text parse_program reads.
KILN_API std::string program_text(const Program& program);

/// The shape of the op's output for inputs broadcasting to `shape` (a row reduction drops or
/// keeps-as-1 the last dimension).
Shape output_shape(const Program& program, Shape shape);

/// The instruction name of a graph op the interpreter runs (`attrs` normalized), or nullopt:
/// "Gelu" with approximate "tanh" is "GeluTanh".
std::optional<std::string> instruction_name(const std::string& op, const Attrs& attrs);
/// The kernel of a unary instruction ("Exp", "GeluTanh", ...); nullopt for another name.
std::optional<simd::UnaryOp> unary_instruction(const std::string& name);

/// How the output is walked: `outer` rows of `inner` contiguous elements; per input, how it maps
/// onto that.
enum class InputKind : uint8_t { kFull, kScalar, kRow, kColumn };
struct Layout {
  int64_t outer = 1;
  int64_t inner = 1;
  std::vector<InputKind> inputs;
};
/// The layout for inputs of `input_shapes` broadcast to `out`, or nullopt when some input
/// broadcasts in another way (e.g. [4, 1, 8] against [4, 5, 8]).
KILN_API std::optional<Layout> plan_layout(const Shape& out,
                                          const std::vector<Shape>& input_shapes);

/// A binary instruction that runs inside a later unary instruction as one of its scalar steps.
struct FoldStep {
  uint32_t instr = 0;         // the binary instruction
  int op = 0;                 // its simd::BinaryOp
  uint32_t scalar_input = 0;  // its scalar operand, input i<scalar_input>
  bool scalar_first = false;  // the scalar is its left operand
};
/// How the interpreter runs one instruction (Note [scalar steps] in fused_elementwise.cc).
struct FoldPlan {
  bool folded = false;          // runs as a step of a later unary instruction
  Operand source;               // a unary instruction: what its steps and op read
  // A unary instruction: the steps, first to last (inline: a plan is made at every run).
  SmallVector<FoldStep, simd::ScalarSteps<float>::kMax> steps;
};
/// Per instruction of `program`, for inputs laid out as `layout`: which binary instructions with
/// a scalar input run as steps inside the unary instruction right after them.
KILN_API std::vector<FoldPlan> plan_folds(const Program& program, const Layout& layout);

/// Runs `program` on `inputs` into `out` (contiguous, of the broadcast shape and the program's
/// dtype). Inputs may be strided; weak scalars of any dtype are converted.
void run(const Program& program, const std::vector<Tensor>& inputs, const Tensor& out);

}  // namespace kiln::fused
