"""What dev chooses: the round a run reports, and the setting or algorithm a comparison keeps.

Every figure tffre reports is read on test once, at a point dev chose:

* a run's figure is the test score at the round of best dev score (:func:`best_dev_round`);
* a setting (trainable layers, rounds, threshold, learning rate) and "the best algorithm" of
  a comparison are the ones of highest mean dev score over the seeds (:func:`best_by_dev`).

Ties go to the earliest (round, or candidate in declared order), so a longer run or a later
candidate wins only by doing better on dev. Rounds without a dev or a test score (not
evaluated, NaN) take no part.
"""

import math


def _number(value):
    """``value`` as a float, or None where it is missing or not finite."""
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def best_dev_round(rounds, dev, test):
    """The round of best dev score, and the test score there.

    Args:
      rounds: the rounds (or epochs), in order.
      dev: the dev score of each round (None or NaN where it was not evaluated).
      test: the test score of each round, likewise.

    Returns:
      {"round", "dev", "test"} at the first round of highest dev score among the rounds that
      have both scores; None when no round has both (no dev split).
    """
    if not len(rounds) == len(dev) == len(test):
        raise ValueError(f"rounds, dev and test differ in length ({len(rounds)}, {len(dev)}, "
                         f"{len(test)})")
    best = None
    for rnd, d, t in zip(rounds, dev, test):
        d, t = _number(d), _number(t)
        if d is None or t is None:
            continue
        if best is None or d > best["dev"]:   # strictly greater: the earliest tie wins
            best = {"round": int(rnd), "dev": d, "test": t}
    return best


def best_by_dev(candidates):
    """The candidate of highest mean dev score, ties to the earliest.

    Args:
      candidates: {name: [dev score per seed]} in the order they were declared; a missing
        or NaN score is left out of its mean, and a candidate with none takes no part.

    Returns:
      (name, {name: mean dev score}); (None, {...}) when no candidate has a score.
    """
    means = {}
    for name, scores in candidates.items():
        kept = [s for s in map(_number, scores) if s is not None]
        means[name] = sum(kept) / len(kept) if kept else None
    ranked = [(m, -i, n) for i, (n, m) in enumerate(means.items()) if m is not None]
    return (max(ranked)[2] if ranked else None), means
