"""Sentence-level relation extraction (FedCMC Table 2, FedED Tables 3-8) on a Hugging Face encoder.

Loads a relation set (:mod:`tffre.data.relations`; the embedded synthetic sample for
i2b2 and GAD by default), tokenizes it with entity markers
(:class:`tffre.text.relation_tokenizer.RETokenizer`), splits the training examples
over clients by label skew (each label's examples over the clients in
Dirichlet(alpha) proportions, FedCMC section 4.1) or IID, and builds the
encoder model (:func:`tffre.models.relations.build_re_model`). The pretrained
encoder weights go into the server state after ``initialize``
(``load_pretrained``), never into ``model_fn``.

Splits: a folder with train/dev/test files gives those splits. A set with no
test split holds out a seeded 20% of its examples as test, and says so. The
test and dev examples are dealt evenly over the clients; the evaluation pools
them (a centralised test set, as the papers report).
"""

import os

import numpy as np

from tffre import resources
from tffre.config import SAMPLE
from tffre.data.concepts import concepts_for
from tffre.experiments import Job, label_mix_writer

SAMPLE_DIRS = {"i2b2": resources.path("re_sample", "i2b2"), "gad": resources.path("re_sample", "gad")}
DEFAULT_MAX_LEN = 128
HOLDOUT = 0.2


def data_path(cfg):
    """The file or folder ``cfg.data`` names (the embedded sample for "sample")."""
    return SAMPLE_DIRS[cfg.dataset] if cfg.data == SAMPLE else cfg.data


def split_examples(examples, seed):
    """{split: DataFrame}; without a test split, a seeded 20% of the examples becomes test."""
    if "split" in examples:
        splits = {name: part.drop(columns="split").reset_index(drop=True)
                  for name, part in examples.groupby("split", sort=False)}
    else:
        splits = {"train": examples.reset_index(drop=True)}
    if "train" not in splits:
        raise ValueError("the data has no train split")
    if "test" not in splits:
        train = splits["train"]
        order = np.random.RandomState([seed, 7]).permutation(len(train))
        cut = int(round(len(train) * HOLDOUT))
        splits["test"] = train.iloc[np.sort(order[:cut])].reset_index(drop=True)
        splits["train"] = train.iloc[np.sort(order[cut:])].reset_index(drop=True)
        print(f"note: no test split in the data; holding out {cut} of {len(train)} examples "
              f"({HOLDOUT:.0%}, seeded) as test")
    return splits


def server_split(cfg, splits, labels):
    """The server's labelled set D_v (FedED section 3.1) as (DataFrame, description), or (None, None).

    ``--server-data`` reads it from a file or folder of the dataset's format
    (its train split, or all of it); ``--server-fraction f`` moves a seeded
    fraction f of ``splits["train"]`` there, so that no client trains on it
    (FedED: "We random sample 20% of training data for validation").
    """
    from tffre.data.relations import load_re
    if cfg.server_data:
        examples, _ = load_re(cfg.dataset, cfg.server_data)
        unknown = sorted(set(examples["label"]) - set(labels))
        if unknown:
            raise ValueError(f"{cfg.server_data}: label(s) {', '.join(map(str, unknown))} are "
                             f"not among the training labels")
        if "split" in examples:
            examples = examples[examples["split"] == "train"].drop(columns="split")
        return examples.reset_index(drop=True), cfg.server_data
    if not cfg.server_fraction:
        return None, None
    train = splits["train"]
    order = np.random.RandomState([cfg.seed, 11]).permutation(len(train))
    cut = int(round(len(train) * cfg.server_fraction))
    if cut < 1 or cut >= len(train):
        raise ValueError(f"--server-fraction {cfg.server_fraction} of {len(train)} training "
                         f"examples leaves no server set or no client data")
    splits["train"] = train.iloc[np.sort(order[cut:])].reset_index(drop=True)
    return (train.iloc[np.sort(order[:cut])].reset_index(drop=True),
            f"{cfg.server_fraction:.0%} of the training examples (seeded)")


