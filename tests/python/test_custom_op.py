"""Custom ops built from examples/custom_op/ (one extension, built once per session): calling
them, their numerics against NumPy, and the errors a wrong call gets."""

import inspect

import numpy as np
import pytest

import kiln
from conftest import EXAMPLES_DIR, assert_close, raises

mint = kiln.mint


def t(array):
    return kiln.tensor(np.asarray(array))


def complex_to_pairs(z, dtype):
    return np.stack([z.real, z.imag], axis=-1).astype(dtype)


@pytest.mark.parametrize("shape", [(16,), (3, 5), (2, 3, 4), ()])
def test_add3_matches_numpy(example_ops, rng, shape):
    x, y, z = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
    assert_close(example_ops.add3(t(x), t(y), t(z)), x + y + z)
    assert_close(example_ops.add3(t(x), z=t(z), y=t(y)), x + y + z)


@pytest.mark.parametrize("view", [lambda a: a.T, lambda a: a[:, ::2],
                                  lambda a: a[:1].expand([4, 6])],
                         ids=["transposed", "sliced", "broadcast"])
def test_add3_reads_strided_inputs_by_their_strides(example_ops, rng, view):
    # A kernel gets the tensors as passed: reading data<float>() linearly gave the storage order.
    x = rng.standard_normal((4, 6)).astype(np.float32)
    y = view(t(x))
    other = t(rng.standard_normal(y.shape).astype(np.float32))
    assert_close(example_ops.add3(y, other, y), y.numpy() * 2 + other.numpy())


def test_add3_writes_a_strided_out_by_its_strides(tmp_path, extension_cache, rng):
    # CustomAdd3 run with an output view, as code reusing the example's runner may do.
    source = tmp_path / "add3_into.cpp"
    source.write_text("""\
#include "add3.cpp"
void add3_into(const kiln::Tensor& x, const kiln::Tensor& y, const kiln::Tensor& z,
               const kiln::Tensor& out) {
  std::make_shared<CustomAdd3>("Add3")->Run({x, y, z}, {out});
}
KILN_EXTENSION(m) { m.def("add3_into", &add3_into, {"x", "y", "z", "out"}); }
""")
    ops = kiln.ops.CustomOpBuilder("add3_into", [source], include_paths=[EXAMPLES_DIR],
                                   build_dir=extension_cache, debug=True).load()
    x = rng.standard_normal((2, 3)).astype(np.float32)
    base = mint.zeros([3, 2])
    ops.add3_into(t(x), t(x), t(x), base.T)
    assert_close(base, 3 * x.T)


def test_add3_refuses_inputs_of_different_shapes(example_ops):
    # The kernel reads x.numel() elements of each input: a smaller y or z was read past its end.
    with raises(kiln.ShapeError, match=r"add3: expected x, y and z of one shape, got \[1048576\], "
                                       r"\[1\] and \[1\]"):
        example_ops.add3(mint.ones([1 << 20]), mint.zeros([1]), mint.zeros([1]))
    with raises(kiln.ShapeError, match=r"got \[2, 3\], \[2, 3\] and \[3, 2\]"):
        example_ops.add3(mint.ones([2, 3]), mint.ones([2, 3]), mint.ones([3, 2]))


def test_functions_describe_themselves(example_ops, example_ops_builder):
    assert str(inspect.signature(example_ops.add3)) == "(x, y, z)"
    # A trailing optional tensor may be left out, so the signature gives it None as a default.
    assert str(inspect.signature(example_ops.linear_gelu)) == "(x, weight, bias=None)"
    assert example_ops.linear_gelu.__doc__.startswith("gelu(x @ weight.T + bias)")
    assert example_ops.__file__ == example_ops_builder.build()
    assert set(example_ops.__all__) == {"add3", "addmm", "gemv", "linear_gelu", "rfft", "irfft",
                                        "fft", "sin_cos", "split_rows", "row_moments"}


