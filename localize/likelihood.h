#pragma once
// The statistics the attribution weighs probes with (localizer.cpp): binomial log-likelihoods,
// deviances and tail probabilities. Pure functions, tested in tests/unit/likelihood_test.cpp.

namespace ibfabric::localize {

// log-likelihood of `lost` of `sent` at rate r (the binomial's, without its constant).
double loglik(double lost, double sent, double r);

// Deviance of `lost` of `sent` from an expected `e` where it lost more (0 otherwise).
double excess_deviance(double lost, double sent, double e);

// Upper quantile of the chi-square distribution with k degrees of freedom at z standard
// deviations (Wilson-Hilferty).
double chi2_quantile(double k, double z);

// z of a one-sided tail probability p.
double z_of(double p);

// log P(X <= k) for X ~ Binomial(n, r), exact.
double log_binomial_le(double k, double n, double r);

}  // namespace ibfabric::localize
