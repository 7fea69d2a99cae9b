"""The robust rules (tffre.robust.rules) against Flower's ``flwr.server.strategy.aggregate``,
TFF's ``clipping_factory``, numpy transcriptions of the papers, and their settings
(tffre.robust.robust_settings).

Where Flower differs from the paper (multi-Krum's weighting, the trimmed mean's rounding), each
form is checked against its own reference: Flower for Flower's, numpy for the paper's.
"""

import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff
from flwr.server.strategy import aggregate as flower

from tffre.hparams import ParamsError, compose
from tffre.privacy.dp_settings import DPHparams
from tffre.robust import rules
from tffre.robust.robust_settings import (RULES, RobustHparams, requirement,
                                          robust_requirement, trim_count)

SHAPES = [(3, 4), (5,), (2, 2, 2), ()]
TOL = dict(rtol=1e-6, atol=1e-6)   # the 1e-6


def updates(n, seed=0, byzantine=2):
    """n random updates of SHAPES, the first ``byzantine`` far off (10 u + 5), and example
    counts."""
    rng = np.random.RandomState(seed)
    out = [[np.asarray(rng.randn(*s), np.float32) for s in SHAPES] for _ in range(n)]
    for i in range(byzantine):
        out[i] = [(10 * u + 5).astype(np.float32) for u in out[i]]
    return out, [int(c) for c in rng.randint(1, 100, n)]


def results(ups, counts):
    """Flower's input: [(NDArrays, num_examples)], fresh copies (Bulyan pops its list)."""
    return [([u.copy() for u in up], c) for up, c in zip(ups, counts)]


def deviation(got, want):
    """The largest absolute difference over all layers."""
    return max(float(np.max(np.abs(np.asarray(g, np.float64) - np.asarray(w, np.float64))))
               for g, w in zip(got, want))


