#include "ops/linalg_kernels.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <numeric>
#include <utility>
#include <vector>

namespace kiln::detail {
namespace {

double dot(const double* x, const double* y, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += x[i] * y[i];
  return s;
}

/// y += alpha * x.
void axpy(double alpha, const double* x, double* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

/// (x, y) <- (c x - s y, s x + c y): a plane rotation of two rows.
void rotate(double* x, double* y, int64_t n, double c, double s) {
  for (int64_t i = 0; i < n; ++i) {
    const double xi = x[i], yi = y[i];
    x[i] = c * xi - s * yi;
    y[i] = s * xi + c * yi;
  }
}

/// The positions 0..n-1 ordered by `value` (descending with `descending`), ties in order.
template <typename Value>
std::vector<int64_t> order_by(int64_t n, Value value, bool descending) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return descending ? value(a) > value(b) : value(a) < value(b);
  });
  return order;
}

/// +1 or -1: the sign that makes the entry of largest magnitude of the vector x [n] (the first
/// of equal ones) positive. Eigenvectors and singular vectors are defined up to sign; fixing it so
/// makes them a smooth function of the matrix (an iteration's count, which decides the sign it
/// happens to end with, changes with tiny perturbations) and the same on every platform.
double fixed_sign(const double* x, int64_t n) {
  int64_t largest = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (std::abs(x[i]) > std::abs(x[largest])) largest = i;
  }
  return n > 0 && x[largest] < 0.0 ? -1.0 : 1.0;
}

bool all_finite(const double* x, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    if (!std::isfinite(x[i])) return false;
  }
  return true;
}

/// Scales the `count` values at x by a power of two that brings their largest magnitude to
/// [0.5, 1) and returns the power's exponent e (x is multiplied by 2^-e; results scale back by
/// 2^e exactly). Sums of squares of the scaled values cannot overflow or underflow to zero, as
/// those of values near 1e200 or 1e-200 would. Zero or non-finite values are left as they are.
int scale_to_unit(double* x, int64_t count) {
  double largest = 0.0;
  for (int64_t i = 0; i < count; ++i) largest = std::max(largest, std::abs(x[i]));
  if (largest == 0.0 || !std::isfinite(largest)) return 0;
  int e = 0;
  std::frexp(largest, &e);
  for (int64_t i = 0; i < count; ++i) x[i] = std::ldexp(x[i], -e);
  return e;
}

/// A Householder reflector H = I - tau v v^T with v[0] = 1 (LAPACK's dlarfg): H x = (beta, 0,
/// ..., 0) for the x it was made from; tau = 0 (H = I) when x already has that form.
struct Reflector {
  std::vector<double> v;
  double tau = 0.0;
  double beta = 0.0;
};

/// The reflector of the `len` values x[0], x[stride], ...
Reflector make_reflector(const double* x, int64_t stride, int64_t len) {
  Reflector h;
  h.v.assign(static_cast<size_t>(len), 0.0);
  if (len == 0) return h;
  h.v[0] = 1.0;
  double sigma = 0.0;
  for (int64_t i = 1; i < len; ++i) sigma += x[i * stride] * x[i * stride];
  const double alpha = x[0];
  h.beta = alpha;
  // Also when the squares underflow: entries below 1e-154 beside a scaled matrix's ~1 are
  // negligible.
  if (sigma == 0.0) return h;
  h.beta = -std::copysign(std::sqrt(alpha * alpha + sigma), alpha);
  for (int64_t i = 1; i < len; ++i) h.v[i] = x[i * stride] / (alpha - h.beta);
  h.tau = (h.beta - alpha) / h.beta;
  return h;
}

/// H applied from the left to rows [r0, r0 + len(v)) and columns [c0, c1) of the row-major x
/// (row length ld): w = v^T X, X -= tau v w, along rows.
void reflect_rows(const Reflector& h, double* x, int64_t ld, int64_t r0, int64_t c0, int64_t c1) {
  if (h.tau == 0.0 || c1 <= c0) return;
  std::vector<double> w(static_cast<size_t>(c1 - c0), 0.0);
  const int64_t len = static_cast<int64_t>(h.v.size());
  for (int64_t i = 0; i < len; ++i) axpy(h.v[i], x + (r0 + i) * ld + c0, w.data(), c1 - c0);
  for (int64_t i = 0; i < len; ++i) {
    axpy(-h.tau * h.v[i], w.data(), x + (r0 + i) * ld + c0, c1 - c0);
  }
}

