// Random programs: a seeded generator writes programs of a few thousand ops (elementwise with
// tensors and scalars, reductions, matmul, views, in-place and out= writes, casts, random
// tensors, reads in the middle) over a small pool of live tensors. Each program runs in every
// pipeline mode, and in one run that switches modes as it goes; every run must give the same bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/functional.h"
#include "runtime_testing.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::PipelineMode;

constexpr int kSlots = 10;
constexpr int64_t kMaxNumel = 2048;
constexpr int kProgramLength = 3000;

enum class Kind : uint8_t {
  kRandn,      // dst = randn(shape, dtype)
  kUnary,      // dst = unary[op](a)
  kBinary,     // dst = binary[op](a, b)
  kScalar,     // dst = binary[op](a, scalar), or (scalar, a) with flag
  kReduce,     // dst = reduce[op](a, {dim}, keepdim = flag)
  kMatMul,     // dst = matmul(a, b)
  kGram,       // dst = matmul(a, transpose(a, -1, -2))
  kReshape,    // dst = reshape(a, shape)
  kTranspose,  // dst = transpose(a, dim, dim2)
  kSlice,      // dst = a.slice(dim, start, end, step)
  kSelect,     // dst = a.select(dim, start)
  kExpand,     // dst = expand(unsqueeze(a, 0), shape)
  kInPlace,    // binary[op](a, b, out = a)
  kOut,        // binary[op](a, b, out = dst)
  kCast,       // dst = to(clamp(a, -1000, 1000), dtype)
  kSquash,     // dst = where(a == a, tanh(a), 0) for floats, remainder(a, 1000) for integers
  kRead,       // reads a's bytes (a sync point in the middle of the program)
  kKeep,       // keeps a handle to a until the end, for the final comparison
};

struct Instr {
  Kind kind = Kind::kUnary;
  int op = 0;
  int dst = 0;
  int a = 0;
  int b = 0;
  double scalar = 0;
  int64_t dim = 0;
  int64_t dim2 = 0;
  int64_t start = 0;
  int64_t end = 0;
  int64_t step = 1;
  bool flag = false;
  Shape shape;
  DType dtype = DType::kFloat32;
};

using UnaryFn = Tensor (*)(const Tensor&, const Tensor&);
using BinaryFn = Tensor (*)(const Tensor&, const Tensor&, const Tensor&);
const UnaryFn kUnaryOps[] = {&neg, &abs, &sin, &cos, &tanh, &sigmoid, &relu, &floor, &square, &exp};
const BinaryFn kBinaryOps[] = {&add, &sub, &mul, &maximum, &minimum};
constexpr int kNumUnary = sizeof(kUnaryOps) / sizeof(kUnaryOps[0]);
constexpr int kNumBinary = sizeof(kBinaryOps) / sizeof(kBinaryOps[0]);
constexpr int kNumReduce = 4;
const DType kDTypes[] = {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64};

Tensor reduce(int op, const Tensor& x, int64_t dim, bool keepdim) {
  switch (op) {
    case 0: return sum(x, {dim}, keepdim);
    case 1: return mean(x, {dim}, keepdim);
    case 2: return amax(x, {dim}, keepdim);
    default: return amin(x, {dim}, keepdim);
  }
}

// What a run leaves: every slot, the kept tensors and the bytes read on the way.
struct State {
  std::vector<Tensor> slots;
  std::vector<Tensor> kept;
  std::vector<std::vector<unsigned char>> reads;
};

// The same starting pool for every run of a seed, made on the caller's thread.
State initial_state(uint64_t seed) {
  static const Shape kShapes[] = {{16},   {4, 8}, {8, 4},    {2, 3, 4}, {6, 6},
                                  {3, 5}, {32},   {4, 4, 2}, {1, 8},    {8, 1}};
  manual_seed(seed);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(-2.0, 2.0);
  State st;
  for (int i = 0; i < kSlots; ++i) {
    const DType dtype =
        i % 5 == 3 ? DType::kInt32 : (i % 5 == 4 ? DType::kFloat64 : DType::kFloat32);
    Tensor t = Tensor::empty(kShapes[i], dtype);
    for (int64_t j = 0; j < t.numel(); ++j) {
      const double v = uniform(rng);
      switch (dtype) {
        case DType::kInt32: t.data<int32_t>()[j] = static_cast<int32_t>(v * 5); break;
        case DType::kFloat64: t.data<double>()[j] = v; break;
        default: t.data<float>()[j] = static_cast<float>(v); break;
      }
    }
    st.slots.push_back(t);
  }
  return st;
}

