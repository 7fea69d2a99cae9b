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

The task is one :class:`tffre.tasks.recipe.Recipe` (:data:`RECIPE`): the simulation's
``prepare`` and every deployment site (:class:`tffre.tasks.recipe.RecipeSites`) are derived
from it, the split encoder's frozen prefix, FedED's D_v and the relation F1 included.
"""

import dataclasses
import os
from typing import Optional

from tffre import resources
from tffre.hparams import (boolean, choice, fraction, non_negative_float, optional, param,
                           positive_int, text, threshold_or_dev)
from tffre.lazy import np
from tffre.tasks import (SAMPLE, ConceptOption, DataOption, EncoderOptions, Task, check_encoder,
                         data_path, label_mix_writer, require_data)
from tffre.tasks.recipe import (Built, Evaluation, FrozenPrefix, Loaded, Recipe, Resources,
                                ServerSet, Simulated)
from tffre.tasks.sites import site_path

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


def encoder_built(config, tokenizer, encoder_dir, encode, rows):
    """The :class:`tffre.tasks.recipe.Built` of an encoder model of ``config``
    (:func:`tffre.models.relation_model.build_re_model`: sentence RE's, and the text task's
    ``--model encoder``): its loss over logits, inputs ``[n, rows, max_length]`` int32 from
    ``encode``, the pretrained encoder of ``encoder_dir`` loaded at the server, ``tokenizer``
    saved in a bundle, and a split encoder's frozen prefix."""
    import tensorflow as tf
    from tffre.models.relation_model import (build_re_model, build_re_prefix, has_prefix,
                                             load_pretrained_encoder)
    prefix = FrozenPrefix(config, lambda: build_re_prefix(config),
                          lambda: build_re_model(config.full())) \
        if has_prefix(config) else None
    return Built(model_fn=lambda: build_re_model(config),
                 loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                 encode=encode, x_spec=tf.TensorSpec((None, rows, tokenizer.max_length), tf.int32),
                 load_pretrained=lambda model: load_pretrained_encoder(model, encoder_dir),
                 encoder=tokenizer, description=os.path.basename(os.path.normpath(encoder_dir)),
                 prefix=prefix)


def loader_options(dataset, options):
    """The loader's options of a run of ``dataset`` (``--raw-labels`` for ChemProt)."""
    return {"raw_labels": True} if dataset == "chemprot" and options.raw_labels else {}


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