/// H applied from the right to columns [c0, c0 + len(v)) of rows [r0, r1) of x: each row
/// -= tau (row . v) v.
void reflect_columns(const Reflector& h, double* x, int64_t ld, int64_t r0, int64_t r1,
                     int64_t c0) {
  if (h.tau == 0.0) return;
  const int64_t len = static_cast<int64_t>(h.v.size());
  for (int64_t i = r0; i < r1; ++i) {
    double* row = x + i * ld + c0;
    axpy(-h.tau * dot(row, h.v.data(), len), h.v.data(), row, len);
  }
}

/// The Givens rotation (c, s, r) with c f + s g = r and -s f + c g = 0.
struct Givens {
  double c, s, r;
};
Givens givens(double f, double g) {
  const double r = std::hypot(f, g);
  if (r == 0.0) return {1.0, 0.0, 0.0};
  return {f / r, g / r, r};
}

/// The SVD of the upper bidiagonal B (diagonal d [n], superdiagonal e [n - 1]) by Golub-Kahan
/// implicit QR steps with Wilkinson shifts (Golub & Van Loan, algorithm 8.6.2), in place: d
/// becomes the singular values, unsigned and unsorted. Each rotation of B's rows (columns) is
/// applied to the rows of ut (of vt) when they are not null, rows of length ut_len (n). Returns
/// false when 100 n steps did not converge.
bool bidiagonal_svd(std::vector<double>& d, std::vector<double>& e, double* ut, int64_t ut_len,
                    double* vt) {
  const int64_t n = static_cast<int64_t>(d.size());
  double norm = 0.0;
  for (int64_t i = 0; i < n; ++i) norm = std::max(norm, std::abs(d[i]) + std::abs(e[i]));
  const auto negligible_e = [&](int64_t i) {
    return std::abs(e[i]) <= DBL_EPSILON * (std::abs(d[i]) + std::abs(d[i + 1]));
  };
  // B <- G B (rows i, j) is U <- U G^T: the rows of ut combine as the rows of B.
  const auto rotate_u = [&](int64_t i, int64_t j, double c, double s) {
    if (ut != nullptr) rotate(ut + i * ut_len, ut + j * ut_len, ut_len, c, s);
  };
  const auto rotate_v = [&](int64_t i, int64_t j, double c, double s) {
    if (vt != nullptr) rotate(vt + i * n, vt + j * n, n, c, s);
  };
  const int64_t max_steps = 100 * std::max<int64_t>(n, 1);
  int64_t hi = n - 1;
  for (int64_t step = 0; hi > 0; ++step) {
    if (step == max_steps) return false;
    if (negligible_e(hi - 1)) {
      e[hi - 1] = 0.0;
      --hi;
      continue;
    }
    int64_t lo = hi - 1;
    while (lo > 0 && !negligible_e(lo - 1)) --lo;
    if (lo > 0) e[lo - 1] = 0.0;
    // A zero on the diagonal splits the block once rotations move its row's (its column's)
    // superdiagonal entry out.
    int64_t zero = -1;
    for (int64_t i = lo; i <= hi && zero < 0; ++i) {
      // Only an entry at the bottom of the range (B is scaled to about 1): LAPACK keeps a small
      // singular value accurate to its own size, and so do the QR steps, where a threshold of
      // eps * |B| would zero it (cond([[1, 1], [0, 1e-20]]) must be 2e20, not inf).
      if (std::abs(d[i]) <= DBL_MIN * norm) zero = i;
    }
    if (zero >= 0) {
      d[zero] = 0.0;
      if (zero < hi) {  // rows (zero, j) chase B[zero][j] right to the end of the block
        double f = e[zero];
        e[zero] = 0.0;
        for (int64_t j = zero + 1; j <= hi && f != 0.0; ++j) {
          const Givens g = givens(d[j], f);
          d[j] = g.r;
          rotate_u(zero, j, g.c, g.s);  // row zero' = c row zero - s row j, as rotate()
          if (j < hi) {
            f = -g.s * e[j];
            e[j] = g.c * e[j];
          }
        }
      } else {  // columns (j, hi) chase B[j][hi] up to the top of the block
        double f = e[hi - 1];
        e[hi - 1] = 0.0;
        for (int64_t j = hi - 1; j >= lo && f != 0.0; --j) {
          const Givens g = givens(d[j], f);
          d[j] = g.r;
          rotate_v(j, hi, g.c, -g.s);
          if (j > lo) {
            f = -g.s * e[j - 1];
            e[j - 1] = g.c * e[j - 1];
          }
        }
      }
      continue;
    }
    // Wilkinson's shift: the eigenvalue of B^T B's trailing 2 x 2 nearer its last entry.
    const double t11 = d[hi - 1] * d[hi - 1] + (hi - 1 > lo ? e[hi - 2] * e[hi - 2] : 0.0);
    const double t12 = d[hi - 1] * e[hi - 1];
    const double t22 = d[hi] * d[hi] + e[hi - 1] * e[hi - 1];
    const double delta = 0.5 * (t11 - t22);
    const double denominator = delta + std::copysign(std::hypot(delta, t12), delta);
    const double shift = denominator == 0.0 ? t22 : t22 - t12 * t12 / denominator;
    double y = d[lo] * d[lo] - shift, z = d[lo] * e[lo];
    for (int64_t k = lo; k < hi; ++k) {
      // Columns k and k + 1: zero the bulge z beside y (the shifted start for k = lo).
      Givens g = givens(y, z);
      if (k > lo) e[k - 1] = g.r;
      y = g.c * d[k] + g.s * e[k];
      e[k] = g.c * e[k] - g.s * d[k];
      z = g.s * d[k + 1];
      d[k + 1] = g.c * d[k + 1];
      rotate_v(k, k + 1, g.c, -g.s);
      // Rows k and k + 1: zero the bulge z below the diagonal.
      g = givens(y, z);
      d[k] = g.r;
      y = g.c * e[k] + g.s * d[k + 1];
      d[k + 1] = g.c * d[k + 1] - g.s * e[k];
      if (k + 1 < hi) {
        z = g.s * e[k + 1];
        e[k + 1] = g.c * e[k + 1];
      }
      rotate_u(k, k + 1, g.c, -g.s);
    }
    e[hi - 1] = y;
  }
  return true;
}