void apply(const Instr& in, State& st) {
  std::vector<Tensor>& s = st.slots;
  const Tensor a = s[in.a];
  const Tensor b = s[in.b];
  switch (in.kind) {
    case Kind::kRandn: s[in.dst] = randn(in.shape, in.dtype); break;
    case Kind::kUnary: s[in.dst] = kUnaryOps[in.op](a, Tensor()); break;
    case Kind::kBinary: s[in.dst] = kBinaryOps[in.op](a, b, Tensor()); break;
    case Kind::kScalar: {
      const Tensor scalar = Tensor::scalar(in.scalar);
      s[in.dst] =
          in.flag ? kBinaryOps[in.op](scalar, a, Tensor()) : kBinaryOps[in.op](a, scalar, Tensor());
      break;
    }
    case Kind::kReduce: s[in.dst] = reduce(in.op, a, in.dim, in.flag); break;
    case Kind::kMatMul: s[in.dst] = matmul(a, b); break;
    case Kind::kGram: s[in.dst] = matmul(a, transpose(a, -1, -2)); break;
    case Kind::kReshape: s[in.dst] = reshape(a, in.shape); break;
    case Kind::kTranspose: s[in.dst] = transpose(a, in.dim, in.dim2); break;
    case Kind::kSlice: s[in.dst] = a.slice(in.dim, in.start, in.end, in.step); break;
    case Kind::kSelect: s[in.dst] = a.select(in.dim, in.start); break;
    case Kind::kExpand: s[in.dst] = expand(unsqueeze(a, 0), in.shape); break;
    case Kind::kInPlace: kBinaryOps[in.op](a, b, a); break;
    case Kind::kOut: kBinaryOps[in.op](a, b, s[in.dst]); break;
    case Kind::kCast: s[in.dst] = to(clamp(a, Scalar(-1000), Scalar(1000)), in.dtype); break;
    case Kind::kSquash:
      s[in.dst] = is_floating_point(a.dtype()) ? where(eq(a, a), tanh(a), Tensor::scalar(0.0))
                                               : remainder(a, Tensor::scalar(int64_t{1000}));
      break;
    case Kind::kRead: st.reads.push_back(testing::bytes_of(a)); break;
    case Kind::kKeep: st.kept.push_back(a); break;
  }
}

