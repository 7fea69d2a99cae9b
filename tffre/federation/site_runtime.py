"""A site's side of a deployment: its data, its round, its own folder.

:class:`SiteRuntime` answers the server's three messages
(:mod:`tffre.federation.messages`: a kind, a config and arrays in; a config and arrays out),
whatever carries them (Flower's ClientApp: :mod:`tffre.deploy.client_app`). Everything a
site uses comes from its own node configuration (Flower's ``flower-supernode
--node-config``), never from the server:

* ``site``: the site's name (required; it orders the sum and names the site in
  the server's logs and metrics);
* ``data``, ``encoder`` and the task's other keys (:mod:`tffre.deploy.tasks`);
* ``state-dir``: the site's own folder (default ``~/.tffre/nodes/<site>``). It holds
  the per-client state of stateful algorithms (MOON, FedLCC, FedRep, FedDyn, FedRoD)
  by round, ``<job key>/state_round_<r>.npz``, so that it survives restarts and a
  resumed server replays a round from the state that round started from; and the
  broadcast's constant weights, ``constants/<hash>.npz``, received once.
* ``task``: "module:attribute", a task of the site's own (default: the job's task, one of
  tffre's, :func:`site_task`).
* ``fault`` (a testing aid): ``scale:S``, ``noise:SIGMA``, ``nan`` or ``stale:R``
  (:func:`tffre.faults.parse_fault`) marks the site faulty: its every upload is changed as
  :meth:`tffre.faults.UploadFaults.apply` changes a simulated faulty client's, after its
  training and before it is sent (under SecAgg+ too, before its contribution is masked), so
  that a deployment's defences can be tried against a broken site. The noise is drawn from
  (job seed, round, site); ``stale``'s past uploads live in the site's process (a restarted
  site starts its history again). ``flip-labels`` changes data, not uploads: it is refused
  here (give the site permuted labels instead).

A job's text is parsed once (:meth:`SiteRuntime.job_of`: every message carries it, so a site
that restarts rebuilds the same round), and its round is built once per job
(:meth:`tffre.tasks.sites.DeployJob.key`) and kept while this process lives: a long-lived
site process (:mod:`tffre.deploy.launch`) trains each round without rebuilding the model.
What a round draws (dropout masks, Python's and numpy's generators) is reset before each
round from (job seed, round, site) (:mod:`tffre.federation.seeding`), so a long-lived process,
a process per message (plain Flower) and a run repeated on running sites give the same
uploads.

What a site builds with comes from the transport's package, as :class:`SiteBuilders` (the
task loader, the round factory, the task context), so that this core imports none of it.
"""

import collections
import dataclasses
import os
import time
from typing import Callable

import numpy as np

from tffre.federation.messages import EVALUATE, HELLO, constants_hash
from tffre.federation.split_round import MessageError, from_arrays, paths_of, to_arrays
from tffre.tasks.sites import DeployJob, SiteDataError

KEEP_STATES = 3   # client states kept per job: a resumed server replays at most the last round
JOBS_KEPT = 4     # parsed job texts kept (a run's hello job and its agreed job, and a new run's)


@dataclasses.dataclass(frozen=True)
class SiteBuilders:
    """What a site builds a job's round with (the deployment's: :mod:`tffre.deploy.tasks` and
    :mod:`tffre.deploy.round_factory`).

    Attributes:
      load_task: callable(name=None, dataset=None) -> a task's site side (a
        :class:`tffre.tasks.sites.Sites`): a task's name, "module:attribute", or None for
        ``dataset``'s task.
      make_round: callable(algorithm, model_fn, *, loss, input_spec, hparams, context) ->
        (:class:`tffre.federation.split_round.SplitRound`, the algorithm's model_fn, its
        definition).
      task_context: callable(job) -> the job's :class:`tffre.definition.TaskContext`.
    """
    load_task: Callable
    make_round: Callable
    task_context: Callable



def site_settings(node_config):
    """The node configuration as a dict, with ``site`` checked and ``state-dir`` defaulted."""
    site = dict(node_config)
    name = str(site.get("site") or "").strip()
    if not name:
        raise SiteDataError("node config: site is required (the site's name, e.g. "
                            "--node-config 'site=\"hospital-a\" data=\"...\"')")
    site["site"] = name
    site.setdefault("state-dir", os.path.join(os.path.expanduser("~"), ".tffre", "nodes", name))
    site_fault(site)   # a bad one is refused at hello, in one line
    return site