/// The SVD of a tall a [m, n], m >= n (destroyed), by Golub-Kahan-Reinsch: Householder
/// bidiagonalization a = U_B B V_B^T, then bidiagonal_svd B = Q S P^T, so U = U_B Q and V =
/// V_B P. u is [m, u_cols] (u_cols = n or m), vt [n, n]. Returns false when the QR steps did not
/// converge.
bool svd_tall(double* a, int64_t m, int64_t n, double* s, double* u, int64_t u_cols, double* vt) {
  const bool vectors = u != nullptr;
  std::vector<Reflector> left(static_cast<size_t>(n)), right(static_cast<size_t>(n));
  std::vector<double> d(static_cast<size_t>(n)), e(static_cast<size_t>(n), 0.0);
  for (int64_t k = 0; k < n; ++k) {
    left[k] = make_reflector(a + k * n + k, n, m - k);
    reflect_rows(left[k], a, n, k, k + 1, n);
    d[k] = left[k].beta;
    if (k + 1 < n) {
      right[k] = make_reflector(a + k * n + k + 1, 1, n - k - 1);
      reflect_columns(right[k], a, n, k + 1, m, k + 1);
      e[k] = right[k].beta;
    }
  }
  // The factors are kept transposed (ut's rows are U's columns, vt_rows V's), so that the
  // rotations combine contiguous rows: U_B = H_0 ... H_{n-1} and V_B = G_0 ... G_{n-2}, each
  // accumulated from the last reflector back.
  std::vector<double> ut, vt_rows;
  if (vectors) {
    std::vector<double> q(static_cast<size_t>(m * u_cols), 0.0);
    for (int64_t i = 0; i < u_cols; ++i) q[i * u_cols + i] = 1.0;
    for (int64_t k = n - 1; k >= 0; --k) reflect_rows(left[k], q.data(), u_cols, k, 0, u_cols);
    ut.resize(static_cast<size_t>(u_cols * m));
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < u_cols; ++j) ut[j * m + i] = q[i * u_cols + j];
    }
    std::vector<double> p(static_cast<size_t>(n * n), 0.0);
    for (int64_t i = 0; i < n; ++i) p[i * n + i] = 1.0;
    for (int64_t k = n - 2; k >= 0; --k) reflect_rows(right[k], p.data(), n, k + 1, 0, n);
    vt_rows.resize(static_cast<size_t>(n * n));
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) vt_rows[j * n + i] = p[i * n + j];
    }
  }
  if (!bidiagonal_svd(d, e, vectors ? ut.data() : nullptr, m, vectors ? vt_rows.data() : nullptr)) {
    return false;
  }
  const std::vector<int64_t> order = order_by(
      n, [&](int64_t j) { return std::abs(d[j]); }, true);
  for (int64_t j = 0; j < n; ++j) s[j] = std::abs(d[order[j]]);
  if (!vectors) return true;
  for (int64_t j = 0; j < u_cols; ++j) {
    const int64_t from = j < n ? order[j] : j;  // the full U's extra columns are U_B's
    for (int64_t i = 0; i < m; ++i) u[i * u_cols + j] = ut[from * m + i];
  }
  for (int64_t j = 0; j < n; ++j) {
    const double sign = d[order[j]] < 0.0 ? -1.0 : 1.0;  // a negative value's V column flips
    for (int64_t i = 0; i < n; ++i) vt[j * n + i] = sign * vt_rows[order[j] * n + i];
  }
  return true;
}

}  // namespace

