#include "localize/likelihood.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ibfabric::localize {

// log-likelihood of `lost` of `sent` at rate r (the binomial's, without its constant).
double loglik(double lost, double sent, double r) {
  r = std::clamp(r, 1e-9, 1 - 1e-9);
  return lost * std::log(r) + (sent - lost) * std::log1p(-r);
}

// Deviance of `lost` of `sent` from an expected `e` where it lost more (0 otherwise).
double excess_deviance(double lost, double sent, double e) {
  if (lost <= e || sent <= 0) return 0;
  auto term = [](double x, double m) { return x > 0 ? x * std::log(x / std::max(m, 1e-12)) : 0.0; };
  return 2 * (term(lost, e) + term(sent - lost, sent - e));
}

// Upper quantile of the chi-square distribution with k degrees of freedom at z standard
// deviations (Wilson-Hilferty).
double chi2_quantile(double k, double z) {
  double a = 2 / (9 * k);
  double c = 1 - a + z * std::sqrt(a);
  return k * c * c * c;
}

// z of a one-sided tail probability p (Abramowitz-Stegun 26.2.23: within 4.5e-4 of the exact
// z, more than enough for thresholds).
double z_of(double p) {
  double t = std::sqrt(-2 * std::log(p));
  return t - (2.515517 + 0.802853 * t + 0.010328 * t * t) /
                 (1 + 1.432788 * t + 0.189269 * t * t + 0.001308 * t * t * t);
}

// log P(X <= k) for X ~ Binomial(n, r): the exact lower tail, summed down from k (the terms
// fall off fast below the mean, and k is at most the mean where it is asked).
double log_binomial_le(double k, double n, double r) {
  k = std::floor(k);
  n = std::round(n);
  if (k >= n || r <= 0) return 0;
  if (k < 0) return -std::numeric_limits<double>::infinity();
  r = std::min(r, 1 - 1e-12);
  auto log_term = [&](double j) {
    return std::lgamma(n + 1) - std::lgamma(j + 1) - std::lgamma(n - j + 1) + j * std::log(r) +
           (n - j) * std::log1p(-r);
  };
  double top = log_term(k), sum = 1, term = 1;
  for (double j = k; j >= 1; --j) {
    term *= (j / (n - j + 1)) * ((1 - r) / r);  // P(j - 1) / P(j)
    sum += term;
    if (term < 1e-12 * sum) break;
  }
  return top + std::log(sum);
}

}  // namespace ibfabric::localize
