"""Sentence-level relation extraction (FedCMC Table 2, FedED Tables 3-8) on a Hugging Face encoder.

Loads a relation set (:mod:`tffre.data.sentence_sets`; the embedded synthetic sample for
i2b2 and GAD by default), tokenizes it with entity markers
(:class:`tffre.text.relation_tokenizer.RETokenizer`), splits the training examples
over clients by label skew (each label's examples over the clients in
Dirichlet(alpha) proportions, FedCMC section 4.1) or IID, and builds the
encoder model (:func:`tffre.models.relation_model.build_re_model`). The pretrained
encoder weights go into the server state after ``initialize``
(``load_pretrained``), never into ``model_fn``.

Splits: a folder with train/dev/test files gives those splits. A set with no
test split holds out a seeded 20% of its examples as test, and says so. The
test and dev examples are dealt evenly over the clients; the evaluation pools
them (a centralised test set, as the papers report).
"""

import collections
import dataclasses
import os
from typing import Optional

from tffre import resources
from tffre.hparams import (boolean, choice, fraction, non_negative_float, optional, param,
                           positive_int, text, threshold_or_dev)
from tffre.lazy import np
from tffre.runner.run_settings import Job
from tffre.tasks import (SAMPLE, ConceptOption, DataOption, EncoderOptions, Task, check_encoder,
                         data_path, label_mix_writer, require_data, with_cached_prefix)
from tffre.tasks.sites import (SiteData, SiteDataError, SiteModel, Sites, check_any_site,
                               check_report_line, site_path)

DATASETS = ("i2b2", "gad", "euadr", "chemprot", "pgr", "jsonl")
SAMPLE_DIRS = {"i2b2": resources.path("re_sample", "i2b2"), "gad": resources.path("re_sample", "gad")}
DEFAULT_MAX_LEN = 128
DEV_FRACTION = 0.2   # as tffre.data.splits.DEV_FRACTION
PARTITIONS = ("label-dirichlet", "iid")
REPRESENTATIONS = ("entity_sum", "cls_entities")


@dataclasses.dataclass(frozen=True)
class Options(DataOption, EncoderOptions, ConceptOption):
    """Sentence-level relation extraction's options."""
    partition: str = param("label-dirichlet", choice(*PARTITIONS), "how the training "
                           "examples are split over clients", paper="FedCMC Sect. 4.1")
    alpha: float = param(0.5, non_negative_float, "Dirichlet concentration of each label "
                         "over clients", paper="FedCMC Sect. 4.1")
    max_len: Optional[int] = param(None, optional(positive_int), "word pieces per example "
                                   f"(default {DEFAULT_MAX_LEN})")
    representation: str = param("entity_sum", choice(*REPRESENTATIONS), "entity_sum (e1 + e2 "
                                "word pieces) or cls_entities (FedED: [CLS], e1, e2)",
                                paper="FedCMC Eq. 1")
    blind_entities: bool = param(False, boolean, "replace entity mentions by their type "
                                 "(FedED's entity blinding)", flag=True)
    server_fraction: float = param(0.0, fraction, "hold out this seeded fraction of the "
                                   "training examples as the server's labelled set D_v "
                                   "(FedED: 0.2); no client trains on it",
                                   paper="FedED Sect. 3.1")
    server_data: Optional[str] = param(None, optional(text), "a file or folder (the dataset's "
                                       "format) whose examples (train split) are the server's "
                                       "labelled set D_v")
    dev_fraction: float = param(DEV_FRACTION, fraction, "without a dev split in the data, this "
                                "seeded fraction of the training examples becomes dev, for "
                                "choosing the round (0: none; model selection then reports the "
                                "max over rounds only)")
    threshold: object = param(None, optional(threshold_or_dev), "a binary set (GAD, EU-ADR): "
                              "the relation's probability above which it is predicted, or dev: "
                              "at each evaluation the threshold with the best dev F1, applied "
                              "to every split (default: the more probable class)")
    raw_labels: bool = param(False, boolean, "ChemProt in SciBERT's JSON lines: keep its 13 raw "
                             "relation labels instead of the evaluated groups CPR:3, 4, 5, 6, 9 "
                             "and false", flag=True)


# A pretrained transformer's defaults, not FLCMC's LSTM's: the top 2 layers train on cached
# activations of the frozen layers below (tffre.models.partial), batch 8, and Adam at 3e-4
# (measured on GAD: see docs/real-corpora.md; FLCMC's 1e-3 for Adam left the top at the guess); the
# in-process executor (TFF's runtime refuses a client dataset over 100 MB, which a large
# client's cached activations exceed, and costs 2-4x on a transformer).
TASK = Task("relations", "sentence-level relation extraction (FedCMC, FedED)", DATASETS,
            ("encoder",), Options, defaults={"clients": 10, "batch_size": 8,
                                             "trainable_layers": 2, "executor": "local"},
            dataset_defaults={"i2b2": {"data": SAMPLE}, "gad": {"data": SAMPLE}},
            learning_rates={"adam": 3e-4}, samples=SAMPLE_DIRS)


