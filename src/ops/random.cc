// Random ops: RandUniform, RandNormal, RandInt and Dropout, drawing from the global Philox
// generator (see Note [Counter-based generator]).
#include "ops/random.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <type_traits>

#include "core/dtype_dispatch.h"
#include "kiln/functional/factory.h"
#include "kiln/functional/nn.h"
#include "kiln/op.h"
#include "kiln/parallel.h"

namespace kiln {

// Note [Counter-based generator]
// Every random op draws from Philox4x32-10 keyed by the global seed. Each call reserves a block of
// counters from the global offset when it is dispatched, and records the seed and the block's
// first counter in its "seed" and "offset" attributes. Element i of the result is then lane
// i % L of the four words Philox gives for counter offset + i / L (L = elements per counter,
// set by how many random bits one element needs). So an element is a pure function of
// (seed, offset, i): identical for any thread count or chunking, and identical when a traced graph
// replays the call with its recorded attributes. Reserving at dispatch, not when the kernel runs,
// keeps draws in program order however the runtime schedules kernels. An op whose seed or offset
// attribute is None (a graph built by hand) reserves its block when the kernel runs.

namespace detail {
namespace {

// PyTorch's default seed: an unseeded process is still deterministic.
constexpr uint64_t kDefaultSeed = 67280421310721ull;

struct Generator {
  std::mutex mutex;
  uint64_t seed = kDefaultSeed;
  uint64_t offset = 0;
};

Generator& generator() {
  static Generator g;
  return g;
}

}  // namespace

GeneratorDraw reserve_counters(uint64_t count) {
  Generator& g = generator();
  std::lock_guard<std::mutex> lock(g.mutex);
  const GeneratorDraw draw{g.seed, g.offset};
  g.offset += count;
  return draw;
}

GeneratorDraw generator_state() {
  Generator& g = generator();
  std::lock_guard<std::mutex> lock(g.mutex);
  return {g.seed, g.offset};
}

}  // namespace detail

void manual_seed(uint64_t seed) {
  detail::Generator& g = detail::generator();
  std::lock_guard<std::mutex> lock(g.mutex);
  g.seed = seed;
  g.offset = 0;
}

namespace {

using detail::GeneratorDraw;
using Words = std::array<uint32_t, 4>;

// Elements per parallel chunk: one Philox call costs about as much as a few dozen adds.
constexpr int64_t kRandomGrain = 1 << 14;

uint64_t counters_for(int64_t numel, int lanes) {
  return static_cast<uint64_t>((numel + lanes - 1) / lanes);
}

// Calls emit(i, value) for every i in [0, n), where value is lane i % kLanes of
// make(philox(offset + i / kLanes)): see Note [Counter-based generator].
template <int kLanes, typename V, typename Make, typename Emit>
void for_each_draw(int64_t n, const GeneratorDraw& draw, const Make& make, const Emit& emit) {
  parallel_for(0, n, kRandomGrain, [&](int64_t lo, int64_t hi) {
    std::array<V, kLanes> lanes;
    for (int64_t g = lo / kLanes; g * kLanes < hi; ++g) {
      make(detail::philox4x32_10(draw.offset + static_cast<uint64_t>(g), draw.seed), lanes);
      const int64_t first = g * kLanes;
      const int64_t last = std::min(hi, first + kLanes);
      for (int64_t i = std::max(lo, first); i < last; ++i) emit(i, lanes[i - first]);
    }
  });
}

// The draw recorded in the attributes, or a fresh reservation when they are None.
GeneratorDraw draw_of(const Attrs& attrs, int64_t numel, int lanes) {
  if (attrs.is_none("seed") || attrs.is_none("offset")) {
    return detail::reserve_counters(counters_for(numel, lanes));
  }
  return {static_cast<uint64_t>(attrs.get<int64_t>("seed")),
          static_cast<uint64_t>(attrs.get<int64_t>("offset"))};
}

// `attrs` with a fresh reservation recorded for a call of `op`. The call is validated (infer)
// first so that a rejected call leaves the generator untouched.
Attrs with_draw(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                int (*lanes_for)(DType)) {
  MetaList metas;
  for (const Tensor& t : inputs) metas.push_back(TensorMeta::of(t));
  const TensorMeta out = op.infer_outputs(metas, op.normalize_attrs(attrs))[0];
  const GeneratorDraw draw =
      detail::reserve_counters(counters_for(out.numel(), lanes_for(out.dtype)));
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

int float_lanes(DType dtype) { return dtype == DType::kFloat64 ? 2 : 4; }
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

OpDef random_op(const char* name) {
  return OpDef(name)
      .attr("shape", AttrKind::kInts)
      .attr("dtype", AttrKind::kDType, DType::kFloat32)
      .attr("seed", AttrKind::kInt, std::monostate{})
      .attr("offset", AttrKind::kInt, std::monostate{})
      .traits(kTraitRandom);
}

KILN_REGISTER_OP(
    random_op("RandUniform")
        .doc("Uniform samples in [0, 1) (24 random bits for 16/32-bit floats, 53 for float64)")
        .infer(random_float_infer)
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          const GeneratorDraw draw = draw_of(ctx.attrs, out.numel(), float_lanes(out.dtype()));
          visit_floating(out.dtype(), [&](auto tag) {
            using T = typename decltype(tag)::type;
            T* p = static_cast<T*>(out.data_ptr());
            const auto emit = [p](int64_t i, T v) { p[i] = v; };
            if constexpr (std::is_same_v<T, double>) {
              for_each_draw<2, double>(out.numel(), draw, [](const Words& w, auto& v) {
                v[0] = detail::uniform_double(w[0], w[1]);
                v[1] = detail::uniform_double(w[2], w[3]);
              }, emit);
            } else {
              for_each_draw<4, T>(out.numel(), draw, [](const Words& w, auto& v) {
                for (int k = 0; k < 4; ++k) v[k] = uniform_as<T>(detail::uniform_float(w[k]));
              }, emit);
            }
          });
        }));

// Box-Muller: two uniforms give two independent standard normals. u1 is taken in (0, 1] so that
// log(u1) is finite.
template <typename C>
void box_muller(C u1, C u2, C* z0, C* z1) {
  constexpr C kTwoPi = static_cast<C>(6.283185307179586476925286766559);
  const C r = std::sqrt(C(-2) * std::log(u1));
  const C theta = kTwoPi * u2;
  *z0 = r * std::cos(theta);
  *z1 = r * std::sin(theta);
}

KILN_REGISTER_OP(
    random_op("RandNormal")
        .doc("Standard normal samples (Box-Muller on Philox; float32 arithmetic for 16-bit "
             "floats)")
        .infer(random_float_infer)
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          const GeneratorDraw draw = draw_of(ctx.attrs, out.numel(), float_lanes(out.dtype()));
          visit_floating(out.dtype(), [&](auto tag) {
            using T = typename decltype(tag)::type;
            T* p = static_cast<T*>(out.data_ptr());
            if constexpr (std::is_same_v<T, double>) {
              for_each_draw<2, double>(out.numel(), draw, [](const Words& w, auto& v) {
                box_muller(1.0 - detail::uniform_double(w[0], w[1]),
                           detail::uniform_double(w[2], w[3]), &v[0], &v[1]);
              }, [p](int64_t i, double v) { p[i] = v; });
            } else {
              for_each_draw<4, float>(out.numel(), draw, [](const Words& w, auto& v) {
                box_muller(1.0f - detail::uniform_float(w[0]), detail::uniform_float(w[1]),
                           &v[0], &v[1]);
                box_muller(1.0f - detail::uniform_float(w[2]), detail::uniform_float(w[3]),
                           &v[2], &v[3]);
              }, [p](int64_t i, float v) { p[i] = convert<T>(v); });
            }
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
    OpDef("RandInt")
        .attr("low", AttrKind::kInt)
        .attr("high", AttrKind::kInt)
        .attr("shape", AttrKind::kInts)
        .attr("dtype", AttrKind::kDType, DType::kInt64)
        .attr("seed", AttrKind::kInt, std::monostate{})
        .attr("offset", AttrKind::kInt, std::monostate{})
        .traits(kTraitRandom)
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
          return MetaList{{dtype, shape}};
        })
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          const GeneratorDraw draw = draw_of(ctx.attrs, out.numel(), int_lanes(out.dtype()));
          const int64_t low = ctx.attrs.get<int64_t>("low");
          // high > low, so the width fits in uint64 (wrapping subtraction is exact here).
          const uint64_t width =
              static_cast<uint64_t>(ctx.attrs.get<int64_t>("high")) - static_cast<uint64_t>(low);
          visit_dtype(out.dtype(), [&](auto tag) {
            using T = typename decltype(tag)::type;
            T* p = static_cast<T*>(out.data_ptr());
            for_each_draw<2, int64_t>(out.numel(), draw, [&](const Words& w, auto& v) {
              for (int k = 0; k < 2; ++k) {
                const uint64_t bits = (static_cast<uint64_t>(w[2 * k]) << 32) | w[2 * k + 1];
                v[k] = static_cast<int64_t>(static_cast<uint64_t>(low) + mul_hi64(bits, width));
              }
            }, [p](int64_t i, int64_t v) {
              if constexpr (std::is_integral_v<T>) {
                p[i] = static_cast<T>(v);
              } else {
                p[i] = convert<T>(static_cast<double>(v));
              }
            });
          });
        }));

