"""tffre's ServerApp: one algorithm's rounds across the sites, with the runner's output files.

``flwr run`` starts it in the SuperLink's process tree. :func:`run_server` reads
the run config (:mod:`tffre.deploy.flower_config`: ``python -m tffre run``'s option
names), waits for ``min-nodes`` sites, learns their labels (and entity types),
builds the round (:func:`tffre.deploy.round_factory.make_round`) from the
server's encoder folder and the run's seed, starts from the pretrained weights
as the runner does, and then drives the rounds with the runner's own loop
(:class:`tffre.runner.rounds.AlgorithmRounds`): resume, the rows, DP's columns,
evaluation, checkpoints, the saved model and the summary are a simulated run's; only
where the clients run differs (:class:`DeployedRounds`: the sites, through
:class:`tffre.federation.round_driver.FederatedRounds`). It holds the server state, applies
``update`` and writes what ``python -m tffre run`` writes:

* ``metrics.csv`` (the runner's columns plus ``missing_clients``: the sites that took no
  part in a round, and ``missing_reasons``: why, "site: reason; ..."), TensorBoard,
  ``summary.json`` (the runner's keys, ``clients_per_round`` "all sites", plus
  ``deployment``; its ``missing``: each such site's last reason) and ``curves.png``;
* ``checkpoints/<algorithm>/`` every round (or every ``checkpoint-every``); ``resume=true``
  continues from the newest, and since the sites keep their state by round and the
  batches are shuffled from (seed, round), it reaches the same final weights as an
  uninterrupted run;
* ``models/<algorithm>/``: the final model bundle (:mod:`tffre.bundle`);
* ``deploy.json``: the job (what the sites agreed on), for ``resume``.

**FedED** (an algorithm that ``needs_server_data``) reads its labelled set D_v from
``server-data``, a file or folder of the dataset's format on the server's machine
(as ``python -m tffre run --server-data`` reads it); ``server-fraction`` is refused,
since a deployment's server holds no training data to split. D_v is tokenized here
as the sites tokenize theirs (the task's :meth:`tffre.tasks.sites.Sites.server_data`);
its inputs reach each site once, with the first broadcast (a constant of the
round), its labels never leave the server.

**Differential privacy** is accounted as ``python -m tffre run`` accounts it, with
the runner's own functions (:func:`tffre.runner.privacy.calibrate`), once, after the
sites said hello: in a deployment every site that answers trains every round, so
the sampling is all N = ``len(sites)`` sites each round (fixed size N of N: no
amplification by subsampling). ``dp-target-epsilon`` is calibrated to a noise
multiplier for (N, N, ``num-rounds``, delta); delta defaults to the runner's
``min(1e-5, N^-1.1)``; the noise seed is ``dp-seed`` or a secret one kept in
``checkpoints/<algorithm>/dp_seed`` (a resumed run adds the same noise). The sites get
the calibrated noise multiplier (the clip is theirs to apply), never the seed.
``metrics.csv`` gets the runner's ``dp_epsilon`` (epsilon at delta after each round)
and ``dp_clip`` columns, ``summary.json`` and the bundle the guarantee.
"""

import collections
import dataclasses
import os
import time
import types

from tffre.deploy.flower_config import resolve_run
from tffre.deploy.tasks import (DeployJob, load_task, public_hparams,
                                server_inputs, task_context)
from tffre.federation.round_driver import FederatedRounds, Scoring, TooFewSites, log_line
from tffre.jsonio import read_json_object, write_json
from tffre.runner.rounds import ClientRounds, RoundOutput
from tffre.runner.per_site import summarise

MISSING_COLUMN = "missing_clients"
REASONS_COLUMN = "missing_reasons"
JOB_FILE = "deploy.json"