int64_t cholesky_lower(double* a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    double* row_i = a + i * n;
    for (int64_t j = 0; j <= i; ++j) {
      const double* row_j = a + j * n;
      const double s = row_i[j] - dot(row_i, row_j, j);
      if (j < i) {
        row_i[j] = s / row_j[j];
      } else if (s > 0.0) {  // also false for NaN
        row_i[i] = std::sqrt(s);
      } else {
        return i + 1;
      }
    }
  }
  return 0;
}

int64_t lu_factor(double* a, int64_t m, int64_t n, int32_t* pivots) {
  int64_t info = 0;
  const int64_t k = std::min(m, n);
  for (int64_t j = 0; j < k; ++j) {
    int64_t p = j;
    for (int64_t i = j + 1; i < m; ++i) {
      if (std::abs(a[i * n + j]) > std::abs(a[p * n + j])) p = i;
    }
    pivots[j] = static_cast<int32_t>(p + 1);
    if (p != j) std::swap_ranges(a + j * n, a + (j + 1) * n, a + p * n);
    const double pivot = a[j * n + j];
    if (pivot == 0.0) {
      // The column below is zero too (the pivot is its largest): nothing to eliminate.
      if (info == 0) info = j + 1;
      continue;
    }
    const double* row_j = a + j * n;
    for (int64_t i = j + 1; i < m; ++i) {
      double* row_i = a + i * n;
      const double l = row_i[j] / pivot;
      row_i[j] = l;
      axpy(-l, row_j + j + 1, row_i + j + 1, n - j - 1);
    }
  }
  return info;
}

void triangular_solve(const double* a, int64_t row_stride, int64_t col_stride, int64_t n, double* b,
                      int64_t k, bool upper, bool unit) {
  const auto t = [&](int64_t i, int64_t j) { return a[i * row_stride + j * col_stride]; };
  for (int64_t step = 0; step < n; ++step) {
    const int64_t i = upper ? n - 1 - step : step;
    double* row = b + i * k;
    const int64_t lo = upper ? i + 1 : 0, hi = upper ? n : i;
    for (int64_t j = lo; j < hi; ++j) axpy(-t(i, j), b + j * k, row, k);
    if (!unit) {
      const double d = 1.0 / t(i, i);
      for (int64_t c = 0; c < k; ++c) row[c] *= d;
    }
  }
}

void lu_solve(const double* lu, const int32_t* pivots, int64_t n, double* b, int64_t k,
              bool transpose) {
  const auto swap_row = [&](int64_t i) {
    const int64_t p = pivots[i] - 1;
    if (p != i) std::swap_ranges(b + i * k, b + (i + 1) * k, b + p * k);
  };
  if (!transpose) {  // A = P L U: x = U^{-1} L^{-1} P^T b
    for (int64_t i = 0; i < n; ++i) swap_row(i);
    triangular_solve(lu, n, 1, n, b, k, /*upper=*/false, /*unit=*/true);
    triangular_solve(lu, n, 1, n, b, k, /*upper=*/true, /*unit=*/false);
  } else {  // A^T = U^T L^T P^T: x = P L^{-T} U^{-T} b
    triangular_solve(lu, 1, n, n, b, k, /*upper=*/false, /*unit=*/false);
    triangular_solve(lu, 1, n, n, b, k, /*upper=*/true, /*unit=*/true);
    for (int64_t i = n - 1; i >= 0; --i) swap_row(i);
  }
}