// Writes programs by running them in "sync" mode, reading shapes and values as it goes: an
// instruction that raises (a shape that does not fit) is dropped, and a result whose values grow
// large is squashed, so that no kernel ever overflows an integer (UBSan) and every float stays
// finite. Tracks which slots share memory, so that in-place and out= writes never partly overlap
// their inputs (the kernels do not support that).
class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed), st_(initial_state(seed)) {
    for (int i = 0; i < kSlots; ++i) base_.push_back(i);
    next_base_ = kSlots;
  }

  std::vector<Instr> generate(int length) {
    while (static_cast<int>(program_.size()) < length) {
      const Instr in = propose();
      std::vector<Tensor> before = st_.slots;
      try {
        apply(in, st_);
      } catch (const Error&) {
        continue;  // the combination did not fit: not part of the program
      }
      const int written = writes(in);
      if (written >= 0 && st_.slots[written].numel() > kMaxNumel) {
        st_.slots = std::move(before);
        continue;
      }
      program_.push_back(in);
      if (written < 0) continue;
      base_[written] =
          aliases_input(in) ? base_[in.a] : (creates(in) ? next_base_++ : base_[written]);
      // A write may change every slot that shares the memory.
      for (int i = 0; i < kSlots; ++i) {
        if (base_[i] == base_[written] && too_large(st_.slots[i])) {
          Instr squash;
          squash.kind = Kind::kSquash;
          squash.dst = squash.a = i;
          apply(squash, st_);
          program_.push_back(squash);
          base_[i] = next_base_++;
        }
      }
    }
    return program_;
  }

 private:
  int pick_slot() { return static_cast<int>(rng_() % kSlots); }
  int64_t uniform(int64_t lo, int64_t hi) {  // [lo, hi]
    return lo + static_cast<int64_t>(rng_() % static_cast<uint64_t>(hi - lo + 1));
  }
  bool coin(double p = 0.5) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  const Tensor& slot(int i) const { return st_.slots[i]; }

  static int writes(const Instr& in) {
    switch (in.kind) {
      case Kind::kRead:
      case Kind::kKeep: return -1;
      case Kind::kInPlace: return in.a;
      default: return in.dst;
    }
  }
  static bool aliases_input(const Instr& in) {
    // Conservative: reshape may copy, but treating it as a view only restricts later writes.
    switch (in.kind) {
      case Kind::kReshape:
      case Kind::kTranspose:
      case Kind::kSlice:
      case Kind::kSelect:
      case Kind::kExpand: return true;
      default: return false;
    }
  }
  static bool creates(const Instr& in) {
    return in.kind != Kind::kInPlace && in.kind != Kind::kOut;
  }

  static bool too_large(const Tensor& t) {
    if (t.numel() == 0) return false;
    const Tensor d = testing::dense(to(t, DType::kFloat64));
    const double* p = d.data<double>();
    const double limit = is_floating_point(t.dtype()) ? 1e4 : 1e3;
    for (int64_t i = 0; i < d.numel(); ++i) {
      if (!(std::fabs(p[i]) <= limit)) return true;  // also NaN
    }
    return false;
  }

  // A writable target: no broadcast (stride-0) dimension, so each element is written once.
  bool writable(int i) const {
    const Tensor& t = slot(i);
    for (int64_t d = 0; d < t.ndim(); ++d) {
      if (t.shape()[d] > 1 && t.strides()[d] == 0) return false;
    }
    return true;
  }

  // A slot whose shape broadcasts with a's, preferring another one.
  int partner(int a) {
    for (int tries = 0; tries < 6; ++tries) {
      const int b = pick_slot();
      try {
        broadcast_shapes(slot(a).shape(), slot(b).shape());
        return b;
      } catch (const Error&) {
      }
    }
    return a;
  }

  Shape random_factorization(int64_t numel) {
    std::vector<int64_t> factors;
    for (int64_t n = numel, f = 2; n > 1;) {
      if (n % f == 0) {
        factors.push_back(f);
        n /= f;
      } else {
        ++f;
      }
    }
    std::shuffle(factors.begin(), factors.end(), rng_);
    const int64_t dims = uniform(1, 3);
    Shape shape(static_cast<size_t>(dims), 1);
    for (int64_t f : factors) shape[uniform(0, dims - 1)] *= f;
    if (coin(0.3)) shape[uniform(0, dims - 1)] = -1;
    return shape;
  }

  Instr propose() {
    Instr in;
    in.dst = pick_slot();
    in.a = pick_slot();
    in.b = pick_slot();
    const Tensor& a = slot(in.a);
    const int64_t ndim = a.ndim();
    const uint64_t roll = rng_() % 100;
    if (roll < 3) {
      static const Shape kFresh[] = {{8}, {4, 4}, {2, 8}, {3, 2, 2}};
      in.kind = Kind::kRandn;
      in.shape = kFresh[rng_() % 4];
      in.dtype = coin() ? DType::kFloat32 : DType::kFloat64;
    } else if (roll < 15) {
      in.kind = Kind::kUnary;
      in.op = static_cast<int>(rng_() % kNumUnary);
    } else if (roll < 29) {
      in.kind = Kind::kBinary;
      in.op = static_cast<int>(rng_() % kNumBinary);
      in.b = partner(in.a);
    } else if (roll < 39) {
      in.kind = Kind::kScalar;
      in.op = static_cast<int>(rng_() % kNumBinary);
      in.scalar = coin() ? static_cast<double>(uniform(-3, 3))
                         : std::uniform_real_distribution<double>(-1.5, 1.5)(rng_);
      in.flag = coin();
    } else if (roll < 47) {
      in.kind = Kind::kReduce;
      in.op = static_cast<int>(rng_() % kNumReduce);
      in.dim = ndim > 0 ? uniform(-ndim, ndim - 1) : 0;
      in.flag = coin();
    } else if (roll < 53) {
      in.kind = Kind::kGram;
      for (int i = 0; i < kSlots; ++i) {
        const Tensor& b = slot(i);
        if (ndim >= 1 && b.ndim() == 2 && b.shape()[0] == a.shape()[ndim - 1]) {
          in.kind = Kind::kMatMul;
          in.b = i;
          break;
        }
      }
    } else if (roll < 59) {
      in.kind = Kind::kReshape;
      in.shape = random_factorization(a.numel());
    } else if (roll < 64) {
      in.kind = Kind::kTranspose;
      in.dim = ndim > 0 ? uniform(0, ndim - 1) : 0;
      in.dim2 = ndim > 0 ? uniform(-ndim, ndim - 1) : 0;
    } else if (roll < 70) {
      in.kind = Kind::kSlice;
      in.dim = ndim > 0 ? uniform(0, ndim - 1) : 0;
      const int64_t size = ndim > 0 ? a.shape()[in.dim] : 0;
      in.start = uniform(-size, size);
      in.end = coin(0.2) ? size + 5 : uniform(-size, size);
      in.step = uniform(1, 3);
    } else if (roll < 74) {
      in.kind = Kind::kSelect;
      in.dim = ndim > 0 ? uniform(-ndim, ndim - 1) : 0;
      const int64_t size = ndim > 0 ? a.shape()[(in.dim + ndim) % ndim] : 1;
      in.start = size > 0 ? uniform(-size, size - 1) : 0;
    } else if (roll < 77) {
      in.kind = Kind::kExpand;
      in.shape.push_back(uniform(2, 3));
      for (int64_t d = 0; d < ndim; ++d) {
        in.shape.push_back(a.shape()[d] == 1 && coin() ? 3 : -1);
      }
    } else if (roll < 87) {
      in.kind = Kind::kInPlace;
      in.op = static_cast<int>(rng_() % kNumBinary);
      in.b = partner(in.a);
      // The result must have a's shape, and b may share a's memory only as the same tensor.
      const bool fits = [&] {
        try {
          return broadcast_shapes(a.shape(), slot(in.b).shape()) == a.shape();
        } catch (const Error&) {
          return false;
        }
      }();
      if (!fits || !writable(in.a) || (in.b != in.a && base_[in.b] == base_[in.a])) {
        in.b = in.a;
        if (!writable(in.a)) in.kind = Kind::kUnary;
      }
    } else if (roll < 93) {
      in.kind = Kind::kOut;
      in.op = static_cast<int>(rng_() % kNumBinary);
      in.b = partner(in.a);
      // Any slot of the result's shape that shares memory with neither input.
      in.dst = -1;
      for (int i = 0; i < kSlots && in.dst < 0; ++i) {
        try {
          if (base_[i] != base_[in.a] && base_[i] != base_[in.b] && writable(i) &&
              slot(i).shape() == broadcast_shapes(a.shape(), slot(in.b).shape())) {
            in.dst = i;
          }
        } catch (const Error&) {
          break;
        }
      }
      if (in.dst < 0) {
        in.kind = Kind::kBinary;
        in.dst = pick_slot();
      }
    } else if (roll < 97) {
      in.kind = Kind::kCast;
      in.dtype = kDTypes[rng_() % 4];
    } else if (roll < 99) {
      in.kind = Kind::kRead;
    } else {
      in.kind = Kind::kKeep;
    }
    return in;
  }

  std::mt19937_64 rng_;
  State st_;
  std::vector<int> base_;  // slots with the same base may share memory
  int next_base_;
  std::vector<Instr> program_;
};

