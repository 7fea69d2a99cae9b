"""A simulated run: several algorithms, the same clients, every round's metrics written at once.

For each algorithm it builds the process from the registry, starts from the
same initial weights (:mod:`tffre.runner.processes`), and drives its rounds
with the loop a deployment drives too (:class:`tffre.runner.rounds.AlgorithmRounds`):
its clients (:class:`SimulatedRounds`) are ``clients_per_round`` drawn from
(seed, round), trained by the process's executor (in this process, in worker
processes, or in TFF's runtime) on batches shuffled from (seed, round), and the
global model is evaluated on the pooled held-out data every ``eval_every``
rounds. So round r is the same computation whether or not the run was
interrupted before it (:mod:`tffre.runner.checkpoints`). What it writes:
:mod:`tffre.runner.rounds` and :mod:`tffre.runner.outputs`.
"""

import os
import time

import numpy as np
from tqdm.auto import tqdm

from tffre import registry
from tffre.definition import TaskContext
from tffre.evaluation import EVALUATORS, evaluate_state, make_evaluator
from tffre.faults import UploadFaults, choose_faulty, label_permutation
from tffre.jsonio import write_json
from tffre.runner import privacy, processes
from tffre.runner.centralised import centralised_runs, epochs_of, run_centralised
from tffre.runner.checkpoints import restore_state, saved_state
from tffre.runner.outputs import postfix, warn, write_per_class
from tffre.runner.per_site import SITE_COLUMNS, PerSiteLog, summarise
from tffre.runner.rounds import (AlgorithmRounds, ClientRounds, RoundOutput, RunRecord,
                                 metric_columns, open_run, record_run, summary_head)
from tffre.runtime import shutdown_workers


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


