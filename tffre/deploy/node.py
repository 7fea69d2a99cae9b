"""A site's side of a deployment: its data, its round, its own folder.

:class:`NodeRuntime` answers the ServerApp's three messages
(:mod:`tffre.deploy.protocol`). Everything a site uses comes from its own node
configuration (``flower-supernode --node-config``), never from the server:

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

The round is built once per job (:meth:`tffre.deploy.tasks.DeployJob.key`) and kept
while this process lives: a long-lived ClientApp process
(:mod:`tffre.deploy.launch`) trains each round without rebuilding the model. What a
round draws (dropout masks, Python's and numpy's generators) is reset before each round
from (job seed, round, site) (:mod:`tffre.deploy.seeding`), so a long-lived process, a
process per message (plain Flower) and a run repeated on running sites give the same
uploads.
"""

import collections
import os
import time

import numpy as np

from tffre.deploy import protocol
from tffre.deploy.tasks import DeployJob, load_task
from tffre.tasks.sites import SiteDataError
from tffre.execution.split_round import MessageError, from_arrays, paths_of, to_arrays

KEEP_STATES = 3   # client states kept per job: a resumed server replays at most the last round


def site_settings(node_config):
    """The node configuration as a dict, with ``site`` checked and ``state-dir`` defaulted."""
    site = dict(node_config)
    name = str(site.get("site") or "").strip()
    if not name:
        raise SiteDataError("node config: site is required (the site's name, e.g. "
                            "--node-config 'site=\"hospital-a\" data=\"...\"')")
    site["site"] = name
    site.setdefault("state-dir", os.path.join(os.path.expanduser("~"), ".tffre", "nodes", name))
    return site


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


