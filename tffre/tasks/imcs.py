"""The IMCS-V2 task (FLCMC Tables 9-11): jieba + Word2Vec + LSTM or mean-vector logistic.

Loads IMCS (the embedded synthetic sample by default), builds the task, splits
whole dialogues over clients, segments with jieba and public dictionaries,
maps tokens through public Word2Vec vectors and builds the model.

Privacy defaults: the server uses only public resources. The jieba dictionary
is the shipped one plus ``--user-dict``; the clients' annotated symptom norms
join it only with ``--dict-from-clients``. Vectors come from ``--w2v`` (or the
sample's public vectors); the clients' pooled texts only with
``--w2v-from-clients``. Both flags warn.

Across sites (:class:`IMCSSites`, ``python -m tffre deploy``) each side reads its own copy
of the public vectors and dictionary, the sites agree on their fingerprints, and both
flags are refused: a deployment's server never holds the clients' texts.
"""

import dataclasses
import hashlib
import json
import os
from typing import Optional

from tffre import resources
from tffre.hparams import (boolean, choice, existing_file, non_negative_float, optional,
                           param, positive_int)
from tffre.runner.run_settings import Job
from tffre.tasks import (SAMPLE, ConceptOption, DataOption, Task, data_path, needs_features,
                         require_data)
from tffre.tasks.sites import (SiteData, SiteDataError, SiteModel, Sites, check_report_line,
                               site_path)

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


def check(cfg):
    """The options' checks that need no data."""
    require_data(cfg)
    o = cfg.options
    private = [n for n, hp in cfg.hparams.items() if hp.dp_on]
    if private and (o.w2v_from_clients or o.dict_from_clients):
        raise ValueError(f"{', '.join(private)}: differential privacy is void with "
                         f"--w2v-from-clients or --dict-from-clients, which read the clients' "
                         f"texts or labels on the server")
    if o.partition in ("diagnosis-dirichlet",) and not o.alpha > 0:
        raise ValueError(f"--alpha must be > 0 for the Dirichlet partition, got {o.alpha}")
    if o.w2v and o.w2v_from_clients:
        raise ValueError("give --w2v or --w2v-from-clients, not both")

SAMPLE_DIR = resources.path("imcs_sample")
SAMPLE_VECTORS = resources.path("imcs_sample", "w2v_sample.txt")
PRIVACY_WARNING = ("WARNING: {flag} reads the clients' private {what} on the server. That breaks "
                   "the federated privacy model; use it only for experiments.")


def max_len(cfg):
    """Tokens per example: ``--max-len``, else 192 for diagnosis and 16 for sentence tasks."""
    return length_of(cfg.options)


def length_of(options):
    """:func:`max_len` of the task's ``options`` (an :class:`Options`)."""
    return options.max_len or (192 if options.task == "diagnosis" else 16)


def check_data(dataset, options, *, tokenizer=None, max_len=None, seed=0):
    """The data check of what a run would load (``python -m tffre data check``): dialogues,
    sentences, ``--task``'s labels and lengths in jieba tokens per split."""
    import types
    from tffre.data.check import check_dataset
    from tffre.tasks import imcs as task  # its max_len(), which the argument hides here
    cfg = types.SimpleNamespace(dataset=dataset, options=options)
    # The run's jieba (--user-dict, --dict-from-clients) counts the tokens.
    return check_dataset("dialogues", dataset, data_path(dataset, options.data), seed=seed, task=options.task,
                         max_len=max_len or task.max_len(cfg),
                         segmenter_for=lambda splits: segmenter_for(cfg, splits))


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