def site_fault(site):
    """The :class:`tffre.faults.Fault` a site's node configuration marks it with (``fault``,
    a testing aid: see the module docstring), or None; :class:`SiteDataError` in one line for
    one that does not parse or changes data, not uploads."""
    text = str(site.get("fault") or "").strip()
    if not text:
        return None
    from tffre.faults import parse_fault
    try:
        fault = parse_fault(text)
    except ValueError as err:
        raise SiteDataError(f"node config: fault: {err}") from None
    if not fault.changes_upload:
        raise SiteDataError(f"node config: fault {fault} changes the site's data, not its "
                            f"uploads: a site takes scale:S, noise:SIGMA, nan or stale:R")
    return fault


def layout_key(parts, identity=""):
    """A short description of the round's message types (broadcast and upload: paths, dtypes,
    shapes) and the model's ``identity`` (a frozen prefix's fingerprint): a site whose model
    differs from the server's is refused by it."""
    import hashlib
    import tensorflow as tf
    text = repr([(p, s.dtype.name, s.shape.as_list()) for spec in
                 (parts.broadcast_spec(), parts.upload_spec())
                 for p, s in zip(paths_of(spec), tf.nest.flatten(spec))]) + identity
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def site_task(site, job, load_task):
    """The task a site runs ``job`` with (``load_task``: :attr:`SiteBuilders.load_task`): its
    own node configuration's ``task`` ("module:attribute") if given, else the job's when it
    names one of tffre's tasks, else the job's dataset's. A site never imports a module the
    server names."""
    from tffre import tasks
    own = str(site.get("task") or "")
    if own:
        return load_task(own)
    if job.task in tasks.MODULES:
        return load_task(job.task)
    return load_task(None, job.dataset)


def save_named(path, named):
    """Writes {path: array} to an .npz file; a kill never leaves half a file under ``path``."""
    tmp = path + ".tmp.npz"
    np.savez(tmp, **{name.replace("/", "|"): value for name, value in named.items()})
    os.replace(tmp, path)


def load_named(path):
    """The ordered {path: array} of :func:`save_named`."""
    with np.load(path) as saved:
        return collections.OrderedDict((n.replace("|", "/"), saved[n]) for n in saved.files)


class _Built:
    """A job's round, model and data at this site.

    Its randomness is reset before each round
    (:class:`tffre.federation.seeding.SiteRandomness`): what a round draws depends on the
    job's seed, the round and the site only, not on the rounds or runs this process ran
    before."""

    def __init__(self, job, task, site, builders):
        from tffre.data import FederatedData
        from tffre.federation.seeding import SiteRandomness, seed_globals
        from tffre.federation.site_evaluation import SiteEvaluator
        self.job = job
        seed_globals(job.seed, "build", site["site"])
        data = task.site_data(job, site)
        model = task.model(job, site)
        context = builders.task_context(job)
        self.parts, self.model_fn, self.definition = builders.make_round(
            job.algorithm, model.model_fn, loss=model.loss, input_spec=model.input_spec,
            hparams=job.hparams, context=context)
        # Before the client's training is traced (layout_key traces it): the trace keeps the
        # random ops it was traced with.
        self.randomness = SiteRandomness(self.parts)
        splits = {"train": data.train, **data.held_out}
        self.data = FederatedData({site["site"]: splits}, num_classes=len(job.labels),
                                  name=site["site"])
        self.layout = layout_key(self.parts, model.identity)
        left = self.randomness.check(self.parts)
        if left:
            print(f"site {site['site']}: the model's training draws from TensorFlow random ops "
                  f"that keep their state in the process ({', '.join(left)}): TensorFlow's "
                  f"kernels are reset before each round so that a round does not depend on "
                  f"the ones before (which costs about a trace's time each round)",
                  flush=True)
        self.evaluator = SiteEvaluator(self.model_fn, model.loss, splits,
                                       kind=getattr(model, "evaluation", "classification"),
                                       annotations=getattr(data, "annotations", None),
                                       **getattr(model, "evaluation_options", {}))
        self.folder = os.path.join(site["state-dir"], job.key())
        self.site = site["site"]
        fault = site_fault(site)
        self.faults = None
        if fault is not None:
            from tffre.faults import UploadFaults
            self.faults = UploadFaults(fault, [self.site], seed=job.seed)
            print(f"site {self.site}: marked faulty for tests (fault={fault}): each upload is "
                  f"changed before it is sent", flush=True)

    def faulty(self, upload, rnd):
        """``upload`` (the round's numpy structure) as this site sends it in round ``rnd``:
        changed by its ``fault`` (:mod:`tffre.faults`), unchanged without one."""
        if self.faults is None:
            return upload
        try:
            return self.faults.apply(self.site, upload, rnd)
        except ValueError as err:   # an algorithm without a model delta
            raise SiteDataError(f"node config: {err}") from None

    def reseed(self, rnd):
        """Before round ``rnd``'s work here: the dropout generators reset, Python's and numpy's
        generators seeded, all from (job seed, round, site)."""
        from tffre.federation.seeding import seed_globals
        self.randomness.reset(self.job.seed, rnd, self.site)
        seed_globals(self.job.seed, rnd, self.site)


