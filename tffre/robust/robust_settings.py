"""Byzantine-robust aggregation as an option of the aggregation, declared once.

``robust`` names the rule that replaces the weighted mean of the clients' updates
(None: the plain mean); the other settings are the rules' parameters. Where
Flower's ``flwr.server.strategy.aggregate`` differs from the paper, tffre follows
the paper and offers Flower's form as a setting (see :mod:`tffre.robust.rules`).

:func:`requirement` and :func:`robust_requirement` say, in one line, when a
number of clients cannot support a rule (the papers' conditions on n and f).

No TensorFlow here: the command line reads these declarations for its flags.
"""

import dataclasses
import math
from typing import Optional

from tffre.hparams import (Params, choice, non_negative_int, optional, param, positive_float,
                           positive_int)

MEDIAN = "median"
TRIMMED_MEAN = "trimmed-mean"
KRUM = "krum"
MULTI_KRUM = "multi-krum"
BULYAN = "bulyan"
NORM_BOUND = "norm-bound"
#: The robust rules, as ``--robust`` names them.
RULES = (MEDIAN, TRIMMED_MEAN, KRUM, MULTI_KRUM, BULYAN, NORM_BOUND)

#: The trimmed mean's count cut at each end when beta * n is not whole: "ceil" (tffre's
#: reading of Yin et al.: at least a beta fraction goes) or "floor" (Flower's and scipy's).
ROUNDINGS = ("ceil", "floor")
#: Multi-Krum's average of its m selected updates: "uniform" (Blanchard et al.) or
#: "examples" (Flower's: weighted by the clients' example counts).
WEIGHTINGS = ("uniform", "examples")

#: {rule: {keyword parameter of :mod:`tffre.robust.rules`: (the setting it comes from, whether
#: the rule needs it given)}}.
RULE_PARAMS = {
    MEDIAN: {},
    TRIMMED_MEAN: {"beta": ("robust_beta", True), "rounding": ("robust_trim_rounding", False)},
    KRUM: {"f": ("robust_f", True)},
    MULTI_KRUM: {"f": ("robust_f", True), "m": ("robust_m", False),
                 "weighting": ("robust_multikrum_weighting", False)},
    BULYAN: {"f": ("robust_f", True)},
    NORM_BOUND: {"bound": ("robust_norm_bound", True)},
}
#: The settings that have no default (None until given).
_OPTIONAL = ("robust_beta", "robust_f", "robust_m", "robust_norm_bound")


def trim_fraction(value):
    """A fraction beta in [0, 0.5): the trimmed mean's cut at each end."""
    try:
        out = math.nan if isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        raise ValueError(f"expected a number in [0, 0.5), got {value!r}") from None
    if not (math.isfinite(out) and 0 <= out < 0.5):
        raise ValueError(f"expected a number in [0, 0.5), got {value}")
    return out


def trim_count(beta, n, rounding="ceil"):
    """How many of n values the beta-trimmed mean cuts at each end (Yin et al. 2018, Def. 2).

    "floor" is Flower's ``int(beta * n)``; "ceil" rounds beta * n up after rounding it to 9
    decimals, so that float noise (0.1 * 30 = 3.0000000000000004) does not cut one more.
    :mod:`tffre.robust.rules` computes the same float64 operations in TensorFlow.
    """
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding must be one of {', '.join(ROUNDINGS)}, got {rounding!r}")
    if rounding == "floor":
        return int(math.floor(beta * n))
    return int(math.ceil(round(beta * n * 1e9) / 1e9))


def _cli(name):
    return "--" + name.replace("_", "-")


def requirement(rule, n, *, beta=None, f=None, m=None, rounding="ceil", weighting=None,
                bound=None):
    """None when ``n`` updates support ``rule`` with these parameters; else one line why not.

    Takes the rule's keyword parameters (``weighting`` and ``bound`` set no condition).

    Krum and multi-Krum need n > 2f + 2 (Blanchard et al. 2017, Proposition 1), Bulyan
    n >= 4f + 3 (El Mhamdi et al. 2018, Section 4), multi-Krum m <= n, and the trimmed mean
    must keep at least one value, n - 2k >= 1 for k cut at each end (Yin et al. 2018, Def. 2).
    """
    if rule is None:
        return None
    if n < 1:
        return f"{rule} needs at least one client's update, got {n}"
    if rule == TRIMMED_MEAN:
        k = trim_count(beta, n, rounding)
        if n - 2 * k < 1:
            return (f"the trimmed mean at beta = {beta} cuts {k} of {n} clients at each end and "
                    f"keeps none (Yin et al. 2018, Definition 2): lower beta or add clients")
    elif rule in (KRUM, MULTI_KRUM):
        if n <= 2 * f + 2:
            return (f"{'Krum' if rule == KRUM else 'multi-Krum'} needs n > 2f + 2 clients per "
                    f"round (Blanchard et al. 2017, Proposition 1): f = {f} needs at least "
                    f"{2 * f + 3}, got {n}")
        if rule == MULTI_KRUM and m is not None and m > n:
            return f"multi-Krum cannot select m = {m} of {n} clients per round"
    elif rule == BULYAN:
        if n < 4 * f + 3:
            return (f"Bulyan needs n >= 4f + 3 clients per round (El Mhamdi et al. 2018, "
                    f"Section 4): f = {f} needs at least {4 * f + 3}, got {n}")
    return None


