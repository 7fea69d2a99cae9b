"""Client-level (epsilon, delta) of DP-FedAvg, from dp-accounting's RDP accountant.

One round of DP-FedAvg (:mod:`tffre.privacy.aggregator`) is the sampled
Gaussian mechanism: a sample of clients, each update clipped to L2 norm C,
their sum plus N(0, sigma^2 C^2). dp-accounting composes T rounds in Renyi DP
(Mironov 2017) and converts to (epsilon, delta). Everything here is
dp-accounting's maths; this module only builds the right events.

Sampling (say which the runner does; the guarantee is only for that one):

* **Poisson** at rate q (each client independently): ``PoissonSampledDpEvent``
  under the add/remove-one relation, with noise multiplier sigma (the sum's
  L2 sensitivity is C). The guarantee covers a client's presence itself.
* **Fixed size** m of N without replacement (what ``tffre.runner.sample_clients``
  does): ``SampledWithoutReplacementDpEvent`` (Wang, Balle, Kasiviswanathan,
  AISTATS 2019, Thm. 27). dp-accounting accepts it only under the
  replace-one relation (N is public; neighbours swap one client's data), under
  which the clipped sum's L2 sensitivity is 2C (+C replaced by -C). dp-accounting
  0.4.3 takes the event's noise multiplier as noise / sensitivity and does not
  double the sensitivity itself (google/differential-privacy issue #378), so the
  event gets sigma / 2. A replace-one epsilon is not comparable with an
  add/remove one (replace-one is implied by add/remove at twice the epsilon).

Conversion to (epsilon, delta): dp-accounting's ``compute_epsilon``, the
improved bound eps = min_alpha rdp(alpha) + log(1 - 1/alpha)
- log(delta alpha) / (alpha - 1) (Canonne, Kamath, Steinke 2020, Prop. 12;
Asoodeh et al. 2020), over ``DEFAULT_RDP_ORDERS``. It is never larger than the
classical min_alpha rdp(alpha) + log(1/delta) / (alpha - 1) (Mironov 2017, Prop. 3).

Adaptive clipping (Andrew et al., NeurIPS 2021) also releases a noised count of
the clients whose update norm is below the clip: a second Gaussian query, of
sensitivity 1/2 and noise stddev sigma_b, i.e. noise multiplier 2 sigma_b. Two
Gaussian queries on the same sample are one Gaussian of noise multiplier
(z_value^-2 + (2 sigma_b)^-2)^-1/2 (Andrew et al. Sec. 3; Mironov, Talwar, Zhang
2019, Sec. 3; dp-accounting's ``_effective_gaussian_noise_multiplier``). As TF
Privacy/TFF do (``tff.aggregators.DifferentiallyPrivateFactory.gaussian_adaptive``),
``noise_multiplier`` is that *effective* multiplier, the one accounted, and
:func:`adaptive_clip_noise` gives the larger z_value the sum is noised with.

Default delta: :func:`default_delta` = min(1e-5, N^-1.1) for N clients. delta
must be well below 1/N: publishing each client's whole data with probability
delta is (0, delta)-DP, and publishes N delta clients on average, so delta >=
1/N allows losing a client outright. N^-1.1 keeps N delta = N^-0.1 < 1 (the rule
of thumb delta = o(1/N)); the cap 1e-5 (Abadi et al. 2016's value) keeps it small
in absolute terms in the small federations tffre targets (10 hospitals: N^-1.1
alone would be 8%).

Subsampling amplifies privacy only if the sample is secret: the runner's
client sampling must then be drawn from a seed the adversary does not know.
"""

import dataclasses
import functools
import math
import numbers

import dp_accounting
from dp_accounting import rdp

POISSON = "poisson"
FIXED = "fixed"
#: A target epsilon that needs more noise than this is refused as out of reach.
MAX_NOISE_MULTIPLIER = 1000.0
#: Andrew et al.'s (and TFF's) default noise stddev of the clipped count: expected clients / 20.
CLIPPED_COUNT_STDDEV_FRACTION = 0.05