def prepare(cfg):
    """Loads, splits and encodes IMCS for ``cfg``; returns the :class:`Job`."""
    from tffre.data import imcs_dialogues as imcs
    from tffre.data.concepts import concepts_for
    from tffre.data.imcs_federated import DialoguePartition, TextEncoding, build_imcs_federated
    from tffre.metrics import lookup_baselines, trivial_baselines
    from tffre.plots import plot_partition
    from tffre.text import TextEncoder, Vocabulary

    o = cfg.options
    notes = []
    splits = imcs.load_imcs_splits(data_path(cfg.dataset, o.data), seed=cfg.run.seed, notes=notes, verbose=True)
    for note in notes:
        print(f"note: {note}")
    segmenter = segmenter_for(cfg, splits)
    kv, source = word_vectors(cfg, splits, segmenter)
    vocab = Vocabulary.from_vectors(kv)
    length = max_len(cfg)
    eval_split = eval_split_of(splits)
    data, stats = build_imcs_federated(
        splits, o.task, encoding=TextEncoding(segmenter, vocab, max_len=length),
        partition=DialoguePartition(o.partition, num_clients=cfg.run.clients, alpha=o.alpha,
                                    seed=cfg.run.seed),
        eval_split=eval_split)
    y_train, y_test = data.pooled("train")[1], data.pooled("test")[1]
    # What remembering the training texts scores, on the raw texts of the roles scored.
    roles = {"train": "train", "test": eval_split, **({"dev": "dev"} if data.has_split("dev")
                                                      else {})}
    raw = {role: imcs.to_examples(splits[split], o.task) for role, split in roles.items()}
    sample_tokens = segmenter.cut_all(imcs.to_examples(splits["train"][:50], o.task)["text"])
    info = {"task": o.task, "vectors": source, "vocab_size": len(vocab),
            "vector_dim": kv.vector_size, "oov_rate_sample": round(vocab.oov_rate(sample_tokens), 4),
            "eval_split": eval_split, "dev_split": "dev" if data.has_split("dev") else None,
            "data_notes": notes,
            **trivial_baselines(y_train, y_test, data.num_classes),
            **lookup_baselines(list(raw["train"]["text"]), raw["train"]["label"].to_numpy(),
                               {role: (list(ex["text"]), ex["label"].to_numpy())
                                for role, ex in raw.items() if role != "train"},
                               data.num_classes),
            "train_examples": int(len(y_train)), "test_examples": int(len(y_test))}
    print(f"\n{data.name}: {info['train_examples']} train / {info['test_examples']} test "
          f"examples; vocabulary {info['vocab_size']} x {info['vector_dim']} from {source}")
    print(partition_table(stats, o.task).to_string())
    model_fn, loss, model_name = build_model(cfg.model, o, data.num_classes, len(vocab),
                                             kv.vector_size, seed=cfg.run.seed,
                                             algorithms=cfg.algorithms)

    def write_extras(out_dir):
        stats.to_csv(os.path.join(out_dir, "partition.csv"), index=False)
        plot_partition(stats, os.path.join(out_dir, "partition.png"),
                       list(imcs.label_names(o.task)), title=data.name,
                       legend_names=list(imcs.label_names(o.task, english=True)))

    return Job(data=data, model_fn=model_fn, loss=loss,
               concepts=concepts_for(imcs.label_names(o.task), o.concept_file), prompts="text",
               title=f"{data.name}, {model_name}",
               label_names=list(imcs.label_names(o.task)),
               encoder=TextEncoder(segmenter, vocab, length), info=info,
               write_extras=write_extras, load_pretrained=embedding_loader(vocab, kv))


def build_model(model, options, num_classes, vocab_size, embedding_dim, *, seed, algorithms):
    """(model_fn, loss, description) of ``--model`` ``model`` ("lstm" or "mean-logistic")
    for the task's ``options`` (an :class:`Options`), ``num_classes`` labels and a vocabulary
    of ``vocab_size`` x ``embedding_dim`` (the vectors' shape); ``algorithms``: the run's
    registry names. The simulation (:func:`prepare`) and each side of a deployment
    (:class:`IMCSSites`) build their model here, so the two are one model."""
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


