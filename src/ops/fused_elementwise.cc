// FusedElementwise: program text, layouts, the tile interpreter and the op (see
// fused_elementwise.h).
#include "ops/fused_elementwise.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>

#include "kiln/parallel.h"
#include "ops/elementwise.h"

namespace kiln::fused {
namespace {

using U = simd::UnaryOp;
using B = simd::BinaryOp;

struct UnaryName {
  const char* name;
  U op;
};
// The graph ops whose float kernels are these simd kernels (src/ops/elementwise_unary.cc).
constexpr UnaryName kUnary[] = {
    {"Neg", U::kNeg},
    {"Abs", U::kAbs},
    {"Sign", U::kSign},
    {"Exp", U::kExp},
    {"Expm1", U::kExpm1},
    {"Log", U::kLog},
    {"Log1p", U::kLog1p},
    {"Log2", U::kLog2},
    {"Sqrt", U::kSqrt},
    {"Rsqrt", U::kRsqrt},
    {"Reciprocal", U::kReciprocal},
    {"Square", U::kSquare},
    {"Sin", U::kSin},
    {"Cos", U::kCos},
    {"Tan", U::kTan},
    {"Tanh", U::kTanh},
    {"Sigmoid", U::kSigmoid},
    {"Relu", U::kRelu},
    {"Gelu", U::kGeluErf},
    {"GeluTanh", U::kGeluTanh},
    {"Silu", U::kSilu},
    {"Erf", U::kErf},
    {"Floor", U::kFloor},
    {"Ceil", U::kCeil},
    {"Round", U::kRound},
    {"Trunc", U::kTrunc},
    {"Erfinv", U::kErfinv},
};

struct BinaryName {
  const char* name;
  B op;
};
// src/ops/elementwise_binary.cc
constexpr BinaryName kBinary[] = {
    {"Add", B::kAdd},
    {"Sub", B::kSub},
    {"Mul", B::kMul},
    {"Div", B::kDiv},
    {"Maximum", B::kMaximum},
    {"Minimum", B::kMinimum},
    {"Pow", B::kPow},
    {"FloorDivide", B::kFloorDivide},
    {"Remainder", B::kRemainder},
    {"TruncDivide", B::kTruncDivide},
    {"SigmoidBackward", B::kSigmoidBackward},
    {"TanhBackward", B::kTanhBackward},
    {"ReluBackward", B::kReluBackward},
    {"SiluBackward", B::kSiluBackward},
};

std::optional<U> find_unary(const std::string& name) {
  for (const UnaryName& u : kUnary) {
    if (name == u.name) return u.op;
  }
  return std::nullopt;
}

std::optional<B> find_binary(const std::string& name) {
  for (const BinaryName& b : kBinary) {
    if (name == b.name) return b.op;
  }
  return std::nullopt;
}

const char* unary_name(int op) {
  for (const UnaryName& u : kUnary) {
    if (static_cast<int>(u.op) == op) return u.name;
  }
  KILN_FAIL(kGeneric) << "no unary instruction " << op;
}

const char* binary_name(int op) {
  for (const BinaryName& b : kBinary) {
    if (static_cast<int>(b.op) == op) return b.name;
  }
  KILN_FAIL(kGeneric) << "no binary instruction " << op;
}

struct EpilogueName {
  const char* name;
  InstrKind kind;
  bool keepdim;
};
// The row epilogues (over the last dimension); one of them may end a program.
constexpr EpilogueName kEpilogues[] = {
    {"Softmax", InstrKind::kSoftmax, false}, {"LogSoftmax", InstrKind::kLogSoftmax, false},
    {"Sum", InstrKind::kRowSum, false},      {"SumKeepdim", InstrKind::kRowSum, true},
    {"Mean", InstrKind::kRowMean, false},    {"MeanKeepdim", InstrKind::kRowMean, true},
};

const EpilogueName* find_epilogue(const std::string& name) {
  for (const EpilogueName& e : kEpilogues) {
    if (name == e.name) return &e;
  }
  return nullptr;
}

const char* epilogue_name(const Instr& in) {
  for (const EpilogueName& e : kEpilogues) {
    if (e.kind == in.kind && e.keepdim == in.keepdim) return e.name;
  }
  KILN_FAIL(kGeneric) << "no row epilogue " << static_cast<int>(in.kind);
}

bool is_epilogue(InstrKind kind) { return kind != InstrKind::kUnary && kind != InstrKind::kBinary; }

bool is_reduction(InstrKind kind) { return kind == InstrKind::kRowSum || kind == InstrKind::kRowMean; }

Operand parse_operand(const std::string& text, size_t instr, const std::string& where) {
  KILN_CHECK_VALUE(text.size() >= 2 && (text[0] == 'i' || text[0] == 'r') &&
                   text.find_first_not_of("0123456789", 1) == std::string::npos &&
                   text.size() <= 10)
      << where << ": operand '" << text << "' is not i<k> (an input) or r<j> (a result)";
  Operand o;
  o.is_input = text[0] == 'i';
  o.index = static_cast<uint32_t>(std::stoul(text.substr(1)));
  KILN_CHECK_VALUE(o.is_input || o.index < instr)
      << where << ": operand '" << text << "' reads a result that does not exist yet";
  return o;
}

// Gives each instruction a tile register, reusing those of results read for the last time (the
// kernels allow an output to alias an input exactly).
void assign_registers(Program& p) {
  const size_t n = p.instrs.size();
  std::vector<size_t> last_use(n, 0);
  const auto use = [&](const Operand& o, size_t at) {
    if (!o.is_input) last_use[o.index] = at;
  };
  for (size_t j = 0; j < n; ++j) {
    use(p.instrs[j].a, j);
    if (p.instrs[j].kind == InstrKind::kBinary) use(p.instrs[j].b, j);
  }
  p.dest.assign(n, Program::kOutput);
  std::vector<int> free;
  const auto release = [&](const Operand& o, size_t at) {
    if (!o.is_input && last_use[o.index] == at) free.push_back(p.dest[o.index]);
  };
  for (size_t j = 0; j < n; ++j) {
    const Instr& in = p.instrs[j];
    release(in.a, j);
    const bool same_operands = in.b.is_input == in.a.is_input && in.b.index == in.a.index;
    if (in.kind == InstrKind::kBinary && !same_operands) release(in.b, j);
    if (j + 1 == n) break;  // the last one writes the output
    if (free.empty()) {
      p.dest[j] = p.num_registers++;
    } else {
      p.dest[j] = free.back();
      free.pop_back();
    }
  }
}

}  // namespace

Program parse_program(const std::string& text) {
  Program p;
  std::vector<std::string> parts;
  {
    std::string part;
    std::istringstream in(text);
    while (std::getline(in, part, ';')) parts.push_back(part);
  }
  KILN_CHECK_VALUE(!parts.empty()) << "FusedElementwise: the program is empty";
  for (size_t j = 0; j < parts.size(); ++j) {
    const std::string& s = parts[j];
    const std::string where = "FusedElementwise: instruction " + std::to_string(j) + " '" + s + "'";
    const size_t open = s.find('(');
    KILN_CHECK_VALUE(open != std::string::npos && s.back() == ')')
        << where << " is not Name(operands)";
    const std::string name = s.substr(0, open);
    std::vector<std::string> args;
    {
      std::string arg;
      std::istringstream in(s.substr(open + 1, s.size() - open - 2));
      while (std::getline(in, arg, ',')) args.push_back(arg);
    }
    Instr instr;
    if (const EpilogueName* e = find_epilogue(name)) {
      KILN_CHECK_VALUE(j + 1 == parts.size() && j > 0)
          << where << ": a row epilogue (softmax, sum, mean) must be the last instruction, after "
             "another";
      instr.kind = e->kind;
      instr.keepdim = e->keepdim;
      KILN_CHECK_VALUE(args.size() == 1) << where << " takes one operand";
    } else if (const std::optional<U> u = find_unary(name)) {
      instr.kind = InstrKind::kUnary;
      instr.op = static_cast<int>(*u);
      KILN_CHECK_VALUE(args.size() == 1) << where << " takes one operand";
    } else if (const std::optional<B> b = find_binary(name)) {
      instr.kind = InstrKind::kBinary;
      instr.op = static_cast<int>(*b);
      KILN_CHECK_VALUE(args.size() == 2) << where << " takes two operands";
    } else {
      KILN_FAIL(kValue) << where << ": unknown instruction '" << name << "'";
    }
    instr.a = parse_operand(args[0], j, where);
    if (instr.kind == InstrKind::kBinary) instr.b = parse_operand(args[1], j, where);
    for (const Operand& o : {instr.a, instr.b}) {
      if (o.is_input) p.num_inputs = std::max(p.num_inputs, o.index + 1);
    }
    p.instrs.push_back(instr);
  }
  assign_registers(p);
  return p;
}

std::string program_text(const Program& program) {
  std::string text;
  const auto operand = [](const Operand& o) {
    return (o.is_input ? "i" : "r") + std::to_string(o.index);
  };
  for (const Instr& in : program.instrs) {
    if (!text.empty()) text += ';';
    switch (in.kind) {
      case InstrKind::kUnary:
        text += std::string(unary_name(in.op)) + "(" + operand(in.a) + ")";
        break;
      case InstrKind::kBinary:
        text += std::string(binary_name(in.op)) + "(" + operand(in.a) + "," + operand(in.b) + ")";
        break;
      default:
        text += std::string(epilogue_name(in)) + "(" + operand(in.a) + ")";
        break;
    }
  }
  return text;
}

Shape output_shape(const Program& program, Shape shape) {
  const Instr& last = program.instrs.back();
  if (!is_reduction(last.kind) || shape.empty()) return shape;
  if (last.keepdim) {
    shape.back() = 1;
  } else {
    shape.pop_back();
  }
  return shape;
}

std::optional<std::string> instruction_name(const std::string& op, const Attrs& attrs) {
  if (op == "Gelu") return attrs.get<std::string>("approximate") == "tanh" ? "GeluTanh" : "Gelu";
  if (find_unary(op) || find_binary(op)) return op;
  return std::nullopt;
}

std::optional<simd::UnaryOp> unary_instruction(const std::string& name) {
  return find_unary(name);
}

std::optional<Layout> plan_layout(const Shape& out, const std::vector<Shape>& input_shapes) {
  const size_t n = out.size();
  std::vector<Shape> padded;
  for (const Shape& s : input_shapes) {
    if (s.size() > n) return std::nullopt;
    Shape p(n - s.size(), 1);
    for (int64_t d : s) p.push_back(d);
    padded.push_back(std::move(p));
  }
  // Split the dimensions into outer [0, k) and inner [k, n); the smallest k that classifies every
  // input gives the longest contiguous runs.
  for (size_t k = 0; k <= n; ++k) {
    Layout layout;
    bool fits = true;
    for (const Shape& s : padded) {
      bool outer_same = true, outer_one = true, inner_same = true, inner_one = true;
      for (size_t d = 0; d < n; ++d) {
        const bool same = s[d] == out[d];
        const bool one = s[d] == 1;
        (d < k ? outer_same : inner_same) &= same;
        (d < k ? outer_one : inner_one) &= one;
      }
      if (shape_numel(s) == 1) {
        layout.inputs.push_back(InputKind::kScalar);
      } else if (outer_same && inner_same) {
        layout.inputs.push_back(InputKind::kFull);
      } else if (outer_one && inner_same) {
        layout.inputs.push_back(InputKind::kRow);
      } else if (outer_same && inner_one) {
        layout.inputs.push_back(InputKind::kColumn);
      } else {
        fits = false;
        break;
      }
    }
    if (!fits) continue;
    for (size_t d = 0; d < n; ++d) (d < k ? layout.outer : layout.inner) *= out[d];
    return layout;
  }
  return std::nullopt;
}

// Note [scalar steps]
// A unary instruction whose operand is made by binary instructions right before it, each with one
// scalar input and each result read only by the next, takes those as simd::ScalarSteps and runs
// them in its own pass; the binary instructions are skipped. gelu(x * 2 + 1) then reads each
// tile of x once and computes the whole expression vector by vector, so the loads of the next
// vectors overlap gelu's arithmetic instead of stalling a pass of their own (bench/RESULTS.md,
// "kiln_cpu graph backend — machine C"). The values do not change: each step rounds as its
// binary kernel does. The folded run must end right before the unary instruction, so that nothing
// runs between the first folded instruction, where assign_registers may free the register of the
// run's operand, and the unary one that reads it. (Its free list is a stack, so today the run's
// own results take that register back at once; the rule keeps folding independent of that.)
std::vector<FoldPlan> plan_folds(const Program& program, const Layout& layout) {
  const std::vector<Instr>& instrs = program.instrs;
  SmallVector<int, 16> reads(instrs.size(), 0);
  for (const Instr& in : instrs) {
    if (!in.a.is_input) ++reads[in.a.index];
    if (in.kind == InstrKind::kBinary && !in.b.is_input) ++reads[in.b.index];
  }
  const auto is_scalar = [&](const Operand& o) {
    return o.is_input && layout.inputs[o.index] == InputKind::kScalar;
  };
  const auto is_tile = [&](const Operand& o) {  // has a run of values per tile
    return !o.is_input || layout.inputs[o.index] == InputKind::kFull ||
           layout.inputs[o.index] == InputKind::kRow;
  };
  // At most as many instructions as ScalarSteps holds steps (one instruction takes one step, or
  // none when it merges with the one before).
  constexpr size_t kMaxRun = simd::ScalarSteps<float>::kMax;
  std::vector<FoldPlan> plan(instrs.size());
  for (size_t j = 0; j < instrs.size(); ++j) {
    if (instrs[j].kind != InstrKind::kUnary) continue;
    FoldPlan& fold = plan[j];
    fold.source = instrs[j].a;
    for (size_t k = j; k-- > 0 && fold.steps.size() < kMaxRun;) {
      const Instr& b = instrs[k];
      const Operand& o = fold.source;
      if (o.is_input || o.index != k || reads[k] != 1 || b.kind != InstrKind::kBinary ||
          !simd::ScalarSteps<float>::takes(static_cast<B>(b.op)) ||
          is_scalar(b.a) == is_scalar(b.b)) {
        break;
      }
      const bool scalar_first = is_scalar(b.a);
      const Operand& other = scalar_first ? b.b : b.a;
      if (!is_tile(other)) break;
      fold.steps.push_back(
          {static_cast<uint32_t>(k), b.op, (scalar_first ? b.a : b.b).index, scalar_first});
      fold.source = other;
    }
    std::reverse(fold.steps.begin(), fold.steps.end());  // collected last first
    for (const FoldStep& step : fold.steps) plan[step.instr].folded = true;
  }
  return plan;
}

namespace {

// Elements per tile: 8 KiB, so that a program's few registers and its inputs' tiles stay in L1.
constexpr size_t kTileBytes = 8192;
// Elements each parallel chunk covers at least.
constexpr int64_t kParallelGrainElements = 32768;

// Where an operand's values for the current tile are: a run of `pointer`s or one `value`.
template <typename T>
struct Source {
  const T* pointer = nullptr;
  T value = T(0);
};

// The value in T of each scalar input (0 for the others), converted from the input itself: a
// Python number (or kiln_cpu's float32 constant of one) in a 16-bit program keeps its float32
// value, as in the eager ops (Note [Scalars of 16-bit ops] in ops/elementwise.h).
template <typename T>
std::vector<T> scalar_values(const Layout& layout, const std::vector<Tensor>& inputs) {
  std::vector<T> values(inputs.size(), T(0));
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (layout.inputs[k] == InputKind::kScalar) {
      values[k] = *contiguous_as(inputs[k], dtype_of<T>()).template data<T>();
    }
  }
  return values;
}

// Each instruction's scalar steps in T, from plan_folds' plan and the scalar inputs' values.
template <typename T>
std::vector<simd::ScalarSteps<T>> scalar_steps(const std::vector<FoldPlan>& plan,
                                               const std::vector<T>& scalars) {
  std::vector<simd::ScalarSteps<T>> steps(plan.size());
  for (size_t j = 0; j < plan.size(); ++j) {
    for (const FoldStep& step : plan[j].steps) {
      const bool pushed =
          steps[j].push(static_cast<B>(step.op), scalars[step.scalar_input], step.scalar_first);
      KILN_CHECK(pushed) << "FusedElementwise: instruction " << j
                         << " folds more scalar steps than simd::ScalarSteps holds";
    }
  }
  return steps;
}

// Note [16-bit programs]
// A float16 / bfloat16 program computes in float32 as the eager ops do, but rounds once, at the
// output: each tile's 16-bit full and row inputs are widened into scratch tiles first, the
// instructions run on float tiles, and the last one's tile is rounded into the output (a row
// reduction rounds each float64 sum; a bfloat16 sum whose float blocks overflow is added again in
// float64, as eager's is). The eager ops round after every op, so a 16-bit program gives the
// float32 result rounded once, not eager's bits: the same or more accurate, and apart from eager's
// by what eager's roundings add (much, relatively, where a later op cancels), as a fused 16-bit
// kernel of PyTorch's inductor does. Ops whose result jumps at a boundary (floor, sign, remainder,
// ...) would land a whole unit away from eager's on an unrounded operand, so kiln_cpu keeps them
// out of 16-bit groups (ElementwiseFusion's `jumps`). That keeps a jump inside a group from
// widening the difference; it cannot make a group's once-rounded result equal eager's: where the
// two lie on either side of a boundary, an op after the group still jumps (floor(h * 10 - 1) of
// float16 0.1: eager rounds h * 10 to 1 and gives 0, the group's -0.000244 gives -1), and so do
// ops with a domain edge inside the group (sqrt or log of that value: 0 or -inf against NaN; a
// negative base to an exponent eager rounds to a whole number). float32 and float64 programs keep
// eager's bits.

// Runs the program on tiles of T (float32 or float64) over inputs and an output stored as S: T
// itself, or a 16-bit float for T = float (Note [16-bit programs]).
template <typename T, typename S>
struct Interpreter {
  static constexpr bool kStaged = !std::is_same_v<S, T>;
  const Program& program;
  const Layout& layout;
  std::vector<const S*> inputs;  // data of the converted, contiguous inputs
  std::vector<T> scalars;        // the scalar inputs' values (scalar_values)
  std::vector<FoldPlan> folds;   // per instruction (Note [scalar steps])
  std::vector<simd::ScalarSteps<T>> steps;  // per instruction: a unary one's folded steps
  S* out;
  int64_t tile;           // elements per tile
  int64_t tiles_per_row;  // tiles per run of `inner`
  simd::Store store;
  int64_t row_length;     // the last dimension, when the program ends in a row epilogue
  // 16-bit data: the scratch tile each full or row input is widened into (-1 for the others), and
  // how many there are.
  std::vector<int64_t> staged_slot;
  int64_t num_staged;

