// Random ops: RandUniform, RandNormal, RandInt, RandPerm, Multinomial, Bernoulli and Dropout,
// drawing from a Philox generator (see Note [Counter-based generator]), DropoutBackward, and the
// kiln::Generator they draw from.
#include "ops/random.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <numeric>
#include <type_traits>

#include "core/dtype_dispatch.h"
#include "kiln/functional/factory.h"
#include "kiln/functional/nn.h"
#include "kiln/op.h"
#include "kiln/parallel.h"
#include "ops/scalar_range.h"
#include "ops/simd/float_kernels.h"
#include "ops/simd/philox.h"

namespace kiln {

// Note [Counter-based generator]
// Every random op draws from Philox4x32-10 keyed by its generator's seed (the default generator's
// unless the call names a Generator). Each call reserves a block of counters from the
// generator's offset when it is dispatched, and records the seed and the block's first counter
// in its "seed" and "offset" attributes. Element i of the result is then lane
// i % L of the four words Philox gives for counter offset + i / L (L = elements per counter,
// set by how many random bits one element needs). So an element is a pure function of
// (seed, offset, i): identical for any thread count or chunking, and identical when a traced graph
// replays the call with its recorded attributes. Reserving at dispatch, not when the kernel runs,
// keeps draws in program order however the runtime schedules kernels. An op whose seed or offset
// attribute is None (a graph built by hand) reserves its block when the kernel runs.
//
// Kernels draw 64 counters at a time (simd::philox4x32_10: vectors of counters go through the
// rounds together) and turn each block into values with loops that vectorise, Box-Muller's log,
// sqrt, sin and cos through the SIMD kernels. One counter and one element at a time, through
// libm, rand / randn / randint / dropout of 1M float32 took 3.5 / 12.7-13.0 / 11.0-11.4 /
// 11.2-11.5 ms on one core; in blocks, 0.88 / 2.3 / 2.7-2.8 / 1.7-1.9 (bench/RESULTS.md,
// "16-bit floats, random ops and other slow single ops"), and dropout 1.05 with its mask applied
// by a Highway kernel ("Slow single ops, second pass").

// PyTorch's default seed: an unseeded process is still deterministic.
constexpr uint64_t kDefaultSeed = 67280421310721ull;

struct Generator::Impl {
  mutable std::mutex mutex;
  RngState state;
};

Generator::Generator() : Generator(kDefaultSeed) {}

Generator::Generator(uint64_t seed) : impl_(std::make_shared<Impl>()) { impl_->state.seed = seed; }

void Generator::manual_seed(uint64_t seed) { set_state({seed, 0}); }

RngState Generator::state() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->state;
}

void Generator::set_state(const RngState& state) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->state = state;
}

RngState Generator::reserve(uint64_t count) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const RngState first = impl_->state;
  impl_->state.offset += count;
  return first;
}

Generator default_generator() {
  static const Generator g;
  return g;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }
RngState get_rng_state() { return default_generator().state(); }
void set_rng_state(const RngState& state) { default_generator().set_state(state); }

