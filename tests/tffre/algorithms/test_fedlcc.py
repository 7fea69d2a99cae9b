"""FedLCC: the objective against a numpy transcription of Eq. 12-13, a first round equal to
FedAvgT, the previous local model kept per client, and rounds equal to a hand-written loop on a
tiny document-RE-shaped model fed through FederatedData's dict inputs."""

import copy

import numpy as np
import pytest
import tensorflow as tf

from tffre import build_algorithm, registry
from tffre.definition import ObjectiveContext
from tffre.registry import resolve_hparams
from tffre.algorithms.fedlcc import FedLCC, lcc_loss
from tffre.algorithms.moon import MOON
from tffre.client_model import ClientModel
from tffre.data import FederatedData
from tffre.mapreduce import ModelWeights
from tffre.models.document_model import DocRELoss, pack_targets
from tiny import assert_weights_close

P, R, F, D = 4, 2, 3, 5          # pairs per document, relation types, pair features, context
HP = dict(mu=0.1, temperature=0.5)
TRAIN = dict(learning_rate=0.05, num_epochs=2, num_iters=None)


RNG = np.random.RandomState(0)


def fedlcc(hp):
    """FedLCC with the hyperparameters ``hp`` (names or aliases)."""
    return FedLCC(resolve_hparams("FedLCC", hp))


def test_lcc_loss_is_eq_12():
    c, c_glob, c_prev = (RNG.randn(2, 4, 5).astype(np.float32) for _ in range(3))
    mask = np.array([[1, 1, 0, 0], [1, 1, 1, 0]], np.float32)

    def cos(a, b):
        return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)

    for tau in (0.5, 1.0):
        pos, neg = np.exp(cos(c, c_glob) / tau), np.exp(cos(c, c_prev) / tau)
        want = (-np.log(pos / (pos + neg)) * mask).sum() / mask.sum()
        np.testing.assert_allclose(lcc_loss(c, c_glob, c_prev, mask, tau=tau), want, rtol=1e-5)
    np.testing.assert_allclose(lcc_loss(c, c_glob, c_glob, mask), np.log(2.0), rtol=1e-6)
    c_var, glob_var = tf.Variable(c), tf.Variable(c_glob)
    with tf.GradientTape() as tape:
        loss = lcc_loss(c_var, glob_var, c_prev, mask)
    grad_c, grad_glob = tape.gradient(loss, [c_var, glob_var])
    assert np.isfinite(grad_c.numpy()).all() and grad_glob is None   # targets: no gradient
    zero = np.zeros_like(c)
    assert np.isfinite(float(lcc_loss(zero, zero, c_prev, mask)))


def tiny_docre_model():
    """A document-RE-shaped model: per-pair features -> context [n, P, D] -> logits [n, P, R]
    (seeded, so every call starts from the same weights)."""
    feats = tf.keras.Input((P, F), name="feats")
    context = tf.keras.layers.Dense(D, activation="tanh", name="context_layer",
                                    kernel_initializer=tf.keras.initializers.GlorotUniform(1))(
        feats)
    logits = tf.keras.layers.Dense(R, name="classifier",
                                   kernel_initializer=tf.keras.initializers.GlorotUniform(2))(
        context)
    return tf.keras.Model({"feats": feats}, {"logits": logits, "context": context})


def documents(n, seed):
    """x = {"feats": [n, P, F]}, y = packed labels and pair mask (some pairs padded)."""
    rng = np.random.RandomState(seed)
    feats = rng.randn(n, P, F).astype(np.float32)
    mask = (rng.rand(n, P) < 0.75).astype(np.int32)
    mask[:, 0] = 1
    labels = ((feats[..., :R] > 0.3) * mask[..., None]).astype(np.int32)
    return {"feats": feats}, pack_targets(labels, mask)


# --- numpy transcriptions ---

def np_cos(a, b):
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def np_lcc(c, c_glob, c_prev, mask, tau):
    """Eq. 12 per pair, averaged over the valid pairs."""
    pos, neg = np.exp(np_cos(c, c_glob) / tau), np.exp(np_cos(c, c_prev) / tau)
    return float((-np.log(pos / (pos + neg)) * mask).sum() / mask.sum())