def assert_close(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert tuple(g.shape) == np.shape(w)
        np.testing.assert_allclose(np.asarray(g), w, **TOL)


# --- numpy transcriptions of the papers (float64, loops, no sorting tricks) ---

def flat(up):
    return np.concatenate([np.asarray(u, np.float64).ravel() for u in up])


def unflat(vector):
    out, at = [], 0
    for s in SHAPES:
        size = int(np.prod(s))
        out.append(vector[at:at + size].reshape(s))
        at += size
    return out


def paper_krum_scores(vectors, f, among=None):
    """Blanchard et al. 2017: s(i) = sum over the n - f - 2 nearest j != i of ||V_i - V_j||^2
    (n: the vectors in ``among``; at least one neighbour, where Bulyan's recursion needs it)."""
    among = list(range(len(vectors))) if among is None else among
    k = max(1, len(among) - f - 2)
    scores = {}
    for i in among:
        d = sorted(float(np.sum((vectors[i] - vectors[j]) ** 2)) for j in among if j != i)
        scores[i] = sum(d[:k])
    return scores


def paper_trimmed_mean(ups, beta):
    """Yin et al. 2018, Def. 2, cutting ceil(beta n) at each end (beta n rounded up)."""
    vectors = np.stack([flat(u) for u in ups])
    n = len(ups)
    k = int(np.ceil(np.round(beta * n, 9)))
    out = np.empty(vectors.shape[1])
    for c in range(vectors.shape[1]):
        column = sorted(vectors[:, c])
        out[c] = np.mean(column[k:n - k])
    return unflat(out)


def paper_multi_krum(ups, f, m):
    """Blanchard et al. 2017, Multi-Krum: 1/m sum of the m updates of least score."""
    vectors = [flat(u) for u in ups]
    scores = paper_krum_scores(vectors, f)
    best = sorted(scores, key=lambda i: (scores[i], i))[:m]
    return unflat(np.mean([vectors[i] for i in best], axis=0))


def paper_bulyan(ups, f):
    """El Mhamdi et al. 2018, Section 4: theta = n - 2f picks of Krum among the rest, then per
    coordinate the mean of the beta = theta - 2f picked values closest to their median."""
    vectors = [flat(u) for u in ups]
    n = len(vectors)
    theta, beta = n - 2 * f, n - 4 * f
    rest, picked = list(range(n)), []
    for _ in range(theta):
        scores = paper_krum_scores(vectors, f, rest)
        best = min(rest, key=lambda i: (scores[i], i))
        picked.append(vectors[best])
        rest.remove(best)
    picked = np.stack(picked)
    out = np.empty(picked.shape[1])
    for c in range(picked.shape[1]):
        column = picked[:, c]
        median = np.median(column)
        nearest = sorted(range(theta), key=lambda j: abs(column[j] - median))[:beta]
        out[c] = np.mean(column[nearest])
    return unflat(out)


def paper_norm_bound(ups, bound, weights):
    """Sun et al. 2019: sum_k n_k u_k / max(1, ||u_k|| / M) / sum_k n_k."""
    total = sum(w * flat(u) / max(1.0, np.linalg.norm(flat(u)) / bound)
                for u, w in zip(ups, weights))
    return unflat(total / sum(weights))


# --- against Flower ---

SIZES = range(7, 13)


@pytest.mark.parametrize("n", SIZES)
def test_median_equals_flower(n):
    for seed in range(2):
        ups, counts = updates(n, seed)
        assert_close(rules.coordinate_median(ups), flower.aggregate_median(results(ups, counts)))


@pytest.mark.parametrize("n", SIZES)
def test_trimmed_mean_floor_equals_flower(n):
    for beta in (0.1, 0.2, 0.3, 0.45):
        ups, counts = updates(n, seed=n)
        want = flower.aggregate_trimmed_avg(results(ups, counts), beta)
        assert_close(rules.trimmed_mean(ups, beta, rounding="floor"), want)


@pytest.mark.parametrize("n", SIZES)
def test_trimmed_mean_ceil_is_the_paper_and_flower_where_beta_n_is_whole(n):
    for beta in (0.1, 0.2, 0.3):
        ups, counts = updates(n, seed=n + 1)
        got = rules.trimmed_mean(ups, beta)
        assert_close(got, paper_trimmed_mean(ups, beta))
        floor = flower.aggregate_trimmed_avg(results(ups, counts), beta)
        if trim_count(beta, n, "ceil") == trim_count(beta, n, "floor"):
            assert_close(got, floor)
        else:   # the two roundings cut a different number: the forms must differ
            assert deviation(got, floor) > 1e-3


def test_trimmed_mean_rounding_counts():
    # 0.1 * 30 is 3.0000000000000004 in floats: ceil must still cut 3, not 4.
    assert [trim_count(0.1, 30, r) for r in ("ceil", "floor")] == [3, 3]
    assert [trim_count(0.1, 7, r) for r in ("ceil", "floor")] == [1, 0]
    assert [trim_count(0.3, 10, r) for r in ("ceil", "floor")] == [3, 3]
    assert [trim_count(0.25, 10, r) for r in ("ceil", "floor")] == [3, 2]


@pytest.mark.parametrize("n", SIZES)
def test_krum_equals_flower_and_the_paper(n):
    for f in (1, 2):
        ups, counts = updates(n, seed=2 * n + f, byzantine=f)
        got = rules.krum(ups, f)
        assert_close(got, flower.aggregate_krum(results(ups, counts), f, 0))
        scores = paper_krum_scores([flat(u) for u in ups], f)
        best = min(scores, key=lambda i: (scores[i], i))
        assert_close(got, ups[best])
        assert best >= f   # not one of the far-off updates


@pytest.mark.parametrize("n", SIZES)
def test_multi_krum_by_examples_equals_flower(n):
    for f, m in ((1, 3), (2, n - 2)):
        ups, counts = updates(n, seed=3 * n + m, byzantine=f)
        got = rules.multi_krum(ups, f, m, weights=counts, weighting="examples")
        assert_close(got, flower.aggregate_krum(results(ups, counts), f, m))


@pytest.mark.parametrize("n", SIZES)
def test_multi_krum_uniform_is_the_paper(n):
    for f, m in ((1, 3), (2, None)):
        ups, counts = updates(n, seed=4 * n, byzantine=f)
        got = rules.multi_krum(ups, f, m, weights=counts)
        assert_close(got, paper_multi_krum(ups, f, n - f if m is None else m))
        # Flower's weighting with equal counts is the paper's; with unequal, it is not.
        assert_close(got, flower.aggregate_krum(results(ups, [1] * n), f, m or n - f))
        assert deviation(got, flower.aggregate_krum(results(ups, counts), f, m or n - f)) > 1e-3


@pytest.mark.parametrize("n, f", [(7, 1), (8, 1), (9, 1), (10, 1), (11, 2), (12, 2)])
def test_bulyan_equals_flower_and_the_paper(n, f):
    # seed 1 with two far-off updates: at n = 7 a mutual nearest pair ties exactly at the
    # fourth pick (one neighbour), and the lower index must win, as Flower's.
    for seed, byzantine in ((5 * n, f), (5 * n + 1, f), (1, 2)):
        ups, counts = updates(n, seed=seed, byzantine=byzantine)
        got = rules.bulyan(ups, f)
        want = flower.aggregate_bulyan(results(ups, counts), f, flower.aggregate_krum, to_keep=0)
        assert_close(got, want)
        assert_close(got, paper_bulyan(ups, f))


def test_norm_bound_equals_tff_clipping_and_the_paper():
    """Sun et al.'s norm bounding is TFF's clipping_factory over its weighted MeanFactory."""
    ups, counts = updates(8, seed=9)
    weights = [float(c) for c in counts]
    norms = sorted(np.linalg.norm(flat(u)) for u in ups)
    bound = float(norms[4])   # four updates scaled down, four kept as they are
    got = rules.norm_bound(ups, bound, weights)
    assert_close(got, tff_norm_bound(ups, bound, weights))
    assert_close(got, paper_norm_bound(ups, bound, weights))
    for bound in (0.5, 1e3):   # every update scaled down; none
        assert_close(rules.norm_bound(ups, bound, weights), paper_norm_bound(ups, bound, weights))
    assert_close(rules.norm_bound(ups, 2.0), paper_norm_bound(ups, 2.0, [1.0] * 8))


def tff_norm_bound(ups, bound, weights):
    """TFF's clipping_factory(bound, MeanFactory()) on the updates, weighted."""
    value_type = tff.StructWithPythonType([tff.TensorType(np.float32, s) for s in SHAPES], list)
    process = tff.aggregators.clipping_factory(bound, tff.aggregators.MeanFactory()).create(
        value_type, tff.TensorType(np.float32))
    return process.next(process.initialize(), ups, weights).result


def max_deviations():
    """{check: the largest deviation over this file's cases}; the closing note quotes it
    (``python -c "import test_rules; print(test_rules.max_deviations())"`` from this folder)."""
    out = {}

    def note(key, got, want):
        out[key] = max(out.get(key, 0.0), deviation(got, want))

    for n in SIZES:
        for seed in range(2):
            ups, counts = updates(n, seed)
            note("median vs Flower", rules.coordinate_median(ups),
                 flower.aggregate_median(results(ups, counts)))
        for beta in (0.1, 0.2, 0.3, 0.45):
            ups, counts = updates(n, seed=n)
            note("trimmed mean floor vs Flower", rules.trimmed_mean(ups, beta, "floor"),
                 flower.aggregate_trimmed_avg(results(ups, counts), beta))
        for beta in (0.1, 0.2, 0.3):
            ups, counts = updates(n, seed=n + 1)
            note("trimmed mean ceil vs numpy (paper)", rules.trimmed_mean(ups, beta),
                 paper_trimmed_mean(ups, beta))
        for f in (1, 2):
            ups, counts = updates(n, seed=2 * n + f, byzantine=f)
            note("Krum vs Flower", rules.krum(ups, f),
                 flower.aggregate_krum(results(ups, counts), f, 0))
        for f, m in ((1, 3), (2, n - 2)):
            ups, counts = updates(n, seed=3 * n + m, byzantine=f)
            note("multi-Krum examples vs Flower",
                 rules.multi_krum(ups, f, m, weights=counts, weighting="examples"),
                 flower.aggregate_krum(results(ups, counts), f, m))
        for f, m in ((1, 3), (2, None)):
            ups, counts = updates(n, seed=4 * n, byzantine=f)
            note("multi-Krum uniform vs numpy (paper)", rules.multi_krum(ups, f, m),
                 paper_multi_krum(ups, f, n - f if m is None else m))
    for n, f in [(7, 1), (8, 1), (9, 1), (10, 1), (11, 2), (12, 2)]:
        for seed, byzantine in ((5 * n, f), (5 * n + 1, f), (1, 2)):
            ups, counts = updates(n, seed=seed, byzantine=byzantine)
            got = rules.bulyan(ups, f)
            note("Bulyan vs Flower", got, flower.aggregate_bulyan(
                results(ups, counts), f, flower.aggregate_krum, to_keep=0))
            note("Bulyan vs numpy (paper)", got, paper_bulyan(ups, f))
    ups, counts = updates(8, seed=9)
    weights = [float(c) for c in counts]
    bound = float(sorted(np.linalg.norm(flat(u)) for u in ups)[4])
    got = rules.norm_bound(ups, bound, weights)
    note("norm bound vs TFF clipping_factory", got, tff_norm_bound(ups, bound, weights))
    note("norm bound vs numpy (paper)", got, paper_norm_bound(ups, bound, weights))
    return out


# --- the same functions in a graph, on rows whose number is known only when it runs ---

CASES = [("median", {}), ("trimmed-mean", {"beta": 0.2}),
         ("trimmed-mean", {"beta": 0.1, "rounding": "floor"}), ("krum", {"f": 1}),
         ("multi-krum", {"f": 1, "m": 3}),
         ("multi-krum", {"f": 1, "m": 3, "weighting": "examples"}), ("bulyan", {"f": 1}),
         ("norm-bound", {"bound": 2.0})]


def direct(rule, ups, weights, **params):
    """The public function of ``rule`` on a list of updates."""
    return rules.aggregate(rule, ups, weights, **params)


def test_rules_run_in_a_graph_on_a_dynamic_number_of_rows():
    spec = [tf.TensorSpec((None,) + s, tf.float32) for s in SHAPES]
    # One case per rule: their options are Python branches, traced alike.
    for rule, params in dict(CASES[::-1]).items():
        graph = tf.function(lambda rows, w, rule=rule, params=params: rules.aggregate_rows(
            rule, rows, w, **params), input_signature=[spec, tf.TensorSpec([None], tf.float32)])
        traced = graph.get_concrete_function()
        assert [tuple(t.shape) for t in traced.structured_outputs] == SHAPES, rule
        for n in (7, 9):   # one trace, two numbers of rows
            ups, counts = updates(n, seed=n)
            weights = np.asarray(counts, np.float32)
            rows = [np.stack([u[i] for u in ups]) for i in range(len(SHAPES))]
            assert_close(graph(rows, weights), direct(rule, ups, weights, **params))


def test_numpy_float64_and_tensors_are_accepted():
    ups, _ = updates(7)
    as_float64 = [[u.astype(np.float64) for u in up] for up in ups]
    as_tensors = [[tf.constant(u) for u in up] for up in ups]
    want = rules.bulyan(ups, 1)
    assert_close(rules.bulyan(as_float64, 1), [w.numpy() for w in want])
    assert_close(rules.bulyan(as_tensors, 1), [w.numpy() for w in want])
    assert all(w.dtype == tf.float32 for w in want)


def test_in_a_round_too_few_rows_degrade_rather_than_fail():
    """Excluded clients can leave fewer rows than a rule needs; the round still aggregates."""
    ups, _ = updates(3, byzantine=0)
    rows = [tf.stack([u[i] for u in ups]) for i in range(len(SHAPES))]
    for rule, params in CASES:
        params = dict(params, f=2) if "f" in params else params
        out = rules.aggregate_rows(rule, rows, tf.ones([3]), **params)
        assert all(np.all(np.isfinite(o.numpy())) for o in out), rule
    # Krum with one neighbour: the mutual nearest pair ties, the lower index wins.
    pair = [[np.array([0.0], np.float32)], [np.array([1.0], np.float32)],
            [np.array([1.5], np.float32)]]
    rows = [tf.stack([p[0] for p in pair])]
    np.testing.assert_array_equal(rules.aggregate_rows("krum", rows, f=5)[0].numpy(), [1.0])


def test_refusals_are_one_line():
    ups, _ = updates(6)
    cases = [(lambda: rules.krum(ups, 2), "n > 2f \\+ 2"),
             (lambda: rules.multi_krum(ups, 1, m=7), "m = 7 of 6"),
             (lambda: rules.bulyan(ups, 1), "n >= 4f \\+ 3"),
             (lambda: rules.trimmed_mean(ups[:2], 0.3), "keeps none"),
             (lambda: rules.trimmed_mean(ups, 0.5), "0.5"),
             (lambda: rules.krum(ups, -1), "f"),
             (lambda: rules.norm_bound(ups, 0.0), "bound"),
             (lambda: rules.multi_krum(ups, 1, weighting="counts"), "weighting"),
             (lambda: rules.aggregate_rows("mean", []), "unknown robust rule"),
             (lambda: rules.aggregate_rows("krum", [], beta=0.1), "not 'beta'"),
             (lambda: rules.aggregate_rows("krum", []), "needs f"),
             (lambda: rules.coordinate_median([]), "at least one"),
             (lambda: rules.coordinate_median([ups[0], ups[1][:2]]), "same number"),
             (lambda: rules.coordinate_median([ups[0], ups[1][::-1]]), "differ in shape"),
             (lambda: rules.norm_bound(ups, 1.0, weights=[1.0] * 5), "5 weights for 6")]
    for call, match in cases:
        with pytest.raises(ValueError, match=match) as info:
            call()
        assert "\n" not in str(info.value)
    assert rules.krum(updates(7)[0], 2) is not None   # 7 > 2 * 2 + 2


# --- the settings ---

def test_settings_resolve_and_give_the_rule_parameters():
    hp = RobustHparams.resolve({"robust": "multi-krum", "robust_f": "1", "robust_m": "3"})
    assert hp.robust_on and hp.rule_params() == {"f": 1, "m": 3, "weighting": "uniform"}
    hp = RobustHparams.resolve(robust="trimmed-mean", robust_beta="0.2",
                               robust_trim_rounding="floor")
    assert hp.rule_params() == {"beta": 0.2, "rounding": "floor"}
    assert RobustHparams.resolve(robust="norm-bound", robust_norm_bound=2).rule_params() == \
        {"bound": 2.0}
    assert RobustHparams.resolve().rule_params() == {} and not RobustHparams().robust_on
    assert RobustHparams.resolve(robust="none").robust is None
    assert set(RULES) == set(RobustHparams.declarations()[0].declaration.parse.choices)
    # It composes with the other aggregation option (no name declared twice differently).
    both = compose("Both", DPHparams, RobustHparams)
    assert both.resolve(robust="krum", robust_f=1, dp_noise_multiplier=1.0,
                        dp_clip=0.1).robust == "krum"


@pytest.mark.parametrize("values, match", [
    ({"robust": "norm-bound"}, "needs --robust-norm-bound"),
    ({"robust": "trimmed-mean"}, "needs --robust-beta"),
    ({"robust": "krum"}, "needs --robust-f"),
    ({"robust": "bulyan", "robust_beta": 0.1, "robust_f": 1}, "does not take --robust-beta"),
    ({"robust": "median", "robust_f": 1}, "does not take --robust-f"),
    ({"robust": "krum", "robust_f": 1, "robust_m": 2}, "does not take --robust-m"),
    ({"robust_f": 1}, "--robust-f needs --robust"),
    ({"robust": "mean"}, "robust: expected one of"),
    ({"robust": "trimmed-mean", "robust_beta": 0.5}, "robust_beta: expected a number in"),
    ({"robust": "krum", "robust_f": -1}, "robust_f"),
    ({"robust": "norm-bound", "robust_norm_bound": 0}, "robust_norm_bound"),
    ({"robust": "trimmed-mean", "robust_beta": 0.1, "robust_trim_rounding": "up"},
     "robust_trim_rounding"),
])
def test_settings_refuse_bad_combinations_in_one_line(values, match):
    with pytest.raises(ParamsError, match=match) as info:
        RobustHparams.resolve(values)
    assert "\n" not in str(info.value)


def test_robust_requirement_names_the_papers_conditions():
    krum = RobustHparams.resolve(robust="krum", robust_f=2)
    assert robust_requirement(krum, 7) is None
    why = robust_requirement(krum, 6)
    assert "n > 2f + 2" in why and "Blanchard et al. 2017" in why and "at least 7" in why
    bulyan = RobustHparams.resolve(robust="bulyan", robust_f=2)
    assert robust_requirement(bulyan, 11) is None
    why = robust_requirement(bulyan, 10)
    assert "n >= 4f + 3" in why and "El Mhamdi et al. 2018" in why and "at least 11" in why
    trimmed = RobustHparams.resolve(robust="trimmed-mean", robust_beta=0.4)
    assert robust_requirement(trimmed, 10) is None          # cuts 4 of 10 at each end
    why = robust_requirement(trimmed, 2)                    # cuts ceil(0.8) = 1 of 2
    assert "keeps none" in why and "Yin et al. 2018" in why
    floor = trimmed.replace(robust_trim_rounding="floor")
    assert robust_requirement(floor, 2) is None             # cuts int(0.8) = 0
    multi = RobustHparams.resolve(robust="multi-krum", robust_f=1, robust_m=8)
    assert "m = 8 of 7" in robust_requirement(multi, 7)
    for hp in (RobustHparams(), RobustHparams.resolve(robust="median"),
               RobustHparams.resolve(robust="norm-bound", robust_norm_bound=1.0)):
        assert robust_requirement(hp, 1) is None
    assert all("\n" not in requirement(r, 0, beta=0.1, f=1) for r in RULES)


def test_settings_import_no_tensorflow():
    script = ("import sys\nimport tffre.robust.robust_settings\nimport tffre.robust\n"
              "tffre.robust.RobustHparams.resolve(robust='krum', robust_f=1)\n"
              "assert 'tensorflow' not in sys.modules, 'tensorflow imported'\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
