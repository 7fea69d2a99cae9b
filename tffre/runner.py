"""The experiment runner: several algorithms, the same clients, metrics to files, resumable.

For each algorithm it builds the process from the registry, starts from the
same initial weights (``tf.keras.utils.set_random_seed(seed)`` before the
model is built), trains ``num_rounds`` rounds on clients drawn from
(seed, round) and batches shuffled from (seed, round), and evaluates the
global model every ``eval_every`` rounds. So round r is the same computation
whether or not the run was interrupted before it.

Files in ``out_dir``:

* ``metrics.csv``: one row per algorithm and round, appended and flushed as
  soon as it exists;
* ``checkpoints/<algorithm>/``: the server state every ``checkpoint_every``
  rounds and at the last round, with ``tff.program.FileProgramStateManager``;
  ``resume=True`` continues from there, dropping the rows after the
  checkpoint (they are recomputed identically);
* ``models/<algorithm>/``: the final global model (see :mod:`tffre.bundle`),
  when ``save_model`` is given;
* ``summary.json`` (NaN written as null) and ``curves.png``.
"""

import asyncio
import collections
import csv
import os
import shutil
import sys

import numpy as np
import pandas as pd
import tensorflow as tf
import tensorflow_federated as tff
from tqdm.auto import tqdm

from tffre import algorithms, registry
from tffre.registry import algorithm_hparams
from tffre.data.federated import take_rows
from tffre.evaluation import EVALUATORS, make_evaluator
from tffre.jsonio import write_json
from tffre.plots import plot_curves
from tffre.runtime import peak_rss_mib, shutdown_workers

METRIC_COLUMNS = ["algorithm", "round", "train_loss", "test_accuracy", "dev_accuracy",
                  "test_f1", "dev_f1", "round_seconds", "bytes_broadcast", "bytes_uploaded",
                  "local_train_loss", "num_examples", "num_excluded_clients", "clients"]
TIMING_COLUMNS = ("round_seconds",)
OUTPUT_NAMES = ("metrics.csv", "summary.json", "curves.png", "checkpoints", "models", "per_class")


def sample_clients(client_ids, clients_per_round, seed, round_num):
    """The clients of round ``round_num``: ``clients_per_round`` ids without replacement.

    Drawn from ``RandomState([seed, round_num])``, so a round's clients depend
    only on (seed, round), not on the rounds run before it (resumable runs).
    """
    if not 1 <= clients_per_round <= len(client_ids):
        raise ValueError(f"clients_per_round must be between 1 and the {len(client_ids)} "
                         f"clients, got {clients_per_round}")
    rng = np.random.RandomState([seed, round_num])
    return [client_ids[i] for i in sorted(rng.choice(len(client_ids), clients_per_round,
                                                     replace=False))]


def data_seed(seed, round_num):
    """The shuffle seed of round ``round_num``'s client datasets."""
    return seed * 1_000_003 + round_num


def prepare_out_dir(out_dir, *, resume=False, overwrite=False):
    """Creates ``out_dir``; refuses one that holds results unless resuming or overwriting.

    ``overwrite`` removes only the files this runner writes.
    """
    existing = [n for n in OUTPUT_NAMES if os.path.exists(os.path.join(out_dir, n))]
    if resume and "metrics.csv" not in existing:
        raise ValueError(f"{out_dir}: no metrics.csv to resume")
    if existing and not (resume or overwrite):
        raise ValueError(f"{out_dir} already holds results ({', '.join(existing)}); resume "
                         f"or overwrite it")
    if overwrite:
        for name in existing:
            path = os.path.join(out_dir, name)
            shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    os.makedirs(out_dir, exist_ok=True)


