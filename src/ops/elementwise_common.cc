// The non-template parts of the elementwise ops (see ops/elementwise.h): dtype rules, operand
// checks and the loop drivers.
#include <array>
#include <limits>
#include <string_view>
#include <utility>

#include "core/transposing_copy.h"
#include "kiln/functional.h"
#include "ops/elementwise.h"
#include "ops/grad_util.h"
#include "ops/scalar_range.h"

namespace kiln::elementwise {
namespace {

// The half-open byte range [first, last) that a tensor's elements occupy.
std::pair<const char*, const char*> byte_extent(const Tensor& t) {
  const char* base = static_cast<const char*>(t.data_ptr());
  int64_t lo = 0;
  int64_t hi = 0;
  for (int64_t d = 0; d < t.ndim(); ++d) {
    const int64_t span = (t.size(d) - 1) * t.stride(d);
    (span < 0 ? lo : hi) += span;
  }
  const auto size = static_cast<int64_t>(t.itemsize());
  return {base + lo * size, base + (hi + 1) * size};
}

// True when writing `out` element by element could change elements of `x` not yet read: they
// share memory and are not the very same view (which elementwise loops handle in place).
bool overlaps_partially(const Tensor& x, const Tensor& out) {
  if (x.storage() != out.storage() || x.numel() == 0 || out.numel() == 0) return false;
  if (x.data_ptr() == out.data_ptr() && x.shape() == out.shape() && x.strides() == out.strides()) {
    return false;
  }
  const auto [x_first, x_last] = byte_extent(x);
  const auto [out_first, out_last] = byte_extent(out);
  return x_first < out_last && out_first < x_last;
}

}  // namespace

Tensor loop_operand(const Tensor& x, const Tensor& out) {
  // NumPy semantics: an input overlapping the output (x += x.T) is read as it was before the call.
  const Tensor operand = broadcast_operand(overlaps_partially(x, out) ? x.clone() : x, out.shape());
  // One running across out's rows (x.T * 2) would be read a cache line per element in out's
  // order: it is copied first, in tiles (Note [Transposing copies]), 6x faster at 1024^2.
  if (is_transposing_copy(out, operand)) return operand.contiguous();
  // One read in short runs (a permute of attention heads) costs the loop's per-run work every few
  // elements: copied first too (Note [Copies of short runs]) while the copy and the output fit in
  // kStagedBytes, so that the op reads the copy back from cache. Runs of at most 32 elements:
  // 1M-element float32 ops on [n, 8], [n, 16] and [n, 32] slices ran 1.7x-3x faster, on [n, 64]
  // no faster. Past the cache the extra pass costs more than it saves (a [32, 64, 64, 16] permute
  // times 2: 2.1 -> 2.9-3.3 ms), and the cache size sysconf reports is no guide there: 256 MiB
  // on the 2-core guest measured, whose core complex has 32.
  constexpr int64_t kCopyRunsUpTo = 32;
  constexpr int64_t kStagedBytes = int64_t{8} << 20;
  const auto bytes = static_cast<int64_t>(operand.numel() * operand.itemsize() + out.nbytes());
  if (bytes <= kStagedBytes && has_short_runs(out, operand, kCopyRunsUpTo)) {
    return operand.contiguous();
  }
  return operand;
}

DType unary_result_dtype(const char* prim, UnaryRule rule, DType input) {
  switch (rule) {
    case UnaryRule::kSame:
      return input;
    case UnaryRule::kSameNoBool:
      KILN_CHECK_DTYPE(input != DType::kBool)
          << prim << ": expected a numeric tensor, got bool; to invert a mask use logical_not "
          << "(the ~ operator)";
      return input;
    case UnaryRule::kFloating:
      return to_floating(input);
    case UnaryRule::kPredicate:
      return DType::kBool;
    case UnaryRule::kIntegral:
      KILN_CHECK_DTYPE(is_integral(input) || input == DType::kBool)
          << prim << ": expected an integer or bool tensor, got " << input
          << " (bitwise operations take integers and bools)";
      return input;
  }
  KILN_ASSERT(false) << "unknown unary rule";
}

DType binary_operand_dtype(const char* prim, BinaryRule rule, const TensorMeta& a,
                           const TensorMeta& b) {
  const DType common = result_type(a, b);
  switch (rule) {
    case BinaryRule::kPromote:
      return common;
    case BinaryRule::kPromoteNoBool:
      KILN_CHECK_DTYPE(common != DType::kBool)
          << prim << ": expected numeric operands, got " << a.dtype << " and " << b.dtype
          << "; booleans support logical_and, logical_or and logical_xor (& | ^)";
      return common;
    case BinaryRule::kFloating:
      return to_floating(common);
    case BinaryRule::kPredicate:
      return common;
    case BinaryRule::kIntegral:
    case BinaryRule::kIntegralNoBool: {
      const bool bool_ok = rule == BinaryRule::kIntegral;
      KILN_CHECK_DTYPE(is_integral(common) || (bool_ok && common == DType::kBool))
          << prim << ": expected " << (bool_ok ? "integer or bool" : "integer") << " operands, got "
          << a.dtype << " and " << b.dtype
          << (common == DType::kBool ? " (shifting bools has no meaning; convert to an integer "
                                       "dtype first)"
                                     : " (bitwise operations take integers)");
      return common;
    }
  }
  KILN_ASSERT(false) << "unknown binary rule";
}

DType predicate_operand_dtype(DType operand, const Tensor& a, const Tensor& b) {
  // A weak Python integer that the integer operand dtype cannot hold would wrap around when
  // converted (int8 tensor == 1000); compare in int64, which holds every integer dtype.
  if (!is_integral(operand)) return operand;
  for (const Tensor* t : {&a, &b}) {
    if (t->is_weak_scalar() && t->dtype() == DType::kInt64 &&
        !detail::int_fits(operand, *t->data<int64_t>())) {
      return DType::kInt64;
    }
  }
  return operand;
}

namespace {

// True when `x` is read in one flat run beside the (contiguous) `out`: x is contiguous, of out's
// shape, and shares no memory with out other than as the very same view.
bool flat_operand(const Tensor& x, const Tensor& out) {
  return x.shape() == out.shape() && x.is_contiguous() && !overlaps_partially(x, out);
}

// The fast path of small ops: when every operand is flat and the output is within one parallel
// chunk, `loop` runs once over the whole output, with no broadcast views or loop plan to build.
template <size_t N>
bool run_flat(const Tensor& out, const std::array<const Tensor*, N>& in, const InnerLoop& loop) {
  const int64_t n = out.numel();
  if (n == 0) return true;  // nothing to compute (empty tensors may have no memory)
  if (n > kElementwiseGrain) return false;
  for (const Tensor* x : in) {
    if (!flat_operand(*x, out)) return false;
  }
  std::array<char*, N + 1> p;
  std::array<int64_t, N + 1> s;
  p[0] = static_cast<char*>(out.data_ptr());
  s[0] = static_cast<int64_t>(out.itemsize());
  for (size_t k = 0; k < N; ++k) {
    p[k + 1] = static_cast<char*>(in[k]->data_ptr());
    s[k + 1] = static_cast<int64_t>(in[k]->itemsize());
  }
  loop(p.data(), s.data(), n);
  return true;
}

}  // namespace

void run_loop(const Tensor& out, const Tensor& x, const InnerLoop& loop) {
  if (run_flat<1>(out, {&x}, loop)) return;
  const Tensor xb = loop_operand(x, out);
  InnerLoop streamed = loop;
  streamed.out_store = simd::store_for_output(static_cast<int64_t>(out.nbytes()));
  StridedLoop<2>(out.shape(), {&out, &xb}).parallel_run(kElementwiseGrain, streamed);
}

void run_loop(const Tensor& out, const Tensor& a, const Tensor& b, const InnerLoop& loop) {
  if (run_flat<2>(out, {&a, &b}, loop)) return;
  const Tensor ab = loop_operand(a, out);
  const Tensor bb = loop_operand(b, out);
  StridedLoop<3>(out.shape(), {&out, &ab, &bb}).parallel_run(kElementwiseGrain, loop);
}

int float_scalar_operand(DType operand, const Tensor& a, const Tensor& b) {
  if (operand != DType::kFloat16 && operand != DType::kBFloat16) return 0;
  if (b.ndim() == 0 && b.dtype() != operand) return 2;
  if (a.ndim() == 0 && a.dtype() != operand) return 1;
  return 0;
}

namespace {

void check_exponent(const char* prim, int64_t e) {
  KILN_CHECK_VALUE(e >= 0) << prim
                           << ": integers to negative integer powers are not allowed (got exponent "
                           << e << "); use a floating-point base or exponent";
}

}  // namespace

void check_operand(const char* prim, OperandCheck check, const Tensor& given, const Tensor& b) {
  if (!is_integral(b.dtype()) || b.numel() == 0) return;
  if (check == OperandCheck::kNonnegativeIntExponent && given.is_weak_scalar() &&
      given.dtype() == DType::kInt64) {
    const int64_t e = *given.data<int64_t>();
    check_exponent(prim, e);
    KILN_CHECK_VALUE(detail::int_fits(b.dtype(), e))
        << prim << ": the exponent " << e << " does not fit " << b.dtype()
        << ", the base's dtype; use a wider integer or a floating-point base";
  }
  visit_types<kIntTypes>(b.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    StridedLoop<1> loop(b.shape(), {&b});
    loop.parallel_run(kElementwiseGrain, [&](char* const* p, const int64_t* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        const T v = load<T>(p[0] + i * s[0]);
        if (check == OperandCheck::kNonzeroIntDivisor) {
          KILN_CHECK_VALUE(v != 0) << prim << ": integer division by zero";
        } else if constexpr (std::is_signed_v<T>) {
          if (v < 0) check_exponent(prim, v);
        }
      }
    });
  });
}

