"""FedCB's frozen classifier: μ and Σ (Eq. 2), F (Eq. 5) and the loss (Eq. 4) against numpy,
no gradient and no upload for the classifier, and prompt embeddings from an encoder folder."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tffre import build_algorithm
from tffre.algorithms.fedcb import (IMAGE_TEMPLATES, TEXT_TEMPLATES, FedCB, class_distributions,
                                    contextualize, embed_prompts)
from tffre.definition import ObjectiveContext, TaskContext
from tffre.models.heads import fedcb_logits
from tffre.registry import resolve_hparams
from tffre.client_model import ClientModel
from tiny import INPUT_SPEC, NAMED_LOSS, NUM_CLASSES, NUM_FEATURES, tiny_fedcb_model
from tiny_encoder import make_encoder_folder


def numpy_distributions(e):
    """Eq. 2 by hand, per class, after L2 normalisation: mean and (M-1) covariance."""
    mus, covs = [], []
    for k in range(e.shape[0]):
        rows = [v / np.sqrt((v ** 2).sum()) for v in e[k]]
        mu = sum(rows) / len(rows)
        cov = sum(np.outer(r - mu, r - mu) for r in rows) / (len(rows) - 1)
        mus.append(mu)
        covs.append(cov)
    return np.array(mus), np.array(covs)


def test_class_distributions_against_numpy():
    e = np.random.RandomState(0).randn(3, 5, 4)
    mu_ref, cov_ref = numpy_distributions(e)
    mu, var = class_distributions(e)
    np.testing.assert_allclose(mu, mu_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(var, np.array([np.diag(c) for c in cov_ref]), rtol=1e-5,
                               atol=1e-7)
    _, full = class_distributions(e, covariance="full")
    np.testing.assert_allclose(full, cov_ref, rtol=1e-5, atol=1e-7)
    # A hand case: two unit embeddings [1, 0] and [0, 1]: mean [.5, .5], variance [.5, .5].
    mu, var = class_distributions([[[2.0, 0.0], [0.0, 3.0]]])
    np.testing.assert_allclose(mu, [[0.5, 0.5]])
    np.testing.assert_allclose(var, [[0.5, 0.5]])
    with pytest.raises(ValueError, match="covariance"):
        class_distributions(e, covariance="spherical")


def numpy_tau_f(h, mu, cov, tau):
    """tau * F(h, k) = tau * (h.mu_k + tau/2 h^T Sigma_k h), Eq. 5, with full Sigma_k."""
    return np.array([[tau * (hi @ mu[k] + 0.5 * tau * hi @ cov[k] @ hi)
                      for k in range(len(mu))] for hi in h])


def test_logits_and_loss_against_numpy():
    rng = np.random.RandomState(1)
    e = rng.randn(NUM_CLASSES, 6, 4)
    mu, cov = numpy_distributions(e)
    h = rng.randn(5, 4)
    h /= np.linalg.norm(h, axis=1, keepdims=True)
    tau = 2.5
    diag = np.array([np.diag(np.diag(c)) for c in cov])
    np.testing.assert_allclose(fedcb_logits(h, mu, np.array([np.diag(c) for c in cov]), tau),
                               numpy_tau_f(h, mu, diag, tau), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(fedcb_logits(h, mu, cov, tau), numpy_tau_f(h, mu, cov, tau),
                               rtol=1e-5, atol=1e-5)
    # The objective on a model of build_fedcb_model: CE(tau F) + tau^2/2 h^T Sigma_y h.
    keras_model = tiny_fedcb_model(tau=tau)
    model = ClientModel(keras_model, loss=NAMED_LOSS, input_spec=INPUT_SPEC)
    x = rng.randn(5, NUM_FEATURES).astype(np.float32)
    y = np.array([0, 2, 1, 1, 0])
    outputs = model.outputs(x, training=False)
    layer = keras_model.get_layer("classifier")
    mu_m, var_m = layer.mu.numpy(), layer.var.numpy()
    hm = outputs["features"].numpy().astype(np.float64)
    np.testing.assert_allclose(np.linalg.norm(hm, axis=1), 1.0, rtol=1e-5)
    logits = numpy_tau_f(hm, mu_m, np.array([np.diag(v) for v in var_m]), tau)
    np.testing.assert_allclose(outputs["logits"], logits, rtol=1e-4, atol=1e-5)
    log_p = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    quad = np.array([(hm[i] ** 2 * var_m[y[i]]).sum() for i in range(5)])
    want = np.mean(-log_p[np.arange(5), y] + 0.5 * tau ** 2 * quad)
    ctx = ObjectiveContext(x=x, y=tf.constant(y), model=model, outputs=outputs, frozen={},
                           extras={}, label_counts=None, client_state=None,
                           initial_weights=None, hparams={})
    np.testing.assert_allclose(FedCB(resolve_hparams("FedCB")).objective(ctx), want, rtol=1e-5)
    # The embedding-average ablation: mu only, no variance term.
    plain = tiny_fedcb_model(use_variance=False, tau=tau)
    out = plain(x)
    np.testing.assert_allclose(out["logits"], tau * out["features"].numpy() @ mu_m.T,
                               rtol=1e-4, atol=1e-5)


def test_classifier_gets_no_gradient_and_is_not_uploaded():
    keras_model = tiny_fedcb_model()
    classifier = keras_model.get_layer("classifier")
    assert classifier.trainable_weights == []
    assert {id(v) for v in classifier.weights} & {id(v) for v in keras_model.trainable_variables} \
        == set()
    process = build_algorithm("FedCB", tiny_fedcb_model, loss=NAMED_LOSS, input_spec=INPUT_SPEC,
                              executor="tff", learning_rate=0.05, num_epochs=1, num_iters=3)
    form = tff.backends.mapreduce.get_map_reduce_form_for_computation(process.tff_process.next)

    def shapes(t):
        if isinstance(t, tff.TensorType):
            return [tuple(t.shape)]
        if isinstance(t, tff.StructType):
            return [s for c in t.children() for s in shapes(c)]
        return []
    uploaded = shapes(form.work.type_signature.result)
    # The trainable weights' deltas: extractor (6x5, 5) and projection (5x3, 3); the
    # classifier's mu and var, both [3, 3], are not among them.
    assert sorted(s for s in uploaded if len(s) == 2) == [(5, NUM_CLASSES), (NUM_FEATURES, 5)]
    assert (NUM_CLASSES, NUM_CLASSES) not in uploaded


def test_prompts_are_embedded_with_the_encoder_folder(tmp_path):
    folder, reference = make_encoder_folder(str(tmp_path / "enc"), weights="tf")
    concepts = ["fever", "chest pain"]
    templates = ("the patient was given {} .", "{} and cough")
    e = embed_prompts(concepts, templates, encoder_dir=folder)
    assert e.shape == (2, 2, 32)
    # One prompt by hand: the encoder's hidden states averaged over the real word pieces.
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(folder)
    batch = tok(["chest pain and cough"], return_tensors="np")
    hidden = reference(input_ids=batch["input_ids"],
                       attention_mask=batch["attention_mask"]).last_hidden_state.numpy()
    np.testing.assert_allclose(e[1, 1], hidden[0].mean(0), rtol=1e-4, atol=1e-5)
    assert contextualize(["x"], templates) == [["the patient was given x .", "x and cough"]]
    assert len(IMAGE_TEMPLATES) >= 20 and len(TEXT_TEMPLATES) >= 20
    assert all("{}" in t for t in IMAGE_TEMPLATES + TEXT_TEMPLATES)


def test_simplex_etf_is_equiangular():
    from tffre.algorithms.fedcb import simplex_etf
    w = simplex_etf(5, 8, seed=3).astype(np.float64)
    gram = w @ w.T
    np.testing.assert_allclose(np.diag(gram), 1.0, rtol=1e-6)
    off = gram[~np.eye(5, dtype=bool)]
    np.testing.assert_allclose(off, -1 / 4, atol=1e-6)
    np.testing.assert_allclose(w.sum(0), 0.0, atol=1e-6)    # centred: the vectors sum to 0
    with pytest.raises(ValueError, match="dim >= 5"):
        simplex_etf(5, 4)


def test_fedcb_over_resnet18_trains_only_the_extractor_and_projection():
    """The paper's setting in small: ResNet-18 (small-input stem) -> projection -> frozen
    classifier; one step moves the body, never mu or var."""
    from tffre.models.heads import build_fedcb_model
    from tffre.models.resnet import resnet18
    mu, var = class_distributions(np.random.RandomState(2).randn(8, 5, 16))
    model = build_fedcb_model(resnet18((32, 32, 3), small_input=True, seed=0), mu, var, 12.5)
    x = np.random.RandomState(3).rand(4, 32, 32, 3).astype(np.float32)
    y = np.array([0, 3, 5, 7])
    cm = ClientModel(model, loss=NAMED_LOSS, input_spec=(
        tf.TensorSpec((None, 32, 32, 3), tf.float32), tf.TensorSpec((None,), tf.int32)))
    frozen = [v.numpy() for v in model.get_layer("classifier").weights]
    before = model.get_layer("projection").kernel.numpy()
    opt = tf.keras.optimizers.Adam(1e-2)
    with tf.GradientTape() as tape:
        out = cm.outputs(x, training=True)
        loss = FedCB(resolve_hparams("FedCB")).objective(ObjectiveContext(
            x=x, y=tf.constant(y), model=cm, outputs=out, frozen={}, extras={},
            label_counts=None, client_state=None, initial_weights=None, hparams={}))
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                            model.trainable_variables))
    assert out["logits"].shape == (4, 8) and out["features"].shape == (4, 16)
    for v, b in zip(model.get_layer("classifier").weights, frozen):
        np.testing.assert_array_equal(v.numpy(), b)
    assert not np.allclose(model.get_layer("projection").kernel.numpy(), before)


def test_model_fn_builds_the_classifier_from_the_concepts(tmp_path, monkeypatch):
    """FedCB's model_fn embeds the concepts' prompts once (an encoder folder), puts the
    classifier on the task model's features, and sends it once to each client."""
    from tffre.algorithms import fedcb
    folder, _ = make_encoder_folder(str(tmp_path / "enc"), weights="tf")
    concepts = ["fever", "chest pain", "cough"]
    templates = fedcb.prompt_templates("text", 0.25)
    assert templates == TEXT_TEMPLATES[:5]
    # The expected classifier: Eq. 2 by hand on the prompts' embeddings.
    mu_ref, cov_ref = numpy_distributions(embed_prompts(concepts, templates, encoder_dir=folder))
    process = build_algorithm(
        "FedCB", __import__("tiny").tiny_named_model, loss=NAMED_LOSS, input_spec=INPUT_SPEC,
        executor="local", learning_rate=0.05, num_epochs=1, num_iters=2,
        context=TaskContext(concepts=tuple(concepts), prompts="text"), prompt_fraction=0.25,
        concept_encoder=folder, temperature=3.0)
    model = process.model_fn()
    classifier = model.get_layer("classifier")
    np.testing.assert_allclose(classifier.mu.numpy(), mu_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(classifier.var.numpy(), [np.diag(c) for c in cov_ref],
                               rtol=1e-4, atol=1e-7)
    assert classifier.tau == 3.0 and model.output["features"].shape[-1] == 32
    # mu and var (3 x 32 each) are the broadcast's constant part: counted once per client.
    constant = 2 * 3 * 32 * 4
    assert process.constant_bytes_per_client == constant
    from tiny import client_arrays, to_datasets
    data = to_datasets(client_arrays([5, 6]))
    state = process.initialize()
    first = process.next(state, data, client_ids=["a", "b"]).metrics["round"]
    again = process.next(state, data, client_ids=["a", "c"]).metrics["round"]
    per_client = process.broadcast_bytes_per_client
    assert first["bytes_broadcast"] == 2 * per_client
    assert again["bytes_broadcast"] == 2 * per_client - constant    # a has it already
    with pytest.raises(ValueError, match="2 class concepts for a model of 3 classes"):
        build_algorithm("FedCB", __import__("tiny").tiny_named_model, loss=NAMED_LOSS,
                        input_spec=INPUT_SPEC, executor="local",
                        context=TaskContext(concepts=tuple(concepts[:2]), prompts="text"),
                        concept_encoder=folder)


def test_fedetf_is_a_frozen_simplex_with_the_plain_cross_entropy():
    from tffre.algorithms.fedcb import simplex_etf
    from tiny import tiny_named_model
    process = build_algorithm("FedETF", tiny_named_model, loss=NAMED_LOSS, input_spec=INPUT_SPEC,
                              executor="local", learning_rate=0.05, num_epochs=1, num_iters=2,
                              etf_dim=4, etf_seed=3, temperature=2.0)
    model = process.model_fn()
    classifier = model.get_layer("classifier")
    np.testing.assert_allclose(classifier.mu.numpy(), simplex_etf(NUM_CLASSES, 4, 3), rtol=1e-6)
    np.testing.assert_array_equal(classifier.var.numpy(), 0.0)
    x = np.random.RandomState(0).randn(4, NUM_FEATURES).astype(np.float32)
    out = model(x)
    h = out["features"].numpy()
    np.testing.assert_allclose(np.linalg.norm(h, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(out["logits"], 2.0 * h @ simplex_etf(NUM_CLASSES, 4, 3).T,
                               rtol=1e-4, atol=1e-5)
    assert process.upload_bytes_per_client < process.broadcast_bytes_per_client