namespace {

// Elements per parallel chunk: one Philox call costs about as much as a few dozen adds.
constexpr int64_t kRandomGrain = 1 << 14;

uint64_t counters_for(int64_t numel, int lanes) {
  return static_cast<uint64_t>((numel + lanes - 1) / lanes);
}

// Counters a block of for_each_draw fills at once: enough values (128 to 256) that Philox's
// vectors and the SIMD calls of a fill (Box-Muller's) cost little per element.
constexpr int64_t kBlockCounters = 64;

// A block's Philox words: word k of the block's counter c.
struct BlockWords {
  uint32_t words[4 * kBlockCounters];
  uint32_t operator()(int k, int64_t c) const { return words[k * kBlockCounters + c]; }
};

// Calls consume(begin, values, count) on consecutive blocks of [0, n), where values[k] is element
// begin + k: lane i % kLanes of counter offset + i / kLanes (Note [Counter-based generator]).
// fill(words, count, out) turns the Philox words of the block's `count` counters into their
// count * kLanes values. A chunk's edge can cut a counter; its values are then made and dropped.
template <int kLanes, typename V, typename Fill, typename Consume>
void for_each_draw(int64_t n, const RngState& draw, const Fill& fill, const Consume& consume) {
  parallel_for(0, n, kRandomGrain, [&](int64_t lo, int64_t hi) {
    BlockWords words;
    V values[kBlockCounters * kLanes];
    for (int64_t counter = lo / kLanes; counter * kLanes < hi; counter += kBlockCounters) {
      simd::philox4x32_10(draw.offset + static_cast<uint64_t>(counter), draw.seed, words.words,
                          kBlockCounters);
      fill(words, kBlockCounters, values);
      const int64_t first = counter * kLanes;
      const int64_t begin = std::max(lo, first);
      const int64_t end = std::min(hi, first + kBlockCounters * kLanes);
      consume(begin, values + (begin - first), end - begin);
    }
  });
}

// consume for an op whose values are its elements: converted into p.
template <typename T, typename V>
auto store_into(T* p) {
  return [p](int64_t begin, const V* values, int64_t count) {
    convert_contiguous(values, p + begin, count);
  };
}

// The draw recorded in the attributes, or a fresh reservation when they are None.
RngState draw_of(const Attrs& attrs, int64_t numel, int lanes) {
  if (attrs.is_none("seed") || attrs.is_none("offset")) {
    return default_generator().reserve(counters_for(numel, lanes));
  }
  return {static_cast<uint64_t>(attrs.get<int64_t>("seed")),
          static_cast<uint64_t>(attrs.get<int64_t>("offset"))};
}

// Note [Random ops in graphs]
// An eager call reserves its counters when it is dispatched and records them in its "seed" and
// "offset" attributes. A call that a thread's own dispatcher records instead of running (the
// jit's tracer) reserves nothing and records them as None: a graph keeping its trace's draws
// would replay them on every run, the same dropout mask at every training step. So each run of
// the graph reserves fresh counters when its kernel runs, and tracing leaves the generator as it
// was. Backends run a graph's nodes one after another on the calling thread (kiln_cpu) or wait
// for a random node before the next (reference), so the reservations stay in program order and a
// seeded program draws the same numbers on every run; dead-code elimination keeps such a node
// even when nothing uses its result. Attributes given explicitly are kept.

// How many values a call draws, from its inputs, output and attributes, for an op that does not
// draw one per output element.
using DrawCount = int64_t (*)(const MetaList& inputs, const TensorMeta& output, const Attrs& attrs);

// `attrs` with a fresh reservation from `generator` recorded for a call of `op` (none while a
// trace records it: Note [Random ops in graphs]): `lanes_for` values per counter, one value per
// output element unless `draws` says otherwise. The call is validated (infer) first so that a
// rejected call leaves the generator untouched.
Attrs with_draw(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                Generator generator, int (*lanes_for)(DType), DrawCount draws = nullptr) {
  if (thread_dispatcher() != nullptr) {
    // The graph's runs reserve from the default generator: a generator of the call's own would
    // be ignored without a word.
    KILN_CHECK_KIND(ErrorKind::kNotImplemented, generator == default_generator())
        << op.name() << ": a random op with a generator of its own cannot be traced (the "
        << "graph draws from the default generator when it runs); draw outside the traced "
        << "function and pass the tensor in, or leave the generator out";
    return attrs;
  }
  MetaList metas;
  for (const Tensor& t : inputs) metas.push_back(TensorMeta::of(t));
  const Attrs normalized = op.normalize_attrs(attrs);
  const TensorMeta out = op.infer_outputs(metas, normalized)[0];
  const int64_t values = draws != nullptr ? draws(metas, out, normalized) : out.numel();
  const RngState draw = generator.reserve(counters_for(values, lanes_for(out.dtype)));
  Attrs drawn = attrs;
  drawn.set("seed", static_cast<int64_t>(draw.seed));
  drawn.set("offset", static_cast<int64_t>(draw.offset));
  return drawn;
}

// Calls f(TypeTag<T>) for the floating dtypes (the random float ops' infer rejects the others).
template <typename F>
void visit_floating(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat16: return f(TypeTag<Half>{});
    case DType::kBFloat16: return f(TypeTag<BFloat16>{});
    case DType::kFloat32: return f(TypeTag<float>{});
    case DType::kFloat64: return f(TypeTag<double>{});
    default: KILN_ASSERT(false) << "visit_floating: " << dtype << " is not floating";
  }
}

// A float32 uniform u in [0, 1) as T, still below 1: rounding to a 16-bit float may round up to
// 1, which then becomes the largest value below 1.
template <typename T>
T uniform_as(float u) {
  if constexpr (std::is_same_v<T, float>) {
    return u;
  } else {
    T v(u);
    if (static_cast<float>(v) < 1.0f) return v;
    T below;
    below.bits = std::is_same_v<T, Half> ? 0x3BFF : 0x3F7F;  // 1 - 2^-11, 1 - 2^-8
    return below;
  }
}

// Calls consume(begin, values, count) as for_each_draw does on uniforms in [0, 1) as T: 53 random
// bits from two words for float64, 24 from one for the other floats (still below 1 when rounded
// to a 16-bit float).
template <typename T, typename Consume>
void for_each_uniform(int64_t n, const RngState& draw, const Consume& consume) {
  if constexpr (std::is_same_v<T, double>) {
    for_each_draw<2, double>(
        n, draw,
        [](const BlockWords& w, int64_t count, double* v) {
          for (int64_t c = 0; c < count; ++c) {
            v[2 * c] = detail::uniform_double(w(0, c), w(1, c));
            v[2 * c + 1] = detail::uniform_double(w(2, c), w(3, c));
          }
        },
        consume);
  } else {
    for_each_draw<4, T>(
        n, draw,
        [](const BlockWords& w, int64_t count, T* v) {
          for (int64_t c = 0; c < count; ++c) {
            for (int k = 0; k < 4; ++k)
              v[4 * c + k] = uniform_as<T>(detail::uniform_float(w(k, c)));
          }
        },
        consume);
  }
}

int float_lanes(DType dtype) { return dtype == DType::kFloat64 ? 2 : 4; }

// The bits of a floating dtype's significand: it holds every integer up to 2^bits in magnitude.
int significand_bits(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
      return 11;
    case DType::kBFloat16:
      return 8;
    case DType::kFloat32:
      return 24;
    default:
      return 53;
  }
}

// Whether `v` is a value of `dtype` exactly: within an integer dtype's range (checked apart), or
// within the integers a floating dtype holds.
bool holds_integer_exactly(DType dtype, int64_t v) {
  return !is_floating_point(dtype) || std::abs(v) <= (int64_t{1} << significand_bits(dtype));
}
int int_lanes(DType) { return 2; }
int dropout_lanes(DType) { return 4; }