class Checkpoints:
    """The server state of one algorithm, saved by round with TFF's ``FileProgramStateManager``."""

    def __init__(self, root_dir):
        self.manager = tff.program.FileProgramStateManager(root_dir, prefix="round_",
                                                           keep_total=2, keep_first=False)

    def save(self, state, round_num):
        """Saves ``state`` as version ``round_num``."""
        asyncio.run(self.manager.save(state, round_num))

    def load_latest(self, structure):
        """(state, round) of the newest readable checkpoint, or (None, 0).

        A checkpoint cut short by a kill cannot be read; it is removed and the
        one before it is used.
        """
        versions = asyncio.run(self.manager.get_versions()) or []
        for version in sorted(versions, reverse=True):
            try:
                return asyncio.run(self.manager.load(version, structure)), version
            except Exception as err:  # a partial SavedModel raises several types
                _warn(f"checkpoint round {version} is unreadable ({type(err).__name__}); "
                      f"trying the one before")
                shutil.rmtree(self.manager._get_path_for_version(version), ignore_errors=True)
        return None, 0


def _read_rows(csv_path):
    """The rows of an existing metrics.csv as (algorithm, round, raw dict) in file order."""
    if not os.path.isfile(csv_path):
        return []
    with open(csv_path, newline="") as f:
        return [(r["algorithm"], int(r["round"]), r) for r in csv.DictReader(f)]