  // A row epilogue over the n / row_length rows of `a`: a softmax writes y (the output tile), a
  // reduction one value per row at sums. Sums accumulate as the eager ReduceSum does: float64,
  // over simd::reduce_sum for rows of 32 or more.
  void row_epilogue(InstrKind kind, const Source<T>& a, int64_t n, T* y, S* sums) const {
    const T* x = a.pointer;
    if (x == nullptr && !is_reduction(kind)) {  // a softmax of a broadcast value
      std::fill(y, y + n, a.value);
      x = y;
    }
    for (int64_t r = 0; r < n; r += row_length) {
      switch (kind) {
        case InstrKind::kSoftmax:
          simd::softmax_row(x + r, y + r, row_length, output_store());
          break;
        case InstrKind::kLogSoftmax:
          simd::log_softmax_row(x + r, y + r, row_length, output_store());
          break;
        default: {
          double total = 0;
          if (x == nullptr) {
            total = static_cast<double>(a.value) * static_cast<double>(row_length);
          } else {
            if (row_length >= 32) total = static_cast<double>(simd::reduce_sum(x + r, row_length));
            // Short rows add in float64 one by one; so does a bfloat16 row whose float blocks
            // overflowed (bfloat16 has float's range) where float64 need not.
            if (row_length < 32 || (std::is_same_v<S, BFloat16> && !std::isfinite(total))) {
              total = 0;
              for (int64_t i = 0; i < row_length; ++i) total += static_cast<double>(x[r + i]);
            }
          }
          const double divisor = kind == InstrKind::kRowMean ? static_cast<double>(row_length) : 1;
          sums[r / row_length] = convert<S>(total / divisor);
          break;
        }
      }
    }
  }