MetaList random_float_infer(const InferContext& ctx) {
  const Shape shape = ctx.attrs.get<std::vector<int64_t>>("shape");
  detail::check_factory_shape(ctx.op.name(), shape);
  const DType dtype = ctx.attrs.get<DType>("dtype");
  KILN_CHECK_DTYPE(is_floating_point(dtype))
      << ctx.op.name() << ": expected a floating dtype, got " << dtype;
  return {{dtype, shape}};
}

// `op` as a random op: the "seed" and "offset" attributes that record its reserved counters
// (None until reserved: Note [Random ops in graphs]), and kTraitRandom besides `traits`.
OpDef& drawing(OpDef& op, uint32_t traits = 0) {
  return op.attr("seed", AttrKind::kInt, std::monostate{})
      .attr("offset", AttrKind::kInt, std::monostate{})
      .traits(kTraitRandom | traits);
}

OpDef random_op(const char* name) {
  return drawing(
      OpDef(name).attr("shape", AttrKind::kInts).attr("dtype", AttrKind::kDType, DType::kFloat32));
}

KILN_REGISTER_OP(
    random_op("RandUniform")
        .doc("Uniform samples in [0, 1) (24 random bits for 16/32-bit floats, 53 for float64)")
        .infer(random_float_infer)
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          const RngState draw = draw_of(ctx.attrs, out.numel(), float_lanes(out.dtype()));
          visit_floating(out.dtype(), [&](auto tag) {
            using T = typename decltype(tag)::type;
            for_each_uniform<T>(out.numel(), draw,
                                store_into<T, T>(static_cast<T*>(out.data_ptr())));
          });
        }));

// Bernoulli's element i is 1 when uniform i (RandUniform's float32 one, float64's for float64) is
// below p[i]: never for p = 0, always for p = 1. A probability outside [0, 1] (or NaN) is found as
// the kernel reads it.
KILN_REGISTER_OP(
    drawing(OpDef("Bernoulli").input("p"), kTraitNotDifferentiable)
        .doc("1 with probability p, else 0, for each element of p (in p's dtype)")
        .infer([](const InferContext& ctx) {
          const TensorMeta& p = ctx.input(0);
          KILN_CHECK_DTYPE(is_floating_point(p.dtype))
              << "bernoulli: expected floating-point probabilities, got " << p.dtype;
          return MetaList{{p.dtype, p.shape}};
        })
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          const Tensor probs = ctx.inputs[0].contiguous();
          const RngState draw = draw_of(ctx.attrs, out.numel(), float_lanes(out.dtype()));
          std::atomic<bool> out_of_range{false};
          visit_floating(out.dtype(), [&](auto tag) {
            using T = typename decltype(tag)::type;
            using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
            const T* p = static_cast<const T*>(probs.data_ptr());
            T* dst = static_cast<T*>(out.data_ptr());
            for_each_uniform<C>(out.numel(), draw, [&](int64_t begin, const C* u, int64_t count) {
              bool in_range = true;
              for (int64_t k = 0; k < count; ++k) {
                const C q = static_cast<C>(p[begin + k]);
                in_range &= q >= C(0) && q <= C(1);
                dst[begin + k] = T(u[k] < q ? C(1) : C(0));
              }
              if (!in_range) out_of_range.store(true, std::memory_order_relaxed);
            });
          });
          KILN_CHECK_VALUE(!out_of_range.load())
              << "bernoulli: expected probabilities in [0, 1], got a value outside or NaN";
        }));

// Box-Muller: a pair of uniforms u1 in (0, 1] (so that log(u1) is finite) and u2 gives two
// independent standard normals, out[2p] = r cos(theta) and out[2p + 1] = r sin(theta), with
// r = sqrt(-2 log u1) and theta = 2 pi u2. A block's pairs go through the SIMD kernels together:
// log, sin and cos one element at a time (libm) held randn of 1M floats at 12 ms.
template <typename C>
void box_muller(const C* u1, const C* u2, int64_t pairs, C* out) {
  constexpr int64_t kMaxPairs = 2 * kBlockCounters;
  constexpr C kTwoPi = static_cast<C>(6.283185307179586476925286766559);
  C r[kMaxPairs], theta[kMaxPairs], cos_theta[kMaxPairs], sin_theta[kMaxPairs];
  simd::unary(simd::UnaryOp::kLog, u1, r, pairs);
  for (int64_t k = 0; k < pairs; ++k) r[k] *= C(-2);
  simd::unary(simd::UnaryOp::kSqrt, r, r, pairs);
  for (int64_t k = 0; k < pairs; ++k) theta[k] = kTwoPi * u2[k];
  simd::unary(simd::UnaryOp::kCos, theta, cos_theta, pairs);
  simd::unary(simd::UnaryOp::kSin, theta, sin_theta, pairs);
  for (int64_t k = 0; k < pairs; ++k) {
    out[2 * k] = r[k] * cos_theta[k];
    out[2 * k + 1] = r[k] * sin_theta[k];
  }
}

