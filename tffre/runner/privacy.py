"""A run's client-level differential privacy: the accounting of what the runner samples.

For an algorithm with DP on (:mod:`tffre.privacy`), the runner

* samples m = ``clients_per_round`` of the N clients each round, uniformly without
  replacement, from a **secret** seed (privacy amplification by subsampling holds only if
  the sample is secret; the run's ``--seed`` is in ``config.json``): the ``dp_seed``, or
  one drawn at random and kept beside the checkpoints (``checkpoints/<algorithm>/dp_seed``),
  so a resumed run draws the same clients and the same noise;
* accounts exactly that: ``SampledWithoutReplacementDpEvent`` of the Gaussian mechanism,
  client-level, under the replace-one relation (one hospital's data replaced by any other;
  :mod:`tffre.privacy.accounting`);
* calibrates sigma to ``dp_target_epsilon`` over the planned rounds before training;
* reports epsilon at delta after every round (``dp_epsilon``) and in the summary and bundle.
"""

import dataclasses
import json
import os
import secrets

from tffre.privacy import accounting
from tffre.runner.checkpoints import checkpoint_folder


#: The metrics.csv columns of a run with differential privacy.
COLUMNS = ["dp_epsilon", "dp_clip"]


@dataclasses.dataclass
class Privacy:
    """One algorithm's DP: its settings resolved for the run, and the accountant."""
    noise_multiplier: float
    delta: float
    sampling: accounting.Sampling
    seed: int
    clip: object
    running: accounting.RunningEpsilon
    target_epsilon: object = None

    def epsilon(self, rounds):
        """epsilon at delta after ``rounds`` rounds."""
        return float(self.running.epsilon(rounds))

    def columns(self, rounds, metrics):
        """{dp_epsilon, dp_clip} of the row of round ``rounds`` (``metrics``: the round's)."""
        return {"dp_epsilon": self.epsilon(rounds),
                "dp_clip": next(float(m["dp_clip"]) for m in metrics["aggregator"].values()
                                if "dp_clip" in m)}

    def summary(self, rounds):
        """The guarantee as the summary and the bundle state it."""
        return {"epsilon": self.epsilon(rounds), "delta": self.delta,
                "noise_multiplier": self.noise_multiplier, "clip": self.clip,
                "target_epsilon": self.target_epsilon, "rounds": rounds, "level": "client",
                "sampling": f"{self.sampling.sample_size} of {self.sampling.population} clients "
                            f"per round, uniformly without replacement, from a secret seed",
                "relation": "replace-one (one client's whole data replaced)",
                "accountant": "dp-accounting RDP"}


def calibrate(name, hparams, settings, num_clients):
    """(hparams with sigma, delta and the seed resolved, :class:`Privacy`) of one algorithm, or
    (hparams, None) without DP. Reads or writes the secret seed beside the checkpoints."""
    if not hparams.dp_on:
        return hparams, None
    sampling = accounting.fixed_size_sampling(settings.clients_per_round, num_clients)
    delta = hparams.dp_delta or accounting.default_delta(num_clients)
    sigma = hparams.dp_noise_multiplier
    if sigma is None:
        sigma = accounting.calibrate_noise_multiplier(hparams.dp_target_epsilon, delta,
                                                      settings.num_rounds, sampling)
    seed = hparams.dp_seed
    if seed is None:
        seed = _kept_seed(os.path.join(checkpoint_folder(settings.out, name), "dp_seed"))
    # The calibrated sigma takes the target's place (the two are exclusive as given); the
    # target stays in the guarantee's summary.
    resolved = dataclasses.replace(hparams, dp_noise_multiplier=float(sigma),
                                   dp_target_epsilon=None, dp_delta=delta, dp_seed=seed)
    return resolved, Privacy(float(sigma), delta, sampling, seed, hparams.dp_clip,
                             accounting.RunningEpsilon(sigma, delta, sampling),
                             target_epsilon=hparams.dp_target_epsilon)


def _kept_seed(path):
    """The secret seed in ``path``, or a new one written there (a resumed run reuses it)."""
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            return int(json.load(f))
    seed = secrets.randbits(63)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(seed, f)
    return seed


def check_budget(hparams, settings, num_clients):
    """A one-line ValueError when ``dp_target_epsilon`` cannot be met even with the largest
    noise multiplier, or adaptive clipping cannot reach sigma (before any work)."""
    if not hparams.dp_on:
        return
    sampling = accounting.fixed_size_sampling(settings.clients_per_round, num_clients)
    delta = hparams.dp_delta or accounting.default_delta(num_clients)
    sigma = hparams.dp_noise_multiplier
    if hparams.dp_target_epsilon is not None:
        best = accounting.epsilon(accounting.MAX_NOISE_MULTIPLIER, settings.num_rounds, delta,
                                  sampling)
        if best > hparams.dp_target_epsilon:
            raise ValueError(f"--dp-target-epsilon {hparams.dp_target_epsilon:g} cannot be met: "
                             f"{settings.num_rounds} rounds of {sampling.sample_size} of "
                             f"{num_clients} clients reach epsilon {best:.3g} at delta "
                             f"{delta:.2g} even with noise multiplier "
                             f"{accounting.MAX_NOISE_MULTIPLIER:g}")
        if hparams.dp_clip == "adaptive":     # the sigma the target needs, calibrated now
            sigma = accounting.calibrate_noise_multiplier(
                hparams.dp_target_epsilon, delta, settings.num_rounds, sampling)
    if hparams.dp_clip == "adaptive":
        accounting.adaptive_clip_noise(sigma, sampling.expected_clients)