@pytest.mark.parametrize("call, message", [
    (lambda ops, x: ops.add3(x, 1.0, x),
     "add3(): argument 'y' (position 2) must be kiln.Tensor, not float"),
    (lambda ops, x: ops.add3(x, x, np.ones(4, np.float32)),
     "add3(): argument 'z' (position 3) must be kiln.Tensor, not numpy.ndarray"),
    (lambda ops, x: ops.add3(x, x), "add3() missing required argument 'z' (position 3)"),
    (lambda ops, x: ops.add3(x, x, x, x), "add3() takes 3 positional arguments but 4 were given"),
    (lambda ops, x: ops.add3(x, x, x, w=x), "add3() got an unexpected keyword argument 'w'"),
    (lambda ops, x: ops.add3(x, x, x, x=x), "add3() got multiple values for argument 'x'"),
    (lambda ops, x: ops.fft(x, inverse=1, norm="ortho"),
     "fft(): argument 'inverse' (position 2) must be bool, not int"),
    (lambda ops, x: ops.irfft(x, 2.5, "backward"),
     "irfft(): argument 'n' (position 2) must be int, not float"),
    (lambda ops, x: ops.rfft(x, norm=3), "rfft(): argument 'norm' (position 2) must be str, not int"),
    (lambda ops, x: ops.addmm(x, x, x, "2", 1.0),
     "addmm(): argument 'alpha' (position 4) must be float, not str"),
    (lambda ops, x: ops.linear_gelu(x, x, 0),
     "linear_gelu(): argument 'bias' (position 3) must be kiln.Tensor or None, not int"),
])
def test_wrong_arguments_raise_type_error_naming_the_parameter(example_ops, call, message):
    x = kiln.mint.ones([4])
    with raises(TypeError) as info:
        call(example_ops, x)
    assert str(info.value) == message


def test_kernel_errors_name_the_op_and_its_inputs(example_ops):
    x = kiln.mint.ones([4])
    with raises(kiln.DTypeError) as info:
        example_ops.add3(x, x, kiln.tensor([1, 2, 3, 4]))
    assert "data<float32>() called on a tensor of dtype int64" in str(info.value)
    assert "in Add3(float32[4], float32[4], int64[4])" in str(info.value)
    with raises(kiln.ShapeError, match=r"linear_gelu: expected x \[N, in\] and weight"):
        example_ops.linear_gelu(kiln.mint.ones([2, 3]), kiln.mint.ones([4, 5]), None)


@pytest.mark.parametrize("with_bias", [True, False])
def test_linear_gelu_matches_numpy(example_ops, rng, with_bias):
    x = rng.standard_normal((7, 12)).astype(np.float32)
    w = rng.standard_normal((5, 12)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    z = x @ w.T + (b if with_bias else 0)
    expected = 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z ** 3)))
    out = example_ops.linear_gelu(t(x), t(w), t(b) if with_bias else None)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-4, atol=1e-5)


def test_linear_gelu_of_empty_shapes(example_ops):
    # No rows or no outputs: an empty result (oneDNN is not called: it divides by zero there).
    for x_shape, w_shape, shape in (((0, 4), (3, 4), (0, 3)), ((2, 4), (0, 4), (2, 0))):
        assert example_ops.linear_gelu(kiln.mint.ones(x_shape), kiln.mint.ones(w_shape),
                                       None).shape == shape
    # No inputs: gelu of the bias, as for any product over nothing.
    out = example_ops.linear_gelu(kiln.mint.ones((2, 0)), kiln.mint.ones((3, 0)),
                                  t(np.array([-1.0, 0.0, 1.0], np.float32)))
    gelu = [-0.158808, 0.0, 0.841192]
    np.testing.assert_allclose(out.numpy(), np.array([gelu, gelu], np.float32), atol=1e-5)


def test_rfft_of_no_points_is_refused(example_ops):
    with raises(kiln.KilnValueError, match="expected a signal of at least one point"):
        example_ops.rfft(kiln.mint.zeros((4, 0)), "backward")


