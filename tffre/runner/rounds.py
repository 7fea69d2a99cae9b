"""One algorithm's rounds, wherever its clients run: the loop simulation and deployment share.

:class:`AlgorithmRounds` drives an algorithm from its newest checkpoint (on resume) to
``num_rounds``: each round's row (:func:`tffre.runner.outputs.round_row`), differential
privacy's columns (:meth:`tffre.runner.privacy.Privacy.columns`), the warning on excluded
updates, the evaluation every ``eval_every`` rounds and at the last, ``metrics.csv`` and
TensorBoard (:class:`tffre.runner.outputs.MetricsLog`), and the checkpoints every
``checkpoint_every`` rounds and at the last (:mod:`tffre.runner.checkpoints`).

Where the clients run is the only thing that differs, a :class:`ClientRounds`:

* simulation (:class:`tffre.runner.loop.SimulatedRounds`): ``process.next`` on the clients
  drawn from (seed, round), in this process, in worker processes or in TFF's runtime (the
  process's executor), evaluated on the pooled held-out data;
* deployment (:class:`tffre.deploy.server_app.DeployedRounds`): every site that answers,
  across Flower (:class:`tffre.federation.round_driver.FederatedRounds`), evaluated by the sites; its
  rows add ``missing_clients`` and ``missing_reasons``.

:class:`RunRecord` is what a run writes around its algorithms' rounds, the same way on
both paths: ``metrics.csv`` (on resume, the old rows up to each algorithm's checkpoint
first), each algorithm's summary entry (``hparams``, ``privacy``, ``model``,
``wall_seconds``), its final model (``models/<algorithm>/``, through the run's
``save_model``, e.g. :func:`bundle_saver`) and ``summary.json`` (:func:`summary_head`'s keys,
``algorithms``, ``peak_rss_mib``, ``wall_seconds`` and ``provenance``; a deployment adds
``deployment``).
So the same settings give the same ``metrics.csv`` columns and ``summary.json`` keys on
both paths, less those two columns and that key.

The run's sequence is one, for :func:`tffre.runner.loop.run_experiment` and a deployment's
server (:func:`tffre.deploy.server_app.serve`) alike: :func:`open_run` (the folder ready, a
resume to fewer rounds refused, before anything is built), differential privacy resolved
(:func:`tffre.runner.privacy.calibrate`), the :class:`RunRecord`, :func:`record_run` (the
rounds of each algorithm into ``metrics.csv``, then what the path adds), and
:meth:`RunRecord.write_summary`.
"""

import dataclasses
import os
import sys
import time

from tqdm.auto import tqdm

from tffre.errors import ConfigError
from tffre.runner.checkpoints import Checkpoints, checkpoint_folder
from tffre.runner.outputs import (METRIC_COLUMNS, MetricsLog, read_rows, round_row,
                                  warn_exclusions, write_summary)


def refuse_fewer_rounds(settings, name, done=None):
    """Refuses (:class:`~tffre.errors.ConfigError`) to resume ``name`` at a ``--num-rounds``
    below the rounds it already trained: ``done``, the loaded checkpoint's round, or, when
    ``done`` is None, before anything is built, the kept checkpoints' rounds when every one
    of them is past ``--num-rounds`` (whichever of them loads, the resume is refused).

    --num-rounds may grow on resume, not shrink: trained rounds cannot be undone, and keeping
    them would report a longer run as the shorter one asked for.
    """
    folder = checkpoint_folder(settings.out, name)
    if done is None:
        kept = Checkpoints(folder).rounds() if os.path.isdir(folder) else []
        if not kept or kept[0] <= settings.num_rounds:
            return
        done = kept[-1]
    if done > settings.num_rounds:
        raise ConfigError(
            f"--resume: {folder} already holds {done} rounds of {name}, more than "
            f"--num-rounds {settings.num_rounds}; give --num-rounds {done} or more, or "
            f"--overwrite")


@dataclasses.dataclass
class RoundOutput:
    """One applied round: the new state, the process-style metrics (``client_work``,
    ``aggregator``, ``round``), the clients whose updates it holds, and the row's columns
    beyond the runner's (a deployment's missing sites)."""
    state: object
    metrics: dict
    clients: list
    columns: dict = dataclasses.field(default_factory=dict)


