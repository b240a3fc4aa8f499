// The bind_* functions that fill kiln._C, one per area (each in its own bind_<area>.cc).
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "kiln/functional/generator.h"
#include "kiln/tensor.h"

namespace kiln {
struct PassReport;
}  // namespace kiln

namespace kiln::py {

void bind_errors(nanobind::module_& m);
void bind_extension(nanobind::module_& m);
void bind_dtype(nanobind::module_& m);
void bind_tensor(nanobind::module_& m);
void bind_tensor_operators(nanobind::module_& m);
/// Tensor's gradient state (requires_grad, grad, grad_fn, backward, ...), on the Tensor class.
void bind_tensor_autograd(nanobind::class_<kiln::Tensor>& cls);
void bind_autograd(nanobind::module_& m);
/// kiln._C.autocast (kiln/autocast.h).
void bind_autocast(nanobind::module_& m);
void bind_ops_registry(nanobind::module_& m);
void bind_runtime(nanobind::module_& m);
void bind_distributed(nanobind::module_& m);
void bind_jit(nanobind::module_& m);
/// kiln._C.graph's pass functions (after bind_jit, which makes kiln._C.graph).
void bind_passes(nanobind::module_& m);
/// kiln._C.graph's registration of backends written in Python (bind_python_backend.cc).
void bind_python_backend(nanobind::module_& graph);
void bind_mint_elementwise(nanobind::module_& mint);
void bind_mint_reduce(nanobind::module_& mint);
void bind_mint_nn(nanobind::module_& mint);
void bind_mint_shape(nanobind::module_& mint);
void bind_mint_factory(nanobind::module_& mint);
void bind_linalg(nanobind::module_& m);
/// kiln.mint.Generator, default_generator and the default generator's functions.
void bind_generator(nanobind::module_& mint);

/// A random op's generator= argument: None (the default generator) or a kiln.Generator; anything
/// else is a kType error naming `fn`.
Generator generator_arg(const char* fn, nanobind::handle generator);

/// (runs, text): one (pass, stage, changed, matches, refusals, reasons, seconds) tuple per pass
/// run, and PassReport::str(); python/kiln/jit.py makes a kiln.graph.PassReport of it.
nanobind::tuple pass_report_to_python(const PassReport& report);

/// Sets the Python error for the C++ exception being handled (call it inside `catch (...)`):
/// kiln::Error by kind as nanobind's translator does, a pending Python error as it was, anything
/// else as RuntimeError. For functions written against the C API, outside nanobind's dispatch.
void set_python_error_from_current_exception();

/// Checks, at the call, that `prim` on (self) or (self, other) gives a result that fits self's
/// dtype (kiln::can_write_result) and shape, for an in-place method `what`: the op's own check runs
/// in its planning step, which the asynchronous modes run later, where the failure would land on
/// self instead of being raised.
void check_inplace(const char* what, const char* prim, const Tensor& self, const Tensor& other);
/// `other` times PyTorch's `alpha` for add / sub (`op`) with `input`, refusing what PyTorch does:
/// a bool alpha unless the result is bool, a floating alpha with integer operands. A Python number
/// times a Python number stays one (weak), so `add(int8 x, 20, alpha=2)` stays int8.
Tensor times_alpha(const char* op, const Tensor& input, const Tensor& other, const Tensor& alpha);
/// Checks, at the call, that no two elements of `t` share memory (an expanded view), for a write
/// `what` into it: the op's own check runs in its planning step, where in the asynchronous modes
/// the failure would stay on this handle, and reading the tensor it views would never raise it.
void check_writable(const char* what, const Tensor& t);
/// check_inplace's checks for a result of `dtype` and `shape` already inferred.
void check_result_fits(const char* what, const Tensor& self, DType dtype, const Shape& shape);
/// For squeeze (x.squeeze, kiln.mint.squeeze) of a traced value: a dimension it leaves because its
/// size is not 1 may be the batch size, which at a batch of 1 it would remove, so a dynamic jit
/// must trace each batch size (kiln::note_size_decision). A bad dim is left to squeeze to refuse.
void note_squeeze_decision(const Tensor& x, std::optional<int64_t> dim);
/// squeeze's `dim` (None, an int, or a sequence of ints as in PyTorch 2) as the single-dim
/// squeezes that do it, highest dim first so that each leaves the others' positions: {nullopt}
/// for None. A repeated dim is a kValue error; one out of range is left to squeeze to refuse.
std::vector<std::optional<int64_t>> squeeze_steps(nanobind::handle dim, int64_t ndim);

}  // namespace kiln::py