void householder_qr(double* a, int64_t m, int64_t n, double* q, int64_t q_cols) {
  const int64_t k = std::min(m, n);
  const int exponent = scale_to_unit(a, m * n);
  std::vector<Reflector> reflectors(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) {
    reflectors[j] = make_reflector(a + j * n + j, n, m - j);
    reflect_rows(reflectors[j], a, n, j, j + 1, n);
    a[j * n + j] = reflectors[j].beta;
  }
  for (int64_t i = 1; i < m; ++i) std::fill(a + i * n, a + i * n + std::min(i, n), 0.0);
  for (int64_t i = 0; i < m * n; ++i) a[i] = std::ldexp(a[i], exponent);
  if (q == nullptr) return;
  // Q = H_0 ... H_{k-1}, accumulated from the last reflector back.
  std::fill(q, q + m * q_cols, 0.0);
  for (int64_t i = 0; i < std::min(m, q_cols); ++i) q[i * q_cols + i] = 1.0;
  for (int64_t j = k - 1; j >= 0; --j) reflect_rows(reflectors[j], q, q_cols, j, 0, q_cols);
}

bool symmetric_eigen(double* a, int64_t n, double* w, double* v) {
  if (n == 0) return true;
  if (!all_finite(a, n * n)) return false;
  const bool vectors = v != nullptr;
  const int exponent = scale_to_unit(a, n * n);
  // 1. Householder tridiagonalization A = Q T Q^T: reflector k (v_k, tau_k) zeroes column k
  // below its subdiagonal, T's diagonal lands in d and its subdiagonal in e (e[i] joins rows i
  // and i + 1; e[n - 1] = 0). The trailing block is kept whole (both triangles), so each step is
  // a matrix-vector product and a rank-2 update along rows.
  std::vector<double> d(static_cast<size_t>(n)), e(static_cast<size_t>(n), 0.0);
  std::vector<Reflector> reflectors(static_cast<size_t>(n));
  std::vector<double> p(static_cast<size_t>(n));
  for (int64_t k = 0; k + 2 < n; ++k) {
    const int64_t lo = k + 1, len = n - lo;
    const Reflector& h = reflectors[k] = make_reflector(a + lo * n + k, n, len);
    e[k] = h.beta;
    if (h.tau == 0.0) continue;  // already tridiagonal in this column
    // B <- H B H for the trailing block B: p = tau B v, w = p - (tau / 2)(p . v) v,
    // B -= v w^T + w v^T.
    const double* v = h.v.data();
    for (int64_t i = 0; i < len; ++i) p[i] = h.tau * dot(a + (lo + i) * n + lo, v, len);
    const double half = 0.5 * h.tau * dot(p.data(), v, len);
    for (int64_t i = 0; i < len; ++i) p[i] -= half * v[i];
    for (int64_t i = 0; i < len; ++i) {
      axpy(-v[i], p.data(), a + (lo + i) * n + lo, len);
      axpy(-p[i], v, a + (lo + i) * n + lo, len);
    }
  }
  for (int64_t i = 0; i < n; ++i) d[i] = a[i * n + i];
  if (n >= 2) e[n - 2] = a[(n - 1) * n + n - 2];

  // 2. The eigenvectors start as Q, kept transposed (zt's rows are V's columns), so that the
  // rotations below combine two contiguous rows. Q^T = H_{n-3} ... H_0.
  std::vector<double> zt;
  if (vectors) {
    zt.assign(static_cast<size_t>(n * n), 0.0);
    for (int64_t i = 0; i < n; ++i) zt[i * n + i] = 1.0;
    for (int64_t k = 0; k + 2 < n; ++k) reflect_rows(reflectors[k], zt.data(), n, k + 1, 0, n);
  }

  // 3. Implicit QL with Wilkinson's shift on (d, e) (EISPACK's imtql2): for each l, chase the
  // bulge from the first negligible e[m] below l up to l until e[l] is negligible. QL converges
  // from the top, and fails on a matrix graded from large at the top to tiny at the bottom (64
  // steps without convergence at 15 rows graded to 1e-300): such a matrix is turned upside down
  // first (LAPACK's dsteqr chooses between QL and QR by the same test, per block).
  if (n >= 2 && std::abs(d[0]) > std::abs(d[n - 1])) {
    std::reverse(d.begin(), d.end());
    std::reverse(e.begin(), e.begin() + (n - 1));
    if (vectors) {
      for (int64_t i = 0; i < n / 2; ++i) {
        std::swap_ranges(&zt[i * n], &zt[(i + 1) * n], &zt[(n - 1 - i) * n]);
      }
    }
  }
  constexpr int kMaxIterations = 64;
  for (int64_t l = 0; l < n; ++l) {
    for (int iteration = 0;; ++iteration) {
      int64_t m = l;
      while (m + 1 < n && std::abs(e[m]) > DBL_EPSILON * (std::abs(d[m]) + std::abs(d[m + 1]))) {
        ++m;
      }
      if (m == l) break;
      if (iteration == kMaxIterations) return false;
      double g = (d[l + 1] - d[l]) / (2.0 * e[l]);
      double r = std::hypot(g, 1.0);
      g = d[m] - d[l] + e[l] / (g + std::copysign(r, g));
      double s = 1.0, c = 1.0, shift = 0.0;
      int64_t i = m - 1;
      for (; i >= l; --i) {
        const double f = s * e[i], b = c * e[i];
        r = e[i + 1] = std::hypot(f, g);
        if (r == 0.0) {  // the rotation underflowed: deflate here and start again
          d[i + 1] -= shift;
          e[m] = 0.0;
          break;
        }
        s = f / r;
        c = g / r;
        g = d[i + 1] - shift;
        r = (d[i] - g) * s + 2.0 * c * b;
        shift = s * r;
        d[i + 1] = g + shift;
        g = c * r - b;
        if (vectors) rotate(&zt[(i + 1) * n], &zt[i * n], n, c, -s);
      }
      if (r == 0.0 && i >= l) continue;
      d[l] -= shift;
      e[l] = g;
      e[m] = 0.0;
    }
  }

  const std::vector<int64_t> order = order_by(
      n, [&](int64_t i) { return d[i]; }, false);
  for (int64_t j = 0; j < n; ++j) w[j] = std::ldexp(d[order[j]], exponent);
  if (!vectors) return true;
  for (int64_t j = 0; j < n; ++j) {
    const double* column = &zt[order[j] * n];
    const double sign = fixed_sign(column, n);
    for (int64_t r = 0; r < n; ++r) v[r * n + j] = column[r] * sign;
  }
  return true;
}

