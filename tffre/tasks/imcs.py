"""The IMCS-V2 task (FLCMC Tables 9-11): jieba + Word2Vec + LSTM or mean-vector logistic,
written as one :class:`tffre.tasks.recipe.Recipe` (:data:`RECIPE`), from which the
simulation and every site of a deployment are derived.

Loads IMCS (the embedded synthetic sample by default), builds the task, splits
whole dialogues over clients, segments with jieba and public dictionaries,
maps tokens through public Word2Vec vectors and builds the model.

Privacy defaults: the server uses only public resources. The jieba dictionary
is the shipped one plus ``--user-dict``; the clients' annotated symptom norms
join it only with ``--dict-from-clients``. Vectors come from ``--w2v`` (or the
sample's public vectors); the clients' pooled texts only with
``--w2v-from-clients``. Both flags warn.

Across sites (``python -m tffre deploy``) a site's node configuration names its own IMCS file
or folder (``data``, as ``--data`` takes it: a single file is the whole set, and a seeded 20%
of its dialogues is held out as test, from the job's seed) and its copies of the PUBLIC
vectors (``w2v``, default the embedded sample's) and jieba dictionary (``user-dict``). The
vocabulary comes from the vectors, never from a site's texts; the sides must agree on the
vocabulary's and the dictionary's fingerprints and on the task's fixed labels
(:attr:`IMCSRecipe.AGREED`), and the server builds the embedding matrix and the bundle's
encoder from its own files. ``--w2v-from-clients`` and ``--dict-from-clients`` read the
clients' texts or labels at the server, which a deployment never has: they are refused
(:meth:`IMCSRecipe.refusal`).
"""

import dataclasses
import hashlib
import json
import os
from typing import Optional

from tffre import resources
from tffre.hparams import (boolean, choice, existing_file, non_negative_float, optional,
                           param, positive_int)
from tffre.tasks import (SAMPLE, ConceptOption, DataOption, Task, data_path, needs_features,
                         require_data)
from tffre.tasks.recipe import Built, Loaded, Recipe, Resources, Simulated
from tffre.tasks.sites import SiteDataError, check_report_line, site_path

TASKS = ("symptom", "dialogue-act", "diagnosis")
PARTITIONS = ("diagnosis-dirichlet", "iid", "by-diagnosis")


@dataclasses.dataclass(frozen=True)
class Options(DataOption, ConceptOption):
    """IMCS-V2's options."""
    task: str = param("symptom", choice(*TASKS), "IMCS task")
    partition: str = param("diagnosis-dirichlet", choice(*PARTITIONS), "how whole dialogues "
                           "are split over clients")
    alpha: float = param(0.5, non_negative_float, "Dirichlet concentration of each client's "
                         "disease mix")
    w2v: Optional[str] = param(None, optional(existing_file), "pretrained Word2Vec vectors "
                               "(text or binary format)")
    w2v_from_clients: bool = param(False, boolean, "train vectors on the clients' pooled texts "
                                   "(breaks the privacy model; experiments only)", flag=True)
    user_dict: Optional[str] = param(None, optional(existing_file), "extra jieba user "
                                     "dictionary (public terms)")
    dict_from_clients: bool = param(False, boolean, "add the clients' annotated symptom norms "
                                    "to the jieba dictionary (reads client labels; experiments "
                                    "only)", flag=True)
    max_len: Optional[int] = param(None, optional(positive_int), "tokens per example "
                                   "(default 16, 192 for diagnosis)")
    lstm_units: int = param(64, positive_int, "LSTM width")
    bidirectional: bool = param(False, boolean, "bidirectional LSTM", flag=True)
    freeze_embedding: bool = param(False, boolean, "freeze the Word2Vec embedding", flag=True)


TASK = Task("imcs", "IMCS-V2 Chinese doctor-patient dialogues (FLCMC Tables 9-11)", ("imcs",),
            ("lstm", "mean-logistic"), Options, defaults={"clients": 20, "batch_size": 10},
            dataset_defaults={"imcs": {"data": SAMPLE}},
            samples={"imcs": resources.path("imcs_sample")})


SAMPLE_VECTORS = resources.path("imcs_sample", "w2v_sample.txt")
PRIVACY_WARNING = ("WARNING: {flag} reads the clients' private {what} on the server. That breaks "
                   "the federated privacy model; use it only for experiments.")
