// FftOpRunner: FFTs through FFTW with cached plans (see kiln/runners.h).
#include <fftw3.h>

#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/runners.h"

namespace kiln {
namespace {

// Note [FFTW plans]
// FFTW's planner is not thread-safe, but executing a plan on new arrays (fftw_execute_dft and
// friends) is, provided the arrays have the alignment the plan was made for. So plans are made
// under one mutex with FFTW_ESTIMATE (which never writes the arrays it is given, so planning
// on the real tensors is safe), cached by everything they depend on, alignment included, and
// executed without a lock. A plan is shared (shared_ptr) between the cache and running kernels;
// the last owner destroys it under the planner mutex. The cache is emptied when it reaches
// kMaxPlans (a workload with ever-new shapes would grow it without bound), which destroys
// nothing that a running kernel still holds.

constexpr size_t kMaxPlans = 256;

std::mutex& planner_mutex() {
  static std::mutex* mutex = new std::mutex();  // leaked: plans may die during static teardown
  return *mutex;
}

struct PlanKey {
  int kind;
  bool is_double;
  std::vector<int> dims;  // the logical signal shape n
  int batch;
  int in_alignment;
  int out_alignment;
  bool operator<(const PlanKey& o) const {
    return std::tie(kind, is_double, dims, batch, in_alignment, out_alignment) <
           std::tie(o.kind, o.is_double, o.dims, o.batch, o.in_alignment, o.out_alignment);
  }
};

// One FFTW plan of either precision.
struct Plan {
  bool is_double = false;
  fftw_plan d = nullptr;
  fftwf_plan f = nullptr;
  ~Plan() {
    if (d == nullptr && f == nullptr) return;  // planning failed: nothing to destroy, no lock
    std::lock_guard<std::mutex> lock(planner_mutex());
    if (d != nullptr) fftw_destroy_plan(d);
    if (f != nullptr) fftwf_destroy_plan(f);
  }
};

// Plans for one precision: the same calls with the fftw_ or fftwf_ prefix.
template <typename Real>
struct Fftw;
template <>
struct Fftw<double> {
  using Complex = fftw_complex;
  static int alignment_of(double* p) { return fftw_alignment_of(p); }
  static void set(Plan& plan, fftw_plan p) { plan.d = p; }
  static fftw_plan get(const Plan& plan) { return plan.d; }
  template <typename... A> static fftw_plan many_dft(A... a) { return fftw_plan_many_dft(a...); }
  template <typename... A> static fftw_plan many_r2c(A... a) { return fftw_plan_many_dft_r2c(a...); }
  template <typename... A> static fftw_plan many_c2r(A... a) { return fftw_plan_many_dft_c2r(a...); }
  static void dft(fftw_plan p, double* in, double* out) {
    fftw_execute_dft(p, reinterpret_cast<Complex*>(in), reinterpret_cast<Complex*>(out));
  }
  static void r2c(fftw_plan p, double* in, double* out) {
    fftw_execute_dft_r2c(p, in, reinterpret_cast<Complex*>(out));
  }
  static void c2r(fftw_plan p, double* in, double* out) {
    fftw_execute_dft_c2r(p, reinterpret_cast<Complex*>(in), out);
  }
};
template <>
struct Fftw<float> {
  using Complex = fftwf_complex;
  static int alignment_of(float* p) { return fftwf_alignment_of(p); }
  static void set(Plan& plan, fftwf_plan p) { plan.f = p; }
  static fftwf_plan get(const Plan& plan) { return plan.f; }
  template <typename... A> static fftwf_plan many_dft(A... a) { return fftwf_plan_many_dft(a...); }
  template <typename... A> static fftwf_plan many_r2c(A... a) { return fftwf_plan_many_dft_r2c(a...); }
  template <typename... A> static fftwf_plan many_c2r(A... a) { return fftwf_plan_many_dft_c2r(a...); }
  static void dft(fftwf_plan p, float* in, float* out) {
    fftwf_execute_dft(p, reinterpret_cast<Complex*>(in), reinterpret_cast<Complex*>(out));
  }
  static void r2c(fftwf_plan p, float* in, float* out) {
    fftwf_execute_dft_r2c(p, in, reinterpret_cast<Complex*>(out));
  }
  static void c2r(fftwf_plan p, float* in, float* out) {
    fftwf_execute_dft_c2r(p, reinterpret_cast<Complex*>(in), out);
  }
};

int64_t product(const std::vector<int>& v) {
  int64_t p = 1;
  for (int x : v) p *= x;
  return p;
}

template <typename Real>
std::shared_ptr<const Plan> get_plan(FftKind kind, const std::vector<int>& n, int batch, Real* in,
                                     Real* out) {
  using F = Fftw<Real>;
  static auto* cache = new std::map<PlanKey, std::shared_ptr<const Plan>>();  // leaked, as above
  const PlanKey key{static_cast<int>(kind), std::is_same_v<Real, double>, n, batch,
                    F::alignment_of(in), F::alignment_of(out)};
  // Declared before the lock so that evicted plans are destroyed after it is released (a plan's
  // destructor takes the planner lock).
  std::map<PlanKey, std::shared_ptr<const Plan>> evicted;
  std::lock_guard<std::mutex> lock(planner_mutex());
  auto it = cache->find(key);
  if (it != cache->end()) return it->second;
  const int rank = static_cast<int>(n.size());
  std::vector<int> half = n;  // the complex side of a real transform: the last dim halved
  half.back() = n.back() / 2 + 1;
  const unsigned flags = FFTW_ESTIMATE;
  auto* cin = reinterpret_cast<typename F::Complex*>(in);
  auto* cout = reinterpret_cast<typename F::Complex*>(out);
  auto plan = std::make_shared<Plan>();
  plan->is_double = std::is_same_v<Real, double>;
  const int dist = static_cast<int>(product(n)), half_dist = static_cast<int>(product(half));
  switch (kind) {
    case FftKind::kComplexForward:
    case FftKind::kComplexInverse:
      F::set(*plan, F::many_dft(rank, n.data(), batch, cin, nullptr, 1, dist, cout, nullptr, 1,
                                dist, kind == FftKind::kComplexForward ? FFTW_FORWARD : FFTW_BACKWARD,
                                flags));
      break;
    case FftKind::kRealForward:
      F::set(*plan, F::many_r2c(rank, n.data(), batch, in, nullptr, 1, dist, cout, nullptr, 1,
                                half_dist, flags));
      break;
    case FftKind::kRealInverse:
      F::set(*plan, F::many_c2r(rank, n.data(), batch, cin, nullptr, 1, half_dist, out, nullptr, 1,
                                dist, flags));
      break;
  }
  KILN_CHECK(F::get(*plan) != nullptr) << "FFTW could not plan this transform";
  if (cache->size() >= kMaxPlans) evicted.swap(*cache);
  cache->emplace(key, plan);
  return plan;
}

template <typename Real>
void execute(FftKind kind, const Plan& plan, Real* in, Real* out) {
  using F = Fftw<Real>;
  switch (kind) {
    case FftKind::kComplexForward:
    case FftKind::kComplexInverse: F::dft(F::get(plan), in, out); break;
    case FftKind::kRealForward: F::r2c(F::get(plan), in, out); break;
    case FftKind::kRealInverse: F::c2r(F::get(plan), in, out); break;
  }
}

}  // namespace

FftOpRunner::FftOpRunner(std::string op_name, FftKind kind, int signal_ndim, FftNorm norm)
    : OpRunner(std::move(op_name)), kind_(kind), signal_ndim_(signal_ndim), norm_(norm) {}

size_t FftOpRunner::CalcWorkspace() {
  return kind_ == FftKind::kRealInverse && inputs().size() == 1 && inputs()[0].defined()
             ? inputs()[0].nbytes()
             : 0;
}

void FftOpRunner::LaunchKernel() {
  const std::string where = "FftOpRunner '" + op_name() + "': ";
  KILN_CHECK_VALUE(inputs().size() == 1 && outputs().size() == 1)
      << where << "expected one input and one output, got " << inputs().size() << " and "
      << outputs().size();
  const Tensor& x = inputs()[0];
  const Tensor& out = outputs()[0];
  KILN_CHECK_DTYPE((x.dtype() == DType::kFloat32 || x.dtype() == DType::kFloat64) &&
                   out.dtype() == x.dtype())
      << where << "expected float32 or float64 input and output of one dtype, got " << x.dtype()
      << " and " << out.dtype();
  KILN_CHECK_VALUE(x.is_contiguous() && out.is_contiguous())
      << where << "expected contiguous tensors (call .contiguous())";
  const bool complex_in = kind_ != FftKind::kRealForward;
  const bool complex_out = kind_ != FftKind::kRealInverse;
  // The real-valued side: the input of a forward real transform, the output of an inverse one.
  // (For a complex transform both sides are complex: drop the trailing 2.)
  const Tensor& real_side = kind_ == FftKind::kRealInverse ? out : x;
  const int64_t real_ndim = real_side.ndim() - (complex_in && complex_out ? 1 : 0);
  KILN_CHECK_VALUE(signal_ndim_ >= 1 && signal_ndim_ <= 3 && real_ndim >= signal_ndim_)
      << where << "expected 1 to 3 signal dimensions within the tensor, got signal_ndim "
      << signal_ndim_ << " for " << (complex_in ? "complex " : "") << "input "
      << shape_str(x.shape());
  // n: the signal shape; batch: the product of the leading dimensions.
  std::vector<int> n;
  for (int64_t d = real_ndim - signal_ndim_; d < real_ndim; ++d) {
    n.push_back(static_cast<int>(real_side.size(d)));
  }
  Shape lead(real_side.shape().begin(), real_side.shape().begin() + (real_ndim - signal_ndim_));
  Shape complex_shape = lead;
  for (int v : n) complex_shape.push_back(v);
  if (kind_ == FftKind::kRealForward || kind_ == FftKind::kRealInverse) {
    complex_shape.back() = n.back() / 2 + 1;
  }
  complex_shape.push_back(2);
  Shape real_shape = lead;
  for (int v : n) real_shape.push_back(v);
  const Shape& expected_in = complex_in ? complex_shape : real_shape;
  const Shape& expected_out = complex_out ? complex_shape : real_shape;
  KILN_CHECK_SHAPE(x.shape() == expected_in && out.shape() == expected_out)
      << where << "expected input " << shape_str(expected_in) << " and output "
      << shape_str(expected_out) << " for signal shape " << shape_str(Shape(n.begin(), n.end()))
      << ", got " << shape_str(x.shape()) << " and " << shape_str(out.shape())
      << " (complex values are a trailing dimension of 2)";
  KILN_CHECK_VALUE(product(n) > 0)
      << where << "expected a signal of at least one point in each dimension (as NumPy and "
      << "PyTorch), got signal shape " << shape_str(Shape(n.begin(), n.end()));
  const int batch = static_cast<int>(shape_numel(lead));
  if (batch == 0) return;
  KILN_CHECK_VALUE(x.data_ptr() != out.data_ptr())
      << where << "expected an output separate from the input";

  auto run = [&](auto tag) {
    using Real = decltype(tag);
    Real* in = static_cast<Real*>(x.data_ptr());
    if (kind_ == FftKind::kRealInverse) {  // c2r overwrites its input: work on a copy
      std::memcpy(workspace_ptr(), in, x.nbytes());
      in = static_cast<Real*>(workspace_ptr());
    }
    Real* o = static_cast<Real*>(out.data_ptr());
    std::shared_ptr<const Plan> plan = get_plan<Real>(kind_, n, batch, in, o);
    execute<Real>(kind_, *plan, in, o);
    const bool inverse = kind_ == FftKind::kComplexInverse || kind_ == FftKind::kRealInverse;
    const double size = static_cast<double>(product(n));
    double scale = 1.0;
    if (norm_ == FftNorm::kOrtho) scale = 1.0 / std::sqrt(size);
    if (norm_ == FftNorm::kBackward && inverse) scale = 1.0 / size;
    if (norm_ == FftNorm::kForward && !inverse) scale = 1.0 / size;
    if (scale != 1.0) {
      const int64_t count = out.numel();
      for (int64_t i = 0; i < count; ++i) o[i] = static_cast<Real>(o[i] * scale);
    }
  };
  if (x.dtype() == DType::kFloat64) {
    run(double{});
  } else {
    run(float{});
  }
}

}  // namespace kiln
