"""Paired differences over seeds: is an algorithm better than its baseline, or is it noise?

Two algorithms run on the same seed share the split, the initial head and the client order,
so their difference on that seed removes what the seed alone moves. :func:`paired_difference`
gives the per-seed differences, their mean and sample sd, and a two-sided t interval
(Student's t with n - 1 degrees of freedom, :func:`scipy.stats.ttest_1samp`), and says "no
difference shown" when the interval holds 0.
"""

import math

NO_DIFFERENCE = "no difference shown"


def paired_difference(values, baseline, *, confidence=0.95):
    """The paired difference ``values - baseline`` over the seeds both have.

    Args:
      values: {seed: score} of an algorithm.
      baseline: {seed: score} of its baseline (FedAvgT or FedAvg) on the same seeds.
      confidence: the interval's level.

    Returns:
      {"seeds", "differences", "mean", "sd", "low", "high", "verdict"}: the seeds both have
      (sorted), each one's difference, their mean and sample sd, the interval (None below two
      seeds) and the verdict: "no difference shown" when the interval holds 0 or is missing,
      else "higher" or "lower". None when no seed has both scores.
    """
    seeds = sorted(s for s in values if s in baseline and _finite(values[s])
                   and _finite(baseline[s]))
    if not seeds:
        return None
    diffs = [float(values[s]) - float(baseline[s]) for s in seeds]
    n = len(diffs)
    mean = sum(diffs) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1)) if n > 1 else 0.0
    low = high = None
    if n > 1:
        if sd == 0.0:
            low = high = mean
        else:
            from scipy import stats
            low, high = stats.ttest_1samp(diffs, 0.0).confidence_interval(confidence)
            low, high = float(low), float(high)
    if low is None or low <= 0.0 <= high:
        verdict = NO_DIFFERENCE
    else:
        verdict = "higher" if mean > 0 else "lower"
    return {"seeds": seeds, "differences": diffs, "mean": mean, "sd": sd, "low": low,
            "high": high, "verdict": verdict}


def _finite(value):
    return value is not None and isinstance(value, (int, float)) and math.isfinite(value)


def describe(diff, scale=1.0, digits=3):
    """One cell: "+0.012 ± 0.004 [+0.007, +0.017]" (mean ± sd [interval]) and, where the
    interval holds 0, "no difference shown"; "-" for None."""
    if diff is None:
        return "-"
    f = f"{{:+.{digits}f}}"
    text = f"{f.format(diff['mean'] * scale)} ± {diff['sd'] * scale:.{digits}f}"
    if diff["low"] is not None:
        text += f" [{f.format(diff['low'] * scale)}, {f.format(diff['high'] * scale)}]"
    else:
        text += f" ({len(diff['seeds'])} seed)"
    return text + (f": {NO_DIFFERENCE}" if diff["verdict"] == NO_DIFFERENCE else "")
