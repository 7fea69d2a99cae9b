"""The round loop: several algorithms, the same clients, every round's metrics written at once.

For each algorithm it builds the process from the registry, starts from the
same initial weights (:mod:`tffre.runner.processes`), trains ``num_rounds``
rounds on clients drawn from (seed, round) with batches shuffled from (seed,
round), and evaluates the global model every ``eval_every`` rounds. So round r
is the same computation whether or not the run was interrupted before it
(:mod:`tffre.runner.checkpoints`). What it writes: :mod:`tffre.runner.outputs`.
"""

import os
import sys
import time

import numpy as np
import tensorflow as tf
from tqdm.auto import tqdm

from tffre import registry
from tffre.definition import TaskContext
from tffre.evaluation import EVALUATORS, evaluate_state, make_evaluator
from tffre.runner import privacy, processes
from tffre.runner.centralised import CENTRALISED, epochs_of, run_centralised
from tffre.runner.checkpoints import Checkpoints, restore_state, saved_state
from tffre.runner.outputs import (METRIC_COLUMNS, MetricsLog, postfix, prepare_out_dir,
                                  read_rows, round_row, warn_exclusions, write_per_class,
                                  write_summary)
from tffre.runtime import peak_rss_mib, shutdown_workers


def sample_clients(client_ids, clients_per_round, seed, round_num):
    """The clients of round ``round_num``: ``clients_per_round`` ids without replacement.

    Drawn from ``RandomState([seed, round_num])``, so a round's clients depend
    only on (seed, round), not on the rounds run before it (resumable runs). A seed of 2^32
    or more (differential privacy's secret one) enters as its two 32-bit words.
    """
    if not 1 <= clients_per_round <= len(client_ids):
        raise ValueError(f"clients_per_round must be between 1 and the {len(client_ids)} "
                         f"clients, got {clients_per_round}")
    words = [seed] if seed < 2 ** 32 else [seed % 2 ** 32, seed // 2 ** 32]
    rng = np.random.RandomState(words + [round_num])
    return [client_ids[i] for i in sorted(rng.choice(len(client_ids), clients_per_round,
                                                     replace=False))]


def data_seed(seed, round_num):
    """The shuffle seed of round ``round_num``'s client datasets."""
    return seed * 1_000_003 + round_num


def task_context(job, settings):
    """The :class:`tffre.definition.TaskContext` the algorithms of ``job`` are given."""
    server = None if job.server_data is None else \
        tf.data.Dataset.from_tensor_slices(job.server_data).batch(settings.batch_size)
    concepts = None if job.concepts is None else tuple(job.concepts)
    return TaskContext(num_clients=len(job.data.client_ids),
                       clients_per_round=settings.clients_per_round, concepts=concepts,
                       prompts=job.prompts, server_data=server)


def run_experiment(job, hparams, settings, *, save_model=None, reference=None):
    """Runs the algorithms of ``hparams`` on ``job``; writes metrics, checkpoints, models,
    summary and plot to ``settings.out``.

    Args:
      job: a :class:`tffre.runner.Job` (data, model, loss, evaluation).
      hparams: {algorithm name: its resolved hyperparameters}
        (:func:`tffre.registry.resolve_hparams`), run in this order.
      settings: the :class:`tffre.runner.RunSettings` (rounds, clients per round, batch
        size, seed, evaluation and checkpoint periods, output folder, resume or
        overwrite, progress, executor, centralised upper bound).
      save_model: optional callable(folder, keras_model, algorithm_name, round, extra) that
        writes a final model (e.g. a bundle); ``extra`` holds what the runner knows of it
        (``privacy``: its client-level (epsilon, delta) guarantee).
      reference: optional {algorithm: {"test_accuracy": v, "train_loss": v}} of published
        figures, drawn as reference lines.

    Returns:
      The summary dict that is also written to summary.json.
    """
    data, out_dir = job.data, settings.out
    if job.evaluation not in EVALUATORS:
        raise ValueError(f"unknown evaluation kind {job.evaluation!r}; valid: "
                         f"{', '.join(EVALUATORS)}")
    names = list(hparams)
    sample_clients(data.client_ids, settings.clients_per_round, settings.seed, 1)
    needs_server = [n for n in names if registry.get_spec(n).load_definition().needs_server_data]
    if needs_server and job.server_data is None:
        raise ValueError(f"{', '.join(needs_server)} needs the server's labelled set D_v "
                         f"(--server-fraction or --server-data)")
    context = task_context(job, settings)
    prepare_out_dir(out_dir, resume=settings.resume, overwrite=settings.overwrite)
    # Differential privacy: sigma calibrated, delta and the secret seed resolved (tffre.runner.privacy).
    private = {}
    for name in names:
        hparams[name], private[name] = privacy.prepare(name, hparams[name], settings,
                                                       len(data.client_ids))
    summary = {"dataset": data.name, "num_rounds": settings.num_rounds,
               "clients_per_round": settings.clients_per_round,
               "batch_size": settings.batch_size, "seed": settings.seed,
               "eval_every": settings.eval_every,
               # What the algorithms were given besides their hyperparameters.
               "task_context": {"num_clients": context.num_clients,
                                "concepts": None if context.concepts is None
                                else list(context.concepts), "prompts": context.prompts,
                                "server_examples": None if job.server_data is None
                                else len(job.server_data[1])},
               "algorithms": {}}
    old_rows = read_rows(os.path.join(out_dir, "metrics.csv")) if settings.resume else []
    centralised = epochs_of(names[0], hparams[names[0]], settings) \
        if settings.centralised else 0
    # The centralised run (after the federated ones) is redone on resume unless it finished.
    done_centralised = centralised and centralised == max(
        (r for a, r, _ in old_rows if a == CENTRALISED), default=0)
    bar = tqdm(total=settings.num_rounds * len(names) + centralised,
               disable=not settings.progress, unit="round", dynamic_ncols=True)
    log = None
    try:
        states = {name: _start(name, hparams[name], job, context, settings)
                  for name in names}
        columns = METRIC_COLUMNS + list(EVALUATORS[job.evaluation].columns)
        if any(private.values()):
            columns += privacy.COLUMNS
        # Rows kept on resume: up to each algorithm's checkpoint, and a finished centralised run.
        kept = [raw for a, r, raw in old_rows if (a in states and r <= states[a][3])
                or (a == CENTRALISED and done_centralised)]
        for name, (process, _, _, _) in states.items():
            # The clients that already received the broadcast's constant part (bytes).
            process.served.update(c for raw in kept if raw["algorithm"] == name
                                  for c in str(raw.get("clients") or "").split())
        log = MetricsLog(out_dir, columns, kept)
        for name in names:
            summary["algorithms"][name] = {"hparams": _public(hparams[name])}
            started = time.perf_counter()
            model = _train(name, job, settings, states[name], log, bar, private[name])
            extra = {}
            if private[name] is not None:
                extra["privacy"] = summary["algorithms"][name]["privacy"] = \
                    private[name].summary(settings.num_rounds)
            if job.negative_label is not None:
                write_per_class(model, data, out_dir, name, job.label_names)
            if save_model is not None:
                folder = os.path.join(out_dir, "models", name)
                save_model(folder, job.saved_model(model.model, states[name][0].wrap_model_fn),
                           name, settings.num_rounds, extra)
                summary["algorithms"][name]["model"] = os.path.relpath(folder, out_dir)
            if not states[name][3]:   # its whole run in this invocation (not resumed)
                summary["algorithms"][name]["wall_seconds"] = round(
                    time.perf_counter() - started, 1)   # rounds, evaluation, saving
        if centralised:
            summary["algorithms"][CENTRALISED] = {"epochs": centralised}
            if done_centralised:
                bar.update(centralised)
            else:
                started = time.perf_counter()
                run_centralised(job, names[0], hparams[names[0]], settings, log=log, bar=bar,
                                save_model=save_model)
                summary["algorithms"][CENTRALISED]["wall_seconds"] = round(
                    time.perf_counter() - started, 1)
    finally:
        bar.close()
        if log is not None:
            log.close()
        summary["peak_rss_mib"] = peak_rss_mib()
        shutdown_workers()
    return write_summary(out_dir, summary, title=job.title or data.name, reference=reference)


def _public(hparams):
    """The hyperparameters as a summary may show them: without the DP secret seed."""
    values = hparams.asdict()
    if values.get("dp_seed") is not None:
        values["dp_seed"] = "secret"
    return values


def _start(name, hp, job, context, settings):
    """(process, checkpoints, state, rounds done) of one algorithm, from its newest checkpoint
    when resuming."""
    process, state = processes.start(name, hp, job, context, settings)
    checkpoints = Checkpoints(os.path.join(settings.out, "checkpoints", name))
    done = 0
    if settings.resume:
        loaded, done = checkpoints.load_latest(saved_state(process, state, job.data.client_ids))
        if loaded is not None:
            state = restore_state(process, loaded)
    return process, checkpoints, state, done


def _train(name, job, settings, started, log, bar, private=None):
    """Runs one algorithm's rounds after those already done; returns its evaluator holding
    the final model. With DP (``private``) the clients are drawn from its secret seed, and
    each row states epsilon so far."""
    process, checkpoints, state, done = started
    data = job.data
    seed = settings.seed if private is None else private.seed
    bar.update(done)
    if done:
        tqdm.write(f"{name}: resuming after round {done}", file=sys.stderr)
    # Built after the process: Keras invalidates eager models when TFF later traces
    # model_fn in a graph.
    evaluator = make_evaluator(job.evaluation, process.model_fn, data, job.loss,
                               negative_label=job.negative_label, macro_f1=job.macro_f1,
                               train_loss=not settings.no_train_loss)
    for rnd in range(done + 1, settings.num_rounds + 1):
        bar.set_description(f"{name} round {rnd}/{settings.num_rounds}")
        clients = sample_clients(data.client_ids, settings.clients_per_round, seed, rnd)
        datasets = [data.client_dataset(c, "train", batch_size=settings.batch_size,
                                        seed=data_seed(settings.seed, rnd)) for c in clients]
        # Client ids key a stateful algorithm's kept state, and count the broadcast's
        # constant part once per client.
        output = process.next(state, datasets, client_ids=clients)
        state = output.state
        row = round_row(name, rnd, clients, output.metrics)
        if private is not None:
            row.update(private.columns(rnd, output.metrics))
        warn_exclusions(name, rnd, row, len(clients))
        if rnd % settings.eval_every == 0 or rnd == settings.num_rounds:
            row.update(evaluate_state(evaluator, process, state))
            bar.set_postfix(postfix(row))
        log.write(row)
        if rnd == settings.num_rounds or (settings.checkpoint_every
                                          and rnd % settings.checkpoint_every == 0):
            checkpoints.save(saved_state(process, state, data.client_ids), rnd)
        bar.update(1)
    evaluator.model_for(process.get_model_weights(state))
    return evaluator
