"""FedCMC: selection, mergeable argmin, contrastive loss and rounds against numpy transcriptions."""

import collections
import itertools

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tffre import build_algorithm
from tffre.builder import ModelRecipe
from tffre.definition import ObjectiveContext
from tffre.algorithms.fedcmc import (FedCMC, contrastive_loss, local_similarity,
                                     select_major_vectors, tf_local_similarity)
from tffre.mapreduce import ModelWeights
from tffre.registry import resolve_hparams
from tiny import (INPUT_SPEC, NAMED_LOSS, NUM_CLASSES, client_arrays, initial_weights, poisoned,
                  tiny_named_model, to_datasets)

# tiny_named_model's trainable variables: features kernel and bias, classifier kernel and bias.
KERNEL = 2


# --- independent transcriptions of the paper (loops, no shared code) ---

def ref_similarity(theta):
    """Def. 1, Eq. 10: d_c = 1/(C-1) sum_{i != c} <Θ_c, Θ_i> / (|Θ_c| |Θ_i|)."""
    theta = np.asarray(theta, np.float64)
    C = len(theta)
    d = np.zeros(C)
    for c in range(C):
        for i in range(C):
            if i != c:
                d[c] += theta[c] @ theta[i] / (np.linalg.norm(theta[c]) * np.linalg.norm(theta[i]))
        d[c] /= C - 1
    return d


def ref_select(classifiers, minor=False, weights=None):
    """Eq. 12 (Eq. 18 if minor): per class the counted client with the smallest (largest) d_{k,c};
    ties to the lexicographically smaller vector, then the first client."""
    K, C = len(classifiers), len(classifiers[0])
    weights = [1] * K if weights is None else weights
    d = [ref_similarity(t) for t in classifiers]
    chosen = []
    for c in range(C):
        ks = [k for k in range(K) if weights[k] > 0]
        ks.sort(key=lambda k: (-d[k][c] if minor else d[k][c], list(classifiers[k][c]), k))
        chosen.append(ks[0] if ks else -1)
    return np.array([classifiers[k][c] for c, k in enumerate(chosen)]), np.array(chosen)


def ref_con(h, y, vectors, tau, reduction):
    """Eq. 14: -log( exp(h_i·Θ̂_{y_i}/tau) / sum_c exp(h_i·Θ̂_c/tau) ), summed or averaged."""
    h, vectors = np.asarray(h, np.float64), np.asarray(vectors, np.float64)
    losses = []
    for hi, yi in zip(h, y):
        scores = [hi @ v / tau for v in vectors]
        losses.append(-np.log(np.exp(scores[yi]) / np.sum(np.exp(scores))))
    return np.sum(losses) if reduction == "sum" else np.mean(losses)


# Crafted classifiers (3 clients, 3 classes, D = 4): in client k, class k's vector is nearly
# orthogonal to (or opposite of) the other two, which point the same way; so client k has the
# smallest d for class k.
def crafted():
    base = np.array([1.0, 1.0, 0.0, 0.0])
    out = []
    for k in range(3):
        theta = np.tile(base, (3, 1)) + 0.1 * np.arange(12).reshape(3, 4) / 12
        theta[k] = [0.1 * (k + 1), -0.1, 1.0, -0.5 * k]   # far from base
        out.append(theta.astype(np.float32))
    return out