  // How the last instruction writes its tile: past the caches when that is the output and it is
  // large; a 16-bit program's is a scratch tile, read back at once to be rounded into the output.
  simd::Store output_store() const { return kStaged ? simd::Store::kCached : store; }

  // The run of full or row input k for the tile at (row, column).
  const S* run_of(size_t k, int64_t row, int64_t column) const {
    return inputs[k] + (layout.inputs[k] == InputKind::kFull ? row * layout.inner : 0) + column;
  }

  // Input k's values for the tile at (row, column): its own run, or for 16-bit inputs the run
  // widened into `staged` (stage_inputs), or one value.
  Source<T> input(uint32_t k, int64_t row, int64_t column, const T* staged) const {
    const S* base = inputs[k];
    switch (layout.inputs[k]) {
      case InputKind::kFull:
      case InputKind::kRow:
        if constexpr (kStaged) {
          return {staged + staged_slot[k] * tile, T(0)};
        } else {
          return {run_of(k, row, column), T(0)};
        }
      case InputKind::kColumn:
        return {nullptr, convert<T>(base[row])};
      case InputKind::kScalar:
        return {nullptr, scalars[k]};
    }
    return {};
  }

  // Widens the tile's runs of the 16-bit full and row inputs into `staged` (one tile each).
  void stage_inputs(int64_t row, int64_t column, int64_t n, T* staged) const {
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (staged_slot[k] >= 0)
        convert_contiguous(run_of(k, row, column), staged + staged_slot[k] * tile, n);
    }
  }

