// kiln._C.linalg: the linear-algebra primitives of include/kiln/functional/linalg.h, one to one.
// kiln.linalg (python/kiln/linalg.py) wraps them with PyTorch's signatures, named tuples and
// argument checks, and composes the rest of torch.linalg from them.
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include "bindings.h"
#include "kiln/functional/linalg.h"

namespace kiln::py {
namespace nb = nanobind;
using namespace nb::literals;

void bind_linalg(nb::module_& m) {
  m.def("cholesky_ex", &linalg::cholesky_ex, "a"_a, "upper"_a, "check_errors"_a,
        "(L, info): the Cholesky factor of symmetric positive-definite matrices.");
  m.def("lu_factor_ex", &linalg::lu_factor_ex, "a"_a, "check_errors"_a,
        "(LU, pivots, info): partial-pivoting LU, packed, with int32 LAPACK pivots.");
  m.def("lu_permutation", &linalg::lu_permutation, "pivots"_a, "m"_a, "dtype"_a,
        "The permutation matrices P of LU pivots for m-row matrices.");
  m.def("lu_solve", &linalg::lu_solve, "lu"_a, "pivots"_a, "b"_a, "left"_a, "adjoint"_a,
        "X with A X = B for A = P L U given by lu_factor.");
  m.def("solve_ex", &linalg::solve_ex, "a"_a, "b"_a, "left"_a, "check_errors"_a,
        "(X, info): X with A X = B (X A = B unless left).");
  m.def("solve_triangular", &linalg::solve_triangular, "a"_a, "b"_a, "upper"_a, "left"_a,
        "unitriangular"_a, "X with A X = B for triangular A.");
  m.def("inv_ex", &linalg::inv_ex, "a"_a, "check_errors"_a, "(inverse, info).");
  m.def("slogdet", &linalg::slogdet, "a"_a, "(sign, logabsdet) of the determinants.");
  m.def("det", &linalg::det, "a"_a, "The determinants.");
  m.def("qr", &linalg::qr, "a"_a, "mode"_a, "(Q, R) by Householder reflections.");
  m.def("eigh", &linalg::eigh, "a"_a, "uplo"_a, "(eigenvalues, eigenvectors), ascending.");
  m.def("svd", &linalg::svd, "a"_a, "full_matrices"_a, "(U, S, Vh), S descending.");
}

}  // namespace kiln::py