def test_selection_matches_the_transcription_on_crafted_classifiers():
    classifiers = crafted()
    for theta in classifiers:
        np.testing.assert_allclose(local_similarity(theta), ref_similarity(theta), atol=1e-12)
        np.testing.assert_allclose(tf_local_similarity(tf.constant(theta)).numpy(),
                                   ref_similarity(theta), atol=1e-6)
    vectors, chosen = select_major_vectors(classifiers)
    np.testing.assert_array_equal(chosen, [0, 1, 2])          # the known answer
    want, want_chosen = ref_select(classifiers)
    np.testing.assert_array_equal(chosen, want_chosen)
    np.testing.assert_array_equal(vectors, want)
    # Eq. 18, the "minor" ablation: the most similar vector instead.
    vectors, chosen = select_major_vectors(classifiers, minor=True)
    want, want_chosen = ref_select(classifiers, minor=True)
    assert not np.any(chosen == [0, 1, 2])
    np.testing.assert_array_equal(chosen, want_chosen)
    np.testing.assert_array_equal(vectors, want)
    # Weight 0 is never chosen.
    _, chosen = select_major_vectors(classifiers, weights=[1, 0, 1])
    np.testing.assert_array_equal(chosen, ref_select(classifiers, weights=[1, 0, 1])[1])
    assert 1 not in chosen


# --- the mergeable argmin ---

def fedcmc(**hp):
    definition = FedCMC(resolve_hparams("FedCMC", **hp))
    model = ModelRecipe(tiny_named_model, NAMED_LOSS, INPUT_SPEC).client_model_fn()()
    extras = definition.initial_extras(model)
    return definition, model, extras


def uploads_of(definition, agg, previous, classifiers, weights):
    """Each client's (extra upload, model upload), as the client work makes them (an excluded
    client's delta and scores are zeros)."""
    out = []
    for theta, w in zip(classifiers, weights):
        update = [np.zeros_like(p) for p in previous]
        update[KERNEL] = previous[KERNEL] - theta.T                   # theta_t - theta_k
        scores = tf_local_similarity(tf.constant(theta))
        if w == 0:
            update, scores = [np.zeros_like(u) for u in update], tf.zeros_like(scores)
        model_upload = collections.OrderedDict(update=[tf.constant(u) for u in update],
                                               weight=tf.constant(float(w)))
        out.append((agg.client(collections.OrderedDict(scores=scores), model_upload["weight"]),
                    model_upload))
    return out


def run_selection(definition, agg, extras, previous, uploads, order=None, split=None):
    """Accumulates ``uploads`` in ``order``; with ``split`` into two partial accumulators,
    merged; then the server update. Returns the new vectors."""
    order = range(len(uploads)) if order is None else order
    parts = [list(order)] if split is None else [list(order)[:split], list(order)[split:]]
    accs = []
    for part in parts:
        acc = agg.zero()
        for k in part:
            acc = agg.accumulate(acc, *uploads[k])
        accs.append(acc)
    acc = accs[0] if len(accs) == 1 else agg.merge(accs[1], accs[0])
    _, new = definition.server_update(None, extras, agg.report(acc),
                                      ModelWeights(trainable=previous, non_trainable=[]))
    return new["vectors"].numpy()


@pytest.mark.parametrize("minor", [False, True])
def test_accumulator_is_order_independent_mergeable_and_skips_excluded_clients(minor):
    definition, model, extras = fedcmc(vectors="minor" if minor else "major")
    previous = [v.numpy() for v in model.trainable_variables]
    rng = np.random.RandomState(3)
    # Positive components: every cosine > 0, so d > 0 and an excluded client's zeroed scores
    # (d = 0) would win the argmin if they were not skipped.
    classifiers = [np.abs(rng.randn(NUM_CLASSES, 5)).astype(np.float32) + 0.1
                   for _ in range(4)]
    # Client 3 is excluded; make it the best candidate for every class if it counted.
    classifiers[3] = crafted_like(classifiers[3], minor)
    weights = [3.0, 1.0, 2.0, 0.0]
    agg = definition.upload_aggregator(collections.OrderedDict(
        scores=tf.TensorSpec([NUM_CLASSES], tf.float32)))
    assert agg.reads_model_upload
    uploads = uploads_of(definition, agg, previous, classifiers, weights)
    want, chosen = ref_select(classifiers, minor=minor, weights=weights)
    assert 3 not in chosen
    assert not np.array_equal(want, ref_select(classifiers, minor=minor)[0])   # it would win
    for order in itertools.permutations(range(4)):
        for split in (None, 1, 2, 3):
            np.testing.assert_allclose(
                run_selection(definition, agg, extras, previous, uploads, order, split),
                want, rtol=1e-6, atol=1e-6)
    # A class no counted client supplies keeps the old vector: here, no client counts at all.
    # (Old vectors other than the broadcast classifier, so that the two cannot be confused.)
    old = collections.OrderedDict(vectors=tf.constant(rng.randn(NUM_CLASSES, 5), tf.float32))
    alone = run_selection(definition, agg, old, previous, uploads, order=[3])
    np.testing.assert_array_equal(alone, old["vectors"].numpy())