bool singular_value_decomposition(double* a, int64_t m, int64_t n, double* s, double* u,
                                  int64_t u_cols, double* vt, int64_t vt_rows) {
  if (!all_finite(a, m * n)) return false;
  const bool vectors = u != nullptr;
  const int exponent = scale_to_unit(a, m * n);
  const auto scale_back = [&] {
    for (int64_t j = 0; j < std::min(m, n); ++j) s[j] = std::ldexp(s[j], exponent);
  };
  // Each pair (U's column j, Vh's row j) flips together so that fixed_sign(Vh's row) is +1.
  const auto fix_signs = [&] {
    for (int64_t j = 0; j < std::min(m, n); ++j) {
      if (fixed_sign(vt + j * n, n) > 0.0) continue;
      for (int64_t i = 0; i < n; ++i) vt[j * n + i] = -vt[j * n + i];
      for (int64_t i = 0; i < m; ++i) u[i * u_cols + j] = -u[i * u_cols + j];
    }
  };
  if (m >= n) {
    if (!svd_tall(a, m, n, s, u, u_cols, vt)) return false;
    scale_back();
    if (vectors) fix_signs();
    return true;
  }
  // a^T [n, m] is tall: a^T = U' S Vh' gives a = Vh'^T S U'^T, so U' [n, vt_rows] is a's V and
  // Vh' [m, m] a's U^T.
  std::vector<double> at(static_cast<size_t>(n * m));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) at[j * m + i] = a[i * n + j];
  }
  std::vector<double> u_prime, vt_prime;
  if (vectors) {
    u_prime.resize(static_cast<size_t>(n * vt_rows));
    vt_prime.resize(static_cast<size_t>(m * m));
  }
  if (!svd_tall(at.data(), n, m, s, vectors ? u_prime.data() : nullptr, vt_rows,
                vectors ? vt_prime.data() : nullptr)) {
    return false;
  }
  scale_back();
  if (!vectors) return true;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < m; ++j) u[i * u_cols + j] = vt_prime[j * m + i];
  }
  for (int64_t i = 0; i < vt_rows; ++i) {
    for (int64_t j = 0; j < n; ++j) vt[i * n + j] = u_prime[j * vt_rows + i];
  }
  fix_signs();
  return true;
}

}  // namespace kiln::detail