KILN_REGISTER_OP(
    random_op("RandNormal")
        .doc("Standard normal samples (Box-Muller on Philox; float32 arithmetic for 16-bit "
             "floats)")
        .infer(random_float_infer)
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          const RngState draw = draw_of(ctx.attrs, out.numel(), float_lanes(out.dtype()));
          visit_floating(out.dtype(), [&](auto tag) {
            using T = typename decltype(tag)::type;
            T* p = static_cast<T*>(out.data_ptr());
            // A float counter's words make two pairs (u1, u2): words 0, 1 and 2, 3; a double
            // counter's make one pair of 53-bit uniforms.
            using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
            constexpr int kLanes = std::is_same_v<T, double> ? 2 : 4;
            for_each_draw<kLanes, C>(
                out.numel(), draw,
                [](const BlockWords& w, int64_t count, C* v) {
                  constexpr int64_t kMaxPairs = 2 * kBlockCounters;
                  C u1[kMaxPairs], u2[kMaxPairs];
                  const int64_t pairs = count * kLanes / 2;
                  for (int64_t c = 0; c < count; ++c) {
                    if constexpr (kLanes == 2) {
                      u1[c] = 1.0 - detail::uniform_double(w(0, c), w(1, c));
                      u2[c] = detail::uniform_double(w(2, c), w(3, c));
                    } else {
                      for (int h = 0; h < 2; ++h) {
                        u1[2 * c + h] = 1.0f - detail::uniform_float(w(2 * h, c));
                        u2[2 * c + h] = detail::uniform_float(w(2 * h + 1, c));
                      }
                    }
                  }
                  box_muller(u1, u2, pairs, v);
                },
                store_into<T, C>(p));
          });
        }));

// The high 64 bits of the 128-bit product a * b.
uint64_t mul_hi64(uint64_t a, uint64_t b) {
  const uint64_t a_lo = a & 0xffffffffu, a_hi = a >> 32;
  const uint64_t b_lo = b & 0xffffffffu, b_hi = b >> 32;
  const uint64_t lo_lo = a_lo * b_lo, hi_lo = a_hi * b_lo, lo_hi = a_lo * b_hi;
  const uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xffffffffu) + lo_hi;
  return a_hi * b_hi + (hi_lo >> 32) + (cross >> 32);
}

KILN_REGISTER_OP(
    drawing(OpDef("RandInt")
                .attr("low", AttrKind::kInt)
                .attr("high", AttrKind::kInt)
                .attr("shape", AttrKind::kInts)
                .attr("dtype", AttrKind::kDType, DType::kInt64))
        .doc("Uniform integers in [low, high) (64 random bits scaled by multiply-shift, so the "
             "bias is below (high - low) / 2^64)")
        .infer([](const InferContext& ctx) {
          const Shape shape = ctx.attrs.get<std::vector<int64_t>>("shape");
          detail::check_factory_shape("RandInt", shape);
          const int64_t low = ctx.attrs.get<int64_t>("low");
          const int64_t high = ctx.attrs.get<int64_t>("high");
          KILN_CHECK_VALUE(high > low)
              << "RandInt: expected high > low, got low = " << low << ", high = " << high;
          const DType dtype = ctx.attrs.get<DType>("dtype");
          KILN_CHECK_DTYPE(dtype != DType::kBool) << "RandInt: expected a numeric dtype, got bool";
          KILN_CHECK_VALUE(detail::int_fits(dtype, low) && detail::int_fits(dtype, high - 1))
              << "RandInt: expected [low, high) within the range of " << dtype << ", got ["
              << low << ", " << high << ")";
          // Past the integers a floating dtype holds exactly a draw would round (to high itself,
          // or to inf in float16).
          KILN_CHECK_VALUE(holds_integer_exactly(dtype, low) &&
                           holds_integer_exactly(dtype, high - 1))
              << "RandInt: expected [low, high) within the integers " << dtype
              << " holds exactly (magnitude at most 2^" << significand_bits(dtype) << "), got ["
              << low << ", " << high << ")";
          return MetaList{{dtype, shape}};
        })
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          const RngState draw = draw_of(ctx.attrs, out.numel(), int_lanes(out.dtype()));
          const int64_t low = ctx.attrs.get<int64_t>("low");
          // high > low, so the width fits in uint64 (wrapping subtraction is exact here).
          const uint64_t width =
              static_cast<uint64_t>(ctx.attrs.get<int64_t>("high")) - static_cast<uint64_t>(low);
          visit_dtype(out.dtype(), [&](auto tag) {
            using T = typename decltype(tag)::type;
            T* p = static_cast<T*>(out.data_ptr());
            for_each_draw<2, int64_t>(
                out.numel(), draw,
                [&](const BlockWords& w, int64_t count, int64_t* v) {
                  if (width <= 0xffffffffu) {
                    // mul_hi64 for a 32-bit width: two 32 x 32-bit products, which vectorise.
                    for (int64_t c = 0; c < count; ++c) {
                      for (int k = 0; k < 2; ++k) {
                        const uint64_t scaled = (uint64_t{w(2 * k, c)} * width +
                                                 ((uint64_t{w(2 * k + 1, c)} * width) >> 32)) >>
                                                32;
                        v[2 * c + k] = static_cast<int64_t>(static_cast<uint64_t>(low) + scaled);
                      }
                    }
                    return;
                  }
                  for (int64_t c = 0; c < count; ++c) {
                    for (int k = 0; k < 2; ++k) {
                      const uint64_t bits =
                          (static_cast<uint64_t>(w(2 * k, c)) << 32) | w(2 * k + 1, c);
                      v[2 * c + k] =
                          static_cast<int64_t>(static_cast<uint64_t>(low) + mul_hi64(bits, width));
                    }
                  }
                },
                [p](int64_t begin, const int64_t* v, int64_t count) {
                  for (int64_t i = 0; i < count; ++i) {
                    if constexpr (std::is_integral_v<T>) {
                      p[begin + i] = static_cast<T>(v[i]);
                    } else {
                      p[begin + i] = convert<T>(static_cast<double>(v[i]));
                    }
                  }
                });
          });
        }));

