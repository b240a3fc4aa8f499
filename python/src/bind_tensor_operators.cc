// Python operators of kiln.Tensor (+ - * / // % ** & | ^ << >> with their reflected and in-place
// forms, comparisons, unary - ~ and abs()), the in-place methods of the binary ones (t.add_(x),
// t.bitwise_and_(m), ...), and the dtype conversions (.to(dtype), .float(), .int(), ...).
// Operands are TensorArg, so Python numbers work on either side as weak scalars; an operand Kiln
// cannot convert makes the operator return NotImplemented.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <string>

#include "bindings.h"
#include "convert.h"
#include "kiln/functional/elementwise.h"
#include "kiln/op.h"
#include "ops/scalar_range.h"

namespace kiln::py {
namespace nb = nanobind;
using namespace nb::literals;

namespace {

using BinaryFn = Tensor (*)(const Tensor&, const Tensor&, const Tensor&);

struct ArithmeticOperator {
  const char* forward;
  const char* reflected;
  const char* inplace;
  const char* inplace_method;  // PyTorch's spelling of the in-place form
  const char* prim;            // for the in-place dtype check
  BinaryFn fn;
  bool alpha;  // the method takes PyTorch's alpha (self + alpha * other)
};

constexpr ArithmeticOperator kArithmetic[] = {
    {"__add__", "__radd__", "__iadd__", "add_", "Add", &add, true},
    {"__sub__", "__rsub__", "__isub__", "sub_", "Sub", &sub, true},
    {"__mul__", "__rmul__", "__imul__", "mul_", "Mul", &mul, false},
    {"__truediv__", "__rtruediv__", "__itruediv__", "div_", "Div", &div, false},
    {"__floordiv__", "__rfloordiv__", "__ifloordiv__", "floor_divide_", "FloorDivide",
     &floor_divide, false},
    {"__mod__", "__rmod__", "__imod__", "remainder_", "Remainder", &remainder, false},
    {"__pow__", "__rpow__", "__ipow__", "pow_", "Pow", &pow, false},
    {"__and__", "__rand__", "__iand__", "bitwise_and_", "BitwiseAnd", &bitwise_and, false},
    {"__or__", "__ror__", "__ior__", "bitwise_or_", "BitwiseOr", &bitwise_or, false},
    {"__xor__", "__rxor__", "__ixor__", "bitwise_xor_", "BitwiseXor", &bitwise_xor, false},
    {"__lshift__", "__rlshift__", "__ilshift__", "bitwise_left_shift_", "BitwiseLeftShift",
     &bitwise_left_shift, false},
    {"__rshift__", "__rrshift__", "__irshift__", "bitwise_right_shift_", "BitwiseRightShift",
     &bitwise_right_shift, false},
};

// Python reflects comparisons itself (3 < t calls t.__gt__(3)), so they need no reflected form.
struct ComparisonOperator {
  const char* name;
  BinaryFn fn;
};

constexpr ComparisonOperator kComparisons[] = {
    {"__eq__", &eq}, {"__ne__", &ne}, {"__lt__", &lt},
    {"__le__", &le}, {"__gt__", &gt}, {"__ge__", &ge},
};

// TensorMeta::of is not exported from libkiln, so the binding builds the metadata itself.
TensorMeta meta_of(const Tensor& t) {
  TensorMeta m(t.dtype(), t.shape());
  m.weak = t.is_weak_scalar();
  return m;
}

/// A result of `shape` (self and the other operand broadcast) must fit self, checked at the call:
/// the op's own check runs in its planning step, which the asynchronous modes run later, where
/// the failure lands on self (a view, perhaps) and reading the tensor it views never raises it.
void check_inplace_shape(const char* op, const Tensor& self, const Shape& shape) {
  KILN_CHECK_SHAPE(shape == self.shape())
      << op << ": the result has shape " << shape_str(shape) << " (the operands broadcast), which "
      << "does not fit the tensor written, of shape " << shape_str(self.shape());
  check_writable(op, self);
}

}  // namespace

void check_writable(const char* what, const Tensor& t) {
  for (int64_t d = 0; d < t.ndim(); ++d) {
    KILN_CHECK_VALUE(t.strides()[d] != 0 || t.shape()[d] <= 1)
        << what << ": the tensor written (shape " << shape_str(t.shape()) << ", strides "
        << shape_str(t.strides()) << ") has elements that share memory (an expanded view); "
        << "write into a tensor of its own (clone() the view first)";
  }
}

void check_inplace(const char* what, const char* prim, const Tensor& self, const Tensor& other) {
  const OpDefPtr def = OpRegistry::Instance().get(prim);
  MetaList operands = {meta_of(self)};
  if (other.defined()) operands.push_back(meta_of(other));
  const TensorMeta result = def->infer_outputs(operands, def->normalize_attrs({})).at(0);
  check_result_fits(what, self, result.dtype, result.shape);
}

Tensor times_alpha(const char* op, const Tensor& input, const Tensor& other, const Tensor& alpha) {
  const DType result = result_type(meta_of(input), meta_of(other));
  KILN_CHECK_DTYPE(alpha.dtype() != DType::kBool || result == DType::kBool)
      << op << ": a bool alpha is only supported for bool results, got " << result << " operands";
  KILN_CHECK_DTYPE(!is_floating_point(alpha.dtype()) || is_floating_point(result))
      << op << ": for integer operands (" << result << ") alpha must be an integer, not the "
      << "floating-point " << detail::scalar_value(alpha);
  if (other.is_weak_scalar() && alpha.is_weak_scalar()) {
    const Scalar a = detail::scalar_value(other);
    const Scalar b = detail::scalar_value(alpha);
    if (a.is_floating_point() || b.is_floating_point()) {
      return Tensor::scalar(Scalar(a.to_double() * b.to_double()));
    }
    // Wraps around as the integer ops do, without signed overflow.
    return Tensor::scalar(Scalar(static_cast<int64_t>(static_cast<uint64_t>(a.to_int()) *
                                                      static_cast<uint64_t>(b.to_int()))));
  }
  return mul(other, alpha);
}

void check_result_fits(const char* what, const Tensor& self, DType dtype, const Shape& shape) {
  KILN_CHECK_DTYPE(can_write_result(dtype, self.dtype()))
      << what << ": result type " << dtype << " can't be cast to the desired output type "
      << self.dtype();
  check_inplace_shape(what, self, shape);
}

namespace {

/// Defines `name` as a method of kiln.Tensor.
template <typename F, typename... Extra>
void def_method(nb::handle cls, const char* name, F&& f, const Extra&... extra) {
  nb::cpp_function_def(std::forward<F>(f), nb::scope(cls), nb::name(name), nb::is_method(),
                       extra...);
}

/// The operand an operator makes of a Python int beyond int64 (TensorArg::big_int): a weak
/// float64 beside a floating-point tensor, as NumPy and PyTorch take it; beside an integer or
/// bool tensor an error (NumPy raises too), where Python would otherwise fall back to `t == big`
/// being False and `t + big` a TypeError about the types.
Tensor big_int_operand(const char* op, const Tensor& self, nb::handle big) {
  KILN_CHECK_VALUE(is_floating_point(self.dtype()))
      << op << ": the Python int " << nb::str(big).c_str()
      << " does not fit int64, the range of Kiln's integer scalars, so it cannot be combined with "
      << "a " << self.dtype() << " tensor; use a float or a floating-point tensor";
  const double value = PyLong_AsDouble(big.ptr());
  if (value == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    KILN_FAIL(kValue) << op << ": the Python int " << nb::str(big).c_str()
                      << " is past float64's range (about 1.8e308)";
  }
  return Tensor::scalar(Scalar(value));
}

/// call(o) with `other` as operator `op`'s operand beside `self`.
template <typename Call>
auto with_operand(const char* op, const Tensor& self, const TensorArg& other, const Call& call) {
  if (other.big_int().is_valid()) [[unlikely]] {
    return call(big_int_operand(op, self, other.big_int()));
  }
  return call(other.get());
}

/// self op= other (times alpha when given), written into self through `out`, for in-place
/// operator or method `name`; returns self.
nb::object write_in_place(nb::handle self, const char* name, const ArithmeticOperator& op,
                          const TensorArg& other, const std::optional<TensorArg>& alpha) {
  const Tensor& t = nb::cast<const Tensor&>(self);
  with_operand(name, t, other, [&](const Tensor& o) {
    const Tensor operand = alpha ? times_alpha(name, t, o, alpha->get()) : o;
    check_inplace(name, op.prim, t, operand);
    op.fn(t, operand, t);
  });
  return nb::borrow(self);
}

}  // namespace

// Everything here goes on kiln.Tensor, but for the in-place methods' check.
void bind_tensor_operators(nb::module_& m) {
  nb::handle cls = nb::type<Tensor>();

  for (const ArithmeticOperator& op : kArithmetic) {
    def_method(
        cls, op.forward,
        [p = &op](const Tensor& self, TensorArg other) {
          return with_operand(p->forward, self, other,
                              [&](const Tensor& o) { return tensor_object(p->fn(self, o, {})); });
        },
        nb::is_operator());
    def_method(
        cls, op.reflected,
        [p = &op](const Tensor& self, TensorArg other) {
          return with_operand(p->reflected, self, other,
                              [&](const Tensor& o) { return tensor_object(p->fn(o, self, {})); });
        },
        nb::is_operator());
    // In place: the result is written into self through `out` and self itself is returned. An
    // operand the operator cannot take is NotImplemented (Python then tries the other side); the
    // method, PyTorch's spelling, raises a TypeError for it.
    def_method(
        cls, op.inplace,
        [p = &op](nb::handle self, TensorArg other) {
          return write_in_place(self, p->inplace, *p, other, std::nullopt);
        },
        nb::is_operator());
    const std::string doc = std::string("In place: self = ") + op.prim +
                            "(self, other), keeping self's dtype and shape (a result that does not "
                            "fit is an error at the call); returns self.";
    if (op.alpha) {
      def_method(
          cls, op.inplace_method,
          [p = &op](nb::handle self, TensorArg other, std::optional<TensorArg> alpha) {
            return write_in_place(self, p->inplace_method, *p, other, alpha);
          },
          "other"_a, nb::kw_only(), "alpha"_a = nb::none(),
          (doc + " With alpha, other is multiplied by it first (PyTorch's alpha).").c_str());
    } else {
      def_method(
          cls, op.inplace_method,
          [p = &op](nb::handle self, TensorArg other) {
            return write_in_place(self, p->inplace_method, *p, other, std::nullopt);
          },
          "other"_a, doc.c_str());
    }
  }
  for (const ComparisonOperator& op : kComparisons) {
    def_method(
        cls, op.name,
        [p = &op](const Tensor& self, TensorArg other) {
          return with_operand(p->name, self, other,
                              [&](const Tensor& o) { return tensor_object(p->fn(self, o, {})); });
        },
        nb::is_operator());
  }
  // For the in-place methods written in Python (kiln/_tensor_methods.py), whose results are
  // computed before they are written.
  m.def(
      "_check_result_fits",
      [](const std::string& what, const Tensor& self, const Tensor& result) {
        check_result_fits(what.c_str(), self, result.dtype(), result.shape());
      },
      "what"_a, "self"_a, "result"_a,
      "Raises, as the in-place operators do, when `result` cannot be written into `self` (its "
      "dtype, or its shape).");
  def_method(cls, "__neg__", [](const Tensor& self) { return neg(self); });
  // +t is t itself, as PyTorch's (a numeric tensor; ~ is the bool one's operator).
  def_method(cls, "__pos__", [](nb::handle self) {
    KILN_CHECK_DTYPE(nb::cast<const Tensor&>(self).dtype() != DType::kBool)
        << "operator +: expected a numeric tensor, got bool";
    return nb::borrow(self);
  });
  def_method(cls, "__abs__", [](const Tensor& self) { return abs(self); });
  def_method(cls, "__invert__", [](const Tensor& self) { return bitwise_not(self); });
  // Defining __eq__ would otherwise leave tensors unhashable; hash by identity, as PyTorch does.
  nb::setattr(cls, "__hash__",
              nb::handle(reinterpret_cast<PyObject*>(&PyBaseObject_Type)).attr("__hash__"));

  def_method(
      cls, "to",
      [](const Tensor& self, nb::handle target, nb::handle dtype, bool /*non_blocking*/, bool copy,
         nb::handle device) {
        DType result = self.dtype();
        if (const Tensor* other = tensor_ptr(target.ptr())) {
          result = other->dtype();
        } else if (!target.is_none() && !is_device("to", target)) {
          result = DTypeArg{nb::borrow(target)}.get();
        }
        check_device("to", device);
        if (!dtype.is_none()) result = DTypeArg{nb::borrow(dtype)}.get();
        // A copy is a recorded op, so that autograd and the jit see it, as every conversion.
        if (copy) {
          static const OpDefPtr cast = OpRegistry::Instance().get("Cast");
          return call_op(*cast, {self}, {{"dtype", result}})[0];
        }
        return to(self, result);
      },
      "target"_a = nb::none(), "dtype"_a = nb::none(), "non_blocking"_a = false, "copy"_a = false,
      nb::kw_only(), "device"_a = nb::none(),
      "PyTorch's to(dtype), to(other) (other's dtype), to(device, dtype) and to(device=...): this "
      "tensor converted to the dtype, itself when it has it already, a new tensor with "
      "copy=True. The device may be 'cpu' (Kiln runs on the CPU) or None; non_blocking changes "
      "nothing (Kiln's pipeline orders every read after the writes).");
  def_method(
      cls, "cpu", [](nb::handle self) { return nb::borrow(self); },
      "This tensor itself: Kiln's tensors are on the CPU (PyTorch's t.cpu()).");
  struct Conversion {
    const char* name;
    DType dtype;
  };
  static constexpr Conversion kConversions[] = {
      {"float", DType::kFloat32},     {"double", DType::kFloat64}, {"half", DType::kFloat16},
      {"bfloat16", DType::kBFloat16}, {"int", DType::kInt32},      {"long", DType::kInt64},
      {"bool", DType::kBool},
  };
  for (const Conversion& c : kConversions) {
    def_method(cls, c.name, [dtype = c.dtype](const Tensor& self) { return to(self, dtype); });
  }
}

}  // namespace kiln::py
