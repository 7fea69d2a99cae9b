"""What the sides of a deployment agree on (:class:`DeployJob`) and what each site loads.

A :class:`DeployJob` is the run's shared description: the task, dataset,
algorithm and hyperparameters (``python -m tffre run``'s names), the task
options that shape the model (never a local path), the batch size and seed,
and what the server learnt from the sites (labels, entity types, the number of
sites). The ServerApp sends it with every training message, so a site that
restarts rebuilds the same round from it; its :meth:`DeployJob.key` names the
round (a site caches one round per key).

**FedED's D_v** (an algorithm that ``needs_server_data``): the server reads its
labelled set from ``server-data`` (a file or folder of the dataset's format on
the server's machine) and tokenizes it as the sites tokenize theirs (the job's
labels, entity types, max_len: a task's :meth:`RelationTask.server_data`). The job
carries only the shape and dtype of D_v's inputs (``server_inputs``): a site
builds the same round from placeholder zeros of that shape
(:func:`task_context`), since FedED's round takes only the types of its
``server_x`` extra from them; the real inputs arrive with the first broadcast
as a constant (sent once: :func:`tffre.execution.flower.constant_extras`).
D_v's labels never leave the server.

A task (:class:`RelationTask` for sentence-level relation extraction, the
issue's GAD and i2b2) turns a job into the Keras model (on both sides, each from
its own encoder folder) and a site's node configuration into that site's data:

* :meth:`survey`: what the site tells the server before training (its labels,
  entity types and example count), or a one-line data error;
* :meth:`model`: model_fn, loss, input spec, pretrained weights (server), the
  encoder a bundle saves;
* :meth:`site_data`: the site's tokenized train split and held-out splits;
* :meth:`server_data` (server side, FedED only): D_v tokenized as the sites' data;
* :meth:`check_site` (optional): what a site checks of its own data when it starts, before
  any run (:func:`check_site_data`; without it, :meth:`survey` with a job naming only the
  dataset).

A site's data and encoder folder come from its own node configuration
(``flower-supernode --node-config 'data="/site/gad" encoder="/site/minilm"'``), never
from the server. A test or another task may pass its own task object with the same
three methods (:func:`load_task` imports ``"module:attribute"``, from a node's or the
server's own configuration only).
"""

import collections
import dataclasses
import hashlib
import importlib
import json
import os
from typing import Optional, Tuple

import numpy as np


class SiteDataError(ValueError):
    """A site's data cannot be used; the message is one line naming file, record and field."""


@dataclasses.dataclass(frozen=True)
class DeployJob:
    """The run's shared description (see the module docstring); JSON both ways."""
    task: str
    dataset: str
    algorithm: str
    hparams: dict
    options: dict
    batch_size: int
    seed: int
    labels: Tuple[str, ...] = ()
    entity_types: Tuple[str, ...] = ()
    num_clients: Optional[int] = None
    concepts: Optional[Tuple[str, ...]] = None
    #: D_v's inputs {"shape": [count, ...], "dtype": name} (FedED), never their values.
    server_inputs: Optional[dict] = None

    def to_json(self):
        """The job as canonical JSON (sorted keys)."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True, default=list)

    @classmethod
    def from_json(cls, text):
        """The job of :meth:`to_json`'s text."""
        raw = json.loads(text)
        for key in ("labels", "entity_types", "concepts"):
            if raw.get(key) is not None:
                raw[key] = tuple(raw[key])
        return cls(**raw)

    def key(self):
        """A short hash naming the round this job builds."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]


@dataclasses.dataclass
class ModelParts:
    """What a task gives a side for the job's model."""
    model_fn: object
    loss: object
    input_spec: object
    load_pretrained: object = None   # callable(keras_model), server side
    encoder: object = None           # what a bundle saves (a tokenizer), server side
    negative_label: Optional[int] = None
    #: A split encoder (``--trainable-layers``, ``--lora-rank``): callable(trained model,
    #: wrap) -> the full model a bundle saves (:attr:`tffre.runner.Job.export`), server side.
    export: object = None
    #: What must agree between the sides beyond the round's types (a frozen prefix's weights
    #: fingerprint: each side builds the prefix from its own encoder folder and the seed).
    identity: str = ""