  // Asks for tile t's full inputs while this tile computes: a tile's instructions read memory
  // only at its start, so without this the memory bus idles while they run (the hardware
  // prefetcher does not run a whole tile ahead).
  void prefetch_inputs(int64_t t) const {
    constexpr int64_t kLine = 64 / sizeof(S);
    const int64_t row = t / tiles_per_row;
    const int64_t column = (t % tiles_per_row) * tile;
    const int64_t n = std::min(tile, layout.inner - column);
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (layout.inputs[k] != InputKind::kFull) continue;
      const S* p = run_of(k, row, column);
      for (int64_t i = 0; i < n; i += kLine) __builtin_prefetch(p + i, 0, 3);
    }
  }

  // Tiles of T each run_tiles call needs: the program's registers, and for 16-bit data one per
  // full or row input and one for the output.
  size_t scratch_elements() const {
    const size_t staged = kStaged ? static_cast<size_t>(num_staged) + 1 : 0;
    return (static_cast<size_t>(program.num_registers) + staged) * static_cast<size_t>(tile);
  }

  void run_tiles(int64_t begin, int64_t end, T* registers) const {
    const std::vector<Instr>& instrs = program.instrs;
    T* const staged = registers + static_cast<int64_t>(program.num_registers) * tile;
    for (int64_t t = begin; t < end; ++t) {
      const int64_t row = t / tiles_per_row;
      const int64_t column = (t % tiles_per_row) * tile;
      const int64_t n = std::min(tile, layout.inner - column);
      S* const out_run = out + row * layout.inner + column;
      // The last instruction's tile: the output's run itself, or one widened results go to
      // before they are rounded into it.
      T* out_tile = nullptr;
      if constexpr (kStaged) {
        out_tile = staged + num_staged * tile;
      } else {
        out_tile = out_run;
      }
      if (t + 1 < end) prefetch_inputs(t + 1);
      if constexpr (kStaged) stage_inputs(row, column, n, staged);
      const auto source = [&](const Operand& o) -> Source<T> {
        if (o.is_input) return input(o.index, row, column, staged);
        return {registers + program.dest[o.index] * tile, T(0)};
      };
      for (size_t j = 0; j < instrs.size(); ++j) {
        const Instr& in = instrs[j];
        const FoldPlan& fold = folds[j];
        if (fold.folded) continue;
        // (A row reduction writes one value per row instead; see row_epilogue.)
        T* y = program.dest[j] == Program::kOutput ? out_tile : registers + program.dest[j] * tile;
        const Source<T> a = source(in.kind == InstrKind::kUnary ? fold.source : in.a);
        switch (in.kind) {
          case InstrKind::kUnary: {
            const T* x = a.pointer;
            if (x == nullptr) {  // a unary op of a broadcast value: fill the tile first
              std::fill(y, y + n, a.value);
              x = y;
            }
            simd::unary(static_cast<U>(in.op), steps[j], x, y, n,
                        y == out_tile ? output_store() : simd::Store::kCached);
            break;
          }
          case InstrKind::kBinary: {
            const Source<T> b = source(in.b);
            const B op = static_cast<B>(in.op);
            if (a.pointer != nullptr && b.pointer != nullptr) {
              simd::binary(op, a.pointer, b.pointer, y, n);
            } else if (a.pointer != nullptr) {
              simd::binary_scalar_rhs(op, a.pointer, b.value, y, n);
            } else if (b.pointer != nullptr) {
              simd::binary_scalar_lhs(op, a.value, b.pointer, y, n);
            } else {
              std::fill(y, y + n, a.value);
              simd::binary_scalar_rhs(op, y, b.value, y, n);
            }
            break;
          }
          default:
            // A tile is whole rows here (run_typed makes it a multiple of the last dimension).
            row_epilogue(in.kind, a, n, y, out + (row * layout.inner + column) / row_length);
            break;
        }
      }
      if constexpr (kStaged) {
        if (!is_reduction(instrs.back().kind)) convert_contiguous(out_tile, out_run, n);
      }
    }
  }
};