// One run's result as bytes, with dtype and shape, for comparison.
struct Snapshot {
  std::vector<std::string> types;
  std::vector<std::vector<unsigned char>> bytes;
  std::vector<std::vector<unsigned char>> reads;
};

Snapshot snapshot(State& st) {
  Snapshot out;
  std::vector<Tensor> all = st.slots;
  all.insert(all.end(), st.kept.begin(), st.kept.end());
  for (const Tensor& t : all) {
    out.types.push_back(type_str(t));
    out.bytes.push_back(testing::bytes_of(t));
  }
  out.reads = st.reads;
  return out;
}

// Runs `program` from the seed's starting pool; `switch_every` > 0 switches to the next mode
// every that many instructions.
Snapshot run(uint64_t seed, const std::vector<Instr>& program, PipelineMode mode,
             int switch_every = 0) {
  testing::ScopedPipeline pipeline(mode);
  State st = initial_state(seed);
  for (size_t i = 0; i < program.size(); ++i) {
    if (switch_every > 0 && i % switch_every == 0) {
      runtime::set_pipeline(testing::all_modes()[(i / switch_every) % 3]);
    }
    apply(program[i], st);
  }
  Snapshot out = snapshot(st);
  runtime::synchronize();
  return out;
}

void expect_same(const Snapshot& expected, const Snapshot& got, const std::string& what) {
  ASSERT_EQ(expected.types.size(), got.types.size()) << what;
  for (size_t i = 0; i < expected.types.size(); ++i) {
    EXPECT_EQ(expected.types[i], got.types[i]) << what << ", tensor " << i;
    EXPECT_TRUE(expected.bytes[i] == got.bytes[i])
        << what << ", tensor " << i << " (" << expected.types[i] << ") differs";
  }
  EXPECT_EQ(expected.reads.size(), got.reads.size()) << what;
  EXPECT_TRUE(expected.reads == got.reads) << what << ": the reads in the middle differ";
}