// The 64 random bits of element i of a draw with two elements per counter (RandInt's lanes: words
// 2k and 2k + 1 of counter offset + i / 2), for ops that consume their draws one at a time. The
// counters are computed a block at a time, as for_each_draw's are, around the element asked for:
// one Philox call per element made randperm of 1M 2.3x slower than PyTorch's.
class DrawnBits {
 public:
  explicit DrawnBits(const RngState& draw) : draw_(draw) {}
  uint64_t operator()(int64_t i) {
    const int64_t counter = i / 2;
    if (counter < first_ || counter >= first_ + kBlockCounters) {
      first_ = counter - counter % kBlockCounters;
      simd::philox4x32_10(draw_.offset + static_cast<uint64_t>(first_), draw_.seed, words_.words,
                          kBlockCounters);
    }
    const int k = static_cast<int>(i % 2);
    const int64_t c = counter - first_;
    return (static_cast<uint64_t>(words_(2 * k, c)) << 32) | words_(2 * k + 1, c);
  }
  /// Element i as a uniform double in [0, 1) (the top 53 of its bits).
  double uniform(int64_t i) {
    const uint64_t b = (*this)(i);
    return detail::uniform_double(static_cast<uint32_t>(b >> 32), static_cast<uint32_t>(b));
  }

 private:
  RngState draw_;
  int64_t first_ = -kBlockCounters;  // the first counter of the block in words_
  BlockWords words_;
};

// Note [Sampling one element at a time]
// RandPerm and Multinomial take their draws in a sequence that depends on earlier ones (a swap,
// a category taken out), so they cannot fill blocks as the elementwise ops do. Each still draws
// element i from lane i % 2 of counter offset + i / 2: RandPerm's i-th swap; Multinomial's
// sample s of row b as element b * num_samples + s with replacement, and without it the key of
// category c of row b as element b * C + c (so a call reserves counters for those, not for its
// output). Rows are independent, so Multinomial splits them across threads with the same results;
// RandPerm's shuffle is one sequential pass (Fisher-Yates, from the last position down), as
// PyTorch's CPU randperm.

KILN_REGISTER_OP(
    drawing(
        OpDef("RandPerm").attr("n", AttrKind::kInt).attr("dtype", AttrKind::kDType, DType::kInt64))
        .doc("A uniformly random permutation of 0 .. n - 1 (Fisher-Yates; each swap's position "
             "from 64 random bits by multiply-shift)")
        .infer([](const InferContext& ctx) {
          const int64_t n = ctx.attrs.get<int64_t>("n");
          KILN_CHECK_VALUE(n >= 0) << "randperm: expected n >= 0, got " << n;
          const DType dtype = ctx.attrs.get<DType>("dtype");
          KILN_CHECK_DTYPE(dtype != DType::kBool) << "randperm: expected a numeric dtype, got bool";
          KILN_CHECK_VALUE(n == 0 ||
                           (detail::int_fits(dtype, n - 1) && holds_integer_exactly(dtype, n - 1)))
              << "randperm: n = " << n << " does not fit in " << dtype;
          return MetaList{{dtype, {n}}};
        })
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          const int64_t n = out.numel();
          DrawnBits bits(draw_of(ctx.attrs, n, int_lanes(out.dtype())));
          visit_dtype(out.dtype(), [&](auto tag) {
            using T = typename decltype(tag)::type;
            if constexpr (!std::is_same_v<T, bool>) {
              T* p = out.data<T>();
              for (int64_t i = 0; i < n; ++i) p[i] = convert<T>(i);
              for (int64_t i = n - 1; i > 0; --i) {
                const auto j = static_cast<int64_t>(mul_hi64(bits(n - 1 - i), i + 1));
                std::swap(p[i], p[j]);
              }
            }
          });
        }));

// The values Multinomial draws for a row of `categories` weights and `k` samples: one per sample
// with replacement, one per category without (Note [Sampling one element at a time]).
int64_t multinomial_draws(int64_t categories, int64_t k, bool replacement) {
  return replacement ? k : categories;
}

// Row `row` of `probs` as weights scaled by their maximum (so that neither subnormal weights,
// whose products with a uniform round to the subnormal grid, nor sums past the largest double
// skew the draws), checked finite and non-negative with one positive at least, and at least `k`
// positive without replacement.
template <typename T>
std::vector<double> checked_weights(const T* probs, int64_t row, int64_t categories, int64_t k,
                                    bool replacement) {
  std::vector<double> weights(static_cast<size_t>(categories));
  double largest = 0.0;
  int64_t positive = 0;
  for (int64_t c = 0; c < categories; ++c) {
    const double w = convert<double>(probs[c]);
    KILN_CHECK_VALUE(std::isfinite(w) && w >= 0.0)
        << "multinomial: expected finite non-negative probabilities, got " << w << " in row " << row
        << ", category " << c;
    weights[c] = w;
    largest = std::max(largest, w);
    positive += w > 0.0;
  }
  KILN_CHECK_VALUE(positive > 0) << "multinomial: row " << row << " has no positive probability";
  KILN_CHECK_VALUE(replacement || positive >= k)
      << "multinomial: cannot draw " << k << " samples without replacement from row " << row
      << ", which has " << positive << " categories of positive probability";
  for (double& w : weights) w /= largest;
  return weights;
}