def crafted_like(theta, minor):
    """A classifier whose d is the smallest (major) or largest (minor) possible for every class."""
    if minor:   # all vectors parallel: d = 1
        return np.tile(theta[:1], (NUM_CLASSES, 1))
    return (np.eye(NUM_CLASSES, 5) - 0.2).astype(np.float32)   # pairwise cosines -0.25


def test_ties_are_broken_by_the_smaller_vector_whatever_the_order():
    definition, model, extras = fedcmc()
    previous = [v.numpy() for v in model.trainable_variables]
    rng = np.random.RandomState(4)
    a = rng.randn(NUM_CLASSES, 5).astype(np.float32)
    # Scaling keeps every cosine, so the scores tie exactly; the vectors differ.
    classifiers = [a, 2 * a, 0.5 * a]
    agg = definition.upload_aggregator(collections.OrderedDict(
        scores=tf.TensorSpec([NUM_CLASSES], tf.float32)))
    uploads = uploads_of(definition, agg, previous, classifiers, [1.0, 1.0, 1.0])
    want, chosen = ref_select(classifiers)
    np.testing.assert_array_equal(select_major_vectors(classifiers)[1], chosen)
    for order in itertools.permutations(range(3)):
        for split in (None, 1, 2):
            np.testing.assert_allclose(
                run_selection(definition, agg, extras, previous, uploads, order, split),
                want, rtol=1e-6, atol=1e-6)


# --- the contrastive loss and its gradients (Eq. 14, 16, 17) ---

@pytest.mark.parametrize("tau,reduction", [(1.0, "mean"), (0.3, "sum"), (2.0, "mean")])
def test_contrastive_loss_matches_the_transcription(tau, reduction):
    rng = np.random.RandomState(5)
    h = rng.randn(7, 5).astype(np.float32)
    y = rng.randint(0, NUM_CLASSES, 7)
    vectors = rng.randn(NUM_CLASSES, 5).astype(np.float32)
    got = contrastive_loss(tf.constant(h), tf.constant(y), tf.constant(vectors), tau, reduction)
    np.testing.assert_allclose(got.numpy(), ref_con(h, y, vectors, tau, reduction), rtol=1e-5)


