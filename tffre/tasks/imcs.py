"""The IMCS-V2 task (FLCMC Tables 9-11): jieba + Word2Vec + LSTM or mean-vector logistic.

Loads IMCS (the embedded synthetic sample by default), builds the task, splits
whole dialogues over clients, segments with jieba and public dictionaries,
maps tokens through public Word2Vec vectors and builds the model.

Privacy defaults: the server uses only public resources. The jieba dictionary
is the shipped one plus ``--user-dict``; the clients' annotated symptom norms
join it only with ``--dict-from-clients``. Vectors come from ``--w2v`` (or the
sample's public vectors); the clients' pooled texts only with
``--w2v-from-clients``. Both flags warn.
"""

import dataclasses
import os
from typing import Optional

from tffre import resources
from tffre.hparams import (Params, boolean, choice, existing_file, non_negative_float, optional,
                           param, positive_int)
from tffre.runner.settings import Job
from tffre.tasks import (SAMPLE, ConceptOption, DataOption, Task, needs_features,
                         require_data)

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
            dataset_defaults={"imcs": {"data": SAMPLE}})


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


def data_path(cfg):
    """The IMCS folder or file ``--data`` names (the embedded sample for "sample")."""
    return SAMPLE_DIR if cfg.options.data == SAMPLE else cfg.options.data


def max_len(cfg):
    """Tokens per example: ``--max-len``, else 192 for diagnosis and 16 for sentence tasks."""
    return cfg.options.max_len or (192 if cfg.options.task == "diagnosis" else 16)


def check_data(dataset, options, *, tokenizer=None, max_len=None, seed=0):
    """The data check of what a run would load (``python -m tffre data check``): dialogues,
    sentences, ``--task``'s labels and lengths in jieba tokens per split."""
    import types
    from tffre.data.check import check_dataset
    from tffre.tasks import imcs as task  # its max_len(), which the argument hides here
    cfg = types.SimpleNamespace(dataset=dataset, options=options)
    # The run's jieba (--user-dict, --dict-from-clients) counts the tokens.
    return check_dataset("dialogues", dataset, data_path(cfg), seed=seed, task=options.task,
                         max_len=max_len or task.max_len(cfg),
                         segmenter_for=lambda splits: segmenter_for(cfg, splits))


def segmenter_for(cfg, splits):
    """jieba with the shipped dictionary and ``--user-dict``; client norms only if asked."""
    from tffre.data import imcs
    from tffre.text import MedicalSegmenter
    o = cfg.options
    segmenter = MedicalSegmenter(user_dicts=[o.user_dict] if o.user_dict else ())
    if o.dict_from_clients:
        print(PRIVACY_WARNING.format(flag="--dict-from-clients",
                                     what="annotations (the symptom norms of the training split)"))
        segmenter.add_terms(sorted(imcs.symptom_norms(splits["train"])))
    return segmenter


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


def partition_table(stats, task):
    """Per-client dialogues, examples per split, and the training label mix."""
    import pandas as pd
    from tffre.data import imcs
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
    import tensorflow as tf
    from tffre.data import imcs
    from tffre.data.concepts import concepts_for
    from tffre.data.imcs_federated import build_imcs_federated
    from tffre.metrics import trivial_baselines
    from tffre.models import lstm_classifier, mean_embedding_logistic
    from tffre.plots import plot_partition
    from tffre.text import TextEncoder, Vocabulary

    o = cfg.options
    notes = []
    splits = imcs.load_imcs_splits(data_path(cfg), seed=cfg.run.seed, notes=notes, verbose=True)
    for note in notes:
        print(f"note: {note}")
    segmenter = segmenter_for(cfg, splits)
    kv, source = word_vectors(cfg, splits, segmenter)
    vocab = Vocabulary.from_vectors(kv)
    length = max_len(cfg)
    eval_split = "test" if "test" in splits else "dev"
    data, stats = build_imcs_federated(
        splits, o.task, segmenter=segmenter, vocab=vocab, max_len=length,
        partition=o.partition, num_clients=cfg.run.clients, alpha=o.alpha, seed=cfg.run.seed,
        eval_split=eval_split)
    y_train, y_test = data.pooled("train")[1], data.pooled("test")[1]
    sample_tokens = segmenter.cut_all(imcs.to_examples(splits["train"][:50], o.task)["text"])
    info = {"task": o.task, "vectors": source, "vocab_size": len(vocab),
            "vector_dim": kv.vector_size, "oov_rate_sample": round(vocab.oov_rate(sample_tokens), 4),
            "eval_split": eval_split, "dev_split": "dev" if data.has_split("dev") else None,
            "data_notes": notes,
            **trivial_baselines(y_train, y_test, data.num_classes),
            "train_examples": int(len(y_train)), "test_examples": int(len(y_test))}
    print(f"\n{data.name}: {info['train_examples']} train / {info['test_examples']} test "
          f"examples; vocabulary {info['vocab_size']} x {info['vector_dim']} from {source}")
    print(partition_table(stats, o.task).to_string())
    matrix = vocab.embedding_matrix(kv)
    num_classes = data.num_classes
    # The vectors enter through load_pretrained (set_model_weights after initialize), not as
    # model_fn's initial values: those would be constants in every traced TFF graph.
    # Algorithms that build on the features (FedCB, FedETF, FedRoD) get the named-output LSTM.
    named = cfg.model == "lstm" and needs_features(cfg.algorithms)
    if cfg.model == "lstm":
        def model_fn():
            return lstm_classifier(num_classes, length, vocab_size=matrix.shape[0],
                                   embedding_dim=matrix.shape[1],
                                   trainable_embedding=not o.freeze_embedding,
                                   lstm_units=o.lstm_units, bidirectional=o.bidirectional,
                                   seed=cfg.run.seed, named_outputs=named)
        model_name = "LSTM"
    else:
        def model_fn():
            # Table 9's model: frozen vectors, only the softmax layer learns.
            return mean_embedding_logistic(num_classes, length, vocab_size=matrix.shape[0],
                                           embedding_dim=matrix.shape[1])
        model_name = "mean-vector logistic regression"

    def load_pretrained(model):
        model.get_layer("embedding").set_weights([matrix])

    def write_extras(out_dir):
        stats.to_csv(os.path.join(out_dir, "partition.csv"), index=False)
        plot_partition(stats, os.path.join(out_dir, "partition.png"),
                       list(imcs.label_names(o.task)), title=data.name,
                       legend_names=list(imcs.label_names(o.task, english=True)))

    return Job(data=data, model_fn=model_fn,
               loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=named),
               concepts=concepts_for(imcs.label_names(o.task), o.concept_file), prompts="text",
               title=f"{data.name}, {model_name}",
               label_names=list(imcs.label_names(o.task)),
               encoder=TextEncoder(segmenter, vocab, length), info=info,
               write_extras=write_extras, load_pretrained=load_pretrained)
