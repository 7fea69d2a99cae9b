"""(epsilon, delta) accounting (tffre.privacy.accounting) against dp-accounting and closed forms."""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting import rdp

from tffre.privacy import accounting

# dp-accounting's DEFAULT_RDP_ORDERS, transcribed.
ORDERS = np.array([1 + x / 10 for x in range(1, 100)] + list(range(11, 64)) + [128, 256, 512, 1024],
                  np.float64)


def closed_form(rdp_per_round, rounds, delta):
    """(improved, classical) epsilon of ``rounds`` rounds of RDP ``rdp_per_round(alpha)``, in numpy.

    classical: min_alpha T rdp(alpha) + log(1/delta) / (alpha - 1) (Mironov 2017, Prop. 3);
    improved:  min_alpha T rdp(alpha) + log(1 - 1/alpha) - log(delta alpha) / (alpha - 1)
    (Canonne, Kamath, Steinke 2020, Prop. 12), the conversion dp-accounting uses.
    """
    r = rounds * rdp_per_round(ORDERS)
    classical = np.min(r + np.log(1 / delta) / (ORDERS - 1))
    improved = np.min(r + np.log1p(-1 / ORDERS) - np.log(delta * ORDERS) / (ORDERS - 1))
    return max(0.0, improved), classical


@pytest.mark.parametrize("q, sigma, rounds, delta", [
    (0.01, 1.1, 100, 1e-5), (0.1, 2.0, 30, 1e-6), (0.5, 0.8, 7, 1e-3), (1.0, 4.0, 50, 1e-5)])
def test_poisson_epsilon_equals_dp_accounting(q, sigma, rounds, delta):
    sampling = accounting.poisson_sampling(q, 1000)
    direct = rdp.RdpAccountant().compose(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)),
        rounds).get_epsilon(delta)
    assert accounting.epsilon(sigma, rounds, delta, sampling) == pytest.approx(direct, rel=1e-10)


def test_fixed_size_epsilon_equals_dp_accounting_at_half_the_noise_multiplier():
    # Replace-one: the clipped sum's sensitivity is 2C, and dp-accounting's multiplier is
    # noise / sensitivity (google/differential-privacy#378), so the event carries sigma / 2.
    sigma, rounds, delta = 3.0, 40, 1e-5
    direct = rdp.RdpAccountant(
        neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE).compose(
            dp_accounting.SampledWithoutReplacementDpEvent(
                200, 20, dp_accounting.GaussianDpEvent(sigma / 2)), rounds).get_epsilon(delta)
    got = accounting.epsilon(sigma, rounds, delta, accounting.fixed_size_sampling(20, 200))
    assert got == pytest.approx(direct, rel=1e-10)


@pytest.mark.parametrize("sigma, rounds, delta", [
    (1.0, 1, 1e-5), (5.0, 20, 1e-5), (20.0, 300, 1e-6), (0.7, 3, 1e-2), (50.0, 10, 1e-5)])
def test_without_subsampling_epsilon_is_the_gaussian_closed_form(sigma, rounds, delta):
    # Gaussian RDP: alpha / (2 sigma^2) per round (Mironov 2017, Prop. 7).
    improved, classical = closed_form(lambda a: a / (2 * sigma ** 2), rounds, delta)
    got = accounting.epsilon(sigma, rounds, delta, accounting.poisson_sampling(1.0, 10))
    assert got == pytest.approx(improved, rel=1e-9, abs=1e-12)
    assert got <= classical + 1e-12   # the improved conversion is never looser
    # Everyone every round, fixed size (m = N): replace-one doubles the sensitivity,
    # RDP 4 alpha / (2 sigma^2).
    improved_fixed, _ = closed_form(lambda a: 4 * a / (2 * sigma ** 2), rounds, delta)
    got_fixed = accounting.epsilon(sigma, rounds, delta, accounting.fixed_size_sampling(10, 10))
    assert got_fixed == pytest.approx(improved_fixed, rel=1e-9, abs=1e-12)


def test_running_epsilon_is_the_epsilon_after_each_round():
    sampling = accounting.poisson_sampling(0.05, 500)
    running = accounting.RunningEpsilon(1.2, 1e-5, sampling)
    values = [running.epsilon(t) for t in range(6)]
    assert values[0] == 0.0
    assert all(a < b for a, b in zip(values, values[1:]))
    for t in (1, 5):
        direct = rdp.RdpAccountant()
        for _ in range(t):   # composed one round at a time, as a run does
            direct.compose(accounting.round_event(1.2, sampling))
        assert values[t] == pytest.approx(direct.get_epsilon(1e-5), rel=1e-10)