def prepare(cfg):
    """Loads, tokenizes and splits the relation set of ``cfg``; returns the :class:`Job`."""
    import tensorflow as tf
    from tffre.data import FederatedData
    from tffre.data.partition import (dirichlet_label_split, format_label_mix, iid_split,
                                      label_mix)
    from tffre.data.relations import load_re
    from tffre.models.relations import build_re_model, config_for, load_pretrained_encoder
    from tffre.text.relation_tokenizer import RETokenizer, default_encoder_dir

    examples, labels = load_re(cfg.dataset, data_path(cfg))
    splits = split_examples(examples, cfg.seed)
    encoder_dir = cfg.encoder or default_encoder_dir()
    tokenizer = RETokenizer.from_pretrained(
        encoder_dir, max_length=cfg.max_len or DEFAULT_MAX_LEN,
        blind_entities=cfg.blind_entities,
        entity_types=RETokenizer.entity_types_of(splits["train"]))
    index = {label: i for i, label in enumerate(labels)}
    server_df, server_source = server_split(cfg, splits, labels)
    arrays = {name: (tokenizer.encode(df), df["label"].map(index).to_numpy(np.int32))
              for name, df in splits.items()}
    y_train = arrays["train"][1]
    if cfg.partition == "iid":
        parts = iid_split(len(y_train), cfg.clients, cfg.seed)
    else:
        parts = dirichlet_label_split(y_train, cfg.clients, cfg.alpha, cfg.seed)
    held_out = {name: iid_split(len(y), cfg.clients, cfg.seed + 1)
                for name, (_, y) in arrays.items() if name != "train"}
    clients = {}
    for k, part in enumerate(parts):
        cid = f"client_{k}"
        clients[cid] = {"train": (arrays["train"][0][part], y_train[part])}
        for name, idx in held_out.items():
            clients[cid][name] = (arrays[name][0][idx[k]], arrays[name][1][idx[k]])
    skew = "IID" if cfg.partition == "iid" else f"label Dirichlet alpha={cfg.alpha}"
    data = FederatedData(clients, num_classes=len(labels),
                         name=f"{cfg.dataset} ({'synthetic sample' if cfg.data == SAMPLE else cfg.data}), "
                              f"{cfg.clients} clients, {skew}")
    mix = label_mix(y_train, parts, label_names=list(range(len(labels))))
    mix.columns = [labels[c] if isinstance(c, (int, np.integer)) else c for c in mix.columns]
    y_test = arrays["test"][1]
    info = {"labels": labels, "negative_label": labels[0], "encoder": encoder_dir,
            "representation": cfg.representation, "max_len": tokenizer.max_length,
            "tokenizer": dict(tokenizer.stats),
            "train_examples": int(len(y_train)), "test_examples": int(len(y_test)),
            "dev_split": "dev" if "dev" in arrays else None,
            "server_examples": 0 if server_df is None else int(len(server_df)),
            "server_data": server_source,
            "majority_class_test_accuracy": float(np.mean(y_test == np.bincount(y_train).argmax())),
            # Guessing the negative class finds no relation: its F1 is 0 by definition.
            "majority_class_test_f1": 0.0}
    print(f"\n{data.name}: {info['train_examples']} train / {info['test_examples']} test "
          f"examples, {len(labels)} labels; tokenizer {tokenizer.stats}")
    print(format_label_mix(mix))
    config = config_for(tokenizer, encoder_dir, len(labels), representation=cfg.representation,
                        num_layers=cfg.encoder_layers, freeze_embeddings=cfg.freeze_embedding)

    def model_fn():
        return build_re_model(config)

    return Job(data=data, model_fn=model_fn,
               loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
               title=f"{data.name}, {os.path.basename(os.path.normpath(encoder_dir))}",
               label_names=labels, encoder=tokenizer, info=info,
               write_extras=label_mix_writer(mix, data.name),
               load_pretrained=lambda model: load_pretrained_encoder(model, encoder_dir),
               negative_label=0,
               context={"concepts": concepts_for(labels, cfg.concept_file), "prompts": "text"},
               server_data=None if server_df is None else (
                   tokenizer.encode(server_df), server_df["label"].map(index).to_numpy(np.int32)))