@pytest.mark.parametrize("tau,reduction", [(1.0, "mean"), (0.5, "sum")])
def test_the_contrastive_term_trains_the_encoder_only(tau, reduction):
    mu = 0.7
    definition, model, extras = fedcmc(mu=mu, temperature=tau, con_reduction=reduction)
    x, y = client_arrays([9], seed=6)[0]
    vectors = tf.Variable(np.random.RandomState(6).randn(NUM_CLASSES, 5).astype(np.float32))
    variables = model.trainable_variables
    with tf.GradientTape(persistent=True) as tape:
        outputs = model.outputs(x, training=True)
        con = mu * contrastive_loss(outputs["features"], y, vectors, tau, reduction)
        ce = model.model_loss(y, outputs)
        total = definition.objective(ObjectiveContext(
            x=x, y=y, outputs=outputs, model=model,
            extras=collections.OrderedDict(vectors=vectors), hparams=definition.hparams))
    np.testing.assert_allclose(total.numpy(), ce.numpy() + mu * ref_con(
        outputs["features"].numpy(), y, vectors.numpy(), tau, reduction), rtol=1e-5)
    grads = tape.gradient(con, variables + [vectors])
    for g in grads[KERNEL:]:   # classifier kernel and bias (Eq. 17), and Θ̂ itself
        assert g is None or not np.any(g.numpy())
    assert np.any(grads[0].numpy()) and np.any(grads[1].numpy())   # the encoder (Eq. 16)
    # So the objective's gradient on the classifier is the cross-entropy's alone (Eq. 17).
    head = variables[KERNEL:]
    for a, b in zip(tape.gradient(total, head), tape.gradient(ce, head)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


# --- full rounds against a hand-written client loop ---

def hand_train(weights, arrays, vectors, lr, mu, tau, reduction):
    """One client's round by hand: tf.keras Adam (fresh) on CE + mu * L_con, one epoch of
    batches of 4. Returns the trained weights."""
    model = tiny_named_model()
    model.set_weights(weights)
    optimizer = tf.keras.optimizers.Adam(lr)
    ce = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    v = tf.constant(vectors, tf.float32)
    for x, y in to_datasets([arrays])[0]:
        with tf.GradientTape() as tape:
            out = model(x, training=True)
            logits = tf.matmul(out["features"], v, transpose_b=True) / tau
            per = tf.reduce_logsumexp(logits, axis=1) - tf.gather(logits, y, batch_dims=1)
            con = tf.reduce_sum(per) if reduction == "sum" else tf.reduce_mean(per)
            loss = ce(y, out["logits"]) + mu * con
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return [w.numpy() for w in model.trainable_variables]


def hand_round(weights, vectors, clients, hp, minor, excluded=()):
    trained = [hand_train(weights, arrays, vectors, hp["learning_rate"], hp["mu"],
                          hp["temperature"], hp["con_reduction"]) for arrays in clients]
    counted = [0.0 if k in excluded else float(len(arrays[1]))
               for k, arrays in enumerate(clients)]
    mean = [sum(w * t[i] for w, t in zip(counted, trained) if w) / sum(counted)
            for i in range(len(weights))]
    classifiers = [t[KERNEL].T for t in trained]
    # The scores must be well apart, or float32 rounding could flip a choice.
    for c in range(NUM_CLASSES):
        d = sorted(ref_similarity(t)[c] for t, w in zip(classifiers, counted) if w)
        assert len(d) < 2 or d[1] - d[0] > 1e-4 and d[-1] - d[-2] > 1e-4
    vectors, _ = ref_select(classifiers, minor=minor, weights=counted)
    return mean, vectors


@pytest.mark.parametrize("vectors,tau,reduction", [("major", 1.0, "mean"),
                                                   ("minor", 0.5, "sum")])
def test_rounds_match_a_hand_written_client_loop(vectors, tau, reduction):
    hp = dict(learning_rate=0.05, num_epochs=1, num_iters=None, mu=0.5, temperature=tau,
              con_reduction=reduction, vectors=vectors)
    process = build_algorithm("FedCMC", tiny_named_model, loss=NAMED_LOSS, input_spec=INPUT_SPEC,
                              executor="local", **hp)
    state = process.initialize()
    theta0 = tiny_named_model().get_layer("classifier").kernel.numpy().T
    np.testing.assert_array_equal(state["extras"]["vectors"], theta0)   # Θ̂^0 = Θ^{L,0}
    # Weights set after initialize: Θ̂^0 stays the built model's classifier (documented).
    state = process.set_model_weights(state, ModelWeights(initial_weights(), []))
    np.testing.assert_array_equal(state["extras"]["vectors"], theta0)
    weights, want_vectors = initial_weights(), theta0
    rounds = [(client_arrays([8, 10, 6], seed=1), ()),
              (poisoned(client_arrays([7, 9, 12], seed=3), {1}), (1,))]
    for clients, excluded in rounds:
        out = process.next(state, to_datasets(clients))
        state = out.state
        assert out.metrics["client_work"]["num_excluded_clients"] == len(excluded)
        weights, want_vectors = hand_round(weights, want_vectors, clients, hp,
                                           vectors == "minor", excluded)
        for got, want in zip(state["model"].trainable, weights):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(state["extras"]["vectors"], want_vectors, rtol=1e-4, atol=1e-5)


def test_random_vectors_are_fixed_and_not_uploaded():
    hp = dict(learning_rate=0.05, num_epochs=1, num_iters=None, vectors="random")
    process = build_algorithm("FedCMC", tiny_named_model, loss=NAMED_LOSS, input_spec=INPUT_SPEC,
                              executor="local", **hp)
    state = process.initialize()
    vectors = state["extras"]["vectors"]
    assert vectors.shape == (NUM_CLASSES, 5)
    np.testing.assert_array_equal(process.initialize()["extras"]["vectors"], vectors)   # seeded
    assert not np.allclose(vectors, tiny_named_model().get_layer("classifier").kernel.numpy().T)
    state = process.next(state, to_datasets(client_arrays([8, 10], seed=1))).state
    np.testing.assert_array_equal(state["extras"]["vectors"], vectors)   # never updated
    baseline = build_algorithm("FedAvgT", tiny_named_model, loss=NAMED_LOSS,
                               input_spec=INPUT_SPEC, executor="local", learning_rate=0.05)
    assert process.upload_bytes_per_client == baseline.upload_bytes_per_client


# --- bytes, MapReduceForm, errors ---

def test_upload_bytes_and_map_reduce_form():
    hp = dict(learning_rate=0.05, num_epochs=1, num_iters=2)
    process = build_algorithm("FedCMC", tiny_named_model, loss=NAMED_LOSS, input_spec=INPUT_SPEC,
                              executor="tff", **hp)
    baseline = build_algorithm("FedAvgT", tiny_named_model, loss=NAMED_LOSS,
                               input_spec=INPUT_SPEC, executor="tff", **hp)
    # Only the C scores on top of FedAvg's upload (the class vectors ride in the delta).
    assert process.upload_bytes_per_client == baseline.upload_bytes_per_client + 4 * NUM_CLASSES
    # Θ̂ [C, D'] is broadcast with the model.
    assert process.broadcast_bytes_per_client == \
        baseline.broadcast_bytes_per_client + 4 * NUM_CLASSES * 5
    form = tff.backends.mapreduce.get_map_reduce_form_for_computation(process.tff_process.next)
    assert form is not None


def named(build_outputs):
    def model_fn():
        inputs = tf.keras.Input((6,))
        return tf.keras.Model(inputs, build_outputs(inputs))
    return model_fn


@pytest.mark.parametrize("model_fn,match", [
    (named(lambda i: {"features": tf.keras.layers.Dense(5, name="f")(i),
                      "logits": tf.keras.layers.Dense(3, name="head")(i)}),
     "layer named 'classifier'"),
    (named(lambda i: {"logits": tf.keras.layers.Dense(3, name="classifier")(i)}),
     "'features' output"),
    (named(lambda i: (lambda logits: {"features": tf.keras.layers.Dense(6, name="f")(logits),
                                      "logits": logits})(
        tf.keras.layers.Dense(3, name="classifier")(i))),
     "depends on the 'classifier'"),
])
def test_models_fedcmc_cannot_train_are_refused(model_fn, match):
    definition = FedCMC(resolve_hparams("FedCMC"))
    model = ModelRecipe(model_fn, NAMED_LOSS, INPUT_SPEC).client_model_fn()()
    with pytest.raises(ValueError, match=match):
        definition.initial_extras(model)


@pytest.mark.parametrize("hp,match", [({"vectors": "best"}, "vectors: expected one of"),
                                      ({"con_reduction": "max"}, "con_reduction"),
                                      ({"temperature": 0.0}, "temperature")])
def test_bad_hyperparameters_are_refused(hp, match):
    with pytest.raises(ValueError, match=match):
        FedCMC(resolve_hparams("FedCMC", **hp))