#: Options that read the clients' data at the server, and their flags (refused across sites).
SERVER_READS = {"w2v_from_clients": ("--w2v-from-clients", "texts"),
                "dict_from_clients": ("--dict-from-clients", "symptom annotations")}


def length_of(options):
    """Tokens per example of the task's ``options`` (an :class:`Options`): ``--max-len``,
    else 192 for diagnosis and 16 for the sentence tasks."""
    return options.max_len or (192 if options.task == "diagnosis" else 16)


def segmenter_for(cfg, splits):
    """jieba with the shipped dictionary and ``--user-dict``; client norms only if asked."""
    from tffre.data import imcs_dialogues as imcs
    o = cfg.options
    segmenter = public_segmenter(o.user_dict)
    if o.dict_from_clients:
        print(PRIVACY_WARNING.format(flag="--dict-from-clients",
                                     what="annotations (the symptom norms of the training split)"))
        segmenter.add_terms(sorted(imcs.symptom_norms(splits["train"])))
    return segmenter


def public_segmenter(user_dict=None):
    """jieba with the shipped dictionary and the public ``user_dict`` file (None: none)."""
    from tffre.text import MedicalSegmenter
    return MedicalSegmenter(user_dicts=[user_dict] if user_dict else ())


def word_vectors(cfg, splits, segmenter):
    """(vectors, source): ``--w2v``, the pooled client texts if asked, else the sample's vectors."""
    from tffre.text.word2vec import load_vectors, train_word2vec
    o = cfg.options
    if o.w2v:
        return load_vectors(o.w2v), o.w2v
    if o.w2v_from_clients:
        print(PRIVACY_WARNING.format(flag="--w2v-from-clients",
                                     what="texts (to train the vocabulary and vectors)"))
        texts = [t["sentence"] for d in splits["train"] for t in d.turns]
        return train_word2vec(segmenter.cut_all(texts), vector_size=64, seed=cfg.run.seed), \
            "pooled client texts"
    if o.data != SAMPLE:
        print("note: no --w2v given; using the small vectors trained on the embedded public "
              "sample. Pass --w2v with real medical vectors (e.g. Chinese-Word2vec-Medicine) "
              "for the real corpus.")
    return load_vectors(SAMPLE_VECTORS), "the embedded sample's public vectors"


def eval_split_of(splits):
    """The split a run scores on: "test", else "dev" (IMCS's test labels are not public)."""
    return "test" if "test" in splits else "dev"


def partition_table(stats, task):
    """Per-client dialogues, examples per split, and the training label mix."""
    import pandas as pd
    from tffre.data import imcs_dialogues as imcs
    names = list(imcs.label_names(task))
    train = stats[stats["split"] == "train"].set_index("client")
    table = pd.DataFrame({"dialogues": train["dialogues"], "train": train["examples"]})
    for split in ("dev", "test"):
        rows = stats[stats["split"] == split].set_index("client")
        if not rows.empty:
            table[split] = rows["examples"]
    if len(names) <= 4:
        for n in names:
            table[n] = train[n]
    else:
        table["largest label"] = train[names].idxmax(axis=1)
        table["share"] = (train[names].max(axis=1) / train["examples"].clip(lower=1)).round(2)
    return table


def build_model(model, options, num_classes, vocab_size, embedding_dim, *, seed, algorithms):
    """(model_fn, loss, description) of ``--model`` ``model`` ("lstm" or "mean-logistic")
    for the task's ``options`` (an :class:`Options`), ``num_classes`` labels and a vocabulary
    of ``vocab_size`` x ``embedding_dim`` (the vectors' shape); ``algorithms``: the run's
    registry names. The simulation and each side of a deployment build their model here
    (:meth:`IMCSRecipe.build`; the text task's too), so the two are one model."""
    import tensorflow as tf
    from tffre.models import LSTMConfig, lstm_classifier, mean_embedding_logistic
    length = length_of(options)
    # The vectors enter through load_pretrained (set_model_weights after initialize), not as
    # model_fn's initial values: those would be constants in every traced TFF graph.
    # Algorithms that build on the features (FedCB, FedETF, FedRoD) get the named-output LSTM.
    named = model == "lstm" and needs_features(algorithms)
    if model == "lstm":
        def model_fn():
            return lstm_classifier(LSTMConfig(
                num_classes, length, vocab_size=vocab_size, embedding_dim=embedding_dim,
                trainable_embedding=not options.freeze_embedding,
                lstm_units=options.lstm_units, bidirectional=options.bidirectional, seed=seed,
                named_outputs=named))
        name = "LSTM"
    elif model == "mean-logistic":
        def model_fn():
            # Table 9's model: frozen vectors, only the softmax layer learns.
            return mean_embedding_logistic(num_classes, length, vocab_size=vocab_size,
                                           embedding_dim=embedding_dim)
        name = "mean-vector logistic regression"
    else:
        raise ValueError(f"unknown IMCS model {model!r}; valid: {', '.join(TASK.models)}")
    return model_fn, tf.keras.losses.SparseCategoricalCrossentropy(from_logits=named), name


