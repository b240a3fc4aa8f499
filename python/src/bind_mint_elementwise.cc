// kiln.mint's elementwise functions (kiln.mint.exp, kiln.mint.add, kiln.mint.where, ...) and their
// Tensor method forms (x.exp(), x.exp_() in place, x.add(y), x.clamp(min=0)), bound from one table
// so that they never drift apart. Operands are TensorArg (Python numbers become weak scalars); each
// function takes an optional keyword `out` and then returns that very object.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>
#include <string>

#include "bindings.h"
#include "convert.h"
#include "kiln/functional/elementwise.h"
#include "kiln/op.h"

namespace kiln::py {
namespace nb = nanobind;
using namespace nb::literals;

namespace {

using UnaryFn = Tensor (*)(const Tensor&, const Tensor&);
using BinaryFn = Tensor (*)(const Tensor&, const Tensor&, const Tensor&);

struct UnaryEntry {
  const char* name;     // kiln.mint function and Tensor method
  const char* inplace;  // Tensor method writing self
  const char* prim;     // primitive, whose doc() the binding reuses
  UnaryFn fn;
};
struct BinaryEntry {
  const char* name;
  const char* prim;
  BinaryFn fn;
  bool alpha = false;  // takes PyTorch's alpha: input op alpha * other
  // Tensor method writing self (optional; default: none here, as for the operators' in-place
  // methods, bound in bind_tensor_operators.cc)
  const char* inplace = nullptr;
};

constexpr UnaryEntry kUnary[] = {
    {"neg", "neg_", "Neg", &neg},
    {"abs", "abs_", "Abs", &abs},
    {"sign", "sign_", "Sign", &sign},
    {"exp", "exp_", "Exp", &exp},
    {"expm1", "expm1_", "Expm1", &expm1},
    {"log", "log_", "Log", &log},
    {"log1p", "log1p_", "Log1p", &log1p},
    {"log2", "log2_", "Log2", &log2},
    {"sqrt", "sqrt_", "Sqrt", &sqrt},
    {"rsqrt", "rsqrt_", "Rsqrt", &rsqrt},
    {"reciprocal", "reciprocal_", "Reciprocal", &reciprocal},
    {"square", "square_", "Square", &square},
    {"sin", "sin_", "Sin", &sin},
    {"cos", "cos_", "Cos", &cos},
    {"tan", "tan_", "Tan", &tan},
    {"tanh", "tanh_", "Tanh", &tanh},
    {"sigmoid", "sigmoid_", "Sigmoid", &sigmoid},
    {"relu", "relu_", "Relu", &relu},
    {"silu", "silu_", "Silu", &silu},
    {"erf", "erf_", "Erf", &erf},
    {"erfc", "erfc_", "Erfc", &erfc},
    {"exp2", "exp2_", "Exp2", &exp2},
    {"asin", "asin_", "Asin", &asin},
    {"acos", "acos_", "Acos", &acos},
    {"atan", "atan_", "Atan", &atan},
    {"sinh", "sinh_", "Sinh", &sinh},
    {"cosh", "cosh_", "Cosh", &cosh},
    {"asinh", "asinh_", "Asinh", &asinh},
    {"acosh", "acosh_", "Acosh", &acosh},
    {"atanh", "atanh_", "Atanh", &atanh},
    {"erfinv", "erfinv_", "Erfinv", &erfinv},
    {"lgamma", "lgamma_", "Lgamma", &lgamma},
    {"digamma", "digamma_", "Digamma", &digamma},
    // PyTorch's NumPy-style aliases: the same op under a second name.
    {"arcsin", "arcsin_", "Asin", &asin},
    {"arccos", "arccos_", "Acos", &acos},
    {"arctan", "arctan_", "Atan", &atan},
    {"arcsinh", "arcsinh_", "Asinh", &asinh},
    {"arccosh", "arccosh_", "Acosh", &acosh},
    {"arctanh", "arctanh_", "Atanh", &atanh},
    {"floor", "floor_", "Floor", &floor},
    {"ceil", "ceil_", "Ceil", &ceil},
    {"round", "round_", "Round", &round},
    {"trunc", "trunc_", "Trunc", &trunc},
    {"logical_not", "logical_not_", "LogicalNot", &logical_not},
    {"bitwise_not", "bitwise_not_", "BitwiseNot", &bitwise_not},
};

constexpr BinaryEntry kBinary[] = {
    {"add", "Add", &add, true},
    {"sub", "Sub", &sub, true},
    {"mul", "Mul", &mul},
    {"div", "Div", &div},
    {"floor_divide", "FloorDivide", &floor_divide},
    {"trunc_divide", "TruncDivide", &trunc_divide},
    {"remainder", "Remainder", &remainder},
    {"fmod", "Fmod", &fmod, false, "fmod_"},
    {"atan2", "Atan2", &atan2, false, "atan2_"},
    {"arctan2", "Atan2", &atan2, false, "arctan2_"},  // PyTorch's alias
    {"pow", "Pow", &pow},
    {"maximum", "Maximum", &maximum},
    {"minimum", "Minimum", &minimum},
    {"eq", "Eq", &eq},
    {"ne", "Ne", &ne},
    {"lt", "Lt", &lt},
    {"le", "Le", &le},
    {"gt", "Gt", &gt},
    {"ge", "Ge", &ge},
    {"logical_and", "LogicalAnd", &logical_and},
    {"logical_or", "LogicalOr", &logical_or},
    {"logical_xor", "LogicalXor", &logical_xor},
    {"bitwise_and", "BitwiseAnd", &bitwise_and},
    {"bitwise_or", "BitwiseOr", &bitwise_or},
    {"bitwise_xor", "BitwiseXor", &bitwise_xor},
    {"bitwise_left_shift", "BitwiseLeftShift", &bitwise_left_shift},
    {"bitwise_right_shift", "BitwiseRightShift", &bitwise_right_shift},
};

/// Runs f(out tensor) with an undefined tensor for out=None; returns the new tensor, or the `out`
/// object itself (so `mint.add(x, y, out=z) is z`, as in PyTorch).
template <typename F>
TensorObject with_out(nb::handle out, F&& f) {
  if (out.is_none()) return tensor_object(f(Tensor()));
  KILN_CHECK_TYPE(nb::isinstance<Tensor>(out))
      << "out: expected a kiln.Tensor or None, got " << nb::type_name(out.type()).c_str();
  check_writable("out", nb::cast<const Tensor&>(out));
  f(nb::cast<const Tensor&>(out));
  return TensorObject(nb::borrow(out));
}

/// A bound of clamp(x, ...): None, or a Python (or NumPy) number keeping its kind; an int past
/// int64 is a float beside a floating-point x, as in the operators.
std::optional<Scalar> optional_scalar(nb::handle value, const char* what, const Tensor& x) {
  if (value.is_none()) return std::nullopt;
  PyObject* v = value.ptr();
  if (PyBool_Check(v)) return Scalar(v == Py_True);
  if (PyIndex_Check(v)) {
    int overflow = 0;
    nb::object index = nb::steal(PyNumber_Index(v));
    if (!index.is_valid()) throw nb::python_error();
    const long long i = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
    if (overflow == 0) return Scalar(static_cast<int64_t>(i));
    KILN_CHECK_VALUE(is_floating_point(x.dtype()))
        << "clamp: " << what << " " << nb::str(index).c_str()
        << " does not fit int64, the range of Kiln's integer scalars, so it cannot bound a "
        << x.dtype() << " tensor; use a float";
    const double d = PyLong_AsDouble(index.ptr());
    if (d == -1.0 && PyErr_Occurred()) throw nb::python_error();  // past double's range
    return Scalar(d);
  }
  if (PyFloat_Check(v) || nb::hasattr(value, "__float__")) {
    const double d = PyFloat_AsDouble(v);
    if (d == -1.0 && PyErr_Occurred()) throw nb::python_error();
    return Scalar(d);
  }
  KILN_FAIL(kType) << "clamp: expected " << what << " to be a number, a kiln.Tensor or None, got "
                   << nb::type_name(value.type()).c_str();
}

/// True when either clamp bound is a kiln.Tensor: then both go to the tensor form of clamp.
bool tensor_bounds(nb::handle min, nb::handle max) {
  return tensor_ptr(min.ptr()) != nullptr || tensor_ptr(max.ptr()) != nullptr;
}

/// A bound of the tensor form: the tensor, a weak scalar for a number, undefined for None.
Tensor bound_tensor(nb::handle value, const char* what, const Tensor& x) {
  if (const Tensor* t = tensor_ptr(value.ptr())) return *t;
  const std::optional<Scalar> number = optional_scalar(value, what, x);
  return number ? Tensor::scalar(*number) : Tensor();
}

/// clamp(x, min, max, out) with bounds that are numbers, tensors or None.
Tensor clamp_with(const Tensor& x, nb::handle min, nb::handle max, const Tensor& out) {
  if (tensor_bounds(min, max)) {
    return clamp(x, bound_tensor(min, "min", x), bound_tensor(max, "max", x), out);
  }
  return clamp(x, optional_scalar(min, "min", x), optional_scalar(max, "max", x), out);
}

const char* doc_of(const char* prim) { return OpRegistry::Instance().get(prim)->doc().c_str(); }

/// Clamp's op documentation and the tensor form, which is not an op of its own.
const char* clamp_doc() {
  static const std::string doc =
      std::string(doc_of("Clamp")) +
      ". With a kiln.Tensor bound: minimum(maximum(x, min), max), broadcast and promoted with x "
      "(max wins where min > max, as in PyTorch); an element equal to a tensor bound shares the "
      "gradient with it, as maximum and minimum do.";
  return doc.c_str();
}

/// polygamma's order n: an int or anything with __index__, never a bool or a float (as
/// PyTorch's int argument). Negative orders are the op's to refuse.
int64_t polygamma_order(nb::handle n) {
  KILN_CHECK_TYPE(is_index(n.ptr())) << "polygamma: expected n to be an int, got " << repr_of(n);
  nb::object index = nb::steal(PyNumber_Index(n.ptr()));
  if (!index.is_valid()) throw nb::python_error();
  int overflow = 0;
  const long long order = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  KILN_CHECK_VALUE(overflow == 0) << "polygamma: expected n within int64, got " << repr_of(n);
  return order;
}

/// kiln.mint.polygamma(n, input) (the order first, as torch.polygamma), Tensor.polygamma(n) and
/// Tensor.polygamma_(n).
void def_polygamma(nb::module_& mint, nb::handle tensor_type) {
  mint.def(
      "polygamma",
      [](nb::handle n, TensorArg x, nb::handle out) {
        const int64_t order = polygamma_order(n);
        return with_out(out, [&](const Tensor& o) { return polygamma(order, x, o); });
      },
      "n"_a, "input"_a, nb::kw_only(), "out"_a = nb::none(), doc_of("Polygamma"));
  nb::cpp_function_def(
      [](const Tensor& self, nb::handle n) {
        return tensor_object(polygamma(polygamma_order(n), self));
      },
      nb::scope(tensor_type), nb::name("polygamma"), nb::is_method(), "n"_a, doc_of("Polygamma"));
  nb::cpp_function_def(
      [](nb::handle self, nb::handle n) {
        const Tensor& t = nb::cast<const Tensor&>(self);
        const int64_t order = polygamma_order(n);
        // check_inplace's checks, with the op's n (its infer also refuses a negative one here).
        const OpDefPtr op = OpRegistry::Instance().get("Polygamma");
        const TensorMeta result = op->infer_outputs({TensorMeta(t.dtype(), t.shape())},
                                                    op->normalize_attrs({{"n", order}}))
                                      .at(0);
        check_result_fits("polygamma_", t, result.dtype, result.shape);
        polygamma(order, t, t);
        return nb::borrow(self);
      },
      nb::scope(tensor_type), nb::name("polygamma_"), nb::is_method(), "n"_a,
      (std::string("In place: self = polygamma(n, self): ") + doc_of("Polygamma") +
       ". self keeps its dtype (a floating-point result does not fit an integer tensor); returns "
       "self.")
          .c_str());
}

/// add / sub with PyTorch's alpha (input + alpha * other): the function and the method.
void def_binary_with_alpha(nb::module_& mint, nb::handle tensor_type, const BinaryEntry& e) {
  const std::string doc =
      std::string(doc_of(e.prim)) + ". With alpha, other is multiplied by it first.";
  const auto scaled = [name = e.name](const Tensor& input, const Tensor& other,
                                      const std::optional<TensorArg>& alpha) {
    return alpha ? times_alpha(name, input, other, alpha->get()) : other;
  };
  mint.def(
      e.name,
      [fn = e.fn, scaled](TensorArg a, TensorArg b, std::optional<TensorArg> alpha,
                          nb::handle out) {
        return with_out(out, [&](const Tensor& o) { return fn(a, scaled(a, b, alpha), o); });
      },
      "input"_a, "other"_a, nb::kw_only(), "alpha"_a = nb::none(), "out"_a = nb::none(),
      doc.c_str());
  nb::cpp_function_def(
      [fn = e.fn, scaled](const Tensor& self, TensorArg other, std::optional<TensorArg> alpha) {
        return tensor_object(fn(self, scaled(self, other, alpha), {}));
      },
      nb::scope(tensor_type), nb::name(e.name), nb::is_method(), "other"_a, nb::kw_only(),
      "alpha"_a = nb::none(), doc.c_str());
}

}  // namespace

void bind_mint_elementwise(nb::module_& mint) {
  nb::handle tensor_type = nb::type<Tensor>();
  for (const UnaryEntry& e : kUnary) {
    mint.def(
        e.name,
        [fn = e.fn](TensorArg x, nb::handle out) {
          return with_out(out, [&](const Tensor& o) { return fn(x, o); });
        },
        "input"_a, nb::kw_only(), "out"_a = nb::none(), doc_of(e.prim));
    nb::cpp_function_def(
        [fn = e.fn](const Tensor& self) { return tensor_object(fn(self, Tensor())); },
        nb::scope(tensor_type), nb::name(e.name), nb::is_method(), doc_of(e.prim));
    nb::cpp_function_def(
        [e = &e](nb::handle self) {
          const Tensor& t = nb::cast<const Tensor&>(self);
          check_inplace(e->inplace, e->prim, t, Tensor());
          e->fn(t, t);
          return nb::borrow(self);
        },
        nb::scope(tensor_type), nb::name(e.inplace), nb::is_method(),
        (std::string("In place: ") + doc_of(e.prim) +
         ". self is overwritten with the result, keeping its dtype (a result that does not fit, "
         "such as sqrt of an integer tensor, is an error at the call); returns self.")
            .c_str());
  }
  for (const BinaryEntry& e : kBinary) {
    if (e.alpha) {
      def_binary_with_alpha(mint, tensor_type, e);
      continue;
    }
    mint.def(
        e.name,
        [fn = e.fn](TensorArg a, TensorArg b, nb::handle out) {
          return with_out(out, [&](const Tensor& o) { return fn(a, b, o); });
        },
        "input"_a, "other"_a, nb::kw_only(), "out"_a = nb::none(), doc_of(e.prim));
    nb::cpp_function_def(
        [fn = e.fn](const Tensor& self, TensorArg other) {
          return tensor_object(fn(self, other, {}));
        },
        nb::scope(tensor_type), nb::name(e.name), nb::is_method(), "other"_a, doc_of(e.prim));
    if (e.inplace == nullptr) continue;
    nb::cpp_function_def(
        [e = &e](nb::handle self, TensorArg other) {
          const Tensor& t = nb::cast<const Tensor&>(self);
          const Tensor& o = other;
          check_inplace(e->inplace, e->prim, t, o);
          e->fn(t, o, t);
          return nb::borrow(self);
        },
        nb::scope(tensor_type), nb::name(e.inplace), nb::is_method(), "other"_a,
        (std::string("In place: self = ") + e.prim + "(self, other): " + doc_of(e.prim) +
         ". self keeps its dtype and shape (a result that does not fit is an error at the call); "
         "returns self.")
            .c_str());
  }
  mint.def(
      "where",
      [](TensorArg cond, TensorArg a, TensorArg b, nb::handle out) {
        return with_out(out, [&](const Tensor& o) { return where(cond, a, b, o); });
      },
      "condition"_a, "input"_a, "other"_a, nb::kw_only(), "out"_a = nb::none(), doc_of("Where"));
  mint.def(
      "gelu",
      [](TensorArg x, const std::string& approximate, nb::handle out) {
        return with_out(out, [&](const Tensor& o) { return gelu(x, approximate, o); });
      },
      "input"_a, "approximate"_a = "none", nb::kw_only(), "out"_a = nb::none(), doc_of("Gelu"));
  def_polygamma(mint, tensor_type);
  // Tensor.clamp is bound here, beside kiln.mint.clamp, so both share the bound conversion.
  mint.def(
      "clamp",
      [](TensorArg x, nb::handle min, nb::handle max, nb::handle out) {
        return with_out(out, [&](const Tensor& o) { return clamp_with(x, min, max, o); });
      },
      "input"_a, "min"_a = nb::none(), "max"_a = nb::none(), nb::kw_only(), "out"_a = nb::none(),
      clamp_doc());
  nb::cpp_function_def([](const Tensor& self, nb::handle min,
                          nb::handle max) { return clamp_with(self, min, max, Tensor()); },
                       nb::scope(tensor_type), nb::name("clamp"), nb::is_method(),
                       "min"_a = nb::none(), "max"_a = nb::none(), clamp_doc());
}

}  // namespace kiln::py
