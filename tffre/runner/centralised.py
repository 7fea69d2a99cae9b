"""The centralised reference: the same model trained on the union of the clients' data for the
federated run's example passes ("centralised (same budget)": at one learning rate it need not
bound the federated rows; :func:`centralised_runs` tries several)."""

import dataclasses
import os
import time

import numpy as np
import tensorflow as tf

from tffre import registry
from tffre.data.federated import take_rows
from tffre.evaluation import main_output, make_evaluator
from tffre.runner.outputs import postfix, write_per_class

CENTRALISED = "Centralised"


def epochs_of(name, hparams, settings, client_sizes=None):
    """How many epochs the centralised run trains: as many examples as one federated run
    sees (at least one epoch). Uncapped, that is num_rounds x num_epochs passes over the
    sampled fraction of the data. With ``--num-iters`` (a cap on a client's steps a round)
    and the clients' training sizes, a sampled client of mean size trains
    min(num_iters x batch, num_epochs x its size) examples a round."""
    passes = settings.num_rounds * hparams.num_epochs * settings.clients_per_round \
        / settings.clients
    cap = getattr(hparams, "num_iters", None)
    if cap and client_sizes is not None and sum(client_sizes):
        total = float(sum(client_sizes))
        mean = total / len(client_sizes)
        seen = min(cap * settings.batch_size, hparams.num_epochs * mean)
        passes = settings.num_rounds * settings.clients_per_round * seen / total
    return max(1, int(round(passes)))


def centralised_runs(hparams, settings):
    """[(row name, hyperparameters)] of the centralised runs: one named "Centralised" with
    the first algorithm's ``hparams``; with ``--centralised-learning-rates``, one per rate,
    named "Centralised lr <rate>" (the report keeps the rate of best mean dev score, as a
    federated setting is chosen: :mod:`tffre.report`)."""
    rates = settings.centralised_learning_rates
    if not rates:
        return [(CENTRALISED, hparams)]
    return [(f"{CENTRALISED} lr {lr:g}", dataclasses.replace(hparams, learning_rate=lr))
            for lr in rates]


def run_centralised(prepared, name, hparams, settings, *, log, bar, save_model=None,
                    label=CENTRALISED):
    """Trains ``prepared``'s model on the pooled training data with algorithm ``name``'s local
    optimizer and ``hparams``' learning rate; each epoch is a metrics row of algorithm
    ``label``.

    Plain Keras steps over the pooled data, shuffled per epoch from the seed (each rate of a
    grid starts from the same initial model and order), evaluated after every epoch.
    """
    data, seed = prepared.data, settings.seed
    epochs = epochs_of(name, hparams, settings, data.sizes("train"))
    spec = registry.get_spec(name)
    local = registry.CLIENT_OPTIMIZERS[registry.client_optimizer_of(spec, hparams)]
    tf.keras.utils.set_random_seed(seed)
    task = prepared.model
    evaluator = make_evaluator(task.evaluation, task.model_fn, data, task.loss,
                               negative_label=task.negative_label, macro_f1=task.macro_f1,
                               train_loss=not settings.no_train_loss, **task.evaluation_options)
    model = evaluator.model
    if prepared.model.load_pretrained is not None:
        prepared.model.load_pretrained(model)
    optimizer = local.make(hparams)
    loss = prepared.model.loss

    @tf.function
    @tf.autograph.experimental.do_not_convert   # no Python control flow; spares a warning
    def step(x, y):
        with tf.GradientTape() as tape:
            batch_loss = tf.add_n([loss(y, main_output(model(x, training=True)))] + model.losses)
        grads = tape.gradient(batch_loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return batch_loss

    x, y = data.pooled("train")
    batch_size = settings.batch_size
    for epoch in range(1, epochs + 1):
        bar.set_description(f"{label} epoch {epoch}/{epochs}")
        start = time.perf_counter()
        order = np.random.RandomState([seed, epoch]).permutation(len(y))
        losses = [float(step(take_rows(x, order[i:i + batch_size]), y[order[i:i + batch_size]]))
                  for i in range(0, len(y), batch_size)]
        row = {"algorithm": label, "round": epoch,
               "round_seconds": time.perf_counter() - start, "bytes_broadcast": 0,
               "bytes_uploaded": 0, "local_train_loss": float(np.mean(losses)),
               "num_examples": int(len(y)), "num_excluded_clients": 0, "clients": "all"}
        row.update(evaluator.evaluate_model())
        bar.set_postfix(postfix(row))
        log.write(row)
        bar.update(1)
    if prepared.model.negative_label is not None:
        write_per_class(evaluator, data, log.out_dir, label, prepared.label_names)
    if save_model is not None:
        decision = evaluator.decision()
        save_model(os.path.join(log.out_dir, "models", label), prepared.model.saved_model(model),
                   label, epochs, {} if decision is None else {"decision": decision})
    return epochs