def run_experiment(data, model_fn, *, loss, algorithm_names, num_rounds, clients_per_round,
                   out_dir, batch_size=10, seed=0, eval_every=1, hparams=None, metrics=None,
                   progress=True, title=None, checkpoint_every=5, resume=False, overwrite=False,
                   save_model=None, reference=None, load_pretrained=None, executor="auto",
                   max_parallel_clients=1, loop="while", client_workers="threads",
                   negative_label=None, centralised=None,
                   class_names=None, server_data=None, context=None, macro_f1=False,
                   evaluation="classification"):
    """Runs ``algorithm_names`` on ``data``; writes metrics, checkpoints, models, summary, plot.

    Args:
      data: a :class:`tffre.data.FederatedData`; a "dev" split, when every
        client has one, is evaluated too.
      model_fn: no-arg callable returning a fresh, uncompiled Keras model.
      loss: the Keras loss.
      algorithm_names: registry names, e.g. ["fedavgs", "fedpap"].
      num_rounds, clients_per_round, batch_size, eval_every: as in FLCMC Table 7.
      out_dir: folder for the result files.
      seed: seeds client sampling, shuffling and model initialisation.
      hparams: shared hyperparameters (learning_rate, mu, stepsize, num_epochs,
        num_iters, granularity, client_weighting, keep_optimizer_state); each
        algorithm takes the ones it uses.
      metrics: optional Keras metric constructors for the training metrics.
      progress: show a progress bar.
      title: plot title.
      checkpoint_every: save the server state every N rounds (0: only after
        the last round).
      resume: continue from the checkpoints and metrics already in ``out_dir``.
      overwrite: replace the results already in ``out_dir``.
      save_model: optional callable (folder, keras_model, algorithm_name,
        round) that writes the final global model (e.g. a bundle).
      reference: optional {algorithm: {"test_accuracy": v, "train_loss": v}}
        of published figures, drawn as reference lines.
      load_pretrained: optional callable(keras_model) that puts pretrained
        weights into a model of ``model_fn``; they enter the server state
        after ``initialize`` with ``set_model_weights`` (never as graph
        constants: TFF issue #2313).
      executor, max_parallel_clients, loop, client_workers: see
        :func:`tffre.algorithms.build_algorithm`.
      negative_label: index of the "no relation" class: also report relation
        F1 (``test_f1``, ``dev_f1``; :func:`tffre.metrics.relation_f1`) and
        write each final model's per-class table to ``per_class/<algorithm>.csv``.
      class_names: the class names, for the per-class tables.
      server_data: the server's labelled set D_v as (x, y) arrays, for the algorithms
        that take it (FedED); batched by ``batch_size``.
      context: {hyperparameter: value} of the task, given to the algorithms that take
        it (FedCB's ``concepts`` and ``prompts``); the run's client count goes to those
        that take ``num_clients`` (FedDyn).
      macro_f1: also report macro-F1 over the classes (``test_f1``, ``dev_f1``; FedCB's
        image tables).
      evaluation: the evaluation kind, a key of :data:`tffre.evaluation.EVALUATORS`:
        "classification" (accuracy, and F1 as above) or "docre" (document-level RE:
        P/R/F1 of the relations over candidate pairs, with intra/inter-sentence and Ign
        F1 where the data is annotated); its extra columns join metrics.csv.
      centralised: optional {"epochs": E, "optimizer_fn": no-arg callable}:
        also train the same model on the union of the clients' training data
        (the upper bound), written as algorithm "Centralised", one row per epoch.

    Returns:
      The summary dict that is also written to summary.json.
    """
    if num_rounds < 1:
        raise ValueError(f"num_rounds must be >= 1, got {num_rounds}")
    if eval_every < 1:
        raise ValueError(f"eval_every must be >= 1, got {eval_every}")
    if checkpoint_every < 0:
        raise ValueError(f"checkpoint_every must be >= 0, got {checkpoint_every}")
    if evaluation not in EVALUATORS:
        raise ValueError(f"unknown evaluation kind {evaluation!r}; valid: "
                         f"{', '.join(EVALUATORS)}")
    columns = METRIC_COLUMNS + list(EVALUATORS[evaluation].columns)
    names = [registry.get_spec(n).name for n in algorithm_names]
    hparams = dict(hparams or {})
    resolved = {n: registry.resolve_hparams(n, **algorithm_hparams(n, hparams)) for n in names}
    sample_clients(data.client_ids, clients_per_round, seed, 1)  # fail early if too many
    needs_server = [n for n in names if "server_data" in registry.valid_hparams(n)]
    if needs_server and server_data is None:
        raise ValueError(f"{', '.join(needs_server)} needs the server's labelled set D_v "
                         f"(--server-fraction or --server-data)")
    for name in needs_server:
        resolved[name]["server_data"] = f"{len(server_data[1])} examples"
    # Task values the algorithms take: the population (FedDyn's m), FedCB's concepts, ...
    context = {"num_clients": len(data.client_ids), **(context or {})}
    population = {n: {k: v for k, v in context.items()
                      if k in registry.valid_hparams(n) and v is not None} for n in names}
    for name, extra in population.items():
        resolved[name].update(extra)
    prepare_out_dir(out_dir, resume=resume, overwrite=overwrite)
    csv_path = os.path.join(out_dir, "metrics.csv")
    input_spec = data.element_spec()
    summary = {"dataset": data.name, "num_rounds": num_rounds,
               "clients_per_round": clients_per_round, "batch_size": batch_size, "seed": seed,
               "eval_every": eval_every, "algorithms": {}}

    old_rows = _read_rows(csv_path) if resume else []
    # The centralised run (after the federated ones) is redone on resume unless it finished.
    done_centralised = centralised is not None and centralised["epochs"] == max(
        (r for a, r, _ in old_rows if a == CENTRALISED), default=0)
    total = num_rounds * len(names) + (centralised["epochs"] if centralised is not None else 0)
    bar = tqdm(total=total, disable=not progress, unit="round", dynamic_ncols=True)
    states = {}
    try:
        # Decide, per algorithm, the round to continue from: its newest readable checkpoint.
        for name in names:
            tf.keras.utils.set_random_seed(seed)
            extra = {"server_data": tf.data.Dataset.from_tensor_slices(
                server_data).batch(batch_size)} if name in needs_server else {}
            extra.update(population.get(name, {}))
            build = dict(loss=loss, input_spec=input_spec, metrics=metrics, executor=executor,
                         max_parallel_clients=max_parallel_clients, loop=loop,
                         client_workers=client_workers,
                         **algorithm_hparams(name, hparams), **extra)
            process, state = _process(name, model_fn, build, seed, load_pretrained,
                                      cacheable=name not in needs_server)
            checkpoints = Checkpoints(os.path.join(out_dir, "checkpoints", name))
            done = 0
            if resume:
                loaded, done = checkpoints.load_latest(_saved(process, state, data.client_ids))
                if loaded is not None:
                    state = _restore(process, loaded)
            states[name] = (process, checkpoints, state, done)
        # Rows kept on resume: up to each algorithm's checkpoint, and a finished centralised run.
        kept = [raw for a, r, raw in old_rows if (a in states and r <= states[a][3])
                or (a == CENTRALISED and done_centralised)]
        for name, (process, _, _, _) in states.items():
            # The clients that already received the broadcast's constant part (bytes).
            process.served.update(c for raw in kept if raw["algorithm"] == name
                                  for c in str(raw.get("clients") or "").split())
        with open(csv_path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(kept)
            f.flush()
            for name in names:
                process, checkpoints, state, done = states[name]
                summary["algorithms"][name] = {"hparams": resolved[name]}
                bar.update(done)
                if done:
                    tqdm.write(f"{name}: resuming after round {done}", file=sys.stderr)
                # Built after the process: Keras invalidates eager models when
                # TFF later traces model_fn in a graph.
                evaluator = make_evaluator(evaluation, process.model_fn, data, loss,
                                           negative_label=negative_label, macro_f1=macro_f1)
                for rnd in range(done + 1, num_rounds + 1):
                    bar.set_description(f"{name} round {rnd}/{num_rounds}")
                    clients = sample_clients(data.client_ids, clients_per_round, seed, rnd)
                    datasets = [data.client_dataset(c, "train", batch_size=batch_size,
                                                    seed=data_seed(seed, rnd)) for c in clients]
                    # Stateful algorithms key each client's kept state by its id.
                    # Client ids key a stateful algorithm's kept state, and count the
                    # broadcast's constant part once per client.
                    output = process.next(state, datasets, client_ids=clients)
                    state = output.state
                    row = _row(name, rnd, clients, output.metrics)
                    _warn_exclusions(name, rnd, row, len(clients))
                    if rnd % eval_every == 0 or rnd == num_rounds:
                        row.update(evaluate(evaluator, process, state))
                        bar.set_postfix(_postfix(row))
                    writer.writerow(row)
                    f.flush()
                    if rnd == num_rounds or (checkpoint_every and rnd % checkpoint_every == 0):
                        checkpoints.save(_saved(process, state, data.client_ids), rnd)
                    bar.update(1)
                evaluator.model_for(process.get_model_weights(state))
                if negative_label is not None:
                    write_per_class(evaluator, data, out_dir, name, class_names)
                if save_model is not None:
                    folder = os.path.join(out_dir, "models", name)
                    save_model(folder, evaluator.model, name, num_rounds)
                    summary["algorithms"][name]["model"] = os.path.relpath(folder, out_dir)
            if centralised is not None:
                summary["algorithms"][CENTRALISED] = {"epochs": centralised["epochs"]}
                if done_centralised:
                    bar.update(centralised["epochs"])
                else:
                    run_centralised(data, model_fn, loss=loss, writer=writer, file=f,
                                    batch_size=batch_size, seed=seed,
                                    negative_label=negative_label, macro_f1=macro_f1,
                                    load_pretrained=load_pretrained, bar=bar,
                                    save_model=save_model, out_dir=out_dir,
                                    class_names=class_names, evaluation=evaluation,
                                    **centralised)
    finally:
        bar.close()
        summary["peak_rss_mib"] = peak_rss_mib()
        shutdown_workers()
    frame = pd.read_csv(csv_path)
    for name in summary["algorithms"]:
        summary["algorithms"][name].update(summarise(frame[frame["algorithm"] == name]))
    write_json(os.path.join(out_dir, "summary.json"), summary)
    plot_curves(frame, os.path.join(out_dir, "curves.png"), title=title or data.name,
                reference=reference)
    return summary


CENTRALISED = "Centralised"
_PROCESS_CACHE = None


def reuse_processes(enabled=True):
    """Keep the processes :func:`run_experiment` builds, for its later calls in this Python
    process (e.g. an example's seeds and betas): building and tracing a ResNet-18 round
    takes longer than ten of its rounds.

    A process is reused when the algorithm, its hyperparameters, the model's architecture,
    the input spec, the loss and the executor settings are all the same; its client
    states are cleared and each run starts from the initial weights of its own seed, as
    a fresh build would. (Server extras start from the first build's; no algorithm of the
    FedCB tables draws them at random.) Processes given a server set (FedED) are not
    kept.
    """
    global _PROCESS_CACHE
    _PROCESS_CACHE = {} if enabled else None


def _architecture(model_fn):
    """The layer types and weight shapes of ``model_fn``'s model (not its values)."""
    model = model_fn()
    return tuple((type(layer).__name__, tuple(tuple(w.shape) for w in layer.weights))
                 for layer in model.layers)


def _process(name, model_fn, build, seed, load_pretrained=None, cacheable=True):
    """(process, initial state) of algorithm ``name``: built, or reused (:func:`reuse_processes`).

    Either way the state starts from the weights of a model built right after
    ``set_random_seed(seed)``, so a seed gives the same run with or without reuse,
    with ``load_pretrained``'s weights in it when given (they enter the server
    state here, after ``initialize``, never through ``model_fn``).
    """
    if _PROCESS_CACHE is None or not cacheable:
        process = algorithms.build_algorithm(name, model_fn, **build)
    else:
        key = (registry.get_spec(name).name, repr(sorted(
            (k, repr(v)) for k, v in build.items()
            if k not in ("loss", "metrics", "input_spec"))),
            repr(build["input_spec"]), repr(build["loss"].get_config()),
            repr([m().name for m in build["metrics"] or ()]), _architecture(model_fn))
        process = _PROCESS_CACHE.get(key)
        if process is None:
            process = _PROCESS_CACHE[key] = algorithms.build_algorithm(name, model_fn, **build)
        process.client_states = {}
        process.served = set()
    tf.keras.utils.set_random_seed(seed)
    weights = pretrained_weights(process.model_fn, load_pretrained)
    return process, process.set_model_weights(process.initialize(), weights)


def _saved(process, state, client_ids):
    """What a checkpoint holds: the server state, and for a stateful algorithm every client's
    kept state too (the initial one for clients not trained yet), so a resumed run goes on
    with the same client states."""
    if not process.stateful:
        return state
    clients = collections.OrderedDict(
        (c, process.client_states[c] if c in process.client_states
         else process.initial_client_state()) for c in client_ids)
    return collections.OrderedDict(server=state, clients=clients)


def _restore(process, loaded):
    """The server state of a loaded checkpoint; a stateful process gets its client states back."""
    if not process.stateful:
        return loaded
    process.client_states = dict(loaded["clients"])
    return loaded["server"]


def _postfix(row):
    shown = {"acc": row["test_accuracy"], "loss": row["train_loss"]}
    if row.get("test_f1") is not None:
        shown["f1"] = row["test_f1"]
    return {k: f"{v:.3f}" for k, v in shown.items()}


def write_per_class(evaluator, data, out_dir, name, class_names=None):
    """Writes ``per_class/<name>.csv``: the evaluation model's test P/R/F1 per class (FedED
    Table 6's layout) and the micro row over the positive classes."""
    from tffre.metrics import per_class_table
    _, preds = evaluator.predictions("test")
    y = np.asarray(data.pooled("test")[1]).reshape(-1)
    names = list(class_names or range(data.num_classes))
    table = per_class_table([names[i] for i in y], [names[i] for i in preds], names,
                            negative_label=names[evaluator.negative_label])
    os.makedirs(os.path.join(out_dir, "per_class"), exist_ok=True)
    table.to_csv(os.path.join(out_dir, "per_class", f"{name}.csv"), index=False)


def run_centralised(data, model_fn, *, loss, writer, file, epochs, optimizer_fn, batch_size,
                    seed, negative_label, load_pretrained, bar, save_model, out_dir,
                    class_names=None, macro_f1=False, evaluation="classification"):
    """The upper bound: the same model trained on the union of the clients' training data.

    Plain Keras steps over the pooled data (shuffled per epoch from the seed), evaluated after
    every epoch; each epoch is a metrics row of algorithm "Centralised".
    """
    import time
    tf.keras.utils.set_random_seed(seed)
    evaluator = make_evaluator(evaluation, model_fn, data, loss, negative_label=negative_label,
                               macro_f1=macro_f1)
    model = evaluator.model
    if load_pretrained is not None:
        load_pretrained(model)
    optimizer = optimizer_fn()
    from tffre.evaluation import main_output

    @tf.function
    @tf.autograph.experimental.do_not_convert   # no Python control flow; spares a warning
    def step(x, y):
        with tf.GradientTape() as tape:
            batch_loss = tf.add_n([loss(y, main_output(model(x, training=True)))] + model.losses)
        grads = tape.gradient(batch_loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return batch_loss

    x, y = data.pooled("train")
    for epoch in range(1, epochs + 1):
        bar.set_description(f"{CENTRALISED} epoch {epoch}/{epochs}")
        start = time.perf_counter()
        order = np.random.RandomState([seed, epoch]).permutation(len(y))
        losses = [float(step(take_rows(x, order[i:i + batch_size]), y[order[i:i + batch_size]]))
                  for i in range(0, len(y), batch_size)]
        row = {"algorithm": CENTRALISED, "round": epoch,
               "round_seconds": time.perf_counter() - start, "bytes_broadcast": 0,
               "bytes_uploaded": 0, "local_train_loss": float(np.mean(losses)),
               "num_examples": int(len(y)), "num_excluded_clients": 0, "clients": "all"}
        row.update(evaluator.evaluate_model())
        bar.set_postfix(_postfix(row))
        writer.writerow(row)
        file.flush()
        bar.update(1)
    if negative_label is not None:
        write_per_class(evaluator, data, out_dir, CENTRALISED, class_names)
    if save_model is not None:
        save_model(os.path.join(out_dir, "models", CENTRALISED), model, CENTRALISED, epochs)


def evaluate(evaluator, process, state):
    """The metrics of the round's model: the global model's, or for an algorithm evaluated as
    personal models (FedRep) the mean over the clients trained so far of the global model
    with each one's personal weights (the global model's before any client has trained)."""
    weights = process.get_model_weights(state)
    personal = getattr(process, "personal_indices", ())
    if getattr(process, "evaluation", "global") != "personal" or not personal:
        return evaluator(weights)
    kept = [s for _, s in sorted(process.client_states.items()) if float(s["seen"]) > 0]
    if not kept:
        return evaluator(weights)
    rows = []
    held_out = [s for s in evaluator.splits if s != "train"]
    for client_state in kept:
        trainable = list(weights.trainable)
        for j, i in enumerate(personal):
            trainable[i] = client_state["personal"][j]
        rows.append(evaluator(tff.learning.models.ModelWeights(
            trainable=trainable, non_trainable=list(weights.non_trainable)), held_out))
    out = {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}
    # The training loss stays the global model's (one pass, not one per client).
    out["train_loss"] = evaluator(weights, ("train",))["train_loss"]
    return out


def pretrained_weights(model_fn, load_pretrained=None):
    """``ModelWeights`` (numpy) of a fresh model of ``model_fn`` after ``load_pretrained``
    (when given)."""
    model = model_fn()
    if load_pretrained is not None:
        load_pretrained(model)
    return tff.learning.models.ModelWeights(
        trainable=[v.numpy() for v in model.trainable_weights],
        non_trainable=[v.numpy() for v in model.non_trainable_weights])


def _warn(message):
    """A warning on stderr that does not break the progress bar."""
    tqdm.write(f"warning: {message}", file=sys.stderr)


def _warn_exclusions(name, rnd, row, num_clients):
    excluded = row["num_excluded_clients"]
    if excluded == num_clients:
        _warn(f"{name} round {rnd}: every client update had NaN/Inf; the round was empty and "
              f"the global model was kept")
    elif excluded:
        _warn(f"{name} round {rnd}: {excluded} client update(s) had NaN/Inf and were excluded")


def _row(name, rnd, clients, m):
    train = m["client_work"]["train"]
    num_examples = int(train["num_examples"])
    return {"algorithm": name, "round": rnd, "train_loss": None, "test_accuracy": None,
            "dev_accuracy": None, "round_seconds": m["round"]["wall_seconds"],
            "bytes_broadcast": m["round"]["bytes_broadcast"],
            "bytes_uploaded": m["round"]["bytes_uploaded"],
            # An empty round has no local loss (TFF reports 0.0): write it as missing.
            "local_train_loss": float(train["loss"]) if num_examples else None,
            "num_examples": num_examples,
            "num_excluded_clients": int(m["client_work"]["num_excluded_clients"]),
            "clients": " ".join(clients)}


def _selected(evaluated, metric, round_suffix):
    """Max, its round and the final value of ``test_<metric>``; and, where a dev split was
    evaluated, the test value at the round of best ``dev_<metric>``."""
    test, dev = f"test_{metric}", f"dev_{metric}"
    if test not in evaluated:
        return {}
    rows = evaluated.dropna(subset=[test])
    if rows.empty:
        return {}
    best = rows.loc[rows[test].idxmax()]
    out = {f"max_test_{metric}": float(best[test]), f"round_of_max_{metric}": int(best["round"]),
           f"final_test_{metric}": float(rows[test].iloc[-1])}
    # The other test scores of the selected rounds (document RE: P, R, intra/inter, Ign F1).
    others = [c for c in rows.columns if c.startswith("test_")
              and c not in (test, "test_accuracy")] if metric == "f1" else []
    for column in others:
        if pd.notna(rows[column].iloc[-1]):
            out[f"final_{column}"] = float(rows[column].iloc[-1])
    chosen = rows.dropna(subset=[dev])
    if not chosen.empty:
        at = chosen.loc[chosen[dev].idxmax()]
        out.update({f"best_dev_{metric}": float(at[dev]),
                    f"round_of_best_dev{round_suffix}": int(at["round"]),
                    f"test_{metric}_at_best_dev": float(at[test])})
        for column in others:
            if pd.notna(at[column]):
                out[f"{column}_at_best_dev"] = float(at[column])
    return out


def summarise(rows):
    """The figures of one algorithm's metric rows.

    ``max_test_accuracy`` is the maximum over rounds, as the paper's tables
    report it (it selects on the test set). Where a dev split was evaluated,
    ``test_accuracy_at_best_dev`` is the test accuracy at the round of best
    dev accuracy, the figure without that selection.
    """
    evaluated = rows.dropna(subset=["test_accuracy"])
    out = {"rounds": int(rows["round"].max()),
           "mean_round_ms": float(rows["round_seconds"].mean() * 1000),
           "median_round_ms": float(rows["round_seconds"].median() * 1000),
           "bytes_uploaded_per_round": float(rows["bytes_uploaded"].mean()),
           "bytes_broadcast_per_round": float(rows["bytes_broadcast"].mean()),
           "empty_rounds": int((rows["num_examples"] == 0).sum())}
    if evaluated.empty:
        return out
    out.update(min_train_loss=float(evaluated["train_loss"].min()))
    out.update(_selected(evaluated, "accuracy", ""))
    out.update(_selected(evaluated, "f1", "_f1"))
    return out
