// The per-element arithmetic of the step's kernels, written once for both
// devices: the CPU device's loops (worker/cpu/cpu_kernels.cc) and the GPU
// device's CUDA kernels (worker/gpu/device_kernels.cu, gpu_kernels.cu)
// call these functions, so the formulas CI checks on the CPU (the
// finite-difference and optimizer tests, kernel_math_test.cc) are the
// formulas the GPU runs. What the devices still write each on their own
// is the parallel part: the loops, the row reductions (the CPU sums some
// in double, the GPU in fp32 over a block) and the memory layout.
//
// Compiled as plain inline C++ by the host compiler and as __host__
// __device__ functions by nvcc; only C math functions (expf, tanhf,
// sqrt) that CUDA provides on the device too.
// Units: none (dimensionless values); counts in elements.
// Thread-safety: pure functions.
#ifndef PACER_WORKER_CORE_KERNEL_MATH_H_
#define PACER_WORKER_CORE_KERNEL_MATH_H_

#include <math.h>

#include <cstdint>

#include "core/host_device.h"

namespace pacer::worker {

struct AdamWParams {
  float learning_rate = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float epsilon = 1e-8f;
  float weight_decay = 0.01f;
};

namespace kernel_math {

// Added to the mean square under the root, as Megatron's RMSNorm does.
constexpr double kRmsNormEpsilon = 1e-6;

// 1 / rms of a row whose squares sum to `sum_squares` over `cols` columns,
// in the accumulator's precision (T = double on the CPU, float on the GPU).
template <typename T>
PACER_HD float InvRms(T sum_squares, int64_t cols) {
  return static_cast<float>(
      T(1) / sqrt(sum_squares / static_cast<T>(cols) + static_cast<T>(kRmsNormEpsilon)));
}

// y = x r with r = (mean x^2 + eps)^-1/2, so dx = r dy - x r^3 (x . dy) /
// cols: RmsNormGradCoef is the second term's row factor from the row's
// x . dy, RmsNormGrad one element's dx.
template <typename T>
PACER_HD float RmsNormGradCoef(T x_dot_dy, int64_t cols, float inv_rms) {
  return static_cast<float>(x_dot_dy / static_cast<T>(cols)) * inv_rms * inv_rms * inv_rms;
}
PACER_HD float RmsNormGrad(float x, float dy, float inv_rms, float coef) {
  return inv_rms * dy - coef * x;
}

// GELU, tanh approximation (GPT-2, Megatron's default).
constexpr float kGeluC = 0.7978845608f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;

PACER_HD float Gelu(float x) {
  return 0.5f * x * (1.0f + tanhf(kGeluC * (x + kGeluA * x * x * x)));
}
// d Gelu / dx.
PACER_HD float GeluGrad(float x) {
  const float t = tanhf(kGeluC * (x + kGeluA * x * x * x));
  const float dt = (1.0f - t * t) * kGeluC * (1.0f + 3.0f * kGeluA * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * dt;
}

PACER_HD float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// SwiGLU of one (gate, up) pair: silu(gate) * up.
PACER_HD float Swiglu(float gate, float up) { return gate * Sigmoid(gate) * up; }
// Its gradients with respect to gate and up, given the output's dout.
PACER_HD void SwigluGrad(float gate, float up, float dout, float* dgate, float* dup) {
  const float s = Sigmoid(gate);
  *dgate = dout * up * s * (1.0f + gate * (1.0f - s));
  *dup = dout * gate * s;
}

// The scores' gradient from the probabilities' (the row softmax of `scale`
// times the scores): scale p (dp - sum_j p_j dp_j), `p_dot_dp` that sum.
PACER_HD float SoftmaxGrad(float p, float dp, float p_dot_dp, float scale) {
  return scale * p * (dp - p_dot_dp);
}

// Cross-entropy against a one-hot label: the logit's gradient from its
// probability p, scaled by grad_scale, and the row's loss from the label's
// probability (clamped so that a vanishing probability gives a large
// finite loss, not infinity; a NaN stays NaN, so a diverged step shows).
PACER_HD float CrossEntropyGrad(float p, bool is_label, float grad_scale) {
  return (p - (is_label ? 1.0f : 0.0f)) * grad_scale;
}
PACER_HD double CrossEntropyLoss(double p_label) { return -log(p_label < 1e-30 ? 1e-30 : p_label); }

// AdamW's bias corrections 1 / (1 - beta^t) for the 1-based `step`, in
// double (once per update, on the host).
struct AdamWScales {
  float c1 = 1, c2 = 1;
};
inline AdamWScales AdamWBiasCorrections(int64_t step, const AdamWParams& p) {
  const double t = static_cast<double>(step > 1 ? step : 1);
  return {static_cast<float>(1.0 / (1.0 - pow(static_cast<double>(p.beta1), t))),
          static_cast<float>(1.0 / (1.0 - pow(static_cast<double>(p.beta2), t)))};
}

// One parameter's AdamW update (decoupled weight decay, Loshchilov &
// Hutter) from its gradient g times grad_scale.
PACER_HD void AdamWElement(float* w, float g, float* m, float* v, float grad_scale, AdamWScales s,
                           const AdamWParams& p) {
  const float grad = g * grad_scale;
  const float mi = p.beta1 * *m + (1.0f - p.beta1) * grad;
  const float vi = p.beta2 * *v + (1.0f - p.beta2) * grad * grad;
  *m = mi;
  *v = vi;
  const float update = (mi * s.c1) / (sqrtf(vi * s.c2) + p.epsilon);
  *w -= p.learning_rate * (update + p.weight_decay * *w);
}

}  // namespace kernel_math
}  // namespace pacer::worker

#endif  // PACER_WORKER_CORE_KERNEL_MATH_H_
