"""The benchmarks' presets are valid runs: each resolves as `python -m tffre run` would take it
(no TensorFlow, no data read), so a broken preset fails here and not an hour into a benchmark."""

import math
import os
import sys

import pytest

from tffre import config

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import privacy_utility  # noqa: E402
import real_corpora  # noqa: E402


# Every run of the benchmark but synthetic at epsilon 3: resolving an adaptive-clip target
# calibrates sigma (half a minute at 100 of 1,000 clients), and 3 takes the path of 8.
RUNS = [(w, e) for w in sorted(privacy_utility.WORKLOADS) for e in privacy_utility.EPSILONS
        if (w, e) != ("synthetic", 3.0)]


@pytest.mark.parametrize("workload,epsilon", RUNS)
def test_privacy_presets_resolve(tmp_path, workload, epsilon):
    preset = privacy_utility.preset_of(workload, epsilon)
    cfg = config.resolve(dict(preset, out=str(tmp_path / "o")))
    (hparams,) = cfg.hparams.values()
    if math.isinf(epsilon):
        assert not hparams.dp_on
    else:
        assert hparams.dp_target_epsilon == epsilon and hparams.dp_clip is not None
    # Adaptive clipping where it can reach the sigma the target needs, a fixed C below that.
    if workload == "synthetic" and not math.isinf(epsilon):
        assert (hparams.dp_clip == "adaptive") == (epsilon >= privacy_utility.ADAPTIVE_FROM)


def test_real_corpora_presets_resolve(tmp_path):
    root = tmp_path / "corpora"
    for folder in ("biobert_RE/GAD/1", "biobert_RE/euadr/1", "scibert_chemprot",
                   "cdr_pubtator"):
        (root / folder).mkdir(parents=True)      # resolve checks that --data exists
    comparisons = real_corpora.comparisons(str(root))
    assert set(comparisons) == {"iid-gad", "fedcmc-gad", "fedcmc-euadr", "fedcmc-chemprot",
                                "feded-gad", "fedcb-gad", "fedlcc-cdr"}
    for name, runs in comparisons.items():
        for label, preset in runs:
            cfg = config.resolve(dict(preset, out=str(tmp_path / name / label)))
            assert cfg.dataset == preset["dataset"]