def job_head(cfg, settings, task):
    """The job before the sites' facts (labels, entity types, number of sites)."""
    name, job_task = cfg.algorithms[0], settings.deploy_task or cfg.task.name
    local = getattr(task, "LOCAL_OPTIONS", ())
    if job_task == cfg.task.name:   # typed: the run's options, the local paths unset
        options = dataclasses.replace(cfg.options, **{
            f.name: f.default for f in dataclasses.fields(cfg.options) if f.name in local})
    else:   # a task of your own reads them as {name: value}
        options = {k: v for k, v in cfg.options.asdict().items() if k not in local}
    return DeployJob(task=job_task, dataset=cfg.dataset, algorithm=name, model=cfg.model,
                     hparams=public_hparams(cfg.hparams[name]), options=options,
                     batch_size=cfg.run.batch_size, seed=cfg.run.seed)


def agree(task, head, sites, log=log_line, concept_file=None):
    """The job with what the sites told (the task's :meth:`tffre.tasks.sites.Sites.agree`: by
    default the labels, which every site must have alike, the union of the entity types, the
    number of sites, and FedCB's concepts from the server's ``concept_file``). Sites that
    disagree are marked."""
    from tffre.tasks.sites import method_of
    return method_of(task, "agree")(head, sites, log, concept_file)


def server_side(cfg, task):
    """The server's own configuration, as a site's node configuration names it: the run
    config's options that name local files (the task's ``LOCAL_OPTIONS``: its encoder
    folder, public word vectors, D_v's file), with dashes."""
    local = getattr(task, "LOCAL_OPTIONS", ())
    return {k.replace("_", "-"): v for k, v in cfg.options.asdict().items()
            if k in local and v not in (None, "")}


def _check_resume(out, head):
    """The saved job of a run to resume; one line naming the first setting that changed
    (the options compared typed, as the head holds them: a run saved before they were typed
    resumes too)."""
    path = os.path.join(out, JOB_FILE)
    if not os.path.isfile(path):
        raise ValueError(f"resume: {path} is missing, so the run cannot be checked")
    raw = read_json_object(path)
    # The job as the run config gave it (before the sites' facts, D_v and DP's calibration).
    saved = _typed(DeployJob.from_json(raw.get("head", raw["job"])), head)
    for key in ("task", "dataset", "algorithm", "hparams", "options", "batch_size", "seed"):
        if getattr(saved, key) != getattr(head, key):
            raise ValueError(f"resume: {key} differs from the saved run's "
                             f"({getattr(saved, key)!r} -> {getattr(head, key)!r})")
    return _typed(DeployJob.from_json(raw["job"]), head)


def _typed(job, head):
    """``job`` (read from a file) with its options of the head's type, as the server holds
    them."""
    if isinstance(head.options, dict):   # a deployment task of your own: the mapping
        return job
    return dataclasses.replace(job, options=job.typed_options(type(head.options)))


def server_set(task, job, cfg, log=log_line):
    """D_v's (x, y) at the server for an algorithm that needs it (FedED), else None."""
    from tffre.tasks.sites import SiteDataError
    from tffre.registry import get_spec
    name = cfg.algorithms[0]
    if not get_spec(name).load_definition().needs_server_data:
        return None
    path = cfg.options.asdict().get("server_data")
    if not path:
        raise ValueError(f"{name} needs the server's labelled set D_v: give server-data (a "
                         f"file or folder of the dataset's format at the server)")
    side = server_side(cfg, task)
    try:
        x, y = task.server_data(job, side)
    except SiteDataError as err:
        log(f"error: {err}")
        raise ValueError(str(err)) from None
    log(f"{name}: D_v has {len(y)} examples ({path}); their inputs go to each site once")
    return x, y


