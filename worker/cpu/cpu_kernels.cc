#include "cpu/cpu_kernels.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "core/kernel_math.h"

namespace pacer::worker::cpu {

namespace km = ::pacer::worker::kernel_math;

void Sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
           double* flops) {
  if (m <= 0 || n <= 0 || k <= 0) return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m), static_cast<blasint>(n),
              static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b,
              static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
  if (flops != nullptr) {
    *flops += 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  }
}

void RmsNormForward(const float* x, int64_t rows, int64_t cols, float* y, float* inv_rms) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    double sum = 0;
    for (int64_t j = 0; j < cols; ++j) sum += static_cast<double>(xr[j]) * xr[j];
    const float inv = km::InvRms(sum, cols);
    inv_rms[r] = inv;
    for (int64_t j = 0; j < cols; ++j) y[r * cols + j] = xr[j] * inv;
  }
}

void RmsNormBackward(const float* x, const float* inv_rms, const float* dy, int64_t rows,
                     int64_t cols, float* dx) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    double dot = 0;
    for (int64_t j = 0; j < cols; ++j) dot += static_cast<double>(xr[j]) * dyr[j];
    const float inv = inv_rms[r];
    const float coef = km::RmsNormGradCoef(dot, cols, inv);
    for (int64_t j = 0; j < cols; ++j)
      dx[r * cols + j] += km::RmsNormGrad(xr[j], dyr[j], inv, coef);
  }
}

void GeluForward(const float* x, size_t n, float* y) {
  for (size_t i = 0; i < n; ++i) y[i] = km::Gelu(x[i]);
}

void GeluBackward(const float* x, const float* dy, size_t n, float* dx) {
  for (size_t i = 0; i < n; ++i) dx[i] = dy[i] * km::GeluGrad(x[i]);
}

void SwigluForward(const float* in, int64_t rows, int64_t f, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* gate = in + r * 2 * f;
    const float* up = gate + f;
    for (int64_t j = 0; j < f; ++j) out[r * f + j] = km::Swiglu(gate[j], up[j]);
  }
}

void SwigluBackward(const float* in, const float* dout, int64_t rows, int64_t f, float* din) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* gate = in + r * 2 * f;
    const float* up = gate + f;
    float* dgate = din + r * 2 * f;
    float* dup = dgate + f;
    for (int64_t j = 0; j < f; ++j)
      km::SwigluGrad(gate[j], up[j], dout[r * f + j], &dgate[j], &dup[j]);
  }
}

void SoftmaxRowsInPlace(float* x, int64_t rows, int64_t cols, float scale, const CausalRows& mask) {
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = x + r * cols;
    const int64_t keys = mask.Keys(r, cols);
    float mx = xr[0] * scale;
    for (int64_t j = 1; j < keys; ++j) mx = std::max(mx, xr[j] * scale);
    double sum = 0;
    for (int64_t j = 0; j < keys; ++j) {
      xr[j] = std::exp(xr[j] * scale - mx);
      sum += xr[j];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t j = 0; j < keys; ++j) xr[j] *= inv;
    std::fill(xr + keys, xr + cols, 0.0f);
  }
}

void SoftmaxBackwardInPlace(const float* p, float* dp, int64_t rows, int64_t cols, float scale) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* pr = p + r * cols;
    float* dr = dp + r * cols;
    double dot = 0;
    for (int64_t j = 0; j < cols; ++j) dot += static_cast<double>(pr[j]) * dr[j];
    const float d = static_cast<float>(dot);
    for (int64_t j = 0; j < cols; ++j) dr[j] = km::SoftmaxGrad(pr[j], dr[j], d, scale);
  }
}

double CrossEntropyGradInPlace(float* logits, const int32_t* labels, int64_t rows, int64_t cols,
                               float grad_scale, const float* row_lse) {
  double loss = 0;
  if (row_lse == nullptr) SoftmaxRowsInPlace(logits, rows, cols, 1.0f);
  for (int64_t r = 0; r < rows; ++r) {
    float* lr = logits + r * cols;
    if (row_lse != nullptr) {
      for (int64_t j = 0; j < cols; ++j) lr[j] = std::exp(lr[j] - row_lse[r]);
    }
    const int64_t label = labels[r];
    if (label >= 0) loss += km::CrossEntropyLoss(lr[label]);
    for (int64_t j = 0; j < cols; ++j) lr[j] = km::CrossEntropyGrad(lr[j], j == label, grad_scale);
  }
  return loss;
}

void LogitRowStats(const float* logits, const int32_t* labels, int64_t rows, int64_t cols,
                   float* stats) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* lr = logits + r * cols;
    float mx = lr[0];
    for (int64_t j = 1; j < cols; ++j) mx = std::max(mx, lr[j]);
    double sum = 0;
    for (int64_t j = 0; j < cols; ++j) sum += std::exp(static_cast<double>(lr[j] - mx));
    stats[r] = static_cast<float>(mx + std::log(sum));
    stats[rows + r] = labels[r] >= 0 ? lr[labels[r]] : 0.0f;
  }
}

void AddInPlace(float* y, const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += x[i];
}

void AdamWUpdate(float* w, const float* g, float* m, float* v, size_t n, float grad_scale,
                 int64_t step, const AdamWParams& p) {
  const km::AdamWScales scales = km::AdamWBiasCorrections(step, p);
  for (size_t i = 0; i < n; ++i) km::AdamWElement(&w[i], g[i], &m[i], &v[i], grad_scale, scales, p);
}

}  // namespace pacer::worker::cpu