def test_addmm_and_gemv_match_numpy(example_ops, rng):
    a = rng.standard_normal((6, 9)).astype(np.float32)
    b = rng.standard_normal((9, 4)).astype(np.float32)
    c = rng.standard_normal((6, 4)).astype(np.float32)
    np.testing.assert_allclose(example_ops.addmm(t(c), t(a), t(b), 0.5, 2.0).numpy(),
                               0.5 * a @ b + 2.0 * c, rtol=1e-5, atol=1e-5)
    # A transposed operand is a strided view: BLAS reads it in place.
    np.testing.assert_allclose(example_ops.addmm(t(c), t(a.T.copy()).T, t(b), 1.0, 0.0).numpy(),
                               a @ b, rtol=1e-5, atol=1e-5)
    v = rng.standard_normal(9).astype(np.float32)
    np.testing.assert_allclose(example_ops.gemv(t(a), t(v)).numpy(), a @ v, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype, tol", [(np.float32, 2e-5), (np.float64, 1e-12)])
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("n", [8, 15])
def test_ffts_match_numpy(example_ops, rng, dtype, tol, norm, n):
    x = rng.standard_normal((3, n)).astype(dtype)
    spectrum = example_ops.rfft(t(x), norm)
    np.testing.assert_allclose(spectrum.numpy(), complex_to_pairs(np.fft.rfft(x, norm=norm), dtype),
                               rtol=tol, atol=tol * n)
    np.testing.assert_allclose(example_ops.irfft(spectrum, n, norm).numpy(), x, rtol=tol,
                               atol=tol * n)
    z = (rng.standard_normal((2, n)) + 1j * rng.standard_normal((2, n)))
    pairs = complex_to_pairs(z, dtype)
    np.testing.assert_allclose(example_ops.fft(t(pairs), False, norm).numpy(),
                               complex_to_pairs(np.fft.fft(z, norm=norm), dtype), rtol=tol,
                               atol=tol * n)
    np.testing.assert_allclose(example_ops.fft(t(pairs), True, norm).numpy(),
                               complex_to_pairs(np.fft.ifft(z, norm=norm), dtype), rtol=tol,
                               atol=tol * n)


def test_two_outputs_come_back_as_a_tuple(example_ops, rng):
    x = rng.standard_normal((4, 5)).astype(np.float32)
    s, c = example_ops.sin_cos(t(x))
    assert_close(s, np.sin(x))
    assert_close(c, np.cos(x))


def test_a_vector_return_is_a_list_of_any_length(example_ops, rng):
    x = rng.standard_normal((6, 2)).astype(np.float32)
    for parts in (1, 3, 6):
        pieces = example_ops.split_rows(t(x), parts)
        assert isinstance(pieces, list) and len(pieces) == parts
        for piece, expected in zip(pieces, np.split(x, parts)):
            assert_close(piece, expected)
    with raises(OverflowError, match="split_rows\\(\\): argument 'parts' = 1099511627776 "
                                            "does not fit in int"):
        example_ops.split_rows(t(x), 2 ** 40)
    with raises(OverflowError, match="split_rows\\(\\): argument 'parts' = 1180591620717411303424 "
                                            "does not fit in int(?!64)"):
        example_ops.split_rows(t(x), 2 ** 70)
    with raises(kiln.KilnValueError, match="a number of parts >= 1 that divides 6, got 4"):
        example_ops.split_rows(t(x), 4)


def test_def_op_registers_an_op_like_a_builtin(example_ops, rng):
    assert "RowMoments" in kiln.ops.list_ops()
    assert kiln.ops.op_signature("RowMoments") == "RowMoments(x, *, correction: int = 0)"
    assert str(inspect.signature(example_ops.row_moments)) == "(x, correction=0)"
    assert example_ops.row_moments.__doc__.startswith("RowMoments(x, *, correction: int = 0)")
    x = rng.standard_normal((3, 10)).astype(np.float32)
    mean, var = example_ops.row_moments(t(x))
    np.testing.assert_allclose(mean.numpy(), x.mean(-1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(var.numpy(), x.var(-1), rtol=1e-5, atol=1e-6)
    _, var1 = example_ops.row_moments(t(x), correction=1)
    np.testing.assert_allclose(var1.numpy(), x.var(-1, ddof=1), rtol=1e-5, atol=1e-6)
    with raises(kiln.DTypeError, match="RowMoments: expected float32, got int64"):
        example_ops.row_moments(kiln.tensor([[1, 2]]))
    with raises(TypeError, match="argument 'correction' .* must be int, not str"):
        example_ops.row_moments(t(x), correction="1")


@pytest.mark.parametrize("describe", [kiln.ops.op_signature, kiln.ops.op_doc,
                                      kiln.ops.op_gradient], ids=lambda f: f.__name__)
def test_registry_queries_name_a_wrong_argument_type(describe):
    # Not nanobind's "op_signature(): incompatible function arguments".
    with raises(kiln.KilnTypeError, match=rf"{describe.__name__}: name must be a str \(an op's "
                                          r"name, as list_ops\(\) gives them\), got int 1"):
        describe(1)


@pytest.mark.parametrize("mode", ["sync", "2stage", "4stage"])
def test_custom_ops_run_through_every_pipeline_mode(example_ops, rng, mode):
    previous = kiln.runtime.get_pipeline()
    kiln.runtime.set_pipeline(mode)
    try:
        x, y, z = (rng.standard_normal((3, 7)).astype(np.float32) for _ in range(3))
        # Custom and built-in ops chained without a sync point in between.
        total = example_ops.add3(t(x) * 2.0, t(y), t(z)) + 1.0
        s, c = example_ops.sin_cos(total)
        expected = x * 2 + y + z + 1
        assert_close(s * c, np.sin(expected) * np.cos(expected))
        # A kernel's failure raises at the call in sync mode, at the first read otherwise, and
        # the op's consumers fail with the same cause.
        bad = kiln.tensor([[1, 2, 3, 4, 5, 6, 7]] * 3)
        if mode == "sync":
            with raises(kiln.DTypeError, match=r"in Add3\(float32\[3, 7\], float32\[3, 7\], int64"):
                example_ops.add3(t(x), t(y), bad)
        else:
            out = example_ops.add3(t(x), t(y), bad)
            assert out.shape == (3, 7)  # metadata came from the custom op's own function
            consumer = out * 2.0
            for tensor in (out, consumer):
                with pytest.raises(kiln.DTypeError, match=r"in Add3\(float32\[3, 7\]"):
                    tensor.numpy()
        kiln.runtime.synchronize()
        assert_close(example_ops.add3(t(x), t(y), t(z)), x + y + z)
    finally:
        kiln.runtime.set_pipeline(previous)


def test_def_op_with_a_gradient_rule_trains_eagerly_and_in_jit(example_ops, rng):
    x = t(rng.standard_normal((3, 6)).astype(np.float32)).requires_grad_()
    # float32 only (the example's kernel), so coarser finite differences.
    assert kiln.testing.gradcheck(lambda v: example_ops.row_moments(v, correction=1), (x,),
                                  eps=1e-2, atol=2e-3, rtol=2e-2)

    def loss(v):
        mean, var = example_ops.row_moments(v)
        return mint.sum(mean * var)

    eager = kiln.grad(loss)(x.detach())
    jitted = kiln.jit(kiln.grad(loss), backend="kiln_cpu")
    np.testing.assert_allclose(jitted(x.detach()).numpy(), eager.numpy(), rtol=1e-5, atol=1e-6)
    assert "RowMoments" in jitted.graph(x.detach())


def test_function_around_an_op_runner_trains_eagerly(example_ops, rng):
    x = t(rng.standard_normal((4, 5)).astype(np.float32)).requires_grad_()
    s, c = example_ops.sin_cos(x)
    assert s.grad_fn.name().endswith("SinCosFunction")
    mint.sum(s * 2.0 + c).backward()
    want = 2 * np.cos(x.detach().numpy()) - np.sin(x.detach().numpy())
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-5, atol=1e-6)
    assert kiln.testing.gradcheck(example_ops.sin_cos, (x,), eps=1e-2, atol=2e-3, rtol=2e-2)


def test_op_runner_results_raise_at_backward_instead_of_losing_gradients(example_ops, tmp_path,
                                                                         extension_cache):
    # Note [OpRunner results and autograd]: add3 is an OpRunner without a gradient.
    x = mint.ones([3], requires_grad=True)
    y = example_ops.add3(x, x, x)
    assert y.requires_grad and y.grad_fn.name() == "Add3"
    with raises(kiln.KilnNotImplementedError, match=r"Add3 \(an OpRunner\) has no gradient"):
        (mint.sum(y) + mint.sum(x)).backward()
    # Without a tensor that requires grad, or under no_grad, nothing is recorded.
    assert not example_ops.add3(x.detach(), x.detach(), x.detach()).requires_grad
    with kiln.no_grad():
        assert not example_ops.add3(x, x, x).requires_grad
    # A kiln::Function around a runner gives the real gradients (its Forward runs without grad).
    s, _ = example_ops.sin_cos(x)
    assert s.grad_fn.name().endswith("SinCosFunction")
    # Results made otherwise (kiln:: ops, constants, detached values) keep autograd's usual rules.
    source = tmp_path / "no_runner.cpp"
    source.write_text("""\
#include <kiln/autograd.h>
#include <kiln/extension.h>
#include <kiln/functional.h>
#include <tuple>
std::tuple<kiln::Tensor, kiln::Tensor> with_mask(const kiln::Tensor& x) {
  return {kiln::mul(x, x), kiln::ones_like(x)};
}
kiln::Tensor detached_square(const kiln::Tensor& x) {
  return kiln::mul(kiln::autograd::detach(x), kiln::autograd::detach(x));
}
KILN_EXTENSION(m) {
  m.def("with_mask", &with_mask, {"x"});
  m.def("detached_square", &detached_square, {"x"});
}
""")
    ops = kiln.ops.CustomOpBuilder("no_runner", [source], build_dir=extension_cache,
                                   debug=True).load()
    x = kiln.tensor([1.0, 2.0, 3.0], requires_grad=True)
    value, mask = ops.with_mask(x)
    assert not mask.requires_grad
    (mint.sum(value * mask) + mint.sum(ops.detached_square(x))).backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0, 6.0])


