"""Medical text classification from the user's own CSV or JSON-lines file (``--dataset
text``): the first task written as one :class:`tffre.tasks.recipe.Recipe`.

The data (:mod:`tffre.data.text_sets`): records with ``text``, ``label`` and optionally
``site`` and ``split``; a folder of train/dev/test files or one file (a missing test split
is a seeded 20% of train, a missing dev ``--dev-fraction`` of the rest).

The model (``--model lstm``): FLCMC's LSTM over jieba tokens and public Word2Vec vectors,
as the IMCS task builds it (:func:`tffre.tasks.imcs.build_model`): jieba with the shipped
medical dictionary and ``--user-dict``; the vocabulary and the embedding's initial values
from ``--w2v`` (default: the IMCS sample's small public Chinese vectors, with a note).
English words are tokens too (jieba splits at spaces), so English notes need vectors that
hold English words.

The clients (``--partition``): ``site`` makes each value of the ``site`` column one client
(a hospital; ``--clients`` is then the number of sites); ``iid`` and ``label-dirichlet``
split the training records over ``--clients``; ``auto`` (the default) is ``site`` when the
data has the column, else ``iid``.

Across sites (``python -m tffre deploy``): a site's node configuration names its own file
or folder, ``data="/site/notes.csv"``, and its copies of the public ``w2v`` and
``user-dict``; a file shared by every site is read with ``site-value="A"``, which keeps that
site's records after the splits are held out of the whole file (the simulation's client
``A`` exactly). The labels are the union of the sites' labels; the vocabularies and
dictionaries must agree.
"""

import dataclasses
from typing import Optional

from tffre import resources
from tffre.hparams import (boolean, choice, existing_file, fraction, non_negative_float,
                           optional, param, positive_int)
from tffre.tasks import ConceptOption, DataOption, Task, require_data
from tffre.tasks.recipe import Built, Loaded, Recipe, Resources

PARTITIONS = ("auto", "site", "iid", "label-dirichlet")
SAMPLE_VECTORS = resources.path("imcs_sample", "w2v_sample.txt")


@dataclasses.dataclass(frozen=True)
class Options(DataOption, ConceptOption):
    """Text classification's options."""
    partition: str = param("auto", choice(*PARTITIONS), "site: each value of the data's site "
                           "column is one client; iid or label-dirichlet: the training texts "
                           "over --clients; auto: site when the data has the column, else iid")
    alpha: float = param(0.5, non_negative_float, "label-dirichlet: the concentration of each "
                         "label over clients", paper="FedCMC Sect. 4.1")
    dev_fraction: float = param(0.2, fraction, "without a dev split in the data, this seeded "
                                "fraction of the training texts becomes dev (0: none)")
    w2v: Optional[str] = param(None, optional(existing_file), "pretrained Word2Vec vectors "
                               "(text or binary format; default: the IMCS sample's public "
                               "vectors)")
    user_dict: Optional[str] = param(None, optional(existing_file), "extra jieba user "
                                     "dictionary (public terms)")
    max_len: int = param(64, positive_int, "jieba tokens per text (longer texts are cut)")
    lstm_units: int = param(64, positive_int, "LSTM width")
    bidirectional: bool = param(False, boolean, "bidirectional LSTM", flag=True)
    freeze_embedding: bool = param(False, boolean, "freeze the Word2Vec embedding", flag=True)


TASK = Task("texts", "medical text classification from your own CSV or JSON lines "
            "(text, label, optional site)", ("text",), ("lstm",), Options,
            defaults={"clients": 3, "clients_per_round": 3, "batch_size": 8})