std::string describe(const std::vector<Instr>& program) {
  int counts[static_cast<int>(Kind::kKeep) + 1] = {};
  for (const Instr& in : program) ++counts[static_cast<int>(in.kind)];
  std::ostringstream os;
  os << program.size() << " instructions; per kind:";
  for (int c : counts) os << " " << c;
  return os.str();
}

class PipelineProgram : public ::testing::TestWithParam<uint64_t> {
 protected:
  testing::Watchdog watchdog_{"PipelineProgram", std::chrono::seconds(300)};
};

TEST_P(PipelineProgram, GivesTheSameBytesInEveryMode) {
  const uint64_t seed = GetParam();
  std::vector<Instr> program;
  {
    testing::ScopedPipeline sync(PipelineMode::kSync);
    program = Generator(seed).generate(kProgramLength);
  }
  SCOPED_TRACE(describe(program));
  // Every kind of instruction made it into the program.
  std::vector<int> counts(static_cast<int>(Kind::kKeep) + 1);
  for (const Instr& in : program) ++counts[static_cast<int>(in.kind)];
  for (size_t k = 0; k < counts.size(); ++k) {
    if (static_cast<Kind>(k) != Kind::kSquash) {
      EXPECT_GT(counts[k], 0) << "kind " << k;
    }
  }
  const Snapshot expected = run(seed, program, PipelineMode::kSync);
  for (PipelineMode mode : testing::async_modes()) {
    expect_same(expected, run(seed, program, mode), runtime::pipeline_mode_name(mode));
  }
  expect_same(expected, run(seed, program, PipelineMode::kTwoStage, /*switch_every=*/250),
              "switching modes every 250 instructions");
}

INSTANTIATE_TEST_SUITE_P(Seeds, PipelineProgram, ::testing::Values(1, 2, 3));

}  // namespace
}  // namespace kiln