class SiteRuntime:
    """Answers the server's messages at one site (see the module docstring).

    Args:
      builders: the :class:`SiteBuilders` a job's round is built with.
      task: a task object to use instead of the node configuration's ``task`` (tests).
    """

    def __init__(self, builders, task=None):
        self.builders = builders
        self._task = task
        self._built = {}
        self._constants = {}   # hash -> {path: array}
        self._jobs = collections.OrderedDict()   # job text -> DeployJob, newest last

    def task_of(self, site, job):
        """The task this site runs ``job`` with (:func:`site_task`)."""
        return self._task if self._task is not None else \
            site_task(site, job, self.builders.load_task)

    def job_of(self, text):
        """The :class:`tffre.tasks.sites.DeployJob` of a message's job text, parsed once per
        text (every message of a run carries the same one)."""
        job = self._jobs.get(text)
        if job is None:
            job = DeployJob.from_json(text)
            self._jobs[text] = job
            while len(self._jobs) > JOBS_KEPT:
                self._jobs.popitem(last=False)
        return job

    # --- messages ---

    def handle(self, kind, config, arrays, node_config):
        """(reply config, reply arrays or None) of one message. A data or message problem is
        answered as ``{"site", "error": one line}``, so the server logs it and goes on."""
        site_name = str(dict(node_config).get("site") or "?")
        try:
            site = site_settings(node_config)
            site_name = site["site"]
            if kind == HELLO:
                return self.hello(config, site), None
            return self.train_or_evaluate(kind, config, arrays, site)
        except (SiteDataError, MessageError) as err:
            return {"site": site_name, "error": str(err)}, None

    def hello(self, config, site):
        """What the site tells the server before training (its data's facts)."""
        job = self.job_of(config["job"])
        facts = dict(self.task_of(site, job).survey(job, site))
        facts = {k: list(v) if isinstance(v, (tuple, set)) else v for k, v in facts.items()}
        return {**facts, "site": site["site"], "labels": [str(x) for x in facts["labels"]],
                "entity_types": list(facts.get("entity_types", ())),
                "examples": int(facts["examples"]), "constants": self._held_constants(site)}

    def build(self, job, site):
        """The job's round and data at this site (built once per job)."""
        key = (job.key(), site["site"])
        if key not in self._built:
            import tensorflow as tf
            self._built.clear()   # one run at a time: a new job frees the last one's model
            # A shuffle's op seed pairs with the process's global seed (tf.random.get_seed);
            # the simulation shuffles under set_random_seed(seed), so a site's order matches
            # only under the same global seed (a site process has none of its own). Set once
            # per job: setting it again retraces the client's training (1 s a round for the
            # benchmark's LSTM, four times its training). What a round draws is reset per
            # round instead, without a retrace (_Built.reseed, tffre.federation.seeding).
            tf.random.set_seed(job.seed)
            self._built[key] = _Built(job, self.task_of(site, job), site, self.builders)
        return self._built[key]

    def train_or_evaluate(self, kind, config, arrays, site):
        """(reply config, the upload or the evaluation counts) of a train or evaluate
        message (:mod:`tffre.federation.messages`)."""
        job = self.job_of(config["job"])
        built = self.build(job, site)
        if config.get("layout") and config["layout"] != built.layout:
            raise MessageError(f"the model this site builds (encoder {site.get('encoder')!r}) "
                               f"differs from the server's: its round's types or its frozen "
                               f"prefix (layout {built.layout} vs {config['layout']})")
        rnd = int(config["round"])
        broadcast = self._broadcast(built, arrays, config.get("constants", ""), site)
        reply = {"site": site["site"], "round": rnd, "constants": config.get("constants", "")}
        start = time.perf_counter()
        built.reseed(rnd)
        if kind == EVALUATE:
            out = built.evaluator.counts(self._evaluation_weights(built, broadcast, rnd),
                                         len(job.labels))
        else:
            out = self.train(built, broadcast, rnd)
        reply["seconds"] = time.perf_counter() - start
        return reply, out

    def train(self, built, broadcast, rnd):
        """The upload of round ``rnd`` (its kept state saved as that round's), as the site's
        ``fault`` changes it, if it has one."""
        from tffre.runner.loop import data_seed
        job, parts = built.job, built.parts
        name = next(iter(built.data.clients))
        dataset = built.data.client_dataset(name, "train", batch_size=job.batch_size,
                                            seed=data_seed(job.seed, rnd))
        if not parts.round.stateful:
            return to_arrays(built.faulty(parts.work(broadcast, dataset), rnd))
        upload, next_state = parts.work(broadcast, dataset, self.client_state(built, rnd))
        self._save_state(built, rnd, next_state)
        return to_arrays(built.faulty(upload, rnd))

    def contribution(self, built, upload_arrays):
        """What this site adds to a secure sum (:meth:`SplitRound.contribution`)."""
        upload = from_arrays(upload_arrays, built.parts.upload_spec(), "upload")
        return built.parts.contribution(upload)

    # --- the site's folder ---

    def client_state(self, built, rnd):
        """The kept state round ``rnd`` starts from: the newest saved before ``rnd``, else the
        initial one."""
        found = sorted((r, name) for r, name in self._saved_states(built) if r < rnd)
        if not found:
            return built.parts.initial_client_state()
        path = os.path.join(built.folder, found[-1][1])
        return from_arrays(load_named(path), built.parts.client_state_spec(), path)

    def _saved_states(self, built):
        if not os.path.isdir(built.folder):
            return []
        out = []
        for name in os.listdir(built.folder):
            if name.startswith("state_round_") and name.endswith(".npz"):
                out.append((int(name[len("state_round_"):-4]), name))
        return out

    def _save_state(self, built, rnd, state):
        os.makedirs(built.folder, exist_ok=True)
        save_named(os.path.join(built.folder, f"state_round_{rnd}.npz"), to_arrays(state))
        saved = sorted(self._saved_states(built))
        # States of later rounds are an earlier run's of the same job (or of rounds a resumed
        # server replays): left, a round this site misses would start from them.
        later = [name for r, name in saved if r > rnd]
        for name in later + [name for r, name in saved if r <= rnd][:-KEEP_STATES]:
            os.remove(os.path.join(built.folder, name))

    def _held_constants(self, site):
        """The hash of the constant weights this site holds (memory or its folder), or ""."""
        if self._constants:
            return next(reversed(self._constants))
        folder = os.path.join(site["state-dir"], "constants")
        if os.path.isdir(folder):
            found = sorted((os.path.getmtime(os.path.join(folder, n)), n)
                           for n in os.listdir(folder) if n.endswith(".npz"))
            if found:
                return found[-1][1][:-4]
        return ""

    def _broadcast(self, built, arrays, constants, site):
        """The round's broadcast from the message's arrays and the constants held here."""
        spec = built.parts.broadcast_spec()
        names = built.parts.constant_paths()
        arrays = collections.OrderedDict(arrays or {})
        if names and names[0] in arrays:   # the server sent them: keep them
            held = collections.OrderedDict((n, arrays[n]) for n in names)
            if constants_hash(held) != constants:
                raise MessageError("the constant weights received do not match their hash")
            self._keep_constants(constants, held, site)
        elif names:
            held = self._load_constants(constants, site)
            if held is None:
                raise MessageError(f"missing constant weights {constants}: this site does "
                                   f"not hold them (the server sends them again)")
            arrays.update(held)
        ordered = collections.OrderedDict((n, arrays[n]) for n in paths_of(spec) if n in arrays)
        return from_arrays(ordered, spec, "broadcast")

    def _keep_constants(self, key, held, site):
        self._constants = {key: held}
        folder = os.path.join(site["state-dir"], "constants")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"{key}.npz")
        if not os.path.exists(path):
            save_named(path, held)

    def _load_constants(self, key, site):
        if key in self._constants:
            return self._constants[key]
        path = os.path.join(site["state-dir"], "constants", f"{key}.npz")
        if not os.path.isfile(path):
            return None
        held = load_named(path)
        self._constants = {key: held}
        return held

    def _evaluation_weights(self, built, broadcast, rnd):
        """The model this site evaluates: the broadcast's, with this site's personal weights
        for an algorithm evaluated as personal models (FedRep)."""
        import tensorflow_federated as tff
        weights = broadcast["model"]
        personal = built.parts.round.personal
        if built.definition.evaluation != "personal" or not personal:
            return weights
        state = self.client_state(built, rnd + 1)
        if float(state["seen"]) <= 0:
            return weights
        trainable = list(weights.trainable)
        for j, i in enumerate(personal):
            trainable[i] = state["personal"][j]
        return tff.learning.models.ModelWeights(trainable=trainable,
                                                non_trainable=list(weights.non_trainable))