def check(cfg):
    """The options' checks that need no data."""
    require_data(cfg)
    check_encoder(cfg)
    o = cfg.options
    if o.partition == "label-dirichlet" and not o.alpha > 0:
        raise ValueError(f"--alpha must be > 0 for the Dirichlet partition, got {o.alpha}")
    if o.server_data and not os.path.exists(o.server_data):
        raise ValueError(f"--server-data: no such file or folder: {o.server_data}")
    if o.server_data and o.server_fraction:
        raise ValueError("give --server-data or --server-fraction, not both")
    from tffre import registry
    needs = [n for n in cfg.algorithms if registry.get_spec(n).load_definition().needs_server_data]
    if needs and not (o.server_data or o.server_fraction):
        raise ValueError(f"{', '.join(needs)} needs the server's labelled set D_v: give "
                         f"--server-fraction (FedED: 0.2) or --server-data")


def check_data(dataset, options, *, tokenizer=None, max_len=None, seed=0):
    """The data check of what a run would load (``python -m tffre data check``)."""
    from tffre.data.check import check_dataset
    path = data_path(dataset, options.data)
    extra = {"raw_labels": True} if dataset == "chemprot" and options.raw_labels else {}
    return check_dataset("relations", dataset, path, tokenizer=tokenizer,
                         max_len=max_len or options.max_len or DEFAULT_MAX_LEN, seed=seed,
                         dev_fraction=options.dev_fraction or None, **extra)


def loader_options(cfg):
    """The loader's options of ``cfg`` (``--raw-labels`` for ChemProt)."""
    return {"raw_labels": True} if cfg.dataset == "chemprot" and cfg.options.raw_labels else {}


def read_server_data(dataset, path, labels):
    """D_v from ``path``, a file or folder of ``dataset``'s format (its train split, or all of
    it), as a DataFrame; a label outside ``labels`` is refused in one line."""
    from tffre.data.sentence_sets import load_re
    examples, _ = load_re(dataset, path)
    unknown = sorted(set(examples["label"]) - set(labels))
    if unknown:
        raise ValueError(f"{path}: label(s) {', '.join(map(str, unknown))} are "
                         f"not among the training labels")
    if "split" in examples:
        examples = examples[examples["split"] == "train"].drop(columns="split")
    return examples.reset_index(drop=True)


def server_split(cfg, splits, labels):
    """The server's labelled set D_v (FedED section 3.1) as (DataFrame, description), or (None, None).

    ``--server-data`` reads it from a file or folder of the dataset's format
    (its train split, or all of it); ``--server-fraction f`` moves a seeded
    fraction f of ``splits["train"]`` there, so that no client trains on it
    (FedED: "We random sample 20% of training data for validation").
    """
    o = cfg.options
    if o.server_data:
        return read_server_data(cfg.dataset, o.server_data, labels), o.server_data
    if not o.server_fraction:
        return None, None
    train = splits["train"]
    order = np.random.RandomState([cfg.run.seed, 11]).permutation(len(train))
    cut = int(round(len(train) * o.server_fraction))
    if cut < 1 or cut >= len(train):
        raise ValueError(f"--server-fraction {o.server_fraction} of {len(train)} training "
                         f"examples leaves no server set or no client data")
    splits["train"] = train.iloc[np.sort(order[cut:])].reset_index(drop=True)
    return (train.iloc[np.sort(order[:cut])].reset_index(drop=True),
            f"{o.server_fraction:.0%} of the training examples (seeded)")