def embedding_loader(vocab, keyed_vectors):
    """A ``load_pretrained``: sets the model's "embedding" layer to ``keyed_vectors`` over
    ``vocab`` (:meth:`tffre.text.Vocabulary.embedding_matrix`). The matrix is built at the
    first call and kept: a site, which never loads the vectors into a model, never builds
    it, and a run of several algorithms builds it once."""
    matrix = []

    def load_pretrained(model):
        if not matrix:
            matrix.append(vocab.embedding_matrix(keyed_vectors))
        model.get_layer("embedding").set_weights(matrix)
    return load_pretrained


def vocabulary_fingerprint(vocab, dim):
    """A short hash of a vocabulary's tokens (in index order) and its vectors' dimension: what
    the sides of a deployment compare, so that a token id means one word everywhere."""
    text = json.dumps([list(vocab.tokens), int(dim)], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def dictionary_fingerprint(path):
    """A short hash of a jieba user dictionary's bytes, or "none" without one."""
    if not path:
        return "none"
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


@dataclasses.dataclass
class Dialogues(Loaded):
    """IMCS's loaded data: ``splits`` {role: [Dialogue]} by the role a client holds them in
    ("train", "test": the split a run scores on, "dev" where the data has one besides:
    :func:`tffre.data.imcs_federated.split_roles`), ``labels`` the ``task``'s fixed names.
    A dialogue holds several examples (:func:`tffre.data.imcs_dialogues.to_examples`)."""
    task: str = "symptom"

    def label_ids(self, split, labels=None):
        """The int32 labels of ``split``'s examples (``labels``: the run's, which must be the
        task's names in their order)."""
        import numpy as np
        from tffre.data import imcs_dialogues as imcs
        if labels is not None and tuple(labels) != tuple(self.labels):
            raise ValueError(f"the run's labels {list(labels)} are not the IMCS {self.task} "
                             f"task's {list(self.labels)}")
        return imcs.to_examples(self.splits[split], self.task)["label"].to_numpy(np.int32)

    def examples(self, split):
        """The number of examples (sentences, or dialogues for diagnosis) of ``split``."""
        from tffre.data import imcs_dialogues as imcs
        return int(len(imcs.to_examples(self.splits[split], self.task)))


class IMCSRecipe(Recipe):
    """``--dataset imcs`` (see the module docstring)."""

    TASK = TASK
    EVALUATION = "classification"
    PREDICTS = "text"
    TABLES = ("FLCMC Table 9", "FLCMC Table 10", "FLCMC Table 11")
    LOCAL_OPTIONS = Recipe.LOCAL_OPTIONS + ("w2v", "user_dict")
    AGREED = ("labels", "vocabulary", "dictionary")

    def __init__(self):
        self._vectors = {}   # the last (vectors path, mtime) -> (keyed vectors, vocabulary)

    def check(self, cfg):
        """``--data`` given; no DP with options that read the clients' data at the server;
        ``--alpha`` above 0 for the Dirichlet split; ``--w2v`` or ``--w2v-from-clients``."""
        require_data(cfg)
        o = cfg.options
        private = [n for n, hp in cfg.hparams.items() if hp.dp_on]
        if private and (o.w2v_from_clients or o.dict_from_clients):
            raise ValueError(f"{', '.join(private)}: differential privacy is void with "
                             f"--w2v-from-clients or --dict-from-clients, which read the "
                             f"clients' texts or labels on the server")
        if o.partition in ("diagnosis-dirichlet",) and not o.alpha > 0:
            raise ValueError(f"--alpha must be > 0 for the Dirichlet partition, got {o.alpha}")
        if o.w2v and o.w2v_from_clients:
            raise ValueError("give --w2v or --w2v-from-clients, not both")

    def load(self, path, options, *, seed, notes=None, site=None, dataset=None):
        """The dialogues of ``path`` (:func:`tffre.data.imcs_dialogues.load_imcs_splits`) by
        role, the split scored on (:func:`eval_split_of`) in ``facts["eval_split"]``."""
        from tffre.data import imcs_dialogues as imcs
        from tffre.data.imcs_federated import split_roles
        splits = imcs.load_imcs_splits(path, seed=seed, notes=notes, verbose=site is None)
        eval_split = eval_split_of(splits)
        try:
            roles = split_roles(splits, eval_split)
        except ValueError as err:   # no training or no scored split
            raise (ValueError(f"{path}: {err}") if site is not None else err) from None
        return Dialogues({role: splits[split] for role, split in roles},
                         tuple(imcs.label_names(options.task)),
                         notes if notes is not None else [], {"eval_split": eval_split},
                         task=options.task)

    def check_data(self, dataset, options, *, tokenizer=None, max_len=None, seed=0,
                   site=None):
        """The data check of what a run would load (``python -m tffre data check``):
        dialogues, sentences, ``--task``'s labels and lengths in jieba tokens per split."""
        import types
        from tffre.data.check import check_dataset
        cfg = types.SimpleNamespace(dataset=dataset, options=options)
        # The run's jieba (--user-dict, --dict-from-clients) counts the tokens.
        return check_dataset("dialogues", dataset, data_path(dataset, options.data),
                             seed=seed, task=options.task,
                             max_len=max_len or length_of(options),
                             segmenter_for=lambda splits: segmenter_for(cfg, splits))

    def refusal(self, options):
        """``--w2v-from-clients`` and ``--dict-from-clients``: they read the clients' data at
        the server, which a deployment never has."""
        for name, (flag, what) in SERVER_READS.items():
            if getattr(options, name):
                return (f"imcs: {flag} reads the clients' {what} at the server, which a "
                        f"deployment never has: give every side the same public vectors "
                        f"(w2v) and dictionary (user-dict) instead")
        return None

    def _keyed_vectors(self, path):
        """(keyed vectors, vocabulary) of the vectors file ``path`` (the last kept)."""
        from tffre.text import Vocabulary
        from tffre.text.word2vec import load_vectors
        if not os.path.isfile(path):
            raise ValueError(f"w2v: no such file: {path}")
        key = (path, os.path.getmtime(path))
        if key not in self._vectors:
            try:
                kv = load_vectors(path)
            except ValueError as err:   # names the file
                raise ValueError(f"w2v: {' '.join(str(err).split())}") from None
            self._vectors = {key: (kv, Vocabulary.from_vectors(kv))}
        return self._vectors[key]

    def resources(self, options, side):
        """A side's jieba (the shipped dictionary and its ``user-dict``) and its public
        ``w2v`` vectors (default the embedded sample's), with their fingerprints."""
        vectors = site_path(side, "w2v", required=False) or SAMPLE_VECTORS
        user_dict = site_path(side, "user-dict", required=False)
        if user_dict and not os.path.isfile(user_dict):
            raise ValueError(f"user-dict: no such file: {user_dict}")
        kv, vocab = self._keyed_vectors(vectors)
        return Resources((public_segmenter(user_dict), kv, vocab),
                         {"vocabulary": vocabulary_fingerprint(vocab, kv.vector_size),
                          "dictionary": dictionary_fingerprint(user_dict)},
                         f"vectors of {len(kv)} words x {kv.vector_size} from {vectors}",
                         files={"vocabulary": f"w2v {vectors}",
                                "dictionary": f"user-dict {user_dict or '(none)'}"})

    def run_resources(self, cfg, loaded):
        """The simulation's jieba (:func:`segmenter_for`) and vectors (:func:`word_vectors`),
        which the experiments' options may take from the clients' training split."""
        from tffre.text import Vocabulary
        segmenter = segmenter_for(cfg, loaded.splits)
        kv, source = word_vectors(cfg, loaded.splits, segmenter)
        return Resources((segmenter, kv, Vocabulary.from_vectors(kv)), description=source)

    def build(self, spec):
        """:func:`build_model` over the side's vocabulary; a split's dialogues encoded as a
        client's (:func:`tffre.data.imcs_federated.encode_examples`)."""
        import tensorflow as tf
        from tffre.data.imcs_federated import encode_examples
        from tffre.text import TextEncoder
        segmenter, kv, vocab = spec.resources.value
        o = spec.options
        length = length_of(o)
        model_fn, loss, name = build_model(spec.model, o, len(spec.labels), len(vocab),
                                           kv.vector_size, seed=spec.seed,
                                           algorithms=spec.algorithms)
        return Built(model_fn=model_fn, loss=loss,
                     encode=lambda dialogues: encode_examples(dialogues, o.task, segmenter,
                                                              vocab, length)[1],
                     x_spec=tf.TensorSpec((None, length), tf.int32),
                     load_pretrained=embedding_loader(vocab, kv),
                     encoder=TextEncoder(segmenter, vocab, length), description=name)

    def simulate(self, cfg, loaded, resources, built):
        """Whole dialogues over clients and encoded per client
        (:func:`tffre.data.imcs_federated.build_imcs_federated`); the info holds the vectors,
        the split scored on, the majority-class and lookup baselines; ``write_extras``
        writes ``partition.csv`` and ``partition.png``."""
        from tffre.data import imcs_dialogues as imcs
        from tffre.data.imcs_federated import (DialoguePartition, TextEncoding,
                                               build_imcs_federated)
        from tffre.metrics import lookup_baselines, trivial_baselines
        from tffre.plots import plot_partition
        o, splits = cfg.options, loaded.splits
        segmenter, kv, vocab = resources.value
        data, stats = build_imcs_federated(
            splits, o.task, encoding=TextEncoding(segmenter, vocab, max_len=length_of(o)),
            partition=DialoguePartition(o.partition, num_clients=cfg.run.clients,
                                        alpha=o.alpha, seed=cfg.run.seed),
            eval_split="test")
        y_train, y_test = data.pooled("train")[1], data.pooled("test")[1]
        # What remembering the training texts scores, on the raw texts of the roles scored.
        roles = ("train", "test") + (("dev",) if data.has_split("dev") else ())
        raw = {role: imcs.to_examples(splits[role], o.task) for role in roles}
        sample_tokens = segmenter.cut_all(imcs.to_examples(splits["train"][:50], o.task)["text"])
        info = {"task": o.task, "vectors": resources.description, "vocab_size": len(vocab),
                "vector_dim": kv.vector_size,
                "oov_rate_sample": round(vocab.oov_rate(sample_tokens), 4),
                "eval_split": loaded.facts["eval_split"],
                "dev_split": "dev" if data.has_split("dev") else None,
                "data_notes": loaded.notes,
                **trivial_baselines(y_train, y_test, data.num_classes),
                **lookup_baselines(list(raw["train"]["text"]), raw["train"]["label"].to_numpy(),
                                   {role: (list(ex["text"]), ex["label"].to_numpy())
                                    for role, ex in raw.items() if role != "train"},
                                   data.num_classes),
                "train_examples": int(len(y_train)), "test_examples": int(len(y_test))}
        print(f"\n{data.name}: {info['train_examples']} train / {info['test_examples']} test "
              f"examples; vocabulary {info['vocab_size']} x {info['vector_dim']} from "
              f"{resources.description}")
        print(partition_table(stats, o.task).to_string())

        def write_extras(out_dir):
            stats.to_csv(os.path.join(out_dir, "partition.csv"), index=False)
            plot_partition(stats, os.path.join(out_dir, "partition.png"),
                           list(imcs.label_names(o.task)), title=data.name,
                           legend_names=list(imcs.label_names(o.task, english=True)))
        return Simulated(data, info, write_extras)

    def check_site(self, site, dataset=None):
        """A site's data and public files before it starts: ``python -m tffre data check
        --dataset imcs --data PATH [--user-dict FILE]``'s report as one line (every problem
        counted, the first named; the symptom task, a run's ``task`` being known only with
        its job), and the vectors it will use; :class:`tffre.tasks.sites.SiteDataError`
        otherwise."""
        dataset = dataset or TASK.datasets[0]
        path = site_path(site, "data")
        user_dict = site_path(site, "user-dict", required=False)
        if user_dict and not os.path.isfile(user_dict):
            raise SiteDataError(f"user-dict: no such file: {user_dict}")
        options = Options.resolve({"data": path, "user_dict": user_dict})
        line = check_report_line(self.check_data(dataset, options), dataset, path)
        try:
            side = self.resources(options, site)
        except ValueError as err:
            raise SiteDataError(" ".join(str(err).split())) from None
        return f"{line}; {side.description}"


#: The task's one declaration: ``prepare``, ``check``, ``check_data`` and the deployment's
#: sites are derived from it (:mod:`tffre.tasks.recipe`).
RECIPE = IMCSRecipe()