def site_task(site, job):
    """The task a site runs ``job`` with: its own node configuration's ``task``
    ("module:attribute") if given, else the job's when it names one of tffre's tasks, else
    the job's dataset's. A site never imports a module the server names."""
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

    Its randomness is reset before each round (:class:`tffre.deploy.seeding.SiteRandomness`):
    what a round draws depends on the job's seed, the round and the site only, not on the
    rounds or runs this process ran before."""

    def __init__(self, job, task, site):
        from tffre.data import FederatedData
        from tffre.deploy.round_factory import make_round
        from tffre.deploy.seeding import SiteRandomness, seed_globals
        from tffre.deploy.tasks import task_context
        self.job = job
        seed_globals(job.seed, "build", site["site"])
        data = task.site_data(job, site)
        model = task.model(job, site)
        context = task_context(job)
        self.parts, self.model_fn, self.definition = make_round(
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

    def reseed(self, rnd):
        """Before round ``rnd``'s work here: the dropout generators reset, Python's and numpy's
        generators seeded, all from (job seed, round, site)."""
        from tffre.deploy.seeding import seed_globals
        self.randomness.reset(self.job.seed, rnd, self.site)
        seed_globals(self.job.seed, rnd, self.site)


class SiteEvaluator:
    """Summed evaluation counts of a model on a site's splits, of the task's evaluation kind
    (:attr:`tffre.tasks.sites.SiteModel.evaluation`); the server adds the sites' counts and
    computes the scores the simulation's evaluator computes on pooled data
    (:func:`tffre.deploy.server.evaluation_columns`):

    * "classification": per split the loss sum, the example count and the confusion matrix
      (accuracy and F1 as :class:`tffre.evaluation.GlobalModelEvaluator`);
    * "docre" (document-level RE): per split the pair loss summed over the valid pairs, the
      valid pairs (``count/<split>``) and :func:`tffre.metrics.docre_counts`
      (``docre/<name>/<split>``: TP/FP/FN, the exactly right pairs, and per intra-/inter-
      sentence pairs where the site's data carries ``pair_intra``), from which P/R/F1 follow
      as :class:`tffre.evaluation.DocREEvaluator` computes them. DocRED's Ign F1 is not
      counted: it needs the facts of every site's training split.

    Args:
      annotations: {split: {name: array}} the evaluation reads beside the data ("docre":
        ``pair_intra``), or None.
      batch_size: default 256 examples, 8 documents for "docre" (as DocREEvaluator).
      threshold: "docre": the sigmoid above which a pair is counted a relation (the job's
        ``--threshold``; default :data:`tffre.evaluation.DOCRE_THRESHOLD`).
    """

    def __init__(self, model_fn, loss, splits, batch_size=None, kind="classification",
                 annotations=None, threshold=None):
        import tensorflow as tf
        from tffre.evaluation import DOCRE_THRESHOLD, EVALUATORS, docre_batch, main_output
        if kind not in EVALUATORS:
            raise ValueError(f"unknown evaluation kind {kind!r}; valid: {', '.join(EVALUATORS)}")
        self.model = model_fn()
        self.splits = splits
        self.kind = kind
        self.annotations = annotations or {}
        if threshold is not None and kind != "docre":
            raise ValueError(f"a threshold applies to the docre evaluation, not {kind!r}")
        if kind == "docre":
            self.batch_size = batch_size or 8
            # The loss's kind decides how logits become predictions, as in simulation.
            self._batch = tf.function(
                lambda x, y: docre_batch(self.model, x, y, loss.kind, DOCRE_THRESHOLD
                                         if threshold is None else float(threshold)),
                reduce_retracing=True)
            return
        self.batch_size = batch_size or 256
        per_example = loss.__class__.from_config({**loss.get_config(), "reduction": "none"})

        def batch(x, y):
            pred = main_output(self.model(x, training=False))
            return per_example(y, pred), tf.argmax(pred, axis=-1, output_type=tf.int32)
        self._batch = tf.function(batch, reduce_retracing=True)

    def counts(self, weights, num_classes):
        """{name: array}: ``loss/<split>``, ``count/<split>`` and ``confusion/<split>``
        ("classification") or ``docre/<name>/<split>`` ("docre")."""
        weights.assign_weights_to(self.model)
        if self.kind == "docre":
            return self._docre_counts()
        from tffre.data.federated import take_rows
        out = collections.OrderedDict()
        for split, (x, y) in self.splits.items():
            y = np.asarray(y).reshape(-1)
            total, confusion = 0.0, np.zeros((num_classes, num_classes), np.int64)
            for i in range(0, len(y), self.batch_size):
                rows = slice(i, i + self.batch_size)
                losses, preds = self._batch(take_rows(x, rows), y[rows])
                total += float(np.sum(losses.numpy(), dtype=np.float64))
                np.add.at(confusion, (y[rows], preds.numpy()), 1)
            out[f"loss/{split}"] = np.float64(total)
            out[f"count/{split}"] = np.int64(len(y))
            out[f"confusion/{split}"] = confusion
        return out

    def _docre_counts(self):
        from tffre.data.federated import take_rows
        from tffre.evaluation import with_unscored_gold
        from tffre.metrics import docre_counts
        out = collections.OrderedDict()
        for split, (x, y) in self.splits.items():
            y = np.asarray(y)
            total, pairs, preds = 0.0, 0.0, []
            for i in range(0, len(y), self.batch_size):
                rows = slice(i, i + self.batch_size)
                loss, weight, pred = self._batch(take_rows(x, rows), y[rows])
                total += float(loss)
                pairs += float(weight)
                preds.append(pred.numpy())
            out[f"loss/{split}"] = np.float64(total)
            out[f"count/{split}"] = np.int64(round(pairs))
            if split == "train":   # only its loss is reported (train_loss)
                continue
            # An empty split sends zero counts, so every site sends the same names.
            pred = np.concatenate(preds) if preds else np.zeros(y[..., :-1].shape, np.int32)
            notes = self.annotations.get(split, {})
            # Every gold pair counts: one no candidate pair holds is a miss (as simulated).
            counts = with_unscored_gold(docre_counts(y[..., :-1], pred, y[..., -1],
                                                     intra=notes.get("pair_intra")), notes)
            for name, value in counts.items():
                out[f"docre/{name}/{split}"] = np.int64(value)
        return out


class NodeRuntime:
    """Answers the server's messages at one site (see the module docstring).

    Args:
      task: a task object to use instead of the node configuration's ``task`` (tests).
    """

    def __init__(self, task=None):
        self._task = task
        self._built = {}
        self._constants = {}   # hash -> {path: array}

    def task_of(self, site, job):
        """The task this site runs ``job`` with (:func:`site_task`)."""
        return self._task if self._task is not None else site_task(site, job)

    # --- messages ---

    def handle(self, kind, config, arrays, node_config):
        """(reply config, reply arrays or None) of one message. A data or message problem is
        answered as ``{"site", "error": one line}``, so the server logs it and goes on."""
        site_name = str(dict(node_config).get("site") or "?")
        try:
            site = site_settings(node_config)
            site_name = site["site"]
            if kind == protocol.HELLO:
                return self.hello(config, site), None
            return self.train_or_evaluate(kind, config, arrays, site)
        except (SiteDataError, MessageError) as err:
            return {"site": site_name, "error": str(err)}, None

    def hello(self, config, site):
        """What the site tells the server before training (its data's facts)."""
        job = DeployJob.from_json(config["job"])
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
            # round instead, without a retrace (_Built.reseed, tffre.deploy.seeding).
            tf.random.set_seed(job.seed)
            self._built[key] = _Built(job, self.task_of(site, job), site)
        return self._built[key]

    def train_or_evaluate(self, kind, config, arrays, site):
        job = DeployJob.from_json(config["job"])
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
        if kind == protocol.EVALUATE:
            out = built.evaluator.counts(self._evaluation_weights(built, broadcast, rnd),
                                         len(job.labels))
        else:
            out = self.train(built, broadcast, rnd)
        reply["seconds"] = time.perf_counter() - start
        return reply, out

    def train(self, built, broadcast, rnd):
        """The upload of round ``rnd`` (its kept state saved as that round's)."""
        from tffre.runner.loop import data_seed
        job, parts = built.job, built.parts
        name = next(iter(built.data.clients))
        dataset = built.data.client_dataset(name, "train", batch_size=job.batch_size,
                                            seed=data_seed(job.seed, rnd))
        if not parts.round.stateful:
            return to_arrays(parts.work(broadcast, dataset))
        upload, next_state = parts.work(broadcast, dataset, self.client_state(built, rnd))
        self._save_state(built, rnd, next_state)
        return to_arrays(upload)

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
            if protocol.constants_hash(held) != constants:
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