def np_bce(labels, logits, mask):
    """Eq. 11 summed over relations, averaged over the valid pairs."""
    p = 1 / (1 + np.exp(-logits))
    per_pair = -(labels * np.log(p) + (1 - labels) * np.log(1 - p)).sum(-1)
    return float((per_pair * mask).sum() / mask.sum())


def context(outputs, frozen, seen, y):
    model = ClientModel(tiny_docre_model(), loss=DocRELoss("bce"), input_spec=None)
    return ObjectiveContext(x=None, y=tf.constant(y), model=model, outputs=outputs,
                            frozen=frozen, extras={}, label_counts=None,
                            client_state={"seen": tf.constant(seen)}, initial_weights=None,
                            hparams={})


def test_objective_is_eq_13_over_hand_built_contexts():
    rng = np.random.RandomState(3)
    labels = (rng.rand(2, P, R) < 0.4).astype(np.float32)
    mask = np.array([[1, 1, 1, 0], [1, 0, 1, 1]], np.float32)
    y = pack_targets(labels * mask[..., None], mask)

    def outputs():
        return {"logits": tf.constant(rng.randn(2, P, R).astype(np.float32)),
                "context": tf.constant(rng.randn(2, P, D).astype(np.float32))}
    local, glob, prev = outputs(), outputs(), outputs()
    frozen = {"global": glob, "previous": prev}
    want_bce = np_bce(labels * mask[..., None], local["logits"].numpy().astype(np.float64), mask)
    want_lcc = np_lcc(*(o["context"].numpy().astype(np.float64) for o in (local, glob, prev)),
                      mask, 0.5)
    for mu, tau in ((0.1, 0.5), (1.0, 0.2)):
        want = np_bce(labels * mask[..., None], local["logits"].numpy().astype(np.float64),
                      mask) + mu * np_lcc(*(o["context"].numpy().astype(np.float64)
                                            for o in (local, glob, prev)), mask, tau)
        got = fedlcc(dict(mu=mu, temperature=tau)).objective(context(local, frozen, 1.0, y))
        np.testing.assert_allclose(got, want, rtol=1e-5)
    # Hand-built contexts: c = c_glob and c_prev orthogonal to it on the valid pairs give
    # log(1 + e^{-1/tau}) per pair, whatever the padded pairs hold.
    c = np.zeros((2, P, D), np.float32)
    c[..., 0] = 1.0
    orth = np.zeros_like(c)
    orth[..., 1] = 1.0
    orth[0, 3] = c[0, 3]                                  # a padded pair: ignored
    hand = {"logits": local["logits"], "context": tf.constant(c)}
    got = fedlcc(HP).objective(context(hand, {"global": {"context": tf.constant(c)},
                                              "previous": {"context": tf.constant(orth)}},
                                       1.0, y))
    np.testing.assert_allclose(got, want_bce + 0.1 * np.log1p(np.exp(-2.0)), rtol=1e-5)
    # A client's first round (seen = 0): exactly the model's loss, DocRELoss on packed y.
    first = context(local, frozen, 0.0, y)
    np.testing.assert_array_equal(fedlcc(HP).objective(first), first.model_loss())
    np.testing.assert_allclose(first.model_loss(), want_bce, rtol=1e-5)
    assert want_lcc > 0


def test_registry_row_and_moon_masks_padded_pairs_too():
    assert registry.resolve_hparams("FedLCC").contrastive_weight == 0.1
    assert registry.resolve_hparams("FedLCC").contrastive_temperature == 0.5
    assert registry.get_spec("fedlcc").client_optimizer == "tf_adam"
    with pytest.raises(ValueError, match="FedLCC: contrastive_temperature"):
        fedlcc(dict(mu=0.1, temperature=0.0))
    # MOON on a pair-shaped "features" output averages l_con over the valid pairs only.
    rng = np.random.RandomState(4)
    mask = np.array([[1, 1, 0, 0], [1, 1, 1, 1]], np.float32)
    y = pack_targets(np.zeros((2, P, R)), mask)
    feats = [rng.randn(2, P, D).astype(np.float32) for _ in range(3)]
    outs = [{"logits": tf.zeros((2, P, R)), "features": tf.constant(f)} for f in feats]
    ctx = context(outs[0], {"global": outs[1], "previous": outs[2]}, 1.0, y)
    got = MOON(resolve_hparams("MOON", mu=1.0, temperature=0.5)).contrast(ctx)
    np.testing.assert_allclose(got, np_lcc(*feats, mask, 0.5), rtol=1e-5)


