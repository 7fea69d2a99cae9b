"""Per-site evaluation: how the global model does on each hospital's own patients.

Every evaluation round also scores the round's model on each client's own held-out rows (its
share of the dev and test splits, partitioned as its training data is:
:meth:`tffre.evaluation.GlobalModelEvaluator.site_scores`). What a run writes:

* ``per_site.csv``: one row per algorithm, round and site (``test_accuracy``, ``test_f1``,
  ``dev_*``, ``num_test``: the site's test examples, or for document RE its valid candidate
  pairs over whole documents), appended and flushed as it comes (a resume keeps the rows up to
  each algorithm's checkpoint);
* ``metrics.csv``: the sites' mean, worst and spread (population standard deviation) of the
  test metrics (:data:`SITE_COLUMNS`), beside the pooled figure;
* ``tensorboard/<algorithm>/sites/<site>/``: one TensorBoard run per site, so
  ``tensorboard --logdir OUT`` shows every hospital's curve.

A site without test rows is left out of the mean, the worst and the spread. For the personal
rows (FedRep, FedRoD: ``evaluation == "personal"``) a site is scored with its own personal
weights, once it has trained (:func:`tffre.evaluation.evaluate_state`'s models).
"""

import asyncio
import csv
import math
import os

import numpy as np

#: The per-site metrics summarised in metrics.csv.
SITE_METRICS = ("test_accuracy", "test_f1")
#: metrics.csv's per-site columns: each metric's mean, worst and spread over the sites.
SITE_COLUMNS = tuple(f"site_{m}_{s}" for m in SITE_METRICS for s in ("mean", "worst", "spread"))
PER_SITE_COLUMNS = ("algorithm", "round", "site", "num_test", "test_accuracy", "test_f1",
                    "dev_accuracy", "dev_f1")


def summarise(rows):
    """:data:`SITE_COLUMNS` of per-site ``rows`` (dicts): mean, worst (lowest) and spread
    (population standard deviation) of each metric over the sites that have test rows."""
    out = {}
    for metric in SITE_METRICS:
        values = [r[metric] for r in rows if r.get("num_test", 1) and metric in r
                  and r[metric] is not None and math.isfinite(r[metric])]
        out.update({f"site_{metric}_mean": float(np.mean(values)) if values else None,
                    f"site_{metric}_worst": float(np.min(values)) if values else None,
                    f"site_{metric}_spread": float(np.std(values)) if values else None})
    return out


class PerSiteLog:
    """``per_site.csv`` and the sites' TensorBoard runs (see the module docstring).

    Args:
      out_dir: the run's folder.
      keeps: callable(algorithm, round) -> whether an earlier run's row is kept (a resume).
    """

    def __init__(self, out_dir, keeps=None):
        self.out_dir = out_dir
        path = os.path.join(out_dir, "per_site.csv")
        kept = []
        if keeps is not None and os.path.isfile(path):
            with open(path, newline="") as f:
                kept = [r for r in csv.DictReader(f) if keeps(r["algorithm"], int(r["round"]))]
        self.file = open(path, "w", newline="")
        self.writer = csv.DictWriter(self.file, fieldnames=PER_SITE_COLUMNS,
                                     extrasaction="ignore")
        self.writer.writeheader()
        self.writer.writerows(kept)
        self.file.flush()
        self._boards = {}

    def write(self, algorithm, rnd, sites, rows):
        """Appends one row per site (``sites``: ids, ``rows``: their scores) and releases each
        site's numbers to its TensorBoard run at step ``rnd``."""
        for site, row in zip(sites, rows):
            self.writer.writerow({"algorithm": algorithm, "round": rnd, "site": site, **row})
            values = {k: float(v) for k, v in row.items()
                      if isinstance(v, (int, float, np.number)) and not isinstance(v, bool)
                      and math.isfinite(float(v))}
            asyncio.run(self._board(algorithm, site).release(values, key=int(rnd)))
        self.file.flush()

    def _board(self, algorithm, site):
        key = (algorithm, site)
        if key not in self._boards:
            import tensorflow_federated as tff
            self._boards[key] = tff.program.TensorBoardReleaseManager(
                os.path.join(self.out_dir, "tensorboard", algorithm, "sites", str(site)))
        return self._boards[key]

    def close(self):
        """Closes the CSV file."""
        self.file.close()