def run_experiment(prepared, hparams, settings, *, save_model=None, reference=None, config=None,
                   inputs=None):
    """Runs the algorithms of ``hparams`` on ``prepared``; writes metrics, checkpoints, models,
    summary and plot to ``settings.out``.

    Args:
      prepared: a :class:`tffre.runner.PreparedTask` (data and its TaskModel: model, loss,
        evaluation).
      hparams: {algorithm name: its resolved hyperparameters}
        (:func:`tffre.registry.resolve_hparams`), run in this order.
      settings: the :class:`tffre.runner.RunSettings` (rounds, clients per round, batch
        size, seed, evaluation and checkpoint periods, output folder, resume or
        overwrite, progress, executor, centralised upper bound).
      save_model: optional callable(folder, keras_model, algorithm_name, round, extra) that
        writes a final model (e.g. a bundle: :func:`tffre.runner.rounds.bundle_saver`);
        ``extra`` holds what the runner knows of it (``privacy``: its client-level
        (epsilon, delta) guarantee).
      reference: optional {algorithm: {"test_accuracy": v, "train_loss": v}} of published
        figures, drawn as reference lines.
      config: optional JSON-safe configuration written to ``config.json`` once every
        algorithm has started: a resume refused then (``--num-rounds`` below the rounds
        already trained) leaves the saved one as it was.
      inputs: optional {option: file or folder} the run reads, recorded by SHA-256 in the
        summary's ``provenance``.

    Returns:
      The summary dict that is also written to summary.json.
    """
    data, out_dir = prepared.data, settings.out
    if prepared.model.evaluation not in EVALUATORS:
        raise ValueError(f"unknown evaluation kind {prepared.model.evaluation!r}; valid: "
                         f"{', '.join(EVALUATORS)}")
    names = list(hparams)
    sample_clients(data.client_ids, settings.clients_per_round, settings.seed, 1)
    needs_server = [n for n in names if registry.get_spec(n).load_definition().needs_server_data]
    if needs_server and prepared.server_data is None:
        raise ValueError(f"{', '.join(needs_server)} needs the server's labelled set D_v "
                         f"(--server-fraction or --server-data)")
    started = time.perf_counter()
    context = TaskContext.of(num_clients=len(data.client_ids),
                             clients_per_round=settings.clients_per_round,
                             concepts=prepared.concepts, prompts=prepared.prompts,
                             server_arrays=prepared.server_data, batch_size=settings.batch_size)
    open_run(settings, names)
    # Differential privacy: sigma calibrated, delta and the secret seed resolved
    # (tffre.runner.privacy).
    private = {}
    for name in names:
        hparams[name], private[name] = privacy.calibrate(name, hparams[name], settings,
                                                       len(data.client_ids))
    head = summary_head(
        data.name, settings, clients_per_round=settings.clients_per_round, context=context,
        server_examples=None if prepared.server_data is None else len(prepared.server_data[1]))
    if settings.faulty_clients:   # the simulated faulty sites, named (tffre.faults)
        head["faults"] = {"kind": str(settings.fault), "clients": faulty_setup(data, settings)[0]}
    record = RunRecord(out_dir, head,
                       resume=settings.resume, save_model=save_model, started=started,
                       inputs=inputs)
    centralised = epochs_of(names[0], hparams[names[0]], settings, data.sizes("train")) \
        if settings.centralised else 0
    central_runs = centralised_runs(hparams[names[0]], settings) if centralised else []
    # Each centralised run (after the federated ones) is redone on resume unless it finished.
    done_centralised = {label for label, _ in central_runs if centralised == max(
        (r for a, r, _ in record.old_rows if a == label), default=0)}
    bar = tqdm(total=settings.num_rounds * len(names) + centralised * len(central_runs),
               disable=not settings.progress, unit="round", dynamic_ncols=True)
    def served(kept):
        for algorithm in algorithms:
            # The clients that already received the broadcast's constant part (bytes).
            algorithm.where.process.served.update(
                c for raw in kept if raw["algorithm"] == algorithm.name
                for c in str(raw.get("clients") or "").split())

    def centralised_runs_after():
        for label, central_hparams in central_runs:
            entry = record.summary["algorithms"][label] = {"epochs": centralised}
            if settings.centralised_learning_rates:
                entry["learning_rate"] = central_hparams.learning_rate
            if label in done_centralised:
                bar.update(centralised)
            else:
                begun = time.perf_counter()
                run_centralised(prepared, names[0], central_hparams, settings, log=record.log,
                                bar=bar, save_model=save_model, label=label)
                entry["wall_seconds"] = round(time.perf_counter() - begun, 1)

    sites_log = None
    try:
        algorithms = [_start(name, hparams[name], prepared, context, settings, bar, private[name])
                      for name in names]
        if config is not None:
            write_json(os.path.join(out_dir, "config.json"), config)
        evaluator_kind = EVALUATORS[prepared.model.evaluation]
        columns = metric_columns(evaluator_kind.columns + (SITE_COLUMNS if
                                                           evaluator_kind.per_site else ()),
                                 private=any(p is not None for p in private.values()))
        if evaluator_kind.per_site:   # each client's own held-out rows (tffre.runner.per_site)
            sites_log = PerSiteLog(out_dir, keeps=(lambda a, r: any(x.keeps(a, r)
                                                                    for x in algorithms))
                                   if settings.resume else None)
            for algorithm in algorithms:
                algorithm.where.sites_log = sites_log
        # Rows kept on resume: up to each algorithm's checkpoint, and a finished centralised run.
        record_run(record, columns, algorithms, hparams,
                   keeps=lambda a, r: any(x.keeps(a, r) for x in algorithms)
                   or a in done_centralised, on_open=served, after=centralised_runs_after)
    finally:
        bar.close()
        if sites_log is not None:
            sites_log.close()
        shutdown_workers()
    return record.write_summary(title=prepared.title or data.name, reference=reference)


def _start(name, hp, prepared, context, settings, bar, private=None):
    """The :class:`tffre.runner.rounds.AlgorithmRounds` of one algorithm: its process built
    (or reused), from its newest checkpoint when resuming. With DP (``private``) the clients
    are drawn from its secret seed."""
    process, state = processes.start(name, hp, prepared, context, settings)
    where = SimulatedRounds(name, process, prepared, settings, bar,
                            seed=settings.seed if private is None else private.seed)
    return AlgorithmRounds(name, where, state, settings, private=private)


def faulty_setup(data, settings):
    """(the faulty client ids, flip-labels' class permutation or None) of a run
    (:mod:`tffre.faults`)."""
    if not settings.faulty_clients:
        return [], None
    faulty = choose_faulty(data.client_ids, settings.faulty_clients, settings.seed)
    if settings.fault.kind != "flip-labels":
        return faulty, None
    label_spec = data.element_spec()[1]
    if label_spec.dtype.is_floating or label_spec.shape.rank != 1:
        raise ValueError(f"--fault flip-labels needs one class id per example; the "
                         f"{data.name} task's labels are {label_spec}")
    return faulty, label_permutation(data.num_classes, settings.seed)


def flipped(dataset, permutation):
    """``dataset``'s batches with each label y replaced by ``permutation[y]``."""
    import tensorflow as tf
    table = tf.constant(permutation)
    return dataset.map(lambda x, y: (x, tf.cast(tf.gather(table, tf.cast(y, tf.int64)),
                                                y.dtype)))


