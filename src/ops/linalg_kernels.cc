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

/// The rotation (c, s) that zeroes the off-diagonal of the symmetric 2x2 [[app, apq], [apq,
/// aqq]] (as J^T M J with J = [[c, s], [-s, c]]), for apq != 0: t = tan of the smaller angle.
std::pair<double, double> jacobi_rotation(double app, double aqq, double apq) {
  const double theta = (aqq - app) / (2.0 * apq);
  // For a huge theta, theta^2 would overflow: t ~ 1 / (2 theta) there.
  const double t = std::abs(theta) > 1e150
                       ? 0.5 / theta
                       : std::copysign(1.0, theta) / (std::abs(theta) + std::hypot(theta, 1.0));
  const double c = 1.0 / std::sqrt(t * t + 1.0);
  return {c, t * c};
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

/// Fills columns [first, last) of u [m, u_cols] with unit vectors orthogonal to its columns
/// [0, first) and to each other (Gram-Schmidt on the unit vectors e_i, projected twice for
/// orthogonality to working precision). Some e_i keeps a residual of squared norm at least 1/m
/// while fewer than m columns are filled, so the 0.5 / m test always finds one.
void complete_orthonormal_columns(double* u, int64_t m, int64_t u_cols, int64_t first,
                                  int64_t last) {
  std::vector<double> x(static_cast<size_t>(m));
  const auto column = [&](int64_t j, int64_t i) -> double& { return u[i * u_cols + j]; };
  int64_t filled = first;
  for (int64_t e = 0; e < m && filled < last; ++e) {
    std::fill(x.begin(), x.end(), 0.0);
    x[e] = 1.0;
    for (int pass = 0; pass < 2; ++pass) {
      for (int64_t j = 0; j < filled; ++j) {
        double proj = 0.0;
        for (int64_t i = 0; i < m; ++i) proj += column(j, i) * x[i];
        for (int64_t i = 0; i < m; ++i) x[i] -= proj * column(j, i);
      }
    }
    const double norm2 = dot(x.data(), x.data(), m);
    if (norm2 <= 0.5 / static_cast<double>(m)) continue;
    const double scale = 1.0 / std::sqrt(norm2);
    for (int64_t i = 0; i < m; ++i) column(filled, i) = x[i] * scale;
    ++filled;
  }
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

/// One-sided Jacobi SVD (Hestenes) of a tall a [m, n], m >= n, given as its transpose at [n, m]
/// (destroyed): rotating pairs of rows of `at` (columns of a) until every pair is orthogonal
/// makes a @ V = G with orthogonal columns, so s = their norms, U = G / s and Vh = V^T. The
/// rows of vt [n, n] accumulate the rotations.
void svd_tall(double* at, int64_t m, int64_t n, double* s, double* u, int64_t u_cols, double* vt) {
  const bool vectors = u != nullptr;
  std::vector<double> v_rows;
  if (vectors) {
    v_rows.assign(static_cast<size_t>(n * n), 0.0);
    for (int64_t i = 0; i < n; ++i) v_rows[i * n + i] = 1.0;
  }
  constexpr int kMaxSweeps = 100;
  for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
    bool rotated = false;
    for (int64_t p = 0; p + 1 < n; ++p) {
      for (int64_t q = p + 1; q < n; ++q) {
        double* gp = at + p * m;
        double* gq = at + q * m;
        const double alpha = dot(gp, gp, m), beta = dot(gq, gq, m), gamma = dot(gp, gq, m);
        if (gamma == 0.0 || std::abs(gamma) <= DBL_EPSILON * std::sqrt(alpha * beta)) continue;
        const auto [c, sn] = jacobi_rotation(alpha, beta, gamma);
        rotate(gp, gq, m, c, sn);
        if (vectors) rotate(&v_rows[p * n], &v_rows[q * n], n, c, sn);
        rotated = true;
      }
    }
    if (!rotated) break;
  }
  std::vector<double> norms(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) norms[j] = std::sqrt(dot(at + j * m, at + j * m, m));
  const std::vector<int64_t> order = order_by(
      n, [&](int64_t j) { return norms[j]; }, true);
  for (int64_t j = 0; j < n; ++j) s[j] = norms[order[j]];
  if (!vectors) return;
  // A column whose singular value is below the rounding of the largest carries no direction of
  // its own: it is replaced by one orthogonal to the others, as are the full U's extra columns.
  const double negligible = DBL_EPSILON * (n > 0 ? s[0] : 0.0);
  int64_t kept = 0;
  while (kept < n && s[kept] > negligible && s[kept] > 0.0) ++kept;
  for (int64_t j = 0; j < n; ++j) {
    const double* g = at + order[j] * m;
    std::copy_n(&v_rows[order[j] * n], n, vt + j * n);
    if (j >= kept) continue;
    for (int64_t i = 0; i < m; ++i) u[i * u_cols + j] = g[i] / s[j];
  }
  complete_orthonormal_columns(u, m, u_cols, kept, u_cols);
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
  // Reflector j is H = I - tau_j v v^T with v = (0.., 1, vs[j][j+1..]): LAPACK's dlarfg.
  std::vector<double> vs(static_cast<size_t>(k * m), 0.0), taus(static_cast<size_t>(k), 0.0);
  std::vector<double> w(static_cast<size_t>(std::max(n, q_cols)));
  // Applies reflector j to columns [c0, c1) of the [m, ld] matrix x.
  const auto reflect = [&](int64_t j, double* x, int64_t ld, int64_t c0, int64_t c1) {
    const double* v = &vs[j * m];
    std::fill(w.begin() + c0, w.begin() + c1, 0.0);
    for (int64_t i = j; i < m; ++i) axpy(v[i], x + i * ld + c0, w.data() + c0, c1 - c0);
    for (int64_t i = j; i < m; ++i) axpy(-taus[j] * v[i], w.data() + c0, x + i * ld + c0, c1 - c0);
  };
  for (int64_t j = 0; j < k; ++j) {
    double sigma = 0.0;
    for (int64_t i = j + 1; i < m; ++i) sigma += a[i * n + j] * a[i * n + j];
    if (sigma == 0.0) continue;  // already triangular here: H = I
    const double alpha = a[j * n + j];
    const double beta = -std::copysign(std::sqrt(alpha * alpha + sigma), alpha);
    double* v = &vs[j * m];
    v[j] = 1.0;
    for (int64_t i = j + 1; i < m; ++i) v[i] = a[i * n + j] / (alpha - beta);
    taus[j] = (beta - alpha) / beta;
    reflect(j, a, n, j + 1, n);
    a[j * n + j] = beta;
  }
  for (int64_t i = 1; i < m; ++i) std::fill(a + i * n, a + i * n + std::min(i, n), 0.0);
  for (int64_t i = 0; i < m * n; ++i) a[i] = std::ldexp(a[i], exponent);
  if (q == nullptr) return;
  std::fill(q, q + m * q_cols, 0.0);
  for (int64_t i = 0; i < std::min(m, q_cols); ++i) q[i * q_cols + i] = 1.0;
  for (int64_t j = k - 1; j >= 0; --j) {
    if (taus[j] != 0.0) reflect(j, q, q_cols, 0, q_cols);
  }
}

void symmetric_eigen(double* a, int64_t n, double* w, double* v) {
  if (n == 0) return;
  const bool vectors = v != nullptr;
  const int exponent = scale_to_unit(a, n * n);
  // 1. Householder tridiagonalization A = Q T Q^T: reflector k (v_k, tau_k) zeroes column k
  // below its subdiagonal, T's diagonal lands in d and its subdiagonal in e (e[i] joins rows i
  // and i + 1; e[n - 1] = 0). The trailing block is kept whole (both triangles), so each step is
  // a matrix-vector product and a rank-2 update along rows.
  std::vector<double> d(static_cast<size_t>(n)), e(static_cast<size_t>(n), 0.0);
  std::vector<double> reflectors(static_cast<size_t>(n * n), 0.0), taus(static_cast<size_t>(n));
  std::vector<double> p(static_cast<size_t>(n));
  for (int64_t k = 0; k + 2 < n; ++k) {
    double sigma = 0.0;
    for (int64_t i = k + 2; i < n; ++i) sigma += a[i * n + k] * a[i * n + k];
    const double alpha = a[(k + 1) * n + k];
    if (sigma == 0.0) {  // already tridiagonal in this column
      e[k] = alpha;
      continue;
    }
    const double beta = -std::copysign(std::sqrt(alpha * alpha + sigma), alpha);
    double* vk = &reflectors[k * n];
    vk[k + 1] = 1.0;
    for (int64_t i = k + 2; i < n; ++i) vk[i] = a[i * n + k] / (alpha - beta);
    const double tau = taus[k] = (beta - alpha) / beta;
    e[k] = beta;
    // B <- H B H for the trailing block B: p = tau B v, w = p - (tau / 2)(p . v) v,
    // B -= v w^T + w v^T.
    const int64_t lo = k + 1, len = n - lo;
    for (int64_t i = lo; i < n; ++i) p[i] = tau * dot(a + i * n + lo, vk + lo, len);
    const double half = 0.5 * tau * dot(p.data() + lo, vk + lo, len);
    for (int64_t i = lo; i < n; ++i) p[i] -= half * vk[i];
    for (int64_t i = lo; i < n; ++i) {
      axpy(-vk[i], p.data() + lo, a + i * n + lo, len);
      axpy(-p[i], vk + lo, a + i * n + lo, len);
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
    std::vector<double> row(static_cast<size_t>(n));
    for (int64_t k = 0; k + 2 < n; ++k) {
      if (taus[k] == 0.0) continue;
      const double* vk = &reflectors[k * n];
      std::fill(row.begin(), row.end(), 0.0);
      for (int64_t i = k + 1; i < n; ++i) axpy(vk[i], &zt[i * n], row.data(), n);
      for (int64_t i = k + 1; i < n; ++i) axpy(-taus[k] * vk[i], row.data(), &zt[i * n], n);
    }
  }

  // 3. Implicit QL with Wilkinson's shift on (d, e) (EISPACK's tql2): for each l, chase the
  // bulge from the first negligible e[m] below l up to l until e[l] is negligible.
  constexpr int kMaxIterations = 64;
  for (int64_t l = 0; l < n; ++l) {
    for (int iteration = 0; iteration < kMaxIterations; ++iteration) {
      int64_t m = l;
      while (m + 1 < n && std::abs(e[m]) > DBL_EPSILON * (std::abs(d[m]) + std::abs(d[m + 1]))) {
        ++m;
      }
      if (m == l) break;
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
  if (!vectors) return;
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < n; ++j) v[r * n + j] = zt[order[j] * n + r];
  }
}

void singular_value_decomposition(double* a, int64_t m, int64_t n, double* s, double* u,
                                  int64_t u_cols, double* vt, int64_t vt_rows) {
  const bool vectors = u != nullptr;
  const int exponent = scale_to_unit(a, m * n);
  const auto scale_back = [&] {
    for (int64_t j = 0; j < std::min(m, n); ++j) s[j] = std::ldexp(s[j], exponent);
  };
  if (m >= n) {
    // The tall routine wants a's columns as rows.
    std::vector<double> at(static_cast<size_t>(n * m));
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) at[j * m + i] = a[i * n + j];
    }
    svd_tall(at.data(), m, n, s, u, u_cols, vt);
    scale_back();
    return;
  }
  // a^T [n, m] is tall, and the tall routine wants its columns as rows: a's rows, so a itself.
  // a^T = U' S Vh' gives a = Vh'^T S U'^T: U' [n, vt_rows] is a's V, Vh' [m, m] a's U^T.
  std::vector<double> u_prime, vt_prime;
  if (vectors) {
    u_prime.resize(static_cast<size_t>(n * vt_rows));
    vt_prime.resize(static_cast<size_t>(m * m));
  }
  svd_tall(a, n, m, s, vectors ? u_prime.data() : nullptr, vt_rows,
           vectors ? vt_prime.data() : nullptr);
  scale_back();
  if (!vectors) return;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < m; ++j) u[i * u_cols + j] = vt_prime[j * m + i];
  }
  for (int64_t i = 0; i < vt_rows; ++i) {
    for (int64_t j = 0; j < n; ++j) vt[i * n + j] = u_prime[j * vt_rows + i];
  }
}

}  // namespace kiln::detail