def run_server(grid, run_config, *, task=None, log=log_line):
    """Runs the deployment the run config describes on ``grid``; returns the summary.

    ``task``: a task object instead of the run config's ``task`` (tests).
    """
    try:
        cfg, settings = resolve_run(run_config)
    except ValueError as err:
        log(f"error: {err}")
        raise
    from tffre.deploy import flower_patches
    flower_patches.shorten_pulls()
    from tffre.deploy.link import GridLink
    task = task or load_task(settings.deploy_task, cfg.dataset)
    secure = None
    if settings.secagg:
        from tffre.deploy.secagg import SecureSum
        secure = SecureSum(settings, grid)
    rounds = FederatedRounds(GridLink(grid, settings.poll), min_nodes=settings.min_nodes,
                             round_timeout=settings.round_timeout, secure=secure, log=log)
    return serve(rounds, cfg, settings, task, log=log)


def serve(rounds, cfg, settings, task, log=log_line):
    """The run's rounds and files (see the module docstring) through ``rounds``: the set-up
    here, then the runner's loop (:class:`tffre.runner.rounds.AlgorithmRounds`) with the
    clients at the sites (:class:`DeployedRounds`)."""
    import tensorflow as tf
    from tffre.federation.site_runtime import layout_key
    from tffre.deploy.round_factory import make_round
    from tffre.evaluation import EVALUATORS
    from tffre.federation.split_round import sum_refusal
    from tffre.runner import privacy
    from tffre.runner.processes import pretrained_weights
    from tffre.runner.per_site import SITE_COLUMNS, PerSiteLog
    from tffre.runner.rounds import (AlgorithmRounds, RunRecord, bundle_saver, metric_columns,
                                     open_run, record_run, summary_head)

    run, name = cfg.run, cfg.algorithms[0]
    head = job_head(cfg, settings, task)
    saved = _check_resume(run.out, head) if run.resume else None
    start = time.perf_counter()
    sites = rounds.wait_for_sites(head, settings.min_nodes, settings.start_timeout)
    if len(sites) < settings.min_nodes:
        raise TooFewSites(f"{len(sites)} site(s) said hello within {settings.start_timeout:g} "
                          f"s; the run needs min-nodes={settings.min_nodes}")
    job = saved or agree(task, head, sites, log,
                         concept_file=cfg.options.asdict().get("concept_file"))
    for site in sites:
        if site.error:   # left out by the agreement
            rounds.leave_out(site.name, site.error)
    # From now on a site that says hello (again) takes part only if it agrees with the job.
    from tffre.tasks.sites import method_of
    rounds.check = method_of(task, "disagreement")
    server_data = server_set(task, job, cfg, log)
    if server_data is not None:
        inputs = server_inputs(server_data[0])
        if saved is not None and saved.server_inputs != inputs:
            raise ValueError(f"resume: server-data's inputs {inputs} differ from the saved "
                             f"run's {saved.server_inputs}")
        job = dataclasses.replace(job, server_inputs=inputs)
    model = task.model(job, server_side(cfg, task))
    open_run(run, [name])   # before the round is built and traced
    # DP: sigma calibrated for all N sites every round, delta and the secret seed resolved,
    # as the runner does (see the module docstring).
    given, private = privacy.calibrate(
        name, cfg.hparams[name], types.SimpleNamespace(
            clients_per_round=job.num_clients, num_rounds=run.num_rounds, out=run.out),
        job.num_clients)
    # Typed all the way: the sites get ``given`` without what stays here (DP's noise seed);
    # the server's round is built from ``given`` itself.
    job = dataclasses.replace(job, hparams=public_hparams(given))
    if private is not None:
        target = "" if private.target_epsilon is None else \
            f" (calibrated to epsilon {private.target_epsilon:g})"
        log(f"{name}: differential privacy: noise multiplier {private.noise_multiplier:.4g}"
            f"{target}, delta {private.delta:.3g}, all {job.num_clients} sites every round")
    tf.keras.utils.set_random_seed(run.seed)
    context = task_context(job, server_data)
    parts, model_fn, definition = make_round(name, model.model_fn, loss=model.loss,
                                             input_spec=model.input_spec, hparams=given,
                                             context=context, trains=False)
    if settings.secagg:
        refusal = sum_refusal(parts.round, name)
        if refusal:
            log(f"error: {refusal}")
            raise ValueError(refusal)
    tf.keras.utils.set_random_seed(run.seed)
    weights = pretrained_weights(model_fn, model.load_pretrained)
    state = parts.set_model_weights(parts.initialize(), weights)
    layout = layout_key(parts, model.identity)
    site_names = [s.name for s in sites]
    write_json(os.path.join(run.out, JOB_FILE),
               {"job": job.to_json(), "head": head.to_json(), "settings": settings.asdict(),
                "sites": site_names})
    where = DeployedRounds(rounds, ServerRound(parts, model_fn, definition, layout), job,
                           settings, model, log)
    # A deployed round is dear: checkpoint every round unless the run config says otherwise.
    algorithm = AlgorithmRounds(
        name, where, state, run, private=private,
        checkpoint_every=run.checkpoint_every if "checkpoint_every" in cfg.given else 1)
    summary = summary_head(cfg.dataset, run, clients_per_round="all sites", context=context,
                           server_examples=None if server_data is None else len(server_data[1]))
    summary["deployment"] = {"sites": site_names, "secagg": settings.secagg,
                             "min_nodes": settings.min_nodes, "job": job.key(),
                             "missing": where.missing}
    save_model = None if model.encoder is None else bundle_saver(
        job.labels, model.encoder, {"dataset": cfg.dataset, "deployment": "flower",
                                    "sites": site_names, "seed": run.seed})
    record = RunRecord(run.out, summary, resume=run.resume, save_model=save_model,
                       started=start)
    log(f"{name} on {len(sites)} site(s) ({', '.join(site_names)}): "
        f"{run.num_rounds} round{'' if run.num_rounds == 1 else 's'}"
        f"{', secure aggregation' if settings.secagg else ''}; "
        f"ready after {time.perf_counter() - start:.1f} s")
    per_site = EVALUATORS[model.evaluation].per_site
    if per_site:   # each site's own scores (tffre.runner.per_site), as in simulation
        where.name = name
        where.sites_log = PerSiteLog(run.out, keeps=algorithm.keeps if run.resume else None)
    try:
        record_run(record, metric_columns(EVALUATORS[model.evaluation].columns,
                                          where.columns + (SITE_COLUMNS if per_site else ()),
                                          private=private is not None),
                   [algorithm], {name: given})
    finally:
        if where.sites_log is not None:
            where.sites_log.close()
    return record.write_summary(title=f"{cfg.dataset}, {name} across sites")