class IMCSSites(Sites):
    """IMCS-V2 across sites (:mod:`tffre.tasks.sites`): jieba + public Word2Vec + LSTM or
    mean-vector logistic regression, as :func:`prepare` builds them.

    Node configuration (a site's own files, never sent):

    * ``data``: the site's IMCS file or folder, as ``--data`` takes it
      (:func:`tffre.data.imcs_dialogues.load_imcs_splits`: a single file is the whole set, and a seeded
      20% of its dialogues is held out as test, from the job's seed);
    * ``w2v``: the site's copy of the PUBLIC Word2Vec vectors (default: the embedded sample's
      public vectors, as :func:`word_vectors`);
    * ``user-dict``: an optional public jieba user dictionary.

    The vocabulary comes from the vectors (:meth:`tffre.text.Vocabulary.from_vectors`),
    never from a site's texts. Each site's survey reports its vocabulary's fingerprint (and
    the vectors' dimension) and its dictionary's; the sites must agree on both
    (:attr:`AGREED`), so a site whose vocabulary differs from the first site's takes no
    part. The server builds the embedding matrix and the bundle's encoder from its own
    ``w2v`` and ``user-dict`` (run config options, local paths: :attr:`LOCAL_OPTIONS`) and
    refuses to start when they differ from what the sites agreed on. The labels are the
    IMCS task's fixed names (:func:`tffre.data.imcs_dialogues.label_names`), alike by construction.

    ``--w2v-from-clients`` and ``--dict-from-clients`` read the clients' texts or labels at
    the server, which a deployment never has: they are refused.
    """

    LOCAL_OPTIONS = Sites.LOCAL_OPTIONS + ("w2v", "user_dict")
    AGREED = ("labels", "vocabulary", "dictionary")
    #: Options that read the clients' data at the server, and their flags.
    SERVER_READS = {"w2v_from_clients": ("--w2v-from-clients", "texts"),
                    "dict_from_clients": ("--dict-from-clients", "symptom annotations")}

    def __init__(self):
        self._vectors = {}      # the last (vectors path, mtime) -> (keyed vectors, vocabulary)
        self._segmenters = {}   # the last user dictionary -> its segmenter

    @staticmethod
    def options(job):
        """The task's :class:`Options` of ``job`` (its local paths unset)."""
        return Options.resolve({k: v for k, v in job.options.items() if k in Options.names()})

    @classmethod
    def refusal(cls, job):
        """Why ``job`` cannot run across sites (an option that reads the clients' data at
        the server), or None."""
        for name, (flag, what) in cls.SERVER_READS.items():
            if job.options.get(name):
                return (f"imcs: {flag} reads the clients' {what} at the server, which a "
                        f"deployment never has: give every side the same public vectors "
                        f"(w2v) and dictionary (user-dict) instead")
        return None

    def _refuse(self, job):
        refusal = self.refusal(job)
        if refusal:
            raise SiteDataError(refusal)

    def _splits(self, job, site):
        """(path, {split: [Dialogue]}) of the site's ``data``."""
        from tffre.data import imcs_dialogues as imcs
        path = site_path(site, "data")
        try:
            return path, imcs.load_imcs_splits(path, seed=job.seed)
        except (OSError, ValueError) as err:   # ImcsFormatError: file, dialogue and field
            message = " ".join(str(err).split())
            raise SiteDataError(message if path in message else f"{path}: {message}") \
                from None

    def vectors(self, side):
        """(keyed vectors, vocabulary, where they came from) of a side's ``w2v`` (default the
        embedded sample's public vectors); the last ones loaded are kept."""
        from tffre.text import Vocabulary
        from tffre.text.word2vec import load_vectors
        path = site_path(side, "w2v", required=False) or SAMPLE_VECTORS
        if not os.path.isfile(path):
            raise SiteDataError(f"w2v: no such file: {path}")
        key = (path, os.path.getmtime(path))
        if key not in self._vectors:
            try:
                kv = load_vectors(path)
            except ValueError as err:   # names the file
                raise SiteDataError(f"w2v: {' '.join(str(err).split())}") from None
            self._vectors = {key: (kv, Vocabulary.from_vectors(kv))}
        return self._vectors[key] + (path,)

    def _user_dict(self, side):
        path = site_path(side, "user-dict", required=False)
        if path and not os.path.isfile(path):
            raise SiteDataError(f"user-dict: no such file: {path}")
        return path

    def segmenter(self, side):
        """A side's jieba: the shipped dictionary and its ``user-dict`` (kept per file)."""
        path = self._user_dict(side)
        if path not in self._segmenters:
            self._segmenters = {path: public_segmenter(path)}
        return self._segmenters[path]

    def _facts(self, side):
        """{vocabulary, dictionary} fingerprints of a side's files, and (vectors, vocabulary)."""
        kv, vocab, _ = self.vectors(side)
        return {"vocabulary": vocabulary_fingerprint(vocab, kv.vector_size),
                "dictionary": dictionary_fingerprint(self._user_dict(side))}, kv, vocab

    def _check_agreed(self, job, side, facts):
        """SiteDataError when a side's fingerprints differ from those the sites agreed on
        (``job.facts``; a job before the agreement has none)."""
        files = {"vocabulary": f"w2v {self.vectors(side)[2]}",
                 "dictionary": f"user-dict {self._user_dict(side) or '(none)'}"}
        for key, value in facts.items():
            agreed = job.facts.get(key)
            if agreed and agreed != value:
                # A site's line is logged under its name; the server's names the server.
                whose = "" if side.get("site") else "the server's "
                raise SiteDataError(
                    f"{whose}{files[key]}: its {key} (fingerprint {value}) differs from the "
                    f"one the sites agreed on ({agreed}): every side needs the same public "
                    f"file")

    def survey(self, job, site):
        """{labels, examples, vocabulary, dictionary} of the site's data and public files
        (:class:`tffre.tasks.sites.SiteDataError` if bad)."""
        from tffre.data import imcs_dialogues as imcs
        o = self.options(job)
        _, splits = self._splits(job, site)
        facts, _, _ = self._facts(site)
        self._check_agreed(job, site, facts)   # a site asked again during the run
        return {"labels": list(imcs.label_names(o.task)),
                "examples": int(len(imcs.to_examples(splits["train"], o.task))), **facts}

    def model(self, job, side):
        """The job's :class:`tffre.tasks.sites.SiteModel` (the run's ``--model``, as
        :func:`build_model` builds it for :func:`prepare`) over this side's vocabulary; at the
        server, the embedding matrix of its vectors and the bundle's
        :class:`tffre.text.TextEncoder`."""
        import tensorflow as tf
        from tffre.data import imcs_dialogues as imcs
        from tffre.text import TextEncoder
        self._refuse(job)
        o = self.options(job)
        # At the server, ``side`` is what the deployment passes of the run config (its
        # ``w2v`` and ``user-dict``, when given): absent, the sample's public vectors.
        facts, kv, vocab = self._facts(side)
        self._check_agreed(job, side, facts)
        # The run's --model (a job saved before DeployJob carried it: the task's default).
        name = job.model or TASK.models[0]
        model_fn, loss, _ = build_model(name, o, imcs.num_classes(o.task), len(vocab),
                                        kv.vector_size, seed=job.seed,
                                        algorithms=[job.algorithm])
        length = length_of(o)
        return SiteModel(
            model_fn=model_fn, loss=loss,
            input_spec=(tf.TensorSpec((None, length), tf.int32),
                        tf.TensorSpec((None,), tf.int32)),
            load_pretrained=embedding_loader(vocab, kv),
            encoder=TextEncoder(self.segmenter(side), vocab, length))

    def site_data(self, job, site):
        """The site's :class:`tffre.tasks.sites.SiteData`: its train split and held-out splits
        (test, and dev where the data has one), segmented and encoded as the simulation
        encodes one client's examples (:func:`tffre.data.imcs_federated.encode_examples`)."""
        from tffre.data.imcs_federated import encode_examples, split_roles
        self._refuse(job)
        o = self.options(job)
        path, splits = self._splits(job, site)
        facts, _, vocab = self._facts(site)
        self._check_agreed(job, site, facts)
        segmenter = self.segmenter(site)
        arrays = {}
        try:
            for role, split in split_roles(splits, eval_split_of(splits)):
                _, x, y = encode_examples(splits[split], o.task, segmenter, vocab,
                                          length_of(o))
                arrays[role] = (x, y)
        except ValueError as err:   # a split missing, a diagnosis unknown: one line
            raise SiteDataError(f"{path}: {' '.join(str(err).split())}") from None
        return SiteData(train=arrays.pop("train"), held_out=arrays)

    def check_site(self, site, dataset=None):
        """A site's data and public files before it starts
        (:func:`tffre.tasks.sites.check_site_data`): ``python -m tffre data check --dataset
        imcs --data PATH [--user-dict FILE]``'s report as one line (every problem counted,
        the first named; the symptom task, a run's ``task`` being known only with its job),
        and the vectors it will use; :class:`tffre.tasks.sites.SiteDataError` otherwise."""
        dataset = dataset or TASK.datasets[0]
        path = site_path(site, "data")
        options = Options.resolve({"data": path, "user_dict": self._user_dict(site)})
        line = check_report_line(check_data(dataset, options), dataset, path)
        kv, _, vectors = self.vectors(site)
        return f"{line}; vectors of {len(kv)} words x {kv.vector_size} from {vectors}"


#: What ``python -m tffre deploy`` runs at each side (:mod:`tffre.tasks.sites`).
SITES = IMCSSites()