def test_no_noise_is_no_privacy():
    assert accounting.epsilon(0.0, 3, 1e-5, accounting.poisson_sampling(0.1, 100)) == math.inf


@pytest.mark.parametrize("target", [1.0, 8.0])
def test_calibration_reaches_the_target_epsilon(target):
    sampling, rounds, delta = accounting.poisson_sampling(0.05, 2000), 200, 1e-6
    sigma = accounting.calibrate_noise_multiplier(target, delta, rounds, sampling)
    eps = accounting.epsilon(sigma, rounds, delta, sampling)
    assert eps <= target and eps == pytest.approx(target, rel=1e-3)
    assert accounting.epsilon(sigma * 0.999, rounds, delta, sampling) > target   # the least sigma


def test_calibration_for_fixed_size_sampling():
    sampling, rounds, delta = accounting.fixed_size_sampling(10, 10), 50, 1e-5
    sigma = accounting.calibrate_noise_multiplier(8.0, delta, rounds, sampling, tol=1e-3)
    improved, _ = closed_form(lambda a: 4 * a / (2 * sigma ** 2), rounds, delta)
    assert improved <= 8.0 and improved == pytest.approx(8.0, rel=1e-3)


def test_an_unreachable_target_is_refused_in_one_line():
    with pytest.raises(ValueError) as err:
        accounting.calibrate_noise_multiplier(1e-3, 1e-5, 100, accounting.poisson_sampling(1.0, 10))
    message = str(err.value)
    assert "out of reach" in message and "\n" not in message


def test_adaptive_clipping_accounts_the_effective_noise_multiplier():
    from tensorflow_federated.python.aggregators.differential_privacy import \
        adaptive_clip_noise_params   # TFF's own split, as the reference
    z, clients = 1.1, 100.0
    z_value, count_stddev = accounting.adaptive_clip_noise(z, clients)
    want_value, want_stddev = adaptive_clip_noise_params(z, clients)
    assert z_value == pytest.approx(want_value, rel=1e-12) and count_stddev == want_stddev
    assert z_value > z
    # What the query releases: the sum (multiplier z_value) and the clipped count (stddev
    # sigma_b, sensitivity 1/2: multiplier 2 sigma_b), on the same sample, as TF Privacy's
    # QuantileAdaptiveClipSumQuery reports its event. dp-accounting gives it the epsilon of z.
    sampling, rounds, delta = accounting.poisson_sampling(0.1, 1000), 50, 1e-5
    both = dp_accounting.ComposedDpEvent([dp_accounting.GaussianDpEvent(z_value),
                                          dp_accounting.GaussianDpEvent(2 * count_stddev)])
    direct = rdp.RdpAccountant().compose(
        dp_accounting.PoissonSampledDpEvent(0.1, both), rounds).get_epsilon(delta)
    assert accounting.epsilon(z, rounds, delta, sampling) == pytest.approx(direct, rel=1e-9)


def test_adaptive_clipping_refuses_too_few_clients_for_its_noise():
    with pytest.raises(ValueError, match="adaptive clipping cannot reach"):
        accounting.adaptive_clip_noise(1.0, 10)   # sigma_b = 0.5: 2 sigma_b = 1 is not enough
    assert accounting.adaptive_clip_noise(0.0, 10) == (0.0, 0.0)


def test_default_delta_is_below_one_over_the_number_of_clients():
    assert accounting.default_delta(10) == 1e-5
    assert accounting.default_delta(1000) == 1e-5
    assert accounting.default_delta(10 ** 6) == pytest.approx(10 ** -6.6)
    for n in (1, 10, 1000, 763430, 10 ** 7):
        assert accounting.default_delta(n) * n < 1


@pytest.mark.parametrize("call, message", [
    (lambda: accounting.check_delta(0.0), "dp delta must be in (0, 1)"),
    (lambda: accounting.check_delta(1.0), "dp delta must be in (0, 1)"),
    (lambda: accounting.check_noise_multiplier(-0.5), "dp noise multiplier must be"),
    (lambda: accounting.poisson_sampling(0.0, 10), "sampling rate must be in (0, 1]"),
    (lambda: accounting.fixed_size_sampling(11, 10), "clients per round must be an integer"),
    (lambda: accounting.calibrate_noise_multiplier(-1.0, 1e-5, 10,
                                                   accounting.poisson_sampling(0.1, 10)),
     "dp target epsilon must be a finite number > 0"),
])
def test_bad_input_is_refused_in_one_line(call, message):
    with pytest.raises(ValueError) as err:
        call()
    assert message in str(err.value) and "\n" not in str(err.value)