# --- rounds, through FederatedData's dict inputs ---

DATA = FederatedData({c: {"train": documents(n, s), "test": documents(2, s + 10)}
                      for c, n, s in [("a", 7, 1), ("b", 5, 2), ("c", 6, 3)]},
                     num_classes=R, name="tiny docre")
LOSS = DocRELoss("bce")


def datasets(ids):
    return [DATA.client_dataset(c, batch_size=3) for c in ids]


def initial():
    rng = np.random.RandomState(9)
    return [0.5 * rng.randn(*w.shape).astype(np.float32) for w in tiny_docre_model().get_weights()]


def process_of(name, **hp):
    process = build_algorithm(name, tiny_docre_model, loss=LOSS,
                              input_spec=DATA.element_spec(), executor="local", **TRAIN, **hp)
    return process, process.set_model_weights(process.initialize(), ModelWeights(initial(), []))


def run_round(process, state, ids):
    return process.next(state, datasets(ids), client_ids=ids).state


def hand_client(global_weights, previous_weights, cid, seen=1.0):
    """One client's FedLCC round by hand: Adam on BCE + mu * seen * L_LCC (Eq. 11-13), the
    global and previous models frozen."""
    model, glob, prev = tiny_docre_model(), tiny_docre_model(), tiny_docre_model()
    for m, w in ((model, global_weights), (glob, global_weights), (prev, previous_weights)):
        m.set_weights(w)
    optimizer = tf.keras.optimizers.Adam(TRAIN["learning_rate"])
    for x, y in DATA.client_dataset(cid, batch_size=3).repeat(TRAIN["num_epochs"]):
        labels, mask = y[..., :-1], y[..., -1]
        cg, cp = glob(x)["context"], prev(x)["context"]
        with tf.GradientTape() as tape:
            out = model(x, training=True)
            bce = tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(labels, out["logits"]),
                                -1)
            unit = tf.math.l2_normalize(out["context"], -1)
            pos = tf.exp(tf.reduce_sum(unit * tf.math.l2_normalize(cg, -1), -1) / 0.5)
            neg = tf.exp(tf.reduce_sum(unit * tf.math.l2_normalize(cp, -1), -1) / 0.5)
            lcc = -tf.math.log(pos / (pos + neg))
            loss = (tf.reduce_sum(bce * mask) + 0.1 * seen * tf.reduce_sum(lcc * mask)) \
                / tf.reduce_sum(mask)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return [v.numpy() for v in model.trainable_variables]


def test_first_round_is_fedavgt_and_later_rounds_match_the_hand_written_loop():
    process, state = process_of("FedLCC")
    fedavgt, avg_state = process_of("FedAvgT")
    state = run_round(process, state, ["a", "b"])
    assert_weights_close(state["model"].trainable,
                         run_round(fedavgt, avg_state, ["a", "b"])["model"].trainable)
    after1 = copy.deepcopy(process.client_states)
    state = run_round(process, state, ["b", "c"])
    # a was not sampled: its previous model is still its round-1 model.
    for g, w in zip(process.client_states["a"]["weights"], after1["a"]["weights"]):
        np.testing.assert_array_equal(g, w)
    after2 = copy.deepcopy(process.client_states)
    broadcast = [np.asarray(w) for w in state["model"].trainable]
    state = run_round(process, state, ["a", "c"])
    want_a = hand_client(broadcast, after1["a"]["weights"], "a")
    want_c = hand_client(broadcast, after2["c"]["weights"], "c")
    assert_weights_close(process.client_states["a"]["weights"], want_a)
    assert_weights_close(process.client_states["c"]["weights"], want_c)
    n_a, n_c = DATA.sizes()[0], DATA.sizes()[2]
    assert_weights_close(state["model"].trainable, [(n_a * a + n_c * c) / (n_a + n_c)
                                                    for a, c in zip(want_a, want_c)])
    # The test can tell: without the LCC term (or with another client's previous model)
    # client a ends elsewhere.
    assert not np.allclose(hand_client(broadcast, after1["a"]["weights"], "a", seen=0.0)[0],
                           want_a[0], atol=1e-5)
    assert not np.allclose(hand_client(broadcast, after2["b"]["weights"], "a")[0], want_a[0],
                           atol=1e-5)