class TextRecipe(Recipe):
    """``--dataset text`` (see the module docstring)."""

    TASK = TASK
    EVALUATION = "classification"
    PREDICTS = "text"
    TABLES = ()
    LOCAL_OPTIONS = Recipe.LOCAL_OPTIONS + ("w2v", "user_dict")
    AGREED = ("vocabulary", "dictionary")

    def check(self, cfg):
        """``--data`` given; ``--alpha`` above 0 for the Dirichlet split."""
        require_data(cfg)
        o = cfg.options
        if o.partition == "label-dirichlet" and not o.alpha > 0:
            raise ValueError(f"--alpha must be > 0 for the Dirichlet partition, got {o.alpha}")

    def load(self, path, options, *, seed, notes=None, site=None, dataset=None):
        """The texts of ``path`` (:func:`tffre.data.text_sets.load_text_splits`); a site's
        ``site-value`` keeps its own records of a shared file."""
        from tffre.data.text_sets import SITE, load_text_splits, sites_of
        splits, labels = load_text_splits(path, seed=seed, dev_fraction=options.dev_fraction,
                                          notes=notes)
        value = None if site is None else site.get("site-value")
        if value not in (None, ""):
            value = str(value)
            if value not in sites_of(splits):
                raise ValueError(f"{path}: site-value {value!r}: no record has it (sites: "
                                 f"{', '.join(sites_of(splits)) or 'no site column'})")
            splits = {s: [r for r in records if r.get(SITE) == value]
                      for s, records in splits.items()}
            if not splits["train"]:
                raise ValueError(f"{path}: site-value {value!r}: no training records")
            labels = sorted({r["label"] for records in splits.values() for r in records})
        return Loaded(splits, tuple(labels), notes if notes is not None else [],
                      {"sites": sites_of(splits)})

    def check_data(self, dataset, options, *, tokenizer=None, max_len=None, seed=0,
                   site=None):
        """Splits, labels and lengths in jieba tokens of the texts a run would read."""
        from tffre.data.text_sets import check_texts
        from tffre.tasks import data_path
        return check_texts(dataset, data_path(dataset, options.data), seed=seed,
                           dev_fraction=options.dev_fraction,
                           segmenter=_segmenter(options.user_dict),
                           max_len=max_len or options.max_len,
                           site_value=None if site is None else site.get("site-value"))

    def resources(self, options, side):
        """jieba (the shipped dictionary and the side's ``user-dict``) and the side's public
        ``w2v`` vectors (default the IMCS sample's), with their fingerprints."""
        import os
        from tffre.tasks.imcs import dictionary_fingerprint, vocabulary_fingerprint
        from tffre.text import Vocabulary
        from tffre.text.word2vec import load_vectors
        vectors = side.get("w2v") or SAMPLE_VECTORS
        user_dict = side.get("user-dict") or None
        for key, path in (("w2v", vectors), ("user-dict", user_dict)):
            if path and not os.path.isfile(path):
                raise ValueError(f"{key}: no such file: {path}")
        if not side.get("w2v"):
            print("note: no --w2v given; using the small public Chinese vectors of the IMCS "
                  "sample: give --w2v with vectors of your texts' words (English notes "
                  "need English vectors)")
        kv = load_vectors(vectors)
        vocab = Vocabulary.from_vectors(kv)
        return Resources((_segmenter(user_dict), kv, vocab),
                         {"vocabulary": vocabulary_fingerprint(vocab, kv.vector_size),
                          "dictionary": dictionary_fingerprint(user_dict)},
                         f"{len(vocab)} words x {kv.vector_size} from {vectors}")

    def build(self, spec):
        """The LSTM of :func:`tffre.tasks.imcs.build_model` over the side's vocabulary."""
        import tensorflow as tf
        from tffre.tasks.imcs import build_model, embedding_loader
        from tffre.text import TextEncoder
        segmenter, kv, vocab = spec.resources.value
        o = spec.options
        model_fn, loss, name = build_model(spec.model, o, len(spec.labels), len(vocab),
                                           kv.vector_size, seed=spec.seed,
                                           algorithms=spec.algorithms)
        encoder = TextEncoder(segmenter, vocab, o.max_len)
        return Built(model_fn=model_fn, loss=loss,
                     encode=lambda records: encoder.encode([r["text"] for r in records]),
                     x_spec=tf.TensorSpec((None, o.max_len), tf.int32),
                     load_pretrained=embedding_loader(vocab, kv), encoder=encoder,
                     description=name)

    def partition(self, loaded, options, num_clients, seed):
        """Each site one client (``site``), or the training texts over ``num_clients``
        (``iid``, ``label-dirichlet``; the held-out texts dealt evenly)."""
        import numpy as np
        from tffre.data.partition import dirichlet_label_split, iid_split
        mode = options.partition
        sites = loaded.facts.get("sites") or ()
        if mode == "auto":
            mode = "site" if sites else "iid"
        if mode == "site":
            if not sites:
                raise ValueError(f"--partition site: {options.data} has no site column")
            parts = {}
            for value in sites:
                parts[value] = {s: np.asarray([i for i, r in enumerate(records)
                                               if r["site"] == value], np.int64)
                                for s, records in loaded.splits.items()}
                if not len(parts[value]["train"]):
                    raise ValueError(f"--partition site: site {value!r} of {options.data} "
                                     f"has no training texts")
            return parts
        y = loaded.label_ids("train")
        train = iid_split(len(y), num_clients, seed) if mode == "iid" else \
            dirichlet_label_split(y, num_clients, options.alpha, seed)
        # The held-out texts dealt evenly, as the relation task deals them; a split of fewer
        # texts than clients leaves some clients none (the evaluation pools them).
        held = {s: [np.sort(p) for p in np.array_split(
                    np.random.RandomState(seed + 1).permutation(len(r)), num_clients)]
                for s, r in loaded.splits.items() if s != "train"}
        return {f"client_{k}": {"train": np.asarray(part), **{s: np.asarray(h[k])
                                                             for s, h in held.items()}}
                for k, part in enumerate(train)}

    def describe(self, cfg, loaded, data):
        """The partition and, with sites, a check that a round can sample them."""
        sites = list(loaded.facts.get("sites") or ())
        mode = cfg.options.partition
        if mode == "auto":
            mode = "site" if sites else "iid"
        if mode == "site":
            if cfg.run.clients_per_round > len(sites):
                raise ValueError(f"--partition site: the {len(sites)} sites of "
                                 f"{cfg.options.data} ({', '.join(sites)}) are the clients: "
                                 f"give --clients-per-round {len(sites)} or fewer")
            if cfg.run.clients != len(sites):
                print(f"note: --partition site: the data's {len(sites)} sites are the "
                      f"clients (--clients {cfg.run.clients} is not used)")
        return {"partition": mode, "sites": sites}


def _segmenter(user_dict):
    from tffre.tasks.imcs import public_segmenter
    return public_segmenter(user_dict)


#: The task's one declaration: ``prepare``, ``check``, ``check_data`` and the deployment's
#: sites are derived from it (:mod:`tffre.tasks.recipe`).
RECIPE = TextRecipe()