void check_dropout_p(double p) {
  KILN_CHECK_VALUE(p >= 0.0 && p <= 1.0) << "Dropout: expected p in [0, 1], got " << p;
}

KILN_REGISTER_OP(
    OpDef("Dropout")
        .input("x")
        .attr("p", AttrKind::kFloat, 0.5)
        .attr("seed", AttrKind::kInt, std::monostate{})
        .attr("offset", AttrKind::kInt, std::monostate{})
        .traits(kTraitRandom)
        .doc("x with each element zeroed with probability p and the rest scaled by 1 / (1 - p)")
        .infer([](const InferContext& ctx) {
          check_dropout_p(ctx.attrs.get<double>("p"));
          const TensorMeta& x = ctx.input(0);
          KILN_CHECK_DTYPE(is_floating_point(x.dtype))
              << "Dropout: expected a floating input, got " << x.dtype;
          return MetaList{{x.dtype, x.shape}};
        })
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          const Tensor x = ctx.inputs[0].contiguous();
          const double p = ctx.attrs.get<double>("p");
          const GeneratorDraw draw = draw_of(ctx.attrs, out.numel(), dropout_lanes(out.dtype()));
          // The mask compares a 24-bit uniform with p, so p == 1 drops everything.
          const float keep_above = static_cast<float>(p);
          visit_floating(out.dtype(), [&](auto tag) {
            using T = typename decltype(tag)::type;
            using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
            const C scale = p < 1.0 ? static_cast<C>(1.0 / (1.0 - p)) : C(0);
            const T* src = static_cast<const T*>(x.data_ptr());
            T* dst = static_cast<T*>(out.data_ptr());
            for_each_draw<4, bool>(out.numel(), draw, [keep_above](const Words& w, auto& keep) {
              for (int k = 0; k < 4; ++k) keep[k] = detail::uniform_float(w[k]) >= keep_above;
            }, [&](int64_t i, bool keep) {
              dst[i] = keep ? convert<T>(static_cast<C>(src[i]) * scale) : convert<T>(C(0));
            });
          });
        })
        // The same seed and offset give the same mask, so the gradient is Dropout of the output
        // gradient with the forward call's attributes.
        .grad([](const std::vector<Tensor>&, const std::vector<Tensor>& outputs,
                 const Attrs& attrs, const std::vector<Tensor>& grad_outputs) {
          KILN_CHECK_VALUE(!attrs.is_none("seed") && !attrs.is_none("offset"))
              << "Dropout: the gradient needs the forward call's seed and offset attributes";
          if (!grad_outputs[0].defined()) return std::vector<Tensor>{zeros_like(outputs[0])};
          static const OpDefPtr op = OpRegistry::Instance().get("Dropout");
          return std::vector<Tensor>{call_op(*op, {grad_outputs[0]}, attrs)[0]};
        }));

}  // namespace

Tensor rand(const Shape& shape, DType dtype) {
  static const OpDefPtr op = OpRegistry::Instance().get("RandUniform");
  return call_op(*op, {}, with_draw(*op, {}, {{"shape", shape}, {"dtype", dtype}}, float_lanes))[0];
}

Tensor randn(const Shape& shape, DType dtype) {
  static const OpDefPtr op = OpRegistry::Instance().get("RandNormal");
  return call_op(*op, {}, with_draw(*op, {}, {{"shape", shape}, {"dtype", dtype}}, float_lanes))[0];
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype) {
  static const OpDefPtr op = OpRegistry::Instance().get("RandInt");
  const Attrs attrs{{"low", low}, {"high", high}, {"shape", shape}, {"dtype", dtype}};
  return call_op(*op, {}, with_draw(*op, {}, attrs, int_lanes))[0];
}

Tensor dropout(const Tensor& x, double p, bool training) {
  check_dropout_p(p);
  if (!training || p == 0.0) return x;
  static const OpDefPtr op = OpRegistry::Instance().get("Dropout");
  return call_op(*op, {x}, with_draw(*op, {x}, {{"p", p}}, dropout_lanes))[0];
}

}  // namespace kiln