// Samples row `row` of `probs` ([rows, categories], contiguous) into out[0 .. k).
//
// With replacement, each sample inverts the running sums: the first category whose prefix sum
// passes u * total (a binary search; a zero weight adds nothing, so it is never the first to
// pass), or the last positive category when rounding leaves u * total at the total.
//
// Without replacement (Efraimidis and Spirakis, "Weighted random sampling with a reservoir", IPL
// 2006): category c gets the key log(u_c) / w_c, and the k largest keys, in decreasing order, are
// distributed as k successive draws each taking its category out. A zero weight's key is -inf,
// below every positive one's. O(C + k log k) per row, where taking categories out one draw at a
// time costs O(C k).
template <typename T>
void sample_row(const T* probs, int64_t row, int64_t categories, int64_t k, bool replacement,
                DrawnBits& bits, int64_t* out) {
  const std::vector<double> weights = checked_weights(probs, row, categories, k, replacement);
  const int64_t first_draw = row * multinomial_draws(categories, k, replacement);
  if (replacement) {
    std::vector<double> prefix(weights.size());
    std::partial_sum(weights.begin(), weights.end(), prefix.begin());
    const int64_t last_positive =
        categories - 1 -
        (std::find_if(weights.rbegin(), weights.rend(), [](double w) { return w > 0.0; }) -
         weights.rbegin());
    for (int64_t s = 0; s < k; ++s) {
      const double target = bits.uniform(first_draw + s) * prefix.back();
      const auto at = std::upper_bound(prefix.begin(), prefix.end(), target);
      out[s] = std::min<int64_t>(at - prefix.begin(), last_positive);
    }
    return;
  }
  struct Keyed {
    double key;
    int64_t category;
  };
  std::vector<Keyed> keyed(static_cast<size_t>(categories));
  for (int64_t c = 0; c < categories; ++c) {
    const double u = 1.0 - bits.uniform(first_draw + c);  // in (0, 1]: log(u) is finite
    keyed[c] = {std::log(u) / weights[c], c};             // -inf for a zero weight
  }
  // Larger keys first; equal keys (log(1) = 0, or -inf) by category, so the order is total.
  const auto before = [](const Keyed& a, const Keyed& b) {
    return a.key > b.key || (a.key == b.key && a.category < b.category);
  };
  const auto kept_end = keyed.begin() + k;
  if (k < categories) std::nth_element(keyed.begin(), kept_end, keyed.end(), before);
  std::sort(keyed.begin(), kept_end, before);
  for (int64_t s = 0; s < k; ++s) out[s] = keyed[s].category;
}

KILN_REGISTER_OP(
    drawing(OpDef("Multinomial")
                .input("probs")
                .attr("num_samples", AttrKind::kInt)
                .attr("replacement", AttrKind::kBool, false),
            kTraitNotDifferentiable)
        .doc("int64 category indices drawn from each row of probs ([C] or [B, C] non-negative "
             "weights, not necessarily summing to 1), with or without replacement")
        .infer([](const InferContext& ctx) {
          const TensorMeta& probs = ctx.input(0);
          KILN_CHECK_DTYPE(is_floating_point(probs.dtype))
              << "multinomial: expected floating probabilities, got " << probs.dtype;
          KILN_CHECK_SHAPE(probs.ndim() == 1 || probs.ndim() == 2)
              << "multinomial: expected probabilities of shape [C] or [B, C], got "
              << shape_str(probs.shape);
          const int64_t categories = probs.shape.back();
          KILN_CHECK_VALUE(categories > 0) << "multinomial: expected at least one category";
          const int64_t k = ctx.attrs.get<int64_t>("num_samples");
          KILN_CHECK_VALUE(k > 0) << "multinomial: expected num_samples > 0, got " << k;
          KILN_CHECK_VALUE(ctx.attrs.get<bool>("replacement") || k <= categories)
              << "multinomial: cannot draw " << k << " samples without replacement from "
              << categories << " categories";
          Shape shape = probs.shape;
          shape.back() = k;
          return MetaList{{DType::kInt64, shape}};
        })
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          const Tensor probs = ctx.inputs[0].contiguous();
          const int64_t categories = probs.shape().back();
          const int64_t k = out.shape().back();
          const int64_t rows = out.numel() / k;
          const bool replacement = ctx.attrs.get<bool>("replacement");
          const RngState draw = draw_of(
              ctx.attrs, rows * multinomial_draws(categories, k, replacement), int_lanes(DType()));
          int64_t* samples = out.data<int64_t>();
          visit_floating(probs.dtype(), [&](auto tag) {
            using T = typename decltype(tag)::type;
            const T* p = probs.data<T>();
            const int64_t grain = std::max<int64_t>(1, kRandomGrain / (categories * k));
            parallel_for(0, rows, grain, [&](int64_t lo, int64_t hi) {
              DrawnBits bits(draw);
              for (int64_t r = lo; r < hi; ++r) {
                sample_row(p + r * categories, r, categories, k, replacement, bits,
                           samples + r * k);
              }
            });
          });
        }));