def prepare(cfg):
    """Loads, tokenizes and splits the relation set of ``cfg``; returns the :class:`Job`."""
    import tensorflow as tf
    from tffre.data import FederatedData
    from tffre.data.partition import (dirichlet_label_split, format_label_mix, iid_split,
                                      label_mix)
    from tffre.data.sentence_sets import load_relation_splits
    from tffre.metrics import trivial_baselines
    from tffre.models.partial import activations, exporter, with_hidden
    from tffre.models.relation_model import (build_re_model, build_re_prefix, config_for, has_prefix,
                                        load_pretrained_encoder)
    from tffre.data.concepts import concepts_for
    from tffre.text.relation_tokenizer import RETokenizer, default_encoder_dir

    o, seed, num_clients = cfg.options, cfg.run.seed, cfg.run.clients
    notes = []
    splits, labels = load_relation_splits(cfg.dataset, data_path(cfg.dataset, o.data), seed=seed,
                                          dev_fraction=o.dev_fraction or None, notes=notes,
                                          **loader_options(cfg))
    if o.threshold is not None and len(labels) != 2:
        raise ValueError(f"--threshold applies to a binary set; {cfg.dataset} "
                         f"({data_path(cfg.dataset, o.data)}) has {len(labels)} labels: "
                         f"{', '.join(map(str, labels))}")
    if o.threshold == "dev" and "dev" not in splits:
        raise ValueError("--threshold dev needs a dev split: the data has none and "
                         "--dev-fraction is 0")
    for note in notes:
        print(f"note: {note}")
    encoder_dir = o.encoder or default_encoder_dir()
    tokenizer = RETokenizer.from_pretrained(
        encoder_dir, max_length=o.max_len or DEFAULT_MAX_LEN,
        blind_entities=o.blind_entities,
        entity_types=RETokenizer.entity_types_of(splits["train"]))
    index = {label: i for i, label in enumerate(labels)}
    server_df, server_source = server_split(cfg, splits, labels)
    arrays = {name: (tokenizer.encode(df), df["label"].map(index).to_numpy(np.int32))
              for name, df in splits.items()}
    y_train = arrays["train"][1]
    if o.partition == "iid":
        parts = iid_split(len(y_train), num_clients, seed)
    else:
        parts = dirichlet_label_split(y_train, num_clients, o.alpha, seed)
    held_out = {name: iid_split(len(y), num_clients, seed + 1)
                for name, (_, y) in arrays.items() if name != "train"}
    clients = {}
    for k, part in enumerate(parts):
        cid = f"client_{k}"
        clients[cid] = {"train": (arrays["train"][0][part], y_train[part])}
        for name, idx in held_out.items():
            clients[cid][name] = (arrays[name][0][idx[k]], arrays[name][1][idx[k]])
    skew = "IID" if o.partition == "iid" else f"label Dirichlet alpha={o.alpha}"
    source = "synthetic sample" if o.data == SAMPLE else o.data
    data = FederatedData(clients, num_classes=len(labels),
                         name=f"{cfg.dataset} ({source}), {num_clients} clients, {skew}")
    mix = label_mix(y_train, parts, label_names=list(range(len(labels))))
    mix.columns = [labels[c] if isinstance(c, (int, np.integer)) else c for c in mix.columns]
    y_test = arrays["test"][1]
    info = {"labels": labels, "negative_label": labels[0], "encoder": encoder_dir,
            "representation": o.representation, "max_len": tokenizer.max_length,
            "tokenizer": dict(tokenizer.stats),
            "train_examples": int(len(y_train)), "test_examples": int(len(y_test)),
            "dev_split": "dev" if "dev" in arrays else None,
            "server_examples": 0 if server_df is None else int(len(server_df)),
            "server_data": server_source, "data_notes": notes,
            **trivial_baselines(y_train, y_test, len(labels), negative_label=0)}
    print(f"\n{data.name}: {info['train_examples']} train / {info['test_examples']} test "
          f"examples, {len(labels)} labels; tokenizer {tokenizer.stats}")
    print(format_label_mix(mix))
    config = config_for(tokenizer, encoder_dir, len(labels), representation=o.representation,
                        num_layers=o.encoder_layers, freeze_embeddings=o.freeze_embedding,
                        partial=o.partial())
    server_x = None if server_df is None else tokenizer.encode(server_df)
    load = lambda model: load_pretrained_encoder(model, encoder_dir)  # noqa: E731
    export = None
    if has_prefix(config):
        # A frozen prefix: each client's activations once; the federated model is the top.
        data, prefix, store, info["partial"] = with_cached_prefix(
            data, config, lambda: build_re_prefix(config), load, cfg)
        if server_x is not None:   # D_v's inputs, as the clients will predict on them
            server_x = with_hidden(server_x, store.get(server_x, lambda x: activations(
                prefix, x)))
        export = exporter(lambda: build_re_model(config.full()), prefix)

    def model_fn():
        return build_re_model(config)

    return Job(data=data, model_fn=model_fn,
               loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
               title=f"{data.name}, {os.path.basename(os.path.normpath(encoder_dir))}",
               label_names=labels, encoder=tokenizer, info=info,
               write_extras=label_mix_writer(mix, data.name),
               load_pretrained=load, negative_label=0, export=export,
               concepts=concepts_for(labels, o.concept_file), prompts="text",
               server_data=None if server_df is None else (
                   server_x, server_df["label"].map(index).to_numpy(np.int32)),
               # Without --threshold the argmax, as before the option existed.
               **({} if o.threshold is None else {
                   "evaluation": "binary", "evaluation_options": {"threshold": o.threshold}}))