bool ends_in_row_epilogue(const Program& p) { return is_epilogue(p.instrs.back().kind); }

// `last_dim`: the last dimension of the inputs' broadcast shape (a row epilogue's row). T is the
// compute type, S the inputs' and output's element type (T itself, or a 16-bit float for float).
template <typename T, typename S>
void run_typed(const Program& program, const Layout& layout, const std::vector<Tensor>& inputs,
               const Tensor& out, int64_t last_dim) {
  const int64_t numel = layout.outer * layout.inner;
  if (numel == 0) {
    // Rows of no elements: their sums are 0 and their means 0 / 0, as eager's.
    const InstrKind last = program.instrs.back().kind;
    if (is_reduction(last)) {
      S* y = static_cast<S*>(out.data_ptr());
      std::fill(y, y + out.numel(), convert<S>(last == InstrKind::kRowSum ? T(0) : T(NAN)));
    }
    return;
  }
  int64_t tile = std::min(static_cast<int64_t>(kTileBytes / sizeof(T)), layout.inner);
  const int64_t row_length = ends_in_row_epilogue(program) ? last_dim : 0;
  if (row_length > 0) {
    // Whole rows per tile (inner is a multiple of the row), as many as fit, at least one: short
    // rows share the instructions' per-call cost.
    tile = std::max<int64_t>(1, tile / row_length) * row_length;
  }
  const int64_t tiles_per_row = (layout.inner + tile - 1) / tile;
  // The inputs in S, contiguous, and their data pointers once per call (Tensor::data_ptr checks
  // the tensor's state, too slow per tile); scalar inputs are read once, as T, instead.
  std::vector<T> scalars = scalar_values<T>(layout, inputs);
  std::vector<Tensor> ready(inputs.size());
  std::vector<const S*> data(inputs.size(), nullptr);
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (layout.inputs[k] == InputKind::kScalar) continue;
    ready[k] = contiguous_as(inputs[k], out.dtype());
    data[k] = static_cast<const S*>(ready[k].data_ptr());
  }
  std::vector<FoldPlan> folds = plan_folds(program, layout);
  std::vector<simd::ScalarSteps<T>> steps = scalar_steps<T>(folds, scalars);
  std::vector<int64_t> staged_slot;
  int64_t num_staged = 0;
  for (const InputKind kind : layout.inputs) {
    const bool runs = kind == InputKind::kFull || kind == InputKind::kRow;
    staged_slot.push_back(runs ? num_staged++ : -1);
  }
  const Interpreter<T, S> interpreter{program,
                                      layout,
                                      std::move(data),
                                      std::move(scalars),
                                      std::move(folds),
                                      std::move(steps),
                                      static_cast<S*>(out.data_ptr()),
                                      tile,
                                      tiles_per_row,
                                      simd::store_for_output(static_cast<int64_t>(out.nbytes())),
                                      row_length,
                                      std::move(staged_slot),
                                      num_staged};
  const size_t register_elements = interpreter.scratch_elements();
  const int64_t grain = std::max<int64_t>(1, kParallelGrainElements / tile);
  parallel_for(0, layout.outer * tiles_per_row, grain, [&](int64_t begin, int64_t end) {
    // Each thread keeps its register file from call to call: no allocation once warm.
    thread_local std::vector<T> registers;
    if (registers.size() < register_elements) registers.resize(register_elements);
    interpreter.run_tiles(begin, end, registers.data());
  });
}

}  // namespace