class ClientRounds:
    """Where an algorithm's clients run (see the module docstring): the part of a round the
    two paths do apart. Subclasses define :meth:`train` and :meth:`evaluate`."""

    #: The metrics.csv columns its rows add to the runner's.
    columns = ()
    #: Differential privacy: how the clients are sampled, in the guarantee's words, where
    #: the runner's accountant's words do not fit (None: they do).
    sampling = None

    def note(self, message):
        """A one-line event (resuming); on stderr without breaking a progress bar."""
        tqdm.write(message, file=sys.stderr)

    def begin(self, done):
        """Called before the first round this run trains (``done`` rounds were restored)."""

    def train(self, state, rnd):
        """Round ``rnd`` from ``state``: a :class:`RoundOutput`."""
        raise NotImplementedError

    def evaluate(self, state, rnd, clients):
        """The evaluation columns of ``state``'s model after round ``rnd`` (``clients``: those
        that trained it)."""
        raise NotImplementedError

    def report(self, row, output, evaluated):
        """Shows a written row (a progress bar, a log line)."""

    def checkpointed(self, state):
        """What a checkpoint of ``state`` holds."""
        return state

    def restored(self, loaded):
        """The state of a loaded checkpoint."""
        return loaded

    def save_extras(self, folder, rnd):
        """Writes into ``folder`` what round ``rnd``'s checkpoint needs beside the state
        (nothing here; simulation's stale:R faults keep their past uploads)."""

    def load_extras(self, folder, rnd):
        """Reads what :meth:`save_extras` wrote for round ``rnd``."""

    def finish(self, state):
        """Called once after the last round with the final state (per-class tables)."""

    def saved_model(self, state):
        """The Keras model the run's ``save_model`` saves, or None (no model to save)."""
        return None

    def decision(self):
        """How the saved model's probabilities become a label, as the evaluation scored it
        (:meth:`tffre.evaluation.GlobalModelEvaluator.decision`), or None: the most
        probable label."""
        return None


class AlgorithmRounds:
    """One algorithm's rounds (see the module docstring), restored from its newest checkpoint
    in ``checkpoints/<name>/`` when ``settings.resume``.

    Args:
      name: the algorithm's name (the rows' ``algorithm``).
      where: the :class:`ClientRounds` of its clients.
      state: its initial server state.
      settings: a :class:`tffre.runner.RunSettings` (``out``, ``num_rounds``,
        ``eval_every``, ``checkpoint_every``, ``resume``).
      checkpoint_every: instead of ``settings.checkpoint_every``.
      private: its :class:`tffre.runner.privacy.Privacy`, or None without DP.
    """

    def __init__(self, name, where, state, settings, *, checkpoint_every=None, private=None):
        self.name, self.where, self.private = name, where, private
        self.num_rounds, self.eval_every = settings.num_rounds, settings.eval_every
        self.checkpoint_every = settings.checkpoint_every if checkpoint_every is None \
            else checkpoint_every
        self.folder = checkpoint_folder(settings.out, name)
        self.checkpoints = Checkpoints(self.folder)
        self.state, self.done = state, 0
        if settings.resume:
            loaded, self.done = self.checkpoints.load_latest(where.checkpointed(state))
            if loaded is not None:
                self.state = where.restored(loaded)
                where.load_extras(self.folder, self.done)
            refuse_fewer_rounds(settings, name, self.done)

    def keeps(self, algorithm, rnd):
        """Whether an earlier run's row of (``algorithm``, ``rnd``) is kept: one of this
        algorithm's up to its checkpoint."""
        return algorithm == self.name and rnd <= self.done

    def run(self, log):
        """Trains rounds ``done + 1`` to ``num_rounds``, each row written to ``log`` (a
        :class:`tffre.runner.outputs.MetricsLog`); returns the final state."""
        name, where, state = self.name, self.where, self.state
        if self.done:
            where.note(f"{name}: resuming after round {self.done}")
        where.begin(self.done)
        for rnd in range(self.done + 1, self.num_rounds + 1):
            output = where.train(state, rnd)
            state = output.state
            row = round_row(name, rnd, output.clients, output.metrics)
            row.update(output.columns)
            if self.private is not None:
                row.update(self.private.columns(rnd, output.metrics))
            warn_exclusions(name, rnd, row, len(output.clients))
            evaluated = rnd % self.eval_every == 0 or rnd == self.num_rounds
            if evaluated:
                row.update(where.evaluate(state, rnd, output.clients))
            log.write(row)
            where.report(row, output, evaluated)
            if rnd == self.num_rounds or (self.checkpoint_every
                                          and rnd % self.checkpoint_every == 0):
                self.checkpoints.save(where.checkpointed(state), rnd)
                where.save_extras(self.folder, rnd)
        self.state = state
        where.finish(state)
        return state

    def privacy_summary(self):
        """The DP guarantee after ``num_rounds`` as the summary and the bundle state it, or
        None without DP."""
        if self.private is None:
            return None
        guarantee = self.private.summary(self.num_rounds)
        if self.where.sampling is not None:
            guarantee["sampling"] = self.where.sampling
        return guarantee


