"""The experiment runner: several algorithms, the same clients, metrics to files.

For each algorithm it builds the process from the registry, starts from the
same initial weights (``tf.keras.utils.set_random_seed(seed)`` before the
model is built), samples the same clients each round (``RandomState(seed)``),
trains ``num_rounds`` rounds and evaluates the global model every
``eval_every`` rounds. Each row is appended to ``metrics.csv`` and flushed as
soon as it exists, so an interrupted run keeps what it computed.
"""

import csv
import json
import os
import time

import numpy as np
import pandas as pd
import tensorflow as tf
from tqdm.auto import tqdm

from tffre import algorithms
from tffre.evaluation import GlobalModelEvaluator
from tffre.plots import plot_curves
from tffre.runtime import peak_rss_mib, shutdown_workers

METRIC_COLUMNS = ["algorithm", "round", "train_loss", "test_accuracy", "round_seconds",
                  "bytes_broadcast", "bytes_uploaded", "local_train_loss", "num_examples",
                  "num_excluded_clients", "clients"]


def sample_clients(client_ids, clients_per_round, num_rounds, seed):
    """The clients of each round: ``clients_per_round`` ids without replacement, seeded."""
    if clients_per_round < 1:
        raise ValueError(f"clients_per_round must be >= 1, got {clients_per_round}")
    rng = np.random.RandomState(seed)
    k = min(clients_per_round, len(client_ids))
    return [[client_ids[i] for i in sorted(rng.choice(len(client_ids), k, replace=False))]
            for _ in range(num_rounds)]


def algorithm_hparams(name, hparams):
    """The subset of ``hparams`` that algorithm ``name`` takes (None values dropped)."""
    valid = algorithms.valid_hparams(name)
    return {k: v for k, v in hparams.items() if k in valid and v is not None}


def run_experiment(data, model_fn, *, loss, algorithm_names, num_rounds, clients_per_round,
                   out_dir, batch_size=10, seed=0, eval_every=1, hparams=None, metrics=None,
                   progress=True, title=None):
    """Runs ``algorithm_names`` on ``data`` and writes metrics.csv, summary.json and curves.png.

    Args:
      data: a :class:`tffre.data.FederatedData`.
      model_fn: no-arg callable returning a fresh, uncompiled Keras model.
      loss: the Keras loss.
      algorithm_names: registry names, e.g. ["fedavgs", "fedpap"].
      num_rounds, clients_per_round, batch_size, eval_every: as in FLCMC Table 7.
      out_dir: folder for the result files (created).
      seed: seeds client sampling, shuffling and model initialisation.
      hparams: shared hyperparameters (learning_rate, mu, stepsize, num_epochs,
        num_iters, granularity); each algorithm takes the ones it uses.
      metrics: optional Keras metric constructors for the training metrics.
      progress: show a progress bar.
      title: plot title.

    Returns:
      The summary dict that is also written to summary.json.
    """
    if num_rounds < 1:
        raise ValueError(f"num_rounds must be >= 1, got {num_rounds}")
    if eval_every < 1:
        raise ValueError(f"eval_every must be >= 1, got {eval_every}")
    names = [algorithms.get_spec(n).name for n in algorithm_names]
    hparams = dict(hparams or {})
    for name in names:  # fail before any work if a hyperparameter is invalid
        algorithms.resolve_hparams(name, **algorithm_hparams(name, hparams))
    os.makedirs(out_dir, exist_ok=True)
    csv_path = os.path.join(out_dir, "metrics.csv")
    schedule = sample_clients(data.client_ids, clients_per_round, num_rounds, seed)
    input_spec = data.element_spec()
    summary = {"dataset": data.name, "num_rounds": num_rounds,
               "clients_per_round": clients_per_round, "batch_size": batch_size, "seed": seed,
               "eval_every": eval_every, "algorithms": {}}
    bar = tqdm(total=num_rounds * len(names), disable=not progress, unit="round",
               dynamic_ncols=True)
    with open(csv_path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=METRIC_COLUMNS)
        writer.writeheader()
        f.flush()
        try:
            for name in names:
                tf.keras.utils.set_random_seed(seed)
                process = algorithms.build_algorithm(
                    name, model_fn, loss=loss, input_spec=input_spec, metrics=metrics,
                    **algorithm_hparams(name, hparams))
                # Built after the process: Keras invalidates eager models when
                # TFF later traces model_fn in a graph.
                evaluator = GlobalModelEvaluator(model_fn, data, loss)
                state = process.initialize()
                for rnd, clients in enumerate(schedule, start=1):
                    bar.set_description(f"{name} round {rnd}/{num_rounds}")
                    datasets = [data.client_dataset(c, "train", batch_size=batch_size,
                                                    seed=seed * 1_000_003 + rnd)
                                for c in clients]
                    output = process.next(state, datasets)
                    state = output.state
                    row = _row(name, rnd, clients, output.metrics)
                    if row["num_excluded_clients"]:
                        tqdm.write(f"warning: {name} round {rnd}: {row['num_excluded_clients']} "
                                   f"client update(s) had NaN/Inf and were excluded")
                    if rnd % eval_every == 0 or rnd == num_rounds:
                        row.update(evaluator(process.get_model_weights(state)))
                        bar.set_postfix(acc=f"{row['test_accuracy']:.3f}",
                                        loss=f"{row['train_loss']:.3f}")
                    writer.writerow(row)
                    f.flush()
                    bar.update(1)
                summary["algorithms"][name] = {"hparams": process.hparams}
        finally:
            bar.close()
            summary["peak_rss_mib"] = peak_rss_mib()
            shutdown_workers()
    frame = pd.read_csv(csv_path)
    for name in summary["algorithms"]:
        summary["algorithms"][name].update(summarise(frame[frame["algorithm"] == name]))
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    plot_curves(frame, os.path.join(out_dir, "curves.png"), title=title or data.name)
    return summary


def _row(name, rnd, clients, m):
    train = m["client_work"]["train"]
    return {"algorithm": name, "round": rnd, "train_loss": None, "test_accuracy": None,
            "round_seconds": m["round"]["wall_seconds"],
            "bytes_broadcast": m["round"]["bytes_broadcast"],
            "bytes_uploaded": m["round"]["bytes_uploaded"],
            "local_train_loss": float(train["loss"]), "num_examples": int(train["num_examples"]),
            "num_excluded_clients": int(m["client_work"]["num_excluded_clients"]),
            "clients": " ".join(clients)}


def summarise(rows):
    """Table 8-style figures for one algorithm's metric rows."""
    evaluated = rows.dropna(subset=["test_accuracy"])
    best = evaluated.loc[evaluated["test_accuracy"].idxmax()]
    return {"max_test_accuracy": float(best["test_accuracy"]),
            "round_of_max_accuracy": int(best["round"]),
            "min_train_loss": float(evaluated["train_loss"].min()),
            "final_test_accuracy": float(evaluated["test_accuracy"].iloc[-1]),
            "mean_round_ms": float(rows["round_seconds"].mean() * 1000),
            "median_round_ms": float(rows["round_seconds"].median() * 1000),
            "bytes_uploaded_per_round": float(rows["bytes_uploaded"].mean()),
            "bytes_broadcast_per_round": float(rows["bytes_broadcast"].mean()),
            "rounds": int(rows["round"].max())}