@dataclasses.dataclass(frozen=True)
class ServerRound:
    """The round the server built (:func:`tffre.deploy.round_factory.make_round`): its split
    functions, the algorithm's model_fn and definition, and the layout key the sites' rounds must
    match (:func:`tffre.federation.site_runtime.layout_key`)."""
    parts: object
    model_fn: object
    definition: object
    layout: str


class DeployedRounds(ClientRounds):
    """A deployment's clients (:class:`tffre.runner.rounds.ClientRounds`): every site that
    answers, through ``rounds`` (:class:`tffre.federation.round_driver.FederatedRounds`); a
    round is retried while fewer than ``min-nodes`` answer (:func:`_train_with_retries`), its
    rows name the missing sites and why, the sites evaluate the round's model (``built``, a
    :class:`ServerRound`), and each row is a line of the server log (:func:`format_row`).

    ``missing``: {site: its last reason} over the run (``summary.json``'s
    ``deployment.missing``).
    """

    columns = (MISSING_COLUMN, REASONS_COLUMN)

    def __init__(self, rounds, built, job, settings, model, log=log_line):
        self.rounds, self.job, self.settings, self.model = rounds, job, settings, model
        self.log = log
        self.parts, self.model_fn = built.parts, built.model_fn
        self.definition, self.layout = built.definition, built.layout
        self.missing = {}
        self.sampling = f"all {job.num_clients} sites every round (a deployment samples none)"
        self.sites_log, self.name = None, None   # per_site.csv, set by the run

    def note(self, message):
        self.log(message)

    def train(self, state, rnd):
        result = _train_with_retries(self.rounds, self.parts, self.job, state, rnd,
                                     self.layout, self.settings, self.log)
        self.missing.update(result.reasons)
        return RoundOutput(result.state, result.metrics, result.clients, {
            MISSING_COLUMN: " ".join(result.missing),
            REASONS_COLUMN: "; ".join(f"{n}: {result.reasons.get(n, '?')}"
                                      for n in result.missing)})

    def evaluate(self, state, rnd, clients):
        model = self.model
        scoring = Scoring(kind=model.evaluation, negative_label=model.negative_label,
                          macro_f1=model.macro_f1)
        sites = {} if self.sites_log is not None else None
        columns = self.rounds.evaluate(self.parts, self.job, state, rnd, self.layout,
                                       scoring=scoring, names=clients, per_site=sites)
        if sites:   # each site's own dev and test files: per_site.csv and the spread here
            names = sorted(sites)
            rows = [sites[n] for n in names]
            self.sites_log.write(self.name, rnd, names, rows)
            columns.update(summarise(rows))
        return columns

    def report(self, row, output, evaluated):
        self.log(format_row(row, output.metrics["round"]))

    def decision(self):
        """A document model's loss and the fixed threshold its sites counted at (a deployment
        tunes none); None for the others: the most probable label."""
        if self.model.evaluation != "docre":
            return None
        from tffre.evaluation import docre_decision
        return docre_decision(self.model.loss.kind, self.model.evaluation_options.get("threshold"))

    def saved_model(self, state):
        """The final model as a bundle saves it: a split encoder's full model, its frozen
        prefix grafted in."""
        keras_model = self.model_fn()
        self.parts.get_model_weights(state).assign_weights_to(keras_model)
        if self.model.export is not None:
            keras_model = self.model.export(keras_model, self.definition.model_fn)
        return keras_model


