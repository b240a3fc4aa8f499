// kiln::Scalar: a Python-style number (bool, integer or floating) used as an op operand or
// attribute.
//
//   kiln::mul(x, kiln::Scalar(2.0));   // a float scalar times a tensor
//
// Scalars are "weak" in type promotion, as in NumPy 2 (NEP 50), PyTorch and JAX: they take the
// tensor's dtype when their kind fits in it (an int scalar with an int8 tensor stays int8, a float
// scalar with a float16 tensor stays float16), and a float scalar with an integer tensor gives the
// default floating dtype (default_float_dtype(): float32 unless set otherwise).
#pragma once

#include <cstdint>
#include <ostream>
#include <type_traits>

#include "kiln/dtype.h"

namespace kiln {

class Scalar {
 public:
  enum class Kind : uint8_t { kBool, kInt, kFloat };

  Scalar() : kind_(Kind::kInt), i_(0) {}
  Scalar(bool v) : kind_(Kind::kBool), i_(v) {}  // NOLINT: implicit like a Python literal
  Scalar(int v) : kind_(Kind::kInt), i_(v) {}  // NOLINT
  Scalar(int64_t v) : kind_(Kind::kInt), i_(v) {}  // NOLINT
  Scalar(double v) : kind_(Kind::kFloat), d_(v) {}  // NOLINT
  Scalar(float v) : kind_(Kind::kFloat), d_(v) {}  // NOLINT
  /// Any other integer type (size_t, long long, unsigned, ...), which was ambiguous among the
  /// constructors above; an unsigned value past INT64_MAX wraps, as a static_cast does.
  template <typename I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool> &&
                                             !std::is_same_v<I, int> && !std::is_same_v<I, int64_t>,
                                         int> = 0>
  Scalar(I v) : kind_(Kind::kInt), i_(static_cast<int64_t>(v)) {}  // NOLINT

  Kind kind() const { return kind_; }
  bool is_floating_point() const { return kind_ == Kind::kFloat; }
  bool is_integral() const { return kind_ == Kind::kInt; }
  bool is_bool() const { return kind_ == Kind::kBool; }

  double to_double() const { return kind_ == Kind::kFloat ? d_ : static_cast<double>(i_); }
  int64_t to_int() const { return kind_ == Kind::kFloat ? static_cast<int64_t>(d_) : i_; }
  bool to_bool() const { return kind_ == Kind::kFloat ? d_ != 0.0 : i_ != 0; }
  /// The value converted to T (T may be any element type, including Half and BFloat16).
  template <typename T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>) {
      return to_bool();
    } else if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(to_int());
    } else if constexpr (std::is_same_v<T, double>) {
      return to_double();
    } else {
      return T(static_cast<float>(to_double()));
    }
  }

  bool operator==(const Scalar& o) const {
    return kind_ == o.kind_ && (kind_ == Kind::kFloat ? d_ == o.d_ : i_ == o.i_);
  }
  bool operator!=(const Scalar& o) const { return !(*this == o); }

  /// The dtype of this scalar standing alone: bool, int64 or default_float_dtype() (Python's
  /// dtype for a tensor made from a literal), read when called.
  DType default_dtype() const {
    return kind_ == Kind::kBool ? DType::kBool
                                : (kind_ == Kind::kInt ? DType::kInt64 : default_float_dtype());
  }

 private:
  Kind kind_;
  union {
    int64_t i_;
    double d_;
  };
};

/// The result dtype of an op between a tensor of dtype `tensor` and a weak scalar.
inline DType promote_with_scalar(DType tensor, const Scalar& s) {
  if (s.is_floating_point()) return to_floating(tensor);
  if (s.is_integral()) return tensor == DType::kBool ? DType::kInt64 : tensor;
  return tensor;
}

/// Whether `a` and `b` are the same number whatever their kinds (1, 1.0 and True are): integers
/// compare exactly, not through double (2**53 + 1 is not 2**53), and a float equals an integer
/// only when it is that integer.
inline bool same_value(const Scalar& a, const Scalar& b) {
  if (a.is_floating_point() && b.is_floating_point()) return a.to_double() == b.to_double();
  if (!a.is_floating_point() && !b.is_floating_point()) return a.to_int() == b.to_int();
  const double d = a.is_floating_point() ? a.to_double() : b.to_double();
  const int64_t i = a.is_floating_point() ? b.to_int() : a.to_int();
  // [-2**63, 2**63): the doubles that convert to int64 without overflow.
  return d >= -0x1p63 && d < 0x1p63 && static_cast<double>(static_cast<int64_t>(d)) == d &&
         static_cast<int64_t>(d) == i;
}

inline std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  if (s.is_bool()) return os << (s.to_bool() ? "True" : "False");
  if (s.is_integral()) return os << s.to_int();
  return os << s.to_double();
}

}  // namespace kiln
