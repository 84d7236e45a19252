// The per-element formulas both devices run (core/kernel_math.h), checked
// against what they claim to be: each gradient against central finite
// differences of its forward, AdamW against its closed form. The GPU
// kernels call these same functions, so this is where their arithmetic is
// tested without a GPU.
#include "core/kernel_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace pacer::worker {
namespace {

namespace km = kernel_math;

std::vector<float> Points() {
  std::vector<float> xs;
  for (float x = -6.0f; x <= 6.0f; x += 0.37f) xs.push_back(x);
  return xs;
}

// (f(x + h) - f(x - h)) / 2h in double around a float function.
template <typename F>
double CentralDifference(F f, double x, double h = 1e-3) {
  return (static_cast<double>(f(static_cast<float>(x + h))) -
          static_cast<double>(f(static_cast<float>(x - h)))) /
         (2 * h);
}

TEST(KernelMathTest, GeluGradIsTheDerivativeOfGelu) {
  for (float x : Points()) {
    EXPECT_NEAR(km::GeluGrad(x), CentralDifference(km::Gelu, x), 2e-3) << "x = " << x;
  }
  // The tanh approximation's known values: ~x for large x, ~0 for very
  // negative x, 0 at 0 with slope 1/2.
  EXPECT_NEAR(km::Gelu(6.0f), 6.0f, 1e-5);
  EXPECT_NEAR(km::Gelu(-6.0f), 0.0f, 1e-5);
  EXPECT_FLOAT_EQ(km::Gelu(0.0f), 0.0f);
  EXPECT_FLOAT_EQ(km::GeluGrad(0.0f), 0.5f);
}

TEST(KernelMathTest, SwigluGradIsTheDerivativeOfSwiglu) {
  for (float gate : Points()) {
    for (float up : {-2.5f, -0.3f, 0.7f, 3.0f}) {
      const float dout = 1.7f;
      float dgate = 0, dup = 0;
      km::SwigluGrad(gate, up, dout, &dgate, &dup);
      const double want_gate =
          dout * CentralDifference([&](float g) { return km::Swiglu(g, up); }, gate);
      const double want_up =
          dout * CentralDifference([&](float u) { return km::Swiglu(gate, u); }, up);
      EXPECT_NEAR(dgate, want_gate, 5e-3 * (1 + std::abs(want_gate))) << gate << " " << up;
      EXPECT_NEAR(dup, want_up, 5e-3 * (1 + std::abs(want_up))) << gate << " " << up;
    }
  }
}

// One row of RMS norm, y = x InvRms(x), and the loss sum_j w_j y_j: its
// gradient by RmsNormGradCoef / RmsNormGrad (dy = w) against central
// differences of the loss in each x_j.
TEST(KernelMathTest, RmsNormGradIsTheDerivativeOfRmsNorm) {
  const std::vector<float> w = {0.3f, -1.2f, 0.8f, 2.0f, -0.5f};
  std::vector<float> x = {1.5f, -0.4f, 0.9f, -2.2f, 0.1f};
  const int64_t cols = static_cast<int64_t>(x.size());
  auto loss = [&](const std::vector<float>& row) {
    double sum_squares = 0;
    for (float v : row) sum_squares += static_cast<double>(v) * v;
    const float inv = km::InvRms(sum_squares, cols);
    double l = 0;
    for (int64_t j = 0; j < cols; ++j) l += static_cast<double>(w[j]) * row[j] * inv;
    return l;
  };
  double sum_squares = 0, dot = 0;
  for (int64_t j = 0; j < cols; ++j) {
    sum_squares += static_cast<double>(x[j]) * x[j];
    dot += static_cast<double>(x[j]) * w[j];
  }
  const float inv = km::InvRms(sum_squares, cols);
  EXPECT_NEAR(inv, 1.0 / std::sqrt(sum_squares / static_cast<double>(cols) + km::kRmsNormEpsilon), 1e-6);
  const float coef = km::RmsNormGradCoef(dot, cols, inv);
  for (int64_t j = 0; j < cols; ++j) {
    const double h = 1e-3;
    std::vector<float> plus = x, minus = x;
    plus[j] += static_cast<float>(h);
    minus[j] -= static_cast<float>(h);
    const double want = (loss(plus) - loss(minus)) / (static_cast<double>(plus[j]) - minus[j]);
    EXPECT_NEAR(km::RmsNormGrad(x[j], w[j], inv, coef), want, 1e-3) << "j = " << j;
  }
}

// p = softmax(scale s); dL/ds_j = SoftmaxGrad(p_j, dL/dp_j, p . dL/dp).
TEST(KernelMathTest, SoftmaxGradIsTheDerivativeOfTheScaledSoftmax) {
  const std::vector<double> s = {0.4, -1.3, 2.1, 0.0, 0.9};
  const std::vector<double> dl_dp = {1.0, -0.5, 0.25, 2.0, -1.5};
  const double scale = 0.35;
  auto softmax = [&](const std::vector<double>& scores) {
    std::vector<double> p(scores.size());
    double sum = 0;
    for (size_t j = 0; j < scores.size(); ++j) sum += p[j] = std::exp(scale * scores[j]);
    for (double& v : p) v /= sum;
    return p;
  };
  auto loss = [&](const std::vector<double>& scores) {
    const std::vector<double> p = softmax(scores);
    double l = 0;
    for (size_t j = 0; j < p.size(); ++j) l += dl_dp[j] * p[j];
    return l;
  };
  const std::vector<double> p = softmax(s);
  double dot = 0;
  for (size_t j = 0; j < p.size(); ++j) dot += p[j] * dl_dp[j];
  for (size_t j = 0; j < s.size(); ++j) {
    std::vector<double> plus = s, minus = s;
    plus[j] += 1e-5;
    minus[j] -= 1e-5;
    const double want = (loss(plus) - loss(minus)) / 2e-5;
    const float got = km::SoftmaxGrad(static_cast<float>(p[j]), static_cast<float>(dl_dp[j]),
                                      static_cast<float>(dot), static_cast<float>(scale));
    EXPECT_NEAR(got, want, 1e-6) << "j = " << j;
  }
}

TEST(KernelMathTest, CrossEntropyIsMinusLogOfTheLabelsProbability) {
  EXPECT_NEAR(km::CrossEntropyLoss(0.25), std::log(4.0), 1e-12);
  // A probability that underflowed to 0 gives a large finite loss.
  EXPECT_NEAR(km::CrossEntropyLoss(0.0), -std::log(1e-30), 1e-9);
  EXPECT_TRUE(std::isfinite(km::CrossEntropyLoss(0.0)));
  // A diverged step's NaN is not clamped into a plausible loss.
  EXPECT_TRUE(std::isnan(km::CrossEntropyLoss(std::nan(""))));
  // The logit's gradient: (p - onehot) * scale.
  EXPECT_FLOAT_EQ(km::CrossEntropyGrad(0.25f, true, 0.5f), -0.375f);
  EXPECT_FLOAT_EQ(km::CrossEntropyGrad(0.25f, false, 0.5f), 0.125f);
}

// Under a constant gradient g the bias-corrected moments are exactly g and
// g^2 at every step, so each step moves w by lr (sign(g) + wd w), up to
// epsilon: a wrong bias correction (or none) breaks it from step 1.
TEST(KernelMathTest, AdamWMovesByTheLearningRateUnderAConstantGradient) {
  AdamWParams p;
  p.learning_rate = 0.01f;
  p.weight_decay = 0.1f;
  for (float g : {3.0f, -0.02f}) {
    float w = 1.0f, m = 0, v = 0;
    for (int64_t step = 1; step <= 6; ++step) {
      const float before = w;
      // grad_scale halves a doubled gradient, as the executor averages
      // summed micro-batch gradients.
      km::AdamWElement(&w, 2 * g, &m, &v, 0.5f, km::AdamWBiasCorrections(step, p), p);
      const double want =
          before - p.learning_rate * ((g > 0 ? 1.0 : -1.0) + p.weight_decay * before);
      EXPECT_NEAR(w, want, 1e-5) << "g = " << g << " step " << step;
    }
  }
  // Step 0 is treated as step 1 (no division by 1 - beta^0 = 0).
  const km::AdamWScales first = km::AdamWBiasCorrections(1, p);
  const km::AdamWScales zero = km::AdamWBiasCorrections(0, p);
  EXPECT_FLOAT_EQ(zero.c1, first.c1);
  EXPECT_FLOAT_EQ(first.c1, 1.0f / (1.0f - p.beta1));
}

}  // namespace
}  // namespace pacer::worker