@dataclasses.dataclass
class SiteData:
    """A site's arrays: ``train`` (x, y) and ``held_out`` {split: (x, y)}."""
    train: tuple
    held_out: dict


#: Hyperparameters that stay at the server: differential privacy's noise seed (a site that
#: knew it could regenerate the noise and remove it).
SERVER_ONLY_HPARAMS = ("dp_seed",)


def public_hparams(hparams):
    """``hparams`` as the sites get them: the server-only ones unset."""
    return {k: (None if k in SERVER_ONLY_HPARAMS else v) for k, v in dict(hparams).items()}


def server_inputs(x):
    """The job's description of D_v's inputs ``x``: {"shape", "dtype"}, or for a dict of
    arrays (a split encoder's {"hidden", "inputs"}) {name: {"shape", "dtype"}}."""
    if isinstance(x, dict):
        return {k: server_inputs(v) for k, v in sorted(x.items())}
    x = np.asarray(x)
    return {"shape": [int(d) for d in x.shape], "dtype": x.dtype.name}


def _zeros_of(described):
    """Zero arrays of a :func:`server_inputs` description."""
    if "shape" in described and "dtype" in described:
        return np.zeros(described["shape"], described["dtype"])
    return {k: _zeros_of(v) for k, v in described.items()}


def task_context(job, server_data=None):
    """The :class:`tffre.definition.TaskContext` of ``job`` (the same on every side): every
    site trains every round, so the population is also the expected clients per round
    (differential privacy's denominator).

    ``server_data``: D_v's (x, y) arrays, at the server. A site has none and gets zeros of
    the job's ``server_inputs`` shape (and zero labels): they give the round its types; the
    values come with the broadcast. Both are batched by the job's batch size, as the runner
    batches D_v (FedED predicts on D_v in chunks of that size)."""
    import dataclasses as dc
    import tensorflow as tf
    from tffre.definition import TaskContext
    if server_data is None and job.server_inputs:
        x = _zeros_of(job.server_inputs)
        server_data = (x, np.zeros(len(tf.nest.flatten(x)[0]), np.int32))
    values = {"num_clients": job.num_clients, "prompts": "text",
              "concepts": None if job.concepts is None else tuple(job.concepts),
              "clients_per_round": job.num_clients,
              "server_data": None if server_data is None else
              tf.data.Dataset.from_tensor_slices(tuple(server_data)).batch(job.batch_size)}
    names = {f.name for f in dc.fields(TaskContext)}
    return TaskContext(**{k: v for k, v in values.items() if k in names})


def load_task(name):
    """The task named ``name``: "relations", or "module:attribute" for one of your own."""
    if name == "relations":
        return RelationTask()
    module, _, attr = str(name).partition(":")
    if not attr:
        raise ValueError(f"unknown deployment task {name!r}: give \"relations\" or "
                         f"\"module:attribute\"")
    try:
        task = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"task {name!r} cannot be imported ({err})") from None
    return task() if isinstance(task, type) else task


def _blank(path):
    """True for a file that holds only whitespace (what the loaders read as no split); a large
    file is not read through."""
    from tffre.data.files import is_blank
    return os.path.getsize(path) < (1 << 16) and is_blank(path)