def summary_hparams(hparams):
    """Hyperparameters (a :class:`tffre.hparams.Params` or a dict) as a summary shows them:
    the DP noise seed as "secret"."""
    values = dict(hparams.asdict() if hasattr(hparams, "asdict") else hparams)
    if values.get("dp_seed") is not None:
        values["dp_seed"] = "secret"
    return values


def summary_head(dataset, settings, *, clients_per_round, context, server_examples=None):
    """The summary's keys before its algorithms' figures, the same on both paths.

    Args:
      dataset: the dataset's name.
      settings: the :class:`tffre.runner.RunSettings` (rounds, batch size, seed,
        ``eval_every``).
      clients_per_round: the clients a round trains (a deployment: "all sites").
      context: the :class:`tffre.definition.TaskContext` the algorithms were given.
      server_examples: the size of the server's labelled set D_v, or None.
    """
    return {"dataset": dataset, "num_rounds": settings.num_rounds,
            "clients_per_round": clients_per_round, "batch_size": settings.batch_size,
            "seed": settings.seed, "eval_every": settings.eval_every,
            # What the algorithms were given besides their hyperparameters.
            "task_context": {"num_clients": context.num_clients,
                             "concepts": None if context.concepts is None
                             else list(context.concepts), "prompts": context.prompts,
                             "server_examples": server_examples},
            "algorithms": {}}


def metric_columns(evaluation=(), extra=(), private=False):
    """metrics.csv's columns: the runner's, an evaluation kind's, the path's own (``extra``)
    and, with differential privacy, its columns."""
    from tffre.runner import privacy
    return METRIC_COLUMNS + list(evaluation) + list(extra) + (privacy.COLUMNS if private else [])


def bundle_saver(label_names, encoder, metadata):
    """A run's ``save_model``: callable(folder, keras model, algorithm, round, extra) that
    writes a model bundle (:func:`tffre.bundle.save_bundle`) whose metadata holds the
    algorithm, the round, ``metadata`` and ``extra`` (what the runner knows of the model:
    its DP guarantee, and its ``decision``: a threshold, its label index given by name)."""
    def save_model(folder, model, name, round_num, extra):
        from tffre.bundle import save_bundle
        if (extra.get("decision") or {}).get("label") is not None:   # by name, as bundle.json
            extra = {**extra, "decision": {**extra["decision"],
                                           "label": str(label_names[extra["decision"]["label"]])}}
        save_bundle(folder, model, encoder=encoder,
                    label_names=None if label_names is None else list(label_names),
                    metadata={"algorithm": name, "round": round_num, **metadata, **extra})
    return save_model


def open_run(settings, names):
    """The run's first step, before any model is built (an encoder's build takes minutes):
    ``settings.out`` made ready (:func:`tffre.runner.outputs.prepare_out_dir`: a folder with
    results is refused unless resuming or overwriting) and, on resume, a ``--num-rounds``
    below the rounds an algorithm of ``names`` already trained refused
    (:func:`refuse_fewer_rounds`)."""
    from tffre.runner.outputs import prepare_out_dir
    prepare_out_dir(settings.out, resume=settings.resume, overwrite=settings.overwrite)
    if settings.resume:
        for name in names:
            refuse_fewer_rounds(settings, name)