class RelationSites(Sites):
    """Sentence-level relation extraction across sites (:mod:`tffre.tasks.sites`).

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

    def __init__(self):
        self._prefixes = {}   # (job key, encoder folder, cache folder) -> (prefix, store)

    @staticmethod
    def refusal(job):
        """A decision threshold (``threshold``): the sites count the more probable class (a
        confusion matrix), so :meth:`agree` refuses it."""
        if job.options.get("threshold") is not None:
            return ("threshold: a deployment of sentence RE scores the more probable class "
                    "(the sites send a confusion matrix at the argmax)")
        return None

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
        """{labels, entity_types, examples} of the site's data (:class:`tffre.tasks.sites.SiteDataError` if bad)."""
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
        from tffre.text.relation_tokenizer import RETokenizer
        o = job.options
        return RETokenizer.from_pretrained(
            encoder_dir, max_length=o.get("max_len") or DEFAULT_MAX_LEN,
            blind_entities=bool(o.get("blind_entities")), entity_types=job.entity_types)

    def _config(self, job, encoder_dir):
        """(tokenizer, the job's :class:`tffre.models.relation_model.REModelConfig`) at a side."""
        from tffre.models.relation_model import config_for
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
        from tffre.models.relation_model import build_re_prefix, load_pretrained_encoder
        key = (job.key(), encoder_dir, folder)
        if key not in self._prefixes:
            self._prefixes.clear()   # one job at a time: a new job frees the last prefix
            self._prefixes[key] = frozen_prefix(lambda: build_re_prefix(config),
                                                lambda m: load_pretrained_encoder(m, encoder_dir),
                                                job.seed, folder)
        return self._prefixes[key]

    def model(self, job, site):
        """The job's :class:`tffre.tasks.sites.SiteModel` built from this side's encoder folder."""
        import tensorflow as tf
        from tffre.models.partial import exporter
        from tffre.models.relation_model import build_re_model, has_prefix, load_pretrained_encoder
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
        return SiteModel(
            model_fn=lambda: build_re_model(config),
            loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            input_spec=(x_spec, tf.TensorSpec((None,), tf.int32)),
            load_pretrained=lambda model: load_pretrained_encoder(model, encoder_dir),
            encoder=tokenizer, negative_label=0, export=export, identity=identity)

    def site_data(self, job, site):
        """The site's tokenized :class:`tffre.tasks.sites.SiteData` (labels indexed by ``job.labels``)."""
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
        from tffre.models.relation_model import has_prefix
        if has_prefix(config):   # this site's activations of the frozen prefix, once
            from tffre.models.partial import cache_clients
            prefix, store = self._prefix(job, encoder_dir, config,
                                         site_path(site, "prefix-cache", required=False))
            arrays = cache_clients({site.get("site", "site"): arrays}, prefix, store)
            arrays = next(iter(arrays.values()))
        return SiteData(train=arrays.pop("train"), held_out=arrays)

    def check_site(self, site, dataset=None):
        """A site's data before it starts (:func:`tffre.tasks.sites.check_site_data`): one line on what it holds,
        or :class:`tffre.tasks.sites.SiteDataError` when it has nothing to train on.

        With ``dataset`` (the format, e.g. "gad") the data is checked as ``python -m tffre
        data check --dataset DATASET --data PATH`` checks it (every problem counted, the
        first named); without, :func:`tffre.tasks.sites.check_any_site`."""
        if dataset:
            return self._check_as(dataset, site_path(site, "data"))
        return check_any_site(site)

    @staticmethod
    def _check_as(dataset, path):
        """``python -m tffre data check``'s check of ``path`` as ``dataset``: a summary line,
        or :class:`tffre.tasks.sites.SiteDataError` with the first problem and the count."""
        from tffre.data.check import check_dataset
        return check_report_line(check_dataset("relations", dataset, path), dataset, path)

    @staticmethod
    def _label_ids(job, frame):
        index = {label: i for i, label in enumerate(job.labels)}
        return frame["label"].astype(str).map(index).to_numpy(np.int32)

    def server_data(self, job, side):
        """D_v at the server: (x, y) of the ``server-data`` file or folder of ``side`` (its
        train split, or all of it, as ``python -m tffre run --server-data`` reads it),
        tokenized as the sites tokenize their data; labels indexed by ``job.labels``."""
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
        from tffre.models.relation_model import has_prefix
        if has_prefix(config):   # the sites predict on D_v through the same frozen prefix
            from tffre.models.partial import activations, with_hidden
            prefix, store = self._prefix(job, encoder_dir, config)
            x = with_hidden(x, store.get(x, lambda x: activations(prefix, x)))
        return x, self._label_ids(job, frame)


#: What ``python -m tffre deploy`` runs at each side (:mod:`tffre.tasks.sites`).
SITES = RelationSites()