void run(const Program& program, const std::vector<Tensor>& inputs, const Tensor& out) {
  std::vector<Shape> shapes;
  Shape shape;  // the elementwise part's (the output's, unless a reduction ends the program)
  for (const Tensor& in : inputs) {
    shapes.push_back(in.shape());
    shape = broadcast_shapes(shape, in.shape());
  }
  const std::optional<Layout> layout = plan_layout(shape, shapes);
  KILN_CHECK_SHAPE(layout.has_value())
      << "FusedElementwise: inputs broadcast in a way the fused kernel does not run";
  const int64_t last_dim = shape.empty() ? 1 : shape.back();
  switch (out.dtype()) {
    case DType::kFloat64:
      return run_typed<double, double>(program, *layout, inputs, out, last_dim);
    case DType::kFloat16:
      return run_typed<float, Half>(program, *layout, inputs, out, last_dim);
    case DType::kBFloat16:
      return run_typed<float, BFloat16>(program, *layout, inputs, out, last_dim);
    case DType::kFloat32:
      return run_typed<float, float>(program, *layout, inputs, out, last_dim);
    default:
      KILN_ASSERT(false) << "FusedElementwise: no kernel for " << out.dtype();
  }
}

namespace {

MetaList infer(const InferContext& ctx) {
  const Program program = parse_program(ctx.attrs.get<std::string>("program"));
  const DType dtype = ctx.attrs.get<DType>("dtype");
  KILN_CHECK_DTYPE(is_floating_point(dtype))
      << "FusedElementwise: dtype must be a floating-point type, got " << dtype_name(dtype);
  KILN_CHECK_VALUE(ctx.num_inputs() == program.num_inputs)
      << "FusedElementwise: the program reads " << program.num_inputs << " inputs, got "
      << ctx.num_inputs();
  Shape shape;
  std::vector<Shape> shapes;
  for (size_t k = 0; k < ctx.num_inputs(); ++k) {
    const TensorMeta& in = ctx.input(k);
    KILN_CHECK_DTYPE(in.dtype == dtype || in.weak)
        << "FusedElementwise: input " << k << " must be " << dtype_name(dtype)
        << " or a Python number, got " << dtype_name(in.dtype);
    shape = broadcast_shapes(shape, in.shape);
    shapes.push_back(in.shape);
  }
  KILN_CHECK_SHAPE(plan_layout(shape, shapes).has_value())
      << "FusedElementwise: inputs broadcast to " << shape_str(shape)
      << " in a way the fused kernel does not run (each must be full, a scalar, a row or a "
         "column)";
  KILN_CHECK_SHAPE(!ends_in_row_epilogue(program) || !shape.empty())
      << "FusedElementwise: a row epilogue (softmax, sum, mean) needs at least one dimension";
  return {{dtype, output_shape(program, std::move(shape))}};
}

}  // namespace

KILN_REGISTER_OP(OpDef(kOpName)
                     .variadic_input("inputs")
                     .attr("program", AttrKind::kString)
                     .attr("dtype", AttrKind::kDType)
                     .doc("a chain of float elementwise ops (and a last-dim softmax) run as one "
                          "tile interpreter; made by kiln_cpu's ElementwiseFusion pass")
                     .infer(infer)
                     .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
                       run(parse_program(ctx.attrs.get<std::string>("program")), ctx.inputs,
                           ctx.outputs[0]);
                     }));

}  // namespace kiln::fused