def record_run(record, columns, algorithms, hparams, *, keeps=None, on_open=None, after=None):
    """The run's rounds into ``record`` (a :class:`RunRecord`), the same on both paths:
    ``metrics.csv`` opened with ``columns`` (on resume, the earlier rows ``keeps(algorithm,
    round)`` keeps, by default those up to each algorithm's checkpoint, passed to
    ``on_open``), each of ``algorithms`` (:class:`AlgorithmRounds`) run with its ``hparams``
    [name], then ``after()`` (the simulation's centralised runs); ``metrics.csv`` is closed
    whatever happens. The caller writes the summary (:meth:`RunRecord.write_summary`)."""
    try:
        kept = record.open(columns, keeps or (lambda a, r: any(x.keeps(a, r)
                                                              for x in algorithms)))
        if on_open is not None:
            on_open(kept)
        for algorithm in algorithms:
            record.run(algorithm, hparams[algorithm.name])
        if after is not None:
            after()
    finally:
        record.close()


class RunRecord:
    """What a run writes around its algorithms' rounds (see the module docstring).

    Args:
      out_dir: the run's folder (prepared: :func:`tffre.runner.outputs.prepare_out_dir`).
      summary: the summary's head (:func:`summary_head`, plus a path's own keys).
      resume: read the earlier run's rows to keep.
      save_model: optional callable(folder, keras_model, algorithm, round, extra) that writes
        a final model (:func:`bundle_saver`).
      started: the run's start (``time.perf_counter()``) for its ``wall_seconds``; default now.
      inputs: {option: file or folder} the run read, whose SHA-256 its ``provenance`` records
        (:func:`tffre.provenance.provenance`); a deployment's server reads none (the sites
        hold the data).
    """

    def __init__(self, out_dir, summary, *, resume=False, save_model=None, started=None,
                 inputs=None):
        from tffre.provenance import commit
        self.out_dir, self.summary, self.save_model = out_dir, summary, save_model
        self.inputs = dict(inputs or {})
        commit()   # the code this process runs: read as the run starts (cached)
        self.started = time.perf_counter() if started is None else started
        self.old_rows = read_rows(os.path.join(out_dir, "metrics.csv")) if resume else []
        self.log = None

    def open(self, columns, keeps):
        """Opens ``metrics.csv`` with ``columns``, the earlier run's rows for which
        ``keeps(algorithm, round)`` holds written first (in their order); returns them."""
        kept = [raw for a, r, raw in self.old_rows if keeps(a, r)]
        self.log = MetricsLog(self.out_dir, columns, kept)
        return kept

    def run(self, algorithm, hparams):
        """Runs ``algorithm``'s (an :class:`AlgorithmRounds`) remaining rounds and records its
        summary entry and final model; returns its final state."""
        name = algorithm.name
        entry = self.summary["algorithms"][name] = {"hparams": summary_hparams(hparams)}
        started = time.perf_counter()
        state = algorithm.run(self.log)
        extra = {}
        guarantee = algorithm.privacy_summary()
        if guarantee is not None:
            extra["privacy"] = entry["privacy"] = guarantee
        decision = algorithm.where.decision()
        if decision is not None:   # a threshold: the bundle predicts as the run scored
            extra["decision"] = decision
        if self.save_model is not None:
            model = algorithm.where.saved_model(state)
            if model is not None:
                folder = os.path.join(self.out_dir, "models", name)
                self.save_model(folder, model, name, algorithm.num_rounds, extra)
                entry["model"] = os.path.relpath(folder, self.out_dir)
        if not algorithm.done:   # its whole run in this invocation (not resumed): rounds,
            # evaluation, saving
            entry["wall_seconds"] = round(time.perf_counter() - started, 1)
        return state

    def close(self):
        """Closes ``metrics.csv`` and notes the run's peak memory."""
        from tffre.runtime import peak_rss_mib
        if self.log is not None:
            self.log.close()
        self.summary["peak_rss_mib"] = peak_rss_mib()

    def write_summary(self, *, title, reference=None):
        """Adds each algorithm's figures, the run's time and its provenance (the code,
        packages, machine and input files), writes ``summary.json`` and ``curves.png``
        (:func:`tffre.runner.outputs.write_summary`); returns the summary."""
        from tffre.provenance import provenance
        self.summary["wall_seconds"] = round(time.perf_counter() - self.started, 1)
        self.summary["provenance"] = provenance(self.inputs)
        return write_summary(self.out_dir, self.summary, title=title, reference=reference)