def check_site_data(task, site, dataset=None):
    """What a site checks of its own data when it starts (``deploy supernode``): one line on
    what it holds, or :class:`SiteDataError` (one line) when it has nothing to train on.

    A task's own ``check_site(site, dataset)`` decides (:meth:`RelationTask.check_site`:
    ``python -m tffre data check``'s check when the dataset is known). A task without one
    is asked for its ``survey`` with a job that names only ``dataset``; a data error refuses
    the site, any other error means the survey needs the run's job (the data is then
    checked when the run starts). Returns None when nothing could be checked."""
    own = getattr(task, "check_site", None)
    if own is not None:
        return own(site, dataset)
    job = DeployJob(task="", dataset=dataset or "", algorithm="", hparams={}, options={},
                    batch_size=1, seed=0)
    try:
        facts = task.survey(job, site)
    except SiteDataError:
        raise
    except Exception:   # the survey needs the run's job: checked when the run starts
        return None
    if not int(facts.get("examples", 0)):
        raise SiteDataError(f"{site.get('data')}: no training examples: nothing to train on")
    return f"{site.get('data')}: {int(facts['examples'])} training examples"


def site_path(site, key, required=True):
    """The node configuration's path ``key`` (absolute), or None when absent and optional."""
    value = site.get(key)
    if value in (None, ""):
        if required:
            raise SiteDataError(f"node config: {key} is required (e.g. --node-config "
                                f"'{key}=\"/site/...\"')")
        return None
    return os.path.abspath(os.path.expanduser(str(value)))