void check_number_fits(const char* prim, const Tensor& a, const Tensor& b) {
  for (const auto& [number, other] : {std::pair(&a, &b), std::pair(&b, &a)}) {
    if (!number->is_weak_scalar() || !is_integral(other->dtype()) || other->is_weak_scalar()) {
      continue;
    }
    const Scalar v = detail::scalar_value(*number);
    KILN_CHECK_VALUE(v.kind() != Scalar::Kind::kInt || detail::int_fits(other->dtype(), v.to_int()))
        << prim << ": the Python int " << v << " does not fit in " << other->dtype()
        << ", the other operand's dtype, where it would wrap; convert the tensor to a dtype that "
           "holds it first"
        << (prim == std::string_view("Maximum") || prim == std::string_view("Minimum")
                ? " (or use clamp, which compares numbers exactly)"
                : "");
  }
}

GradFn unary_grad(UnaryDerivative d) {
  return detail::one_output_rule([d](const std::vector<Tensor>& in, const Tensor& y, const Attrs&,
                                     const Tensor& g) {
    if (!detail::differentiable(in[0])) return std::vector<Tensor>{Tensor()};
    return std::vector<Tensor>{to(d(in[0], y, g), in[0].dtype())};
  });
}

GradFn binary_grad(BinaryDerivative d) {
  return detail::one_output_rule([d](const std::vector<Tensor>& in, const Tensor& y, const Attrs&,
                                     const Tensor& g) {
    const std::array<bool, 2> needed = {detail::differentiable(in[0]),
                                        detail::differentiable(in[1])};
    if (!needed[0] && !needed[1]) return std::vector<Tensor>(2);
    const std::array<Tensor, 2> grads = d(in[0], in[1], y, g, needed);
    return std::vector<Tensor>{detail::input_grad(grads[0], in[0]),
                               detail::input_grad(grads[1], in[1])};
  });
}

}  // namespace kiln::elementwise