// v where keep, else +0, by masking the bits: GCC compiles `keep ? v : 0` in this loop as a
// branch, which a random mask mispredicts half the time (and which stops vectorisation).
template <typename C>
C zero_unless(bool keep, C v) {
  using Bits = std::conditional_t<sizeof(C) == 4, uint32_t, uint64_t>;
  Bits bits;
  std::memcpy(&bits, &v, sizeof(bits));
  bits &= Bits{0} - static_cast<Bits>(keep);
  std::memcpy(&v, &bits, sizeof(v));
  return v;
}

void check_dropout_p(double p) {
  KILN_CHECK_VALUE(p >= 0.0 && p <= 1.0) << "Dropout: expected p in [0, 1], got " << p;
}

// Dropout scales in float for float32 and the 16-bit floats, in double for double.
template <typename T>
using dropout_scale_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
dropout_scale_t<T> dropout_scale(double p) {
  return p < 1.0 ? static_cast<dropout_scale_t<T>>(1.0 / (1.0 - p)) : dropout_scale_t<T>(0);
}

// y[i] = x[i] * scale where keep[i], else +0: Dropout's forward on x and its backward on g.
template <typename T>
void apply_dropout_mask(const T* x, const bool* keep, dropout_scale_t<T> scale, T* y, int64_t n) {
  if constexpr (std::is_same_v<T, dropout_scale_t<T>>) {
    simd::masked_scale(x, keep, scale, y, n);
  } else {
    for (int64_t i = 0; i < n; ++i) {
      y[i] = convert<T>(zero_unless(keep[i], static_cast<float>(x[i]) * scale));
    }
  }
}

Tensor dropout_backward(const Tensor& g, const Tensor& mask, double p) {
  static const OpDefPtr op = OpRegistry::Instance().get("DropoutBackward");
  return call_op(*op, {g, mask}, {{"p", p}})[0];
}

// Note [Dropout's mask]
// Dropout also returns the mask it drew (bool, true where it kept the element), and its gradient
// is DropoutBackward(g, mask): one pass over g and a byte per element. Drawing the mask again from
// the forward's seed and offset gives the same mask, but costs the Philox draws a second time:
// 1.7 ms for the gradient of 1M float32 against 0.28 for PyTorch, which keeps its mask too.
KILN_REGISTER_OP(
    drawing(OpDef("Dropout").input("x").attr("p", AttrKind::kFloat, 0.5))
        .outputs(2)
        .doc("x with each element zeroed with probability p and the rest scaled by 1 / (1 - p); "
             "second output: the bool mask of the kept elements")
        .infer([](const InferContext& ctx) {
          check_dropout_p(ctx.attrs.get<double>("p"));
          const TensorMeta& x = ctx.input(0);
          KILN_CHECK_DTYPE(is_floating_point(x.dtype))
              << "Dropout: expected a floating input, got " << x.dtype;
          return MetaList{{x.dtype, x.shape}, {DType::kBool, x.shape}};
        })
        .kernel(DeviceType::kCPU,
                [](KernelContext& ctx) {
                  const Tensor& out = ctx.outputs[0];
                  const Tensor x = ctx.inputs[0].contiguous();
                  bool* mask = static_cast<bool*>(ctx.outputs[1].data_ptr());
                  const double p = ctx.attrs.get<double>("p");
                  const RngState draw = draw_of(ctx.attrs, out.numel(), dropout_lanes(out.dtype()));
                  // The mask compares a 24-bit uniform with p, so p == 1 drops everything.
                  const float keep_above = static_cast<float>(p);
                  visit_floating(out.dtype(), [&](auto tag) {
                    using T = typename decltype(tag)::type;
                    const dropout_scale_t<T> scale = dropout_scale<T>(p);
                    const T* src = static_cast<const T*>(x.data_ptr());
                    T* dst = static_cast<T*>(out.data_ptr());
                    for_each_draw<4, bool>(
                        out.numel(), draw,
                        [keep_above](const BlockWords& w, int64_t count, bool* keep) {
                          for (int64_t c = 0; c < count; ++c) {
                            for (int k = 0; k < 4; ++k) {
                              keep[4 * c + k] = detail::uniform_float(w(k, c)) >= keep_above;
                            }
                          }
                        },
                        [&](int64_t begin, const bool* keep, int64_t count) {
                          std::copy(keep, keep + count, mask + begin);
                          apply_dropout_mask(src + begin, keep, scale, dst + begin, count);
                        });
                  });
                })
        .grad([](const std::vector<Tensor>&, const std::vector<Tensor>& outputs, const Attrs& attrs,
                 const std::vector<Tensor>& grad_outputs) {
          if (!grad_outputs[0].defined()) return std::vector<Tensor>{zeros_like(outputs[0])};
          return std::vector<Tensor>{
              dropout_backward(grad_outputs[0], outputs[1], attrs.get<double>("p"))};
        }));