class RelationTask:
    """Sentence-level relation extraction (:mod:`tffre.tasks.relations`) across sites.

    Node configuration: ``data`` (a file, or a folder of train/dev/test files, of the
    dataset's format: :func:`tffre.data.sentence_sets.load_re`) and ``encoder`` (the local
    Hugging Face encoder folder; default the packaged all-MiniLM-L6-v2). The held-out
    splits a site has (dev, test) are evaluated there.

    With a split encoder (the job's ``trainable_layers`` or ``lora_rank``) each side builds
    the frozen prefix from its own encoder folder and the job's seed
    (:func:`tffre.models.partial.frozen_prefix`); a site computes its examples' activations
    once (in memory, or in the node configuration's ``prefix-cache`` folder) and trains the
    top on them. The prefix's fingerprint is part of the round's layout, so a site whose
    prefix differs from the server's is refused.
    """

    #: Task options that name local files: each side uses its own, so they stay out of the job.
    LOCAL_OPTIONS = ("data", "encoder", "server_data", "concept_file", "prefix_cache")

    def __init__(self):
        self._prefixes = {}   # (job key, encoder folder, cache folder) -> (prefix, store)

    def _examples(self, job, site):
        from tffre.data.sentence_sets import by_split, load_re
        path = site_path(site, "data")
        try:
            examples, labels = load_re(job.dataset, path)
        except ValueError as err:   # REFormatError: "file line N: field: message"
            raise SiteDataError(f"{path}: {err}" if path not in str(err) else str(err)) \
                from None
        splits = by_split(examples)
        if "train" not in splits or not len(splits["train"]):
            raise SiteDataError(f"{path}: no training examples")
        return path, splits, [str(label) for label in labels]

    def survey(self, job, site):
        """{labels, entity_types, examples} of the site's data (:class:`SiteDataError` if bad)."""
        from tffre.text.relation_tokenizer import RETokenizer
        _, splits, labels = self._examples(job, site)
        return {"labels": labels,
                "entity_types": RETokenizer.entity_types_of(splits["train"]),
                "examples": int(len(splits["train"]))}

    def encoder_dir(self, site):
        """The encoder folder of a side's configuration (default the packaged MiniLM)."""
        from tffre.text.relation_tokenizer import default_encoder_dir
        return site_path(site, "encoder", required=False) or default_encoder_dir()

    def tokenizer(self, job, encoder_dir):
        from tffre.tasks.relations import DEFAULT_MAX_LEN
        from tffre.text.relation_tokenizer import RETokenizer
        o = job.options
        return RETokenizer.from_pretrained(
            encoder_dir, max_length=o.get("max_len") or DEFAULT_MAX_LEN,
            blind_entities=bool(o.get("blind_entities")), entity_types=job.entity_types)

    def _config(self, job, encoder_dir):
        """(tokenizer, the job's :class:`tffre.models.relations.REModelConfig`) at a side."""
        from tffre.models.relations import config_for
        from tffre.tasks import EncoderOptions
        tokenizer = self.tokenizer(job, encoder_dir)
        o = job.options
        known = {k: o[k] for k in EncoderOptions.names() if k in o and k != "encoder"}
        partial = EncoderOptions.resolve(known).partial()
        return tokenizer, config_for(tokenizer, encoder_dir, len(job.labels),
                                     representation=o.get("representation", "entity_sum"),
                                     num_layers=o.get("encoder_layers"),
                                     freeze_embeddings=bool(o.get("freeze_embedding")),
                                     partial=partial)

    def _prefix(self, job, encoder_dir, config, folder=None):
        """The frozen prefix of a split ``config`` and its activation store, built once per
        (job, encoder folder) in this process."""
        from tffre.models.partial import frozen_prefix
        from tffre.models.relations import build_re_prefix, load_pretrained_encoder
        key = (job.key(), encoder_dir, folder)
        if key not in self._prefixes:
            self._prefixes.clear()   # one job at a time: a new job frees the last prefix
            self._prefixes[key] = frozen_prefix(lambda: build_re_prefix(config),
                                                lambda m: load_pretrained_encoder(m, encoder_dir),
                                                job.seed, folder)
        return self._prefixes[key]

    def model(self, job, site):
        """The job's :class:`ModelParts` built from this side's encoder folder."""
        import tensorflow as tf
        from tffre.models.partial import exporter
        from tffre.models.relations import build_re_model, has_prefix, load_pretrained_encoder
        encoder_dir = self.encoder_dir(site)
        tokenizer, config = self._config(job, encoder_dir)
        x = tokenizer.encode([])
        x_spec = tf.TensorSpec((None,) + x.shape[1:], tf.int32)
        export, identity = None, ""
        if has_prefix(config):
            prefix, store = self._prefix(job, encoder_dir, config,
                                         site_path(site, "prefix-cache", required=False))
            identity = store.identity
            x_spec = collections.OrderedDict(   # as FederatedData orders a dict: by key
                hidden=tf.TensorSpec((None,) + tuple(prefix.output_shape[1:]), tf.float32),
                inputs=x_spec)
            export = exporter(lambda: build_re_model(config.full()), prefix)
        return ModelParts(
            model_fn=lambda: build_re_model(config),
            loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            input_spec=(x_spec, tf.TensorSpec((None,), tf.int32)),
            load_pretrained=lambda model: load_pretrained_encoder(model, encoder_dir),
            encoder=tokenizer, negative_label=0, export=export, identity=identity)

    def site_data(self, job, site):
        """The site's tokenized :class:`SiteData` (labels indexed by ``job.labels``)."""
        path, splits, labels = self._examples(job, site)
        if list(labels) != list(job.labels):
            raise SiteDataError(f"{path}: labels {labels} differ from the run's "
                                f"{list(job.labels)}")
        encoder_dir = self.encoder_dir(site)
        tokenizer, config = self._config(job, encoder_dir)
        arrays = {}
        for name, frame in splits.items():
            try:
                x = tokenizer.encode(frame)
            except ValueError as err:   # names the example and the field
                raise SiteDataError(f"{path}: {name} split: {err}") from None
            arrays[name] = (x, self._label_ids(job, frame))
        from tffre.models.relations import has_prefix
        if has_prefix(config):   # this site's activations of the frozen prefix, once
            from tffre.models.partial import cache_clients
            prefix, store = self._prefix(job, encoder_dir, config,
                                         site_path(site, "prefix-cache", required=False))
            arrays = cache_clients({site.get("site", "site"): arrays}, prefix, store)
            arrays = next(iter(arrays.values()))
        return SiteData(train=arrays.pop("train"), held_out=arrays)

    def check_site(self, site, dataset=None):
        """A site's data before it starts (:func:`check_site_data`): one line on what it holds,
        or :class:`SiteDataError` when it has nothing to train on.

        With ``dataset`` (the format, e.g. "gad") the data is checked as ``python -m tffre
        data check --dataset DATASET --data PATH`` checks it (every problem counted, the
        first named); without, the site does not know its format before a run's job arrives,
        so only what any format needs is checked: a non-empty file, or a folder with a
        training split (``train.tsv``, ``train.txt`` or ``train.jsonl``; i2b2's ``txt/`` or
        ``train/``)."""
        path = site_path(site, "data")
        if dataset:
            return self._check_as(dataset, path)
        if os.path.isfile(path):
            if _blank(path):
                raise SiteDataError(f"{path}: the file is empty: nothing to train on")
            return f"{path}: one file (its format is checked when a run names the dataset)"
        if not os.path.isdir(path):
            raise SiteDataError(f"{path}: no such file or folder")
        from tffre.data.sentence_sets import split_file_names
        train_files = split_file_names("train")   # the loaders' own names
        names = set(os.listdir(path))
        found = [n for n in train_files if n in names and not _blank(os.path.join(path, n))]
        layout = [n for n in ("txt", "train") if os.path.isdir(os.path.join(path, n))]
        if not found and not layout:
            held = sorted(n for n in names if n.split(".")[0] in ("dev", "test"))
            what = f"only {', '.join(held)}" if held else "no split files"
            raise SiteDataError(
                f"{path}: {what}: nothing to train on (a site needs a training split: "
                f"{', '.join(train_files)}, or i2b2's txt/ or train/ folder)")
        others = sorted(n for n in names if n.split(".")[0] in ("dev", "test")
                        and not _blank(os.path.join(path, n)))
        return (f"{path}: {', '.join(found + [n + '/' for n in layout] + others)} (their "
                f"format is checked when a run names the dataset)")

    @staticmethod
    def _check_as(dataset, path):
        """``python -m tffre data check``'s check of ``path`` as ``dataset``: a summary line,
        or :class:`SiteDataError` with the first problem and the count."""
        from tffre.data.check import check_dataset
        report = check_dataset("relations", dataset, path)
        if report.problems:
            more = len(report.problems) - 1
            raise SiteDataError(
                f"{' '.join(str(report.problems[0]).split())}"
                + (f" (and {more} more problem{'s' * (more > 1)})" if more else "")
                + f"; see: python -m tffre data check --dataset {dataset} --data {path}")
        counts = {s.name: s.count for s in report.splits}
        if not counts.get("train"):
            raise SiteDataError(f"{path}: no training examples as {dataset}: nothing to "
                                f"train on")
        return f"{path}: {dataset}, " + ", ".join(f"{n} {c}" for n, c in counts.items()) \
            + " examples"

    @staticmethod
    def _label_ids(job, frame):
        index = {label: i for i, label in enumerate(job.labels)}
        return frame["label"].astype(str).map(index).to_numpy(np.int32)

    def server_data(self, job, side):
        """D_v at the server: (x, y) of the ``server-data`` file or folder of ``side`` (its
        train split, or all of it, as ``python -m tffre run --server-data`` reads it),
        tokenized as the sites tokenize their data; labels indexed by ``job.labels``."""
        from tffre.tasks.relations import read_server_data
        path = site_path(side, "server-data")
        try:
            frame = read_server_data(job.dataset, path, list(job.labels))
        except ValueError as err:   # REFormatError: "file line N: field: message"
            raise SiteDataError(f"server-data: {err}" if path not in str(err) else str(err)) \
                from None
        if not len(frame):
            raise SiteDataError(f"{path}: server-data has no training examples")
        encoder_dir = self.encoder_dir(side)
        tokenizer, config = self._config(job, encoder_dir)
        try:
            x = tokenizer.encode(frame)
        except ValueError as err:   # names the example and the field
            raise SiteDataError(f"{path}: server-data: {err}") from None
        from tffre.models.relations import has_prefix
        if has_prefix(config):   # the sites predict on D_v through the same frozen prefix
            from tffre.models.partial import activations, with_hidden
            prefix, store = self._prefix(job, encoder_dir, config)
            x = with_hidden(x, store.get(x, lambda x: activations(prefix, x)))
        return x, self._label_ids(job, frame)