def test_exceptions_a_function_throws_are_kiln_errors_naming_it(tmp_path, extension_cache):
    source = tmp_path / "throwing.cpp"
    source.write_text("""\
#include <kiln/extension.h>
#include <stdexcept>
kiln::Tensor std_error(const kiln::Tensor& x) { throw std::invalid_argument("bad x"); }
kiln::Tensor odd_throw(const kiln::Tensor& x) { throw 7; }
KILN_EXTENSION(m) {
  m.def("std_error", &std_error, {"x"});
  m.def("odd_throw", &odd_throw, {"x"});
}
""")
    ops = kiln.ops.CustomOpBuilder("throwing", [source], build_dir=extension_cache,
                                   debug=True).load()
    x = mint.ones([2])
    with raises(kiln.KilnError, match=r"bad x\n  in std_error\(\)"):
        ops.std_error(x)
    with raises(kiln.KilnError, match=r"not a std::exception(.|\n)*in odd_throw\(\)"):
        ops.odd_throw(x)


def test_kernels_dispatch_on_dtype_through_the_extension_header(tmp_path, extension_cache, rng):
    # kiln/dtype_dispatch.h, included by kiln/extension.h: one kernel for every floating dtype.
    source = tmp_path / "scale.cpp"
    source.write_text("""\
#include <kiln/extension.h>
class Scale : public kiln::OpRunner {
 public:
  Scale(double factor) : OpRunner("Scale"), factor_(factor) {}
  void LaunchKernel() override {
    const kiln::Tensor x = inputs()[0].contiguous();
    kiln::dispatch_floating(x.dtype(), "scale", [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* in = x.data<T>();
      T* out = outputs()[0].data<T>();
      for (int64_t i = 0; i < x.numel(); ++i) {
        out[i] = T(static_cast<float>(static_cast<double>(in[i]) * factor_));
      }
    });
  }
 private:
  double factor_;
};
kiln::Tensor scale(const kiln::Tensor& x, double factor) {
  kiln::dispatch_floating(x.dtype(), "scale", [](auto) {});  // refuse other dtypes at the call
  kiln::Tensor out(x.dtype(), x.shape());
  std::make_shared<Scale>(factor)->Run({x}, {out});
  return out;
}
KILN_EXTENSION(m) { m.def("scale", &scale, {"x", "factor"}); }
""")
    ops = kiln.ops.CustomOpBuilder("dispatching", [source], build_dir=extension_cache,
                                   debug=True).load()
    values = rng.standard_normal((3, 4))
    for dtype in (kiln.float16, kiln.bfloat16, kiln.float32, kiln.float64):
        x = t(values).to(dtype)
        got = ops.scale(x, 2.0)
        assert got.dtype == dtype
        np.testing.assert_allclose(got.to(kiln.float64).numpy(),
                                   2.0 * x.to(kiln.float64).numpy(), rtol=1e-2)
    with raises(kiln.DTypeError, match="scale: expected a tensor of dtype float16, bfloat16, "
                                       "float32 or float64, got int64"):
        ops.scale(kiln.tensor([1, 2]), 2.0)