KILN_REGISTER_OP(
    OpDef("DropoutBackward")
        .input("grad_output")
        .input("mask")
        .attr("p", AttrKind::kFloat)
        .doc("grad_output / (1 - p) where mask, else 0: Dropout's input gradient from the mask its "
             "forward returned")
        .infer([](const InferContext& ctx) {
          check_dropout_p(ctx.attrs.get<double>("p"));
          const TensorMeta& g = ctx.input(0);
          const TensorMeta& mask = ctx.input(1);
          KILN_CHECK_DTYPE(is_floating_point(g.dtype))
              << "DropoutBackward: expected a floating grad_output, got " << g.dtype;
          KILN_CHECK_DTYPE(mask.dtype == DType::kBool)
              << "DropoutBackward: expected a bool mask, got " << mask.dtype;
          KILN_CHECK_SHAPE(mask.shape == g.shape)
              << "DropoutBackward: expected the mask in grad_output's shape " << shape_str(g.shape)
              << ", got " << shape_str(mask.shape);
          return MetaList{{g.dtype, g.shape}};
        })
        .kernel(DeviceType::kCPU,
                [](KernelContext& ctx) {
                  const Tensor g = ctx.inputs[0].contiguous();
                  const Tensor mask = ctx.inputs[1].contiguous();
                  const Tensor& out = ctx.outputs[0];
                  const bool* keep = static_cast<const bool*>(mask.data_ptr());
                  visit_floating(out.dtype(), [&](auto tag) {
                    using T = typename decltype(tag)::type;
                    const dropout_scale_t<T> scale = dropout_scale<T>(ctx.attrs.get<double>("p"));
                    const T* src = static_cast<const T*>(g.data_ptr());
                    T* dst = static_cast<T*>(out.data_ptr());
                    parallel_for(0, out.numel(), kRandomGrain, [&](int64_t lo, int64_t hi) {
                      apply_dropout_mask(src + lo, keep + lo, scale, dst + lo, hi - lo);
                    });
                  });
                })
        // Linear in grad_output: its gradient is DropoutBackward of the incoming one, same mask.
        .grad([](const std::vector<Tensor>& inputs, const std::vector<Tensor>&, const Attrs& attrs,
                 const std::vector<Tensor>& grad_outputs) {
          if (!grad_outputs[0].defined()) return std::vector<Tensor>{Tensor(), Tensor()};
          return std::vector<Tensor>{
              dropout_backward(grad_outputs[0], inputs[1], attrs.get<double>("p")), Tensor()};
        }));

}  // namespace

Tensor rand(const Shape& shape, DType dtype) { return rand(shape, dtype, default_generator()); }

Tensor rand(const Shape& shape, DType dtype, const Generator& generator) {
  static const OpDefPtr op = OpRegistry::Instance().get("RandUniform");
  const Attrs attrs{{"shape", shape}, {"dtype", dtype}};
  return call_op(*op, {}, with_draw(*op, {}, attrs, generator, float_lanes))[0];
}

Tensor randn(const Shape& shape, DType dtype) { return randn(shape, dtype, default_generator()); }

Tensor randn(const Shape& shape, DType dtype, const Generator& generator) {
  static const OpDefPtr op = OpRegistry::Instance().get("RandNormal");
  const Attrs attrs{{"shape", shape}, {"dtype", dtype}};
  return call_op(*op, {}, with_draw(*op, {}, attrs, generator, float_lanes))[0];
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype) {
  return randint(low, high, shape, dtype, default_generator());
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype,
               const Generator& generator) {
  static const OpDefPtr op = OpRegistry::Instance().get("RandInt");
  const Attrs attrs{{"low", low}, {"high", high}, {"shape", shape}, {"dtype", dtype}};
  return call_op(*op, {}, with_draw(*op, {}, attrs, generator, int_lanes))[0];
}

Tensor randperm(int64_t n, DType dtype) { return randperm(n, dtype, default_generator()); }

Tensor randperm(int64_t n, DType dtype, const Generator& generator) {
  static const OpDefPtr op = OpRegistry::Instance().get("RandPerm");
  const Attrs attrs{{"n", n}, {"dtype", dtype}};
  return call_op(*op, {}, with_draw(*op, {}, attrs, generator, int_lanes))[0];
}

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement) {
  return multinomial(probs, num_samples, replacement, default_generator());
}

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement,
                   const Generator& generator) {
  static const OpDefPtr op = OpRegistry::Instance().get("Multinomial");
  const Attrs attrs{{"num_samples", num_samples}, {"replacement", replacement}};
  const DrawCount draws = [](const MetaList& inputs, const TensorMeta& out, const Attrs& a) {
    const int64_t categories = inputs[0].shape.back(), k = out.shape.back();
    return out.numel() / k * multinomial_draws(categories, k, a.get<bool>("replacement"));
  };
  return call_op(*op, {probs}, with_draw(*op, {probs}, attrs, generator, int_lanes, draws))[0];
}

Tensor bernoulli(const Tensor& p) { return bernoulli(p, default_generator()); }

Tensor bernoulli(const Tensor& p, const Generator& generator) {
  static const OpDefPtr op = OpRegistry::Instance().get("Bernoulli");
  return call_op(*op, {p}, with_draw(*op, {p}, {}, generator, float_lanes))[0];
}

Tensor dropout(const Tensor& x, double p, bool training) {
  check_dropout_p(p);
  if (!training || p == 0.0) return x;
  static const OpDefPtr op = OpRegistry::Instance().get("Dropout");
  return call_op(*op, {x}, with_draw(*op, {x}, {{"p", p}}, default_generator(), dropout_lanes))[0];
}

}  // namespace kiln