def _train_with_retries(rounds, parts, job, state, rnd, layout, settings, log):
    """Round ``rnd``, tried again (after refreshing the sites) while fewer than min-nodes
    answer, at most ``round_retries`` times."""
    for attempt in range(settings.round_retries + 1):
        try:
            return rounds.train(parts, job, state, rnd, layout)
        except TooFewSites as err:
            if attempt == settings.round_retries:
                log(f"error: {err}; stopping (continue later with resume=true)")
                raise
            log(f"{err}; trying round {rnd} again")
            rounds.wait_for_sites(job, settings.min_nodes, settings.round_timeout)
    raise AssertionError("unreachable")


def format_row(row, timing=None):
    """One line of a round's figures for the server log (and where the time went)."""
    shown = collections.OrderedDict(
        [("loss", row.get("local_train_loss")), ("train_loss", row.get("train_loss")),
         ("test_acc", row.get("test_accuracy")), ("test_f1", row.get("test_f1"))])
    figures = " ".join(f"{k} {v:.4f}" for k, v in shown.items() if v is not None)
    missing = f"; missing: {row.get(REASONS_COLUMN) or row[MISSING_COLUMN]}" \
        if row.get(MISSING_COLUMN) else ""
    parts = [f"{k[:-len('_seconds')]} {v:.2f}" for k, v in (timing or {}).items()
             if k.endswith("_seconds") and k != "wall_seconds"]
    spent = f" ({', '.join(parts)})" if parts else ""
    return (f"round {row['round']}: sites {row['clients'] or '-'}{missing}; {figures}; "
            f"{row['round_seconds']:.2f} s{spent}, {row['bytes_broadcast']:,} B down, "
            f"{row['bytes_uploaded']:,} B up, excluded {row['num_excluded_clients']}")


def make_server_app(task=None):
    """A Flower ``ServerApp`` running :func:`run_server` (``task``: see there)."""
    from flwr.serverapp import ServerApp
    app = ServerApp()

    @app.main()
    def main(grid, context):
        run_server(grid, context.run_config, task=task)

    return app


app = make_server_app()
