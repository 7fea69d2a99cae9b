"""Client-level differential privacy as an option of the aggregation, declared once.

Every registry line takes these settings (:mod:`tffre.registry` composes them
into each algorithm's hyperparameters); DP is on when ``dp_noise_multiplier``
or ``dp_target_epsilon`` is given. Whether it is *sound* for an algorithm is
the algorithm's to say (:meth:`tffre.definition.Definition.dp_refusal`, and its
aggregator's): the registry refuses the others in one line saying why.

No TensorFlow here: the command line reads these declarations for its flags.
"""

import dataclasses
from typing import Optional, Union

from tffre.hparams import (Params, non_negative_float, open_unit_interval, optional, param,
                           positive_float, probability, secret_seed)

ADAPTIVE = "adaptive"
#: The adaptive clip's starting value (TFF's and TF Privacy's default initial_l2_norm_clip).
INITIAL_ADAPTIVE_CLIP = 0.1


def clip_or_adaptive(value):
    """A clipping norm C > 0, or "adaptive"."""
    if str(value).strip().lower() == ADAPTIVE:
        return ADAPTIVE
    return positive_float(value)


@dataclasses.dataclass(frozen=True)
class DPHparams(Params):
    """DP-FedAvg's settings (McMahan et al., ICLR 2018; adaptive clipping: Andrew et al.,
    NeurIPS 2021)."""

    dp_noise_multiplier: Optional[float] = param(
        None, optional(non_negative_float), "client-level DP: the noise multiplier sigma: "
        "N(0, sigma^2 C^2) is added to the sum of the clipped updates (DP is on with this or "
        "--dp-target-epsilon)", paper="McMahan et al. 2018, Algorithm 1")
    dp_clip: Optional[Union[float, str]] = param(
        None, optional(clip_or_adaptive), "client-level DP: the L2 norm C each client's update "
        "is clipped to, or 'adaptive' (C follows --dp-target-quantile of the update norms, "
        f"privately, from {INITIAL_ADAPTIVE_CLIP})", paper="Andrew et al. 2021")
    dp_target_quantile: float = param(
        0.5, probability, "adaptive clipping: the quantile of the clients' update norms C "
        "follows", paper="Andrew et al. 2021, Algorithm 1")
    dp_target_epsilon: Optional[float] = param(
        None, optional(positive_float), "calibrate sigma so that the run's planned rounds end "
        "at this epsilon (dp-accounting); refused if it cannot be met")
    dp_delta: Optional[float] = param(
        None, optional(open_unit_interval), "the delta of the (epsilon, delta) guarantee "
        "(default min(1e-5, N^-1.1) for N clients: well below 1/N)")
    dp_seed: Optional[int] = param(
        None, optional(secret_seed), "the DP noise's and client sampling's secret seed "
        "(default: drawn at random, kept with the checkpoints); whoever knows it can "
        "subtract the noise", persistent=False)

    @property
    def dp_on(self):
        """True when client-level DP is asked for."""
        return self.dp_noise_multiplier is not None or self.dp_target_epsilon is not None

    def check(self):
        if self.dp_noise_multiplier is not None and self.dp_target_epsilon is not None:
            raise ValueError("give --dp-noise-multiplier or --dp-target-epsilon, not both")
        if self.dp_on and self.dp_clip is None:
            raise ValueError("differential privacy needs --dp-clip: the L2 norm C each "
                             "client's update is clipped to, or adaptive")
