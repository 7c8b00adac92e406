// The statistics the attribution weighs probes with (localize/likelihood.h), against values
// from tables and sums written out here, not from the code under test.

#include "localize/likelihood.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace ibfabric::localize {
namespace {

// P(X <= k), X ~ Binomial(n, r), summed term by term.
double binomial_le(int k, int n, double r) {
  double sum = 0;
  for (int j = 0; j <= k; ++j) {
    sum += std::exp(std::lgamma(n + 1.0) - std::lgamma(j + 1.0) - std::lgamma(n - j + 1.0) +
                    j * std::log(r) + (n - j) * std::log(1 - r));
  }
  return sum;
}

TEST(Likelihood, LogLikelihoodOfABinomialWithoutItsConstant) {
  EXPECT_NEAR(loglik(3, 60, 0.05), 3 * std::log(0.05) + 57 * std::log(0.95), 1e-12);
  EXPECT_NEAR(loglik(0, 100, 0.01), 100 * std::log(0.99), 1e-12);
  // A rate of 0 or 1 is held just inside, so that a loss it cannot explain is very unlikely,
  // not impossible (the fit compares finite numbers).
  EXPECT_TRUE(std::isfinite(loglik(2, 10, 0)));
  EXPECT_LT(loglik(2, 10, 0), -30);
  EXPECT_TRUE(std::isfinite(loglik(8, 10, 1)));
}

TEST(Likelihood, ExcessDevianceOnlyAboveWhatWasExpected) {
  EXPECT_EQ(excess_deviance(4, 100, 5), 0);
  EXPECT_EQ(excess_deviance(5, 100, 5), 0);
  EXPECT_EQ(excess_deviance(3, 0, 1), 0);
  EXPECT_GT(excess_deviance(10, 100, 5), excess_deviance(8, 100, 5));
  // Large counts: about the chi-square statistic (x - e)^2 / (e (1 - e/n)), 4.04 here.
  EXPECT_NEAR(excess_deviance(120, 10000, 100), 400 / (100 * 0.99), 0.3);
}

TEST(Likelihood, ZOfATailProbability) {
  // The normal table: z of 0.05, 0.001 and 1e-6 one-sided.
  EXPECT_NEAR(z_of(0.05), 1.6449, 1e-3);
  EXPECT_NEAR(z_of(1e-3), 3.0902, 1e-3);
  EXPECT_NEAR(z_of(1e-6), 4.7534, 1e-3);
}

TEST(Likelihood, ChiSquareQuantile) {
  // The chi-square table: 5.991 (2 degrees of freedom, 0.05), 29.588 (10, 0.001), 124.342
  // (100, 0.05).
  EXPECT_NEAR(chi2_quantile(2, z_of(0.05)), 5.991, 5.991 * 0.02);
  EXPECT_NEAR(chi2_quantile(10, z_of(1e-3)), 29.588, 29.588 * 0.02);
  EXPECT_NEAR(chi2_quantile(100, z_of(0.05)), 124.342, 124.342 * 0.005);
}

TEST(Likelihood, LowerTailOfABinomialIsExact) {
  for (int k = 0; k <= 3; ++k) {
    EXPECT_NEAR(log_binomial_le(k, 60, 0.05), std::log(binomial_le(k, 60, 0.05)), 1e-9) << k;
  }
  EXPECT_NEAR(log_binomial_le(2, 600, 0.02), std::log(binomial_le(2, 600, 0.02)), 1e-9);
  EXPECT_NEAR(log_binomial_le(0, 100, 0.01), 100 * std::log(0.99), 1e-9);
  // Fractional counts (a pair's residual loss) are taken down to whole probes.
  EXPECT_EQ(log_binomial_le(2.7, 60, 0.05), log_binomial_le(2, 60, 0.05));
  EXPECT_EQ(log_binomial_le(60, 60, 0.05), 0);  // certain
  EXPECT_EQ(log_binomial_le(1, 60, 0), 0);
  EXPECT_EQ(log_binomial_le(-1, 60, 0.05), -std::numeric_limits<double>::infinity());
}

}  // namespace
}  // namespace ibfabric::localize