def _integer(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def default_delta(num_clients):
    """min(1e-5, N^-1.1): delta well below 1/N for N clients (see the module docstring)."""
    if num_clients < 1:
        raise ValueError(f"num_clients must be >= 1, got {num_clients!r}")
    return min(1e-5, float(num_clients) ** -1.1)


def check_delta(delta):
    """``delta`` as a float if 0 < delta < 1, else a one-line ValueError."""
    if not isinstance(delta, numbers.Real) or not 0 < delta < 1:
        raise ValueError(f"dp delta must be in (0, 1), got {delta!r}")
    return float(delta)


def check_noise_multiplier(noise_multiplier):
    """``noise_multiplier`` as a float if it is finite and >= 0, else a one-line ValueError."""
    if not isinstance(noise_multiplier, numbers.Real) or not 0 <= noise_multiplier < math.inf:
        raise ValueError(f"dp noise multiplier must be a finite number >= 0, "
                         f"got {noise_multiplier!r}")
    return float(noise_multiplier)


@dataclasses.dataclass(frozen=True)
class Sampling:
    """How a round's clients are drawn from the N = ``population`` clients.

    Build it with :func:`poisson_sampling` or :func:`fixed_size_sampling`.

    Attributes:
      kind: :data:`POISSON` or :data:`FIXED`.
      population: N, the number of clients.
      rate: q, each client's probability of taking part in a round.
      sample_size: m, the clients per round (fixed-size sampling; None for Poisson).
    """
    kind: str
    population: int
    rate: float
    sample_size: int = None

    @property
    def expected_clients(self):
        """The expected number of clients per round (q N, or m): the DP-FedAvg denominator."""
        return float(self.sample_size) if self.kind == FIXED else self.rate * self.population

    @property
    def relation(self):
        """The neighbouring relation the epsilon is stated under."""
        return (dp_accounting.NeighboringRelation.REPLACE_ONE if self.kind == FIXED
                else dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE)


def poisson_sampling(rate, population):
    """Each of ``population`` clients takes part in a round with probability ``rate``."""
    if not _integer(population) or population < 1:
        raise ValueError(f"the number of clients must be a positive integer, got {population!r}")
    if not isinstance(rate, numbers.Real) or not 0 < rate <= 1:
        raise ValueError(f"the sampling rate must be in (0, 1], got {rate!r}")
    return Sampling(POISSON, int(population), float(rate))


def fixed_size_sampling(sample_size, population):
    """``sample_size`` of ``population`` clients per round, uniformly without replacement."""
    if not _integer(population) or population < 1:
        raise ValueError(f"the number of clients must be a positive integer, got {population!r}")
    if not _integer(sample_size) or not 1 <= sample_size <= population:
        raise ValueError(f"clients per round must be an integer in [1, {population}], "
                         f"got {sample_size!r}")
    return Sampling(FIXED, int(population), sample_size / population, int(sample_size))


def round_event(noise_multiplier, sampling):
    """The ``DpEvent`` of one round: the sampled Gaussian of noise multiplier sigma.

    Fixed-size sampling carries sigma / 2 (sensitivity 2C under replace-one; see
    the module docstring).
    """
    sigma = check_noise_multiplier(noise_multiplier)
    if sampling.kind == FIXED:
        return dp_accounting.SampledWithoutReplacementDpEvent(
            sampling.population, sampling.sample_size, dp_accounting.GaussianDpEvent(sigma / 2))
    return dp_accounting.PoissonSampledDpEvent(sampling.rate,
                                               dp_accounting.GaussianDpEvent(sigma))


def accountant(sampling):
    """A fresh dp-accounting RDP accountant (default orders) for ``sampling``'s relation."""
    return rdp.RdpAccountant(neighboring_relation=sampling.relation)


def epsilon(noise_multiplier, rounds, delta, sampling):
    """epsilon at ``delta`` after ``rounds`` rounds of DP-FedAvg with ``sampling``.

    0 rounds give 0; sigma = 0 gives inf.
    """
    return RunningEpsilon(noise_multiplier, delta, sampling).epsilon(rounds)


class RunningEpsilon:
    """epsilon after each round, for the per-round report (``dp_epsilon``).

    RDP composes additively, so the one-round RDP curve is computed once (by
    dp-accounting: the without-replacement bound takes ~2 s) and T rounds are
    T times it, converted by dp-accounting's ``compute_epsilon``: the same
    numbers as composing T events (tested).

    Args:
      noise_multiplier: sigma (the effective one for adaptive clipping).
      delta: the target delta.
      sampling: a :class:`Sampling`.
    """

    def __init__(self, noise_multiplier, delta, sampling):
        self.noise_multiplier = check_noise_multiplier(noise_multiplier)
        self.delta = check_delta(delta)
        self.sampling = sampling
        one = accountant(sampling).compose(round_event(self.noise_multiplier, sampling))
        self._orders, self._rdp = one.orders, one.rdp

    def epsilon(self, rounds):
        """epsilon at ``delta`` after ``rounds`` (>= 0) rounds."""
        if not _integer(rounds) or rounds < 0:
            raise ValueError(f"rounds must be an integer >= 0, got {rounds!r}")
        return float(rdp.compute_epsilon(
            self._orders, int(rounds) * self._rdp, self.delta)[0])


# Memoized: the command line calibrates to check a budget before any work, and the runner
# again to train; each is a search over sigma (tens of seconds at 100 of 1,000 clients).
@functools.lru_cache(maxsize=32)
def calibrate_noise_multiplier(target_epsilon, delta, rounds, sampling, tol=1e-4):
    """The smallest sigma (within ``tol``) whose epsilon after ``rounds`` rounds is at most
    ``target_epsilon``, by dp-accounting's ``calibrate_dp_mechanism``.

    A target that needs more than :data:`MAX_NOISE_MULTIPLIER` (or none is met
    at any sigma: RDP's epsilon has a floor > 0 at fixed orders and delta) is
    refused in one line. For adaptive clipping the result is the effective
    multiplier (:func:`adaptive_clip_noise` splits it).
    """
    if not isinstance(target_epsilon, numbers.Real) or not 0 < target_epsilon < math.inf:
        raise ValueError(f"dp target epsilon must be a finite number > 0, got {target_epsilon!r}")
    delta = check_delta(delta)
    if not _integer(rounds) or rounds < 1:
        raise ValueError(f"rounds must be a positive integer, got {rounds!r}")
    rounds = int(rounds)

    def event(sigma):
        return dp_accounting.SelfComposedDpEvent(round_event(sigma, sampling), rounds)

    def eps(sigma):
        return accountant(sampling).compose(event(sigma)).get_epsilon(delta)

    reached = eps(MAX_NOISE_MULTIPLIER)
    if reached > target_epsilon:
        raise ValueError(
            f"dp target epsilon {target_epsilon:g} is out of reach at delta {delta:g} over "
            f"{rounds} rounds of {_describe(sampling)}: even noise multiplier "
            f"{MAX_NOISE_MULTIPLIER:g} gives epsilon {reached:.3g}; allow a larger epsilon "
            f"or delta, or fewer rounds")
    # A bracket [low, 2 low] around the answer, doubling up or halving down from 1 (epsilon
    # falls as sigma grows; sigma -> 0 gives epsilon -> inf): a short bracket, few Brent steps.
    low = 1.0
    if eps(low) > target_epsilon:
        while eps(2 * low) > target_epsilon:
            low *= 2
    else:
        while eps(low) <= target_epsilon:
            if low < 1e-3:
                return low       # the budget is met with (next to) no noise
            low /= 2
    return float(dp_accounting.calibrate_dp_mechanism(
        lambda: accountant(sampling), event, target_epsilon, delta,
        bracket_interval=dp_accounting.ExplicitBracketInterval(
            low, min(2 * low, MAX_NOISE_MULTIPLIER)), tol=tol))


def adaptive_clip_noise(noise_multiplier, expected_clients, clipped_count_stddev=None):
    """(z_value, sigma_b): the noise multiplier of the sum and the stddev of the clipped count
    for adaptive clipping whose *effective* noise multiplier is ``noise_multiplier``.

    z^-2 = z_value^-2 + (2 sigma_b)^-2 (the module docstring), so z_value =
    (z^-2 - (2 sigma_b)^-2)^-1/2, with sigma_b = ``expected_clients`` / 20 by
    default (Andrew et al.'s recommendation, TFF's default). Refused when
    sigma_b is too small for it (z >= 2 sigma_b). z = 0 gives (0, 0): no noise.
    """
    z = check_noise_multiplier(noise_multiplier)
    if not expected_clients > 0:
        raise ValueError(f"expected clients per round must be > 0, got {expected_clients!r}")
    if z == 0:
        return 0.0, 0.0 if clipped_count_stddev is None else float(clipped_count_stddev)
    if clipped_count_stddev is None:
        clipped_count_stddev = CLIPPED_COUNT_STDDEV_FRACTION * expected_clients
    if not clipped_count_stddev > 0 or z >= 2 * clipped_count_stddev:
        raise ValueError(
            f"adaptive clipping cannot reach noise multiplier {z:g}: its clipped-count noise "
            f"stddev {clipped_count_stddev:g} must exceed {z / 2:g} (it defaults to 1/20 of the "
            f"{expected_clients:g} expected clients per round); use more clients per round, "
            f"a fixed clip, or a smaller noise multiplier")
    return (z ** -2 - (2 * clipped_count_stddev) ** -2) ** -0.5, float(clipped_count_stddev)


def _describe(sampling):
    if sampling.kind == FIXED:
        return f"{sampling.sample_size} of {sampling.population} clients"
    return f"Poisson sampling at rate {sampling.rate:g} of {sampling.population} clients"