@dataclasses.dataclass(frozen=True)
class RobustHparams(Params):
    """Byzantine-robust aggregation's settings: coordinate-wise median and trimmed mean (Yin et
    al., ICML 2018), Krum and multi-Krum (Blanchard et al., NeurIPS 2017), Bulyan (El Mhamdi
    et al., ICML 2018) and norm bounding (Sun et al. 2019)."""

    robust: Optional[str] = param(
        None, optional(choice(*RULES)), "Byzantine-robust aggregation: the rule that replaces "
        "the mean of the clients' updates (default: the mean); the server then holds every "
        "update of the round, not a sum")
    robust_beta: Optional[float] = param(
        None, optional(trim_fraction), "the trimmed mean's fraction beta of the clients cut at "
        "each end of every coordinate, in [0, 0.5)", paper="Yin et al. 2018, Definition 2")
    robust_f: Optional[int] = param(
        None, optional(non_negative_int), "Krum, multi-Krum and Bulyan: f, the number of "
        "Byzantine clients assumed per round", paper="Blanchard et al. 2017; El Mhamdi et al. "
        "2018")
    robust_m: Optional[int] = param(
        None, optional(positive_int), "multi-Krum: m, how many of the best-scored updates are "
        "averaged (default n - f)", paper="Blanchard et al. 2017, Multi-Krum")
    robust_norm_bound: Optional[float] = param(
        None, optional(positive_float), "norm bounding: the L2 norm M each client's update is "
        "scaled down to before the weighted mean", paper="Sun et al. 2019")
    robust_trim_rounding: str = param(
        "ceil", choice(*ROUNDINGS), "the trimmed mean's count cut at each end where beta * n is "
        "not whole: ceil (at least a beta fraction goes, so the paper's beta >= alpha holds) or "
        "floor (Flower's and scipy's int(beta * n))", paper="Yin et al. 2018, Definition 2")
    robust_multikrum_weighting: str = param(
        "uniform", choice(*WEIGHTINGS), "multi-Krum's average of its m updates: uniform (the "
        "paper's) or examples (Flower's: weighted by the clients' example counts)",
        paper="Blanchard et al. 2017, Multi-Krum")

    def check(self):
        given = [name for name in _OPTIONAL if getattr(self, name) is not None]
        if self.robust is None:
            if given:
                raise ValueError(f"{', '.join(map(_cli, given))} needs --robust (the rule that "
                                 f"takes it)")
            return
        takes = {setting: needed for setting, needed in RULE_PARAMS[self.robust].values()}
        extra = [name for name in given if name not in takes]
        if extra:
            raise ValueError(f"--robust {self.robust} does not take "
                             f"{', '.join(map(_cli, extra))}")
        missing = [name for name, needed in takes.items() if needed and getattr(self, name) is None]
        if missing:
            what = {"robust_beta": "the fraction cut at each end, in [0, 0.5)",
                    "robust_f": "the number of Byzantine clients assumed",
                    "robust_norm_bound": "the L2 norm M each update is scaled down to"}
            raise ValueError(f"--robust {self.robust} needs {_cli(missing[0])}: "
                             f"{what[missing[0]]}")

    @property
    def robust_on(self):
        """True when a robust rule replaces the mean."""
        return self.robust is not None

    def rule_params(self):
        """The keyword parameters of the chosen rule ({} for none or the median), as
        :mod:`tffre.robust.rules` and :class:`tffre.robust.collecting.RobustAggregator` take
        them (``beta``, ``rounding``, ``f``, ``m``, ``weighting``, ``bound``)."""
        if self.robust is None:
            return {}
        return {key: getattr(self, setting)
                for key, (setting, _) in RULE_PARAMS[self.robust].items()
                if getattr(self, setting) is not None}


def robust_requirement(hp, clients_per_round):
    """None when ``clients_per_round`` clients support ``hp``'s robust rule; else one line why
    not (see :func:`requirement`: Krum n > 2f + 2, Bulyan n >= 4f + 3, the trimmed mean keeps
    at least one update)."""
    if hp.robust is None:
        return None
    return requirement(hp.robust, clients_per_round, **hp.rule_params())