class SimulatedRounds(ClientRounds):
    """Simulation's clients (:class:`tffre.runner.rounds.ClientRounds`): each round
    ``clients_per_round`` drawn from (``seed``, round) (:func:`sample_clients`; DP's secret
    seed), trained by ``process.next`` on batches shuffled from (run seed, round)
    (:func:`data_seed`); the round's model evaluated on the pooled held-out data
    (:func:`tffre.evaluation.evaluate_state`); a progress bar."""

    def __init__(self, name, process, prepared, settings, bar, seed):
        self.name, self.process, self.prepared, self.settings = name, process, prepared, settings
        self.bar, self.seed = bar, seed
        self.evaluator = None
        self.evaluated = None   # the last round this run evaluated
        self.sites_log = None   # per_site.csv (tffre.runner.per_site), set by the run
        # Simulated faulty sites (tffre.faults): chosen from the run's seed, every round.
        self.faulty, self.flip = faulty_setup(prepared.data, settings)
        process.upload_faults = None   # a reused process (runner.processes) keeps no old run's
        if self.faulty and settings.fault.changes_upload:
            process.simulate_faults(UploadFaults(settings.fault, self.faulty, settings.seed))

    def begin(self, done):
        self.bar.update(done)
        # Built after the processes: Keras invalidates eager models when TFF later traces
        # model_fn in a graph.
        prepared = self.prepared
        task = prepared.model
        self.evaluator = make_evaluator(task.evaluation, self.process.model_fn, prepared.data,
                                        task.loss, negative_label=task.negative_label,
                                        macro_f1=task.macro_f1,
                                        train_loss=not self.settings.no_train_loss,
                                        **task.evaluation_options)

    def train(self, state, rnd):
        data, settings = self.prepared.data, self.settings
        self.bar.set_description(f"{self.name} round {rnd}/{settings.num_rounds}")
        clients = sample_clients(data.client_ids, settings.clients_per_round, self.seed, rnd)
        datasets = [data.client_dataset(c, "train", batch_size=settings.batch_size,
                                        seed=data_seed(settings.seed, rnd)) for c in clients]
        if self.flip is not None:   # flip-labels: the faulty sites' labels permuted
            datasets = [flipped(ds, self.flip) if c in self.faulty else ds
                        for c, ds in zip(clients, datasets)]
        # Client ids key a stateful algorithm's kept state, and count the broadcast's
        # constant part once per client.
        output = self.process.next(state, datasets, client_ids=clients, round_num=rnd)
        return RoundOutput(output.state, output.metrics, clients)

    def evaluate(self, state, rnd, clients):
        self.evaluated = rnd
        data = self.prepared.data
        if self.sites_log is None or not self.evaluator.per_site:
            return evaluate_state(self.evaluator, self.process, state)
        held_out = [s for s in self.evaluator.splits if s != "train"]
        columns, rows = evaluate_state(self.evaluator, self.process, state,
                                       sizes={s: data.sizes(s) for s in held_out},
                                       client_ids=data.client_ids)
        # Each hospital's own patients: per_site.csv, TensorBoard, and the spread here.
        self.sites_log.write(self.name, rnd, data.client_ids, rows)
        columns.update(summarise(rows))
        return columns

    def report(self, row, output, evaluated):
        if evaluated:
            self.bar.set_postfix(postfix(row))
        self.bar.update(1)

    def checkpointed(self, state):
        return saved_state(self.process, state, self.prepared.data.client_ids)

    def restored(self, loaded):
        return restore_state(self.process, loaded)

    def save_extras(self, folder, rnd):
        if self.process.upload_faults is not None:
            self.process.upload_faults.save(folder, rnd)

    def load_extras(self, folder, rnd):
        faults = self.process.upload_faults
        if faults is not None and not faults.load(folder, rnd):
            warn(f"{self.name}: --fault {faults.fault}: the checkpoint of round {rnd} has no "
                 f"past uploads saved beside it; the faulty clients start theirs anew")

    def finish(self, state):
        """Puts the final weights into the evaluator's model; writes the per-class table."""
        prepared = self.prepared
        self.evaluator.model_for(self.process.get_model_weights(state))
        if self.evaluated != self.settings.num_rounds:
            # A finished run resumed: no evaluation here tuned a threshold for this model.
            self.evaluator.settle()
        if prepared.model.negative_label is not None:
            write_per_class(self.evaluator, prepared.data, self.settings.out, self.name,
                            prepared.label_names)

    def saved_model(self, state):
        return self.prepared.model.saved_model(self.evaluator.model, self.process.wrap_model_fn)

    def decision(self):
        return self.evaluator.decision()