class RelationRecipe(Recipe):
    """Sentence-level relation extraction (see the module docstring), in a simulation and
    across sites.

    A site's node configuration: ``data`` (a file, or a folder of train/dev/test files, of
    the dataset's format: :func:`tffre.data.sentence_sets.load_re`; its splits as they are,
    each held-out one evaluated there), ``encoder`` (the local Hugging Face encoder folder;
    default the packaged all-MiniLM-L6-v2) and ``prefix-cache``. The labels (the loader's
    names) must be alike at every site; the entity types are the sites' union (entity
    blinding's placeholders). With a split encoder (``trainable_layers``, ``lora_rank``) each
    side builds the frozen prefix from its own encoder folder and the job's seed; a site
    computes its examples' activations once and trains the top on them, and a site whose
    prefix differs from the server's is refused (:attr:`tffre.tasks.recipe.Built.prefix`).
    The server's ``server-data`` is FedED's D_v, tokenized as the sites tokenize.
    """

    TASK = TASK
    EVALUATION = "classification"
    PREDICTS = "relations"   # JSON lines of relation records (text and entity offsets)
    TABLES = ("FedCMC Table 2", "FedED Tables 3-8")
    AGREED = ("labels",)
    UNITED = ("entity_types",)

    def check(self, cfg):
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
        needs = [n for n in cfg.algorithms
                 if registry.get_spec(n).load_definition().needs_server_data]
        if needs and not (o.server_data or o.server_fraction):
            raise ValueError(f"{', '.join(needs)} needs the server's labelled set D_v: give "
                             f"--server-fraction (FedED: 0.2) or --server-data")

    def load(self, path, options, *, seed, notes=None, site=None, dataset=None):
        """The relation examples of ``path`` as {split: DataFrame}: a run's splits completed
        (:func:`tffre.data.sentence_sets.load_relation_splits`: a missing test or dev split
        held out of train), a site's as its files hold them; ``facts["entity_types"]`` those
        of the training examples."""
        from tffre.text.relation_tokenizer import RETokenizer
        if site is not None:
            splits, labels = self._site_splits(dataset, path, options)
        else:
            from tffre.data.sentence_sets import load_relation_splits
            splits, labels = load_relation_splits(dataset, path, seed=seed,
                                                  dev_fraction=options.dev_fraction or None,
                                                  notes=notes,
                                                  **loader_options(dataset, options))
            if options.threshold is not None and len(labels) != 2:
                raise ValueError(f"--threshold applies to a binary set; {dataset} ({path}) "
                                 f"has {len(labels)} labels: {', '.join(map(str, labels))}")
            if options.threshold == "dev" and "dev" not in splits:
                raise ValueError("--threshold dev needs a dev split: the data has none and "
                                 "--dev-fraction is 0")
        return Loaded(splits, tuple(labels), notes if notes is not None else [],
                      {"entity_types": RETokenizer.entity_types_of(splits["train"])})

    @staticmethod
    def _site_splits(dataset, path, options):
        from tffre.data.sentence_sets import by_split, load_re
        try:
            examples, labels = load_re(dataset, path, **loader_options(dataset, options))
        except ValueError as err:   # REFormatError: "file line N: field: message"
            raise ValueError(f"{path}: {err}" if path not in str(err) else str(err)) \
                from None
        splits = by_split(examples)
        if "train" not in splits or not len(splits["train"]):
            raise ValueError(f"{path}: no training examples")
        return splits, [str(label) for label in labels]

    def check_data(self, dataset, options, *, tokenizer=None, max_len=None, seed=0,
                   site=None):
        """The data check of what a run would load (``python -m tffre data check``)."""
        from tffre.data.check import check_dataset
        path = data_path(dataset, options.data)
        return check_dataset("relations", dataset, path, tokenizer=tokenizer,
                             max_len=max_len or options.max_len or DEFAULT_MAX_LEN, seed=seed,
                             dev_fraction=options.dev_fraction or None,
                             **loader_options(dataset, options))

    def run_resources(self, cfg, loaded):
        """The simulation's encoder folder: ``--encoder`` as given, or the packaged MiniLM."""
        from tffre.text.relation_tokenizer import default_encoder_dir
        return Resources(cfg.options.encoder or default_encoder_dir())

    def resources(self, options, side):
        """A deployment side's encoder folder (its ``encoder``; default the packaged
        MiniLM)."""
        from tffre.text.relation_tokenizer import default_encoder_dir
        return Resources(site_path(side, "encoder", required=False) or default_encoder_dir())

    def server_split(self, cfg, loaded):
        """FedED's D_v of the simulation (:func:`server_split`)."""
        server, source = server_split(cfg, loaded.splits, list(loaded.labels))
        return None if server is None else ServerSet(server, source)

    def read_server_data(self, path, options, *, dataset, labels):
        """A deployment server's D_v (:func:`read_server_data`)."""
        return read_server_data(dataset, path, list(labels))

    def config(self, spec, tokenizer, encoder_dir):
        """The :class:`tffre.models.relation_model.REModelConfig` of ``spec``."""
        from tffre.models.relation_model import config_for
        o = spec.options
        return config_for(tokenizer, encoder_dir, len(spec.labels),
                          representation=o.representation, num_layers=o.encoder_layers,
                          freeze_embeddings=bool(o.freeze_embedding), partial=o.partial())

    def build(self, spec):
        """The encoder model (:func:`tffre.models.relation_model.build_re_model`) and its
        entity-marker tokenizer, from the side's encoder folder; a split encoder's frozen
        prefix (:func:`tffre.models.relation_model.build_re_prefix`)."""
        from tffre.text.relation_tokenizer import RETokenizer
        o, encoder_dir = spec.options, spec.resources.value
        tokenizer = RETokenizer.from_pretrained(
            encoder_dir, max_length=o.max_len or DEFAULT_MAX_LEN,
            blind_entities=bool(o.blind_entities), entity_types=spec.facts.get("entity_types"))
        return encoder_built(self.config(spec, tokenizer, encoder_dir), tokenizer,
                             encoder_dir, tokenizer.encode, rows=4)

    def evaluation(self, options, labels):
        """Relation F1 (the first label is the negative one); with ``--threshold`` on a
        binary set, the relation's probability above the threshold."""
        if options.threshold is None:   # the argmax, as before the option existed
            return Evaluation("classification", negative_label=0)
        return Evaluation("binary", {"threshold": options.threshold}, negative_label=0)

    def refusal(self, options):
        """A decision threshold: the sites count the more probable class (a confusion
        matrix)."""
        if options.threshold is not None:
            return ("threshold: a deployment of sentence RE scores the more probable class "
                    "(the sites send a confusion matrix at the argmax)")
        return None

    def partition(self, loaded, options, num_clients, seed):
        """The training examples by label skew (each label over the clients in
        Dirichlet(alpha) proportions) or IID; the held-out examples dealt evenly (IID) or,
        under label skew, as the training labels were (each client's share of a class its
        training share: :func:`tffre.data.partition.label_following_split`), so that each
        site's own scores (per_site.csv) are on examples like its own. The pooled splits hold
        the same examples either way."""
        from tffre.data.partition import dirichlet_label_split, iid_split, label_following_split
        y = loaded.label_ids("train")
        if options.partition == "iid":
            parts = iid_split(len(y), num_clients, seed)
            held_out = {name: iid_split(len(records), num_clients, seed + 1)
                        for name, records in loaded.splits.items() if name != "train"}
        else:
            parts = dirichlet_label_split(y, num_clients, options.alpha, seed)
            held_out = {name: label_following_split(loaded.label_ids(name), y, parts, seed + 1)
                        for name in loaded.splits if name != "train"}
        return {f"client_{k}": {"train": part, **{name: idx[k] for name, idx in
                                                   held_out.items()}}
                for k, part in enumerate(parts)}

    def simulate(self, cfg, loaded, resources, built):
        """The clients of :meth:`partition`, the label mix (``partition.csv``/``.png``) and
        the summary's fields (labels, encoder, tokenizer counts, D_v)."""
        from tffre.data import FederatedData
        from tffre.data.partition import format_label_mix, label_mix
        from tffre.metrics import trivial_baselines
        o, labels, tokenizer = cfg.options, list(loaded.labels), built.encoder
        arrays = {name: (built.encode(df), loaded.label_ids(name))
                  for name, df in loaded.splits.items()}
        parts = self.partition(loaded, o, cfg.run.clients, cfg.run.seed)
        clients = {cid: {split: (arrays[split][0][idx], arrays[split][1][idx])
                         for split, idx in rows.items()} for cid, rows in parts.items()}
        skew = "IID" if o.partition == "iid" else f"label Dirichlet alpha={o.alpha}"
        source = "synthetic sample" if o.data == SAMPLE else o.data
        data = FederatedData(clients, num_classes=len(labels),
                             name=f"{cfg.dataset} ({source}), {cfg.run.clients} clients, "
                                  f"{skew}")
        y_train, y_test = arrays["train"][1], arrays["test"][1]
        mix = label_mix(y_train, [rows["train"] for rows in parts.values()],
                        label_names=list(range(len(labels))))
        mix.columns = [labels[c] if isinstance(c, (int, np.integer)) else c for c in mix.columns]
        server = loaded.server
        info = {"labels": labels, "negative_label": labels[0], "encoder": resources.value,
                "representation": o.representation, "max_len": tokenizer.max_length,
                "tokenizer": dict(tokenizer.stats),
                "train_examples": int(len(y_train)), "test_examples": int(len(y_test)),
                "dev_split": "dev" if "dev" in arrays else None,
                "server_examples": 0 if server is None else int(len(server.records)),
                "server_data": None if server is None else server.source,
                "data_notes": loaded.notes,
                **trivial_baselines(y_train, y_test, len(labels), negative_label=0)}
        print(f"\n{data.name}: {info['train_examples']} train / {info['test_examples']} test "
              f"examples, {len(labels)} labels; tokenizer {tokenizer.stats}")
        print(format_label_mix(mix))
        return Simulated(data, info, label_mix_writer(mix, data.name))


#: The task's one declaration: ``prepare``, ``check``, ``check_data`` and the deployment's
#: sites are derived from it (:mod:`tffre.tasks.recipe`).
RECIPE = RelationRecipe()
