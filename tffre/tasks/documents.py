"""Document-level biomedical relation extraction (FedLCC Tables 3-5, 7) on a Hugging Face encoder.

Loads CDR, GDA or CHR (PubTator or EoG ``.data``) or DocRED-style JSON with
:func:`tffre.data.document_sets.load_document_splits` (the embedded, invented CDR-style sample
by default for ``--dataset cdr``), marks and packs the documents with
:class:`tffre.text.document_features.DocREFeaturizer`, splits the training
documents over the clients by the paper's structural-entropy rule (Sect. 4.2,
:func:`tffre.data.doc_graph.structural_entropy_split`, ``--entropy-form``) or
IID, and builds the ATLOP-style model of :func:`tffre.models.document_model.build_docre_model`
(pretrained encoder weights enter the server state after ``initialize``).

The client loop sees ``x`` = the dict of model inputs and ``y`` = labels ⊕
pair mask (:func:`tffre.models.document_model.pack_targets`), trained with
:class:`tffre.models.document_model.DocRELoss` (``--loss bce``, Eq. 11, or ``softmax``,
the authors' code). The global model is scored by the "docre" evaluation
(:class:`tffre.evaluation.DocREEvaluator`): P/R/F1 of the relations over the
candidate pairs, the intra-/inter-sentence F1 (from each pair's
``pair_intra``, kept beside the data as an annotation) and, for DocRED, Ign F1
(``pair_in_train``, from the training facts).

Choices where the data leaves one open:

* **Relation types** are those annotated in the training split (CDR: CID;
  GDA: GDA), in sorted order.
* **Candidate pairs**: for CDR, GDA and CHR, the ordered (subject type, object
  type) combinations of the training relations (CDR: Chemical -> Disease), as
  the corpora's candidate pairs are; for DocRED every ordered pair of entities.
* **Splits**: without a dev split, a seeded 20% of the training documents is
  held out as dev (FedLCC: "we further divide the training set into a
  training set and a development set in a ratio of 8 to 2" for GDA). DocRED's
  test labels are not public: as the paper's Table 7, its dev split is scored
  as the test set and a seeded 20% of train serves for selection.
* **Row limits** (mentions, entities, pairs per document) are fitted to the
  data, so nothing but tokens beyond ``--max-len`` is cut; the cuts are
  counted (``summary.json`` -> ``featurizer``). Across sites
  (:meth:`DocumentRecipe.agree`) they are the largest of the sites' fitted limits.
* **Every gold relation counts**, as BioCreative V's CID evaluation counts every
  gold (chemical, disease) pair: one whose pair is no candidate pair (an entity
  without a mention, a pair of other types, a row beyond the limits) is a miss
  in recall and F1 (intra/inter as its entities' sentences say; Ign F1's recall
  too). Their count is ``summary.json`` -> ``splits`` -> ``unscorable_gold_pairs``
  and is printed with the splits.
* **A document in two splits** (same pmid) is refused before anything is built
  (:func:`tffre.data.document_sets.load_document_splits`).
* **Empty clients**: an entropy interval without documents leaves its client
  empty; it is dropped (printed), the others keep their interval's index.

Dev and test documents are dealt as the training documents are (to the client whose
entropy interval holds them; evenly under ``iid``) and pooled by the evaluation (a common
test set, as the paper's); each client's own share gives its per-site scores
(:mod:`tffre.runner.per_site`).

Across sites (``python -m tffre deploy``) the same recipe, :data:`RECIPE`, builds the
featurizer and model at each side from its own files (:class:`tffre.tasks.recipe.RecipeSites`).
Node configuration: ``data`` (the site's documents: a file, or a folder of train/dev/test
files, read as a run reads ``--data``: :func:`read_splits`), ``encoder`` (the local encoder
folder; default the packaged all-MiniLM-L6-v2) and, with a split encoder, ``prefix-cache``
(a folder for the site's cached frozen-prefix activations; default memory). The relation
types (the job's ``labels``) and the candidate pair types must be the same at every site,
else the site is refused; the featurizer's row limits, which a run fits to all its
documents, are the maxima of the sites' own fitted limits (:meth:`DocumentRecipe.agree`),
so the inputs have one shape everywhere and nothing a site holds is cut (a site that joins
later with larger documents has its extra rows cut and counted). Each site sends its TP/FP/FN
counts ("docre" evaluation) at the job's numeric ``--threshold`` (``dev`` is refused: it
needs the pooled dev probabilities); DocRED's Ign F1 is left out (it needs every site's
training facts). With a split encoder the prefix's fingerprint is agreed: a site whose
prefix differs from the server's is refused.
"""

import dataclasses
import json
import os
from typing import Optional

from tffre.hparams import choice, optional, param, positive_int, threshold_or_dev
from tffre.lazy import np
from tffre import resources
from tffre.tasks import (SAMPLE, DataOption, EncoderOptions, Task, check_encoder, data_path,
                         require_data)
from tffre.tasks.recipe import Built, Evaluation, FrozenPrefix, Loaded, Recipe, Resources, \
    Simulated
from tffre.tasks.sites import site_path

DEFAULT_MAX_LEN = 1024   # ATLOP's and the FedLCC authors' document length (two 512 windows)
# A relation type's pairs and the candidate pairs: DocRED scores every ordered entity pair.
ALL_PAIRS = ("docred",)
PARTITIONS = ("iid", "structural-entropy")


@dataclasses.dataclass(frozen=True)
class Options(DataOption, EncoderOptions):
    """Document-level relation extraction's options."""
    partition: str = param("structural-entropy", choice(*PARTITIONS), "how the training "
                           "documents are split over clients", paper="FedLCC Sect. 4.2")
    entropy_form: str = param("paper", choice("paper", "authors"), "structural-entropy split: "
                              "paper (Eq. 15 over the degree distribution) or authors (their "
                              "code's sum over nodes of -(deg/N) log2(deg/N))",
                              paper="FedLCC Eq. 15")
    max_len: Optional[int] = param(None, optional(positive_int), "word pieces per document "
                                   f"(default {DEFAULT_MAX_LEN}, read as two overlapping "
                                   "512-token windows, as ATLOP)")
    eog_variant: str = param("filter", choice("filter", "plain"), "EoG .data folders: read the "
                             "_filter files (EoG's own configs) or the plain ones")
    loss: str = param("bce", choice("bce", "softmax"), "document-level RE loss: bce (a sigmoid "
                      "per relation) or softmax (the authors' code: a softmax over no-relation "
                      "and the relation types)", paper="FedLCC Eq. 10-11")
    threshold: object = param(0.5, threshold_or_dev, "bce: the sigmoid above which a relation "
                              "is predicted, or dev: at each evaluation the threshold with the "
                              "best dev F1 (DocRED's baseline's theta), applied to every split")


TASK = Task("documents", "document-level relation extraction (FedLCC Tables 3-5, 7)",
            ("cdr", "gda", "chr", "docred"), ("encoder",), Options,
            defaults={"clients": 10, "batch_size": 3, "trainable_layers": 2,
                      "executor": "local"},
            learning_rates={"adam": 3e-4},
            dataset_defaults={"cdr": {"data": SAMPLE}},
            samples={"cdr": resources.path("docre_sample")})


def read_splits(dataset, path, seed, eog_variant="filter"):
    """{"train", "dev", "test": [Document]} of the file or folder ``path`` and the notes on
    what was held out (:func:`tffre.data.document_sets.load_document_splits`: a single file is
    the whole set; DocRED's dev split scored as test; a missing test split -- a single file, or
    a folder without a test file -- a seeded 20% of train, then a missing dev split a seeded
    20% of what is left), as a run and a deployed site read it."""
    from tffre.data.document_sets import load_document_splits
    notes = []
    splits = load_document_splits(path, seed=seed, eog_variant=eog_variant,
                                  dev_as_test=dataset == "docred", notes=notes)
    return {k: splits[k] for k in ("train", "dev", "test")}, notes


def relation_schema(dataset, train):
    """(relation types, pair types or None) read off the training documents."""
    types = sorted({r.type for doc in train for r in doc.relations})
    if not types:
        raise ValueError("the training documents hold no relation")
    if dataset in ALL_PAIRS:
        return types, None
    pairs = set()
    for doc in train:
        kinds = doc.entity_types()
        pairs.update((kinds[r.id1], kinds[r.id2]) for r in doc.relations
                     if r.id1 in kinds and r.id2 in kinds)
    return types, sorted(pairs)


def facts_seen_in_training(featurizer, documents, facts):
    """int8 ``[n, P, R]``: 1 where (pair row, relation) is a fact of ``facts``
    (:func:`tffre.data.formats.docred.fact_keys` of the training set) by some mention names of the
    pair's entities, DocRED's rule for Ign F1."""
    shapes = featurizer.shapes()
    out = np.zeros((len(documents),) + shapes["labels"], np.int8)
    for row, doc in enumerate(documents):
        entities = doc.entities()
        names = {eid: {doc.mentions[m].text for m in idx} for eid, idx in entities.items()}
        for p, (s, o) in enumerate(featurizer.pair_ids(doc)):
            for r, rtype in enumerate(featurizer.relation_types):
                out[row, p, r] = any((a, b, rtype) in facts for a in names[s] for b in names[o])
    return out


def featurizer_for(encoder_dir, relation_types, pair_types, max_len, limits):
    """The run's :class:`tffre.text.document_features.DocREFeaturizer`: ``max_len`` word pieces
    (default :data:`DEFAULT_MAX_LEN`), the candidate ``pair_types`` and the row ``limits``
    (:data:`tffre.text.document_features.LIMIT_KEYS`: a run's fitted to all its documents, a
    deployment's agreed, the same at every site so that the input shapes agree; {}: the
    featurizer's defaults, to measure the limits documents need)."""
    from tffre.text.document_features import DocREFeaturizer
    return DocREFeaturizer(encoder_dir, relation_types, max_length=max_len or DEFAULT_MAX_LEN,
                           pair_types=pair_types, **limits)


def encode_splits(featurizer, splits, facts=None):
    """({split: (model inputs, packed targets, annotations)}, {split: featurizer cut counts})
    of ``splits`` ({split: [Document]}). The annotations are what the evaluation reads beside
    the model's inputs: ``pair_intra`` (intra-/inter-sentence F1), ``unscored_gold`` and
    ``unscored_gold_intra`` (each document's gold relations no candidate pair holds, counted
    as misses) and, with ``facts`` (the training set's
    :func:`tffre.data.formats.docred.fact_keys`), ``pair_in_train`` (Ign F1)."""
    from tffre.models.document_model import model_inputs, pack_targets
    arrays, stats = {}, {}
    for name, docs in splits.items():
        encoded = featurizer.encode(docs)
        stats[name] = dict(featurizer.last_stats)
        notes_of = {key: encoded[key] for key in ("pair_intra", "unscored_gold",
                                                  "unscored_gold_intra")}
        if facts is not None:
            notes_of["pair_in_train"] = facts_seen_in_training(featurizer, docs, facts)
        arrays[name] = (model_inputs(encoded), pack_targets(encoded["labels"],
                                                            encoded["pair_mask"]), notes_of)
    return arrays, stats


def model_config(featurizer, encoder_dir, options):
    """The :class:`tffre.models.document_model.DocREModelConfig` of ``featurizer``'s arrays and
    ``options`` (the task's :class:`Options`: ``--loss``, the encoder's layers, embeddings and
    the split of a frozen prefix, ``--trainable-layers``/``--lora-rank``)."""
    from tffre.models.document_model import docre_config_for
    return docre_config_for(featurizer, encoder_dir, loss=options.loss,
                            num_layers=options.encoder_layers,
                            freeze_embeddings=options.freeze_embedding,
                            partial=options.partial())


class DocumentRecipe(Recipe):
    """Document-level relation extraction (see the module docstring)."""

    TASK = TASK
    EVALUATION = "docre"
    PREDICTS = "documents"
    TABLES = ("FedLCC Table 3", "FedLCC Table 4", "FedLCC Table 5", "FedLCC Table 7")
    #: The facts every site must report alike: the relation types and the candidate pair
    #: types (a JSON text: Flower's config records hold no nested lists).
    AGREED = ("labels", "pair_types")
    #: What the featurizer reads besides the relation types: the candidate pair types and the
    #: row limits (the simulation's fitted to all its documents, a deployment's agreed).
    JOB_FACTS = ("pair_types", "limits")

    def check(self, cfg):
        """``--data`` given, a usable ``--encoder``, and ``--threshold dev`` only with
        ``--loss bce``."""
        require_data(cfg)
        check_encoder(cfg)
        if cfg.options.threshold == "dev" and cfg.options.loss != "bce":
            raise ValueError("--threshold dev applies to --loss bce (softmax predicts the "
                             "argmax): with --loss softmax give --threshold 0.5, which it "
                             "leaves unused")

    def load(self, path, options, *, seed, notes=None, site=None, dataset=None):
        """The documents of ``path`` (:func:`read_splits`), their relation types (the labels)
        and candidate pair types (``facts["pair_types"]``, JSON text; :func:`relation_schema`
        of the training documents)."""
        splits, read_notes = read_splits(dataset, path, seed, options.eog_variant)
        if notes is not None:
            notes.extend(read_notes)
        types, pairs = relation_schema(dataset, splits["train"])
        return Loaded(splits, tuple(types), notes if notes is not None else read_notes,
                      {"pair_types": json.dumps(pairs)})

    def load_run(self, cfg, path, notes):
        """:meth:`load`, with the row limits that fit every document of the run
        (``facts["limits"]``: :meth:`tffre.text.document_features.DocREFeaturizer.limits`)."""
        loaded = self.load(path, cfg.options, seed=cfg.run.seed, notes=notes,
                           dataset=cfg.dataset)
        encoder_dir = self.run_resources(cfg, loaded).value
        loaded.facts["limits"] = self._limits(encoder_dir, loaded, cfg.options)
        return loaded

    @staticmethod
    def _limits(encoder_dir, loaded, options):
        """The row limits that encode all of ``loaded``'s documents without a cut."""
        pairs = json.loads(loaded.facts["pair_types"])
        probe = featurizer_for(encoder_dir, list(loaded.labels),
                               None if pairs is None else [tuple(p) for p in pairs],
                               options.max_len, limits={})
        return probe.limits([doc for docs in loaded.splits.values() for doc in docs])

    def check_data(self, dataset, options, *, tokenizer=None, max_len=None, seed=0,
                   site=None):
        """The data check of what a run would load (``python -m tffre data check``)."""
        from tffre.data.check import check_dataset
        path = data_path(dataset, options.data)
        return check_dataset("documents", dataset, path, tokenizer=tokenizer,
                             max_len=max_len or options.max_len or DEFAULT_MAX_LEN, seed=seed,
                             eog_variant=options.eog_variant, dev_as_test=dataset == "docred")

    def resources(self, options, side):
        """The side's encoder folder (its ``encoder``; default the packaged MiniLM)."""
        from tffre.text.relation_tokenizer import default_encoder_dir
        return Resources(site_path(side, "encoder", required=False) or default_encoder_dir())

    def survey(self, loaded, options, resources):
        """``row_limits``: the limits that encode all the site's documents without a cut, in
        :data:`tffre.text.document_features.LIMIT_KEYS` order (a list: Flower's config
        records hold no mappings)."""
        from tffre.text.document_features import LIMIT_KEYS
        need = self._limits(resources.value, loaded, options)
        return {"row_limits": [int(need[k]) for k in LIMIT_KEYS]}

    def agree(self, job, sites, log):
        """The job's row limits (``job.facts["limits"]``): each the largest of the agreeing
        sites' (a site whose survey holds none is refused), so that every site's documents
        fit."""
        from tffre.text.document_features import LIMIT_KEYS
        for site in sites:
            if not site.error and len(site.facts.get("row_limits") or ()) != len(LIMIT_KEYS):
                site.error = "its survey holds no row limits (another task's code?)"
                log(f"site {site.name} (node {site.node_id}): {site.error}; it takes no part")
        usable = [s for s in sites if not s.error]
        if not usable:
            return job
        limits = {key: max(int(s.facts["row_limits"][i]) for s in usable)
                  for i, key in enumerate(LIMIT_KEYS)}
        return dataclasses.replace(job, facts={**job.facts, "limits": limits})

    def refusal(self, options):
        """A threshold tuned on dev (``threshold dev``): it needs the pooled dev
        probabilities, which no site sends (the sites count at the job's fixed threshold)."""
        if options.threshold == "dev":
            return ("threshold dev: a deployment scores at a fixed threshold (the sites send "
                    "counts, not the pooled dev probabilities a tuned threshold needs)")
        return None

    def build(self, spec):
        """The ATLOP-style model (:func:`tffre.models.document_model.build_docre_model`), the
        loss of ``--loss`` (FedLCC Eq. 11 for "bce") and the featurizer of the relation types,
        pair types and row limits (``spec.facts``), from the side's encoder folder; a split
        encoder's frozen prefix (:func:`tffre.models.document_model.build_docre_prefix`)."""
        import tensorflow as tf
        from tffre.data.federated import ordered
        from tffre.models.document_model import (MODEL_INPUTS, DocRELoss, build_docre_model,
                                                 build_docre_prefix, has_prefix,
                                                 load_pretrained_encoder, model_inputs)
        o, encoder_dir = spec.options, spec.resources.value
        if "limits" not in spec.facts or spec.facts["limits"] is None:
            from tffre.tasks.sites import SiteDataError
            raise SiteDataError("the job holds no row limits: the sites' surveys were not "
                                "agreed (DocumentRecipe.agree)")
        pairs = json.loads(spec.facts.get("pair_types") or "null")
        featurizer = featurizer_for(encoder_dir, list(spec.labels),
                                    None if pairs is None else [tuple(p) for p in pairs],
                                    o.max_len, limits=dict(spec.facts["limits"]))
        config = model_config(featurizer, encoder_dir, o)
        shapes = featurizer.shapes()
        prefix = FrozenPrefix(config, lambda: build_docre_prefix(config),
                              lambda: build_docre_model(config.full())) \
            if has_prefix(config) else None
        return Built(
            model_fn=lambda: build_docre_model(config), loss=DocRELoss(o.loss),
            encode=lambda documents: model_inputs(featurizer.encode(documents)),
            # As FederatedData orders a dict of inputs (by key); y: labels and pair mask.
            x_spec=ordered({k: tf.TensorSpec((None,) + shapes[k], tf.int32)
                            for k in MODEL_INPUTS}),
            y_spec=tf.TensorSpec((None,) + shapes["labels"][:-1]
                                 + (featurizer.num_relations + 1,), tf.float32),
            load_pretrained=lambda model: load_pretrained_encoder(model, encoder_dir),
            encoder=featurizer, prefix=prefix,
            description=os.path.basename(os.path.normpath(o.encoder or encoder_dir)))

    def encode(self, built, loaded, labels, site=None):
        """({split: (model inputs, packed targets)}, {split: annotations}) of a site's
        documents (:func:`encode_splits`; no ``pair_in_train``: Ign F1 needs every site's
        training facts); its candidate pair types must be the job's. Prints the rows the
        job's limits cut (a site that joined after the limits were agreed)."""
        featurizer = built.encoder
        pairs = json.loads(loaded.facts["pair_types"])
        pairs = None if pairs is None else [tuple(p) for p in pairs]
        types = list(loaded.labels)
        if types != featurizer.relation_types or pairs != featurizer.pair_types:
            raise ValueError(f"relation types {types} and candidate pairs {pairs} differ from "
                             f"the run's {featurizer.relation_types} and "
                             f"{featurizer.pair_types}")
        encoded, stats = encode_splits(featurizer, loaded.splits)
        cut = {name: {k: v for k, v in s.items() if k != "documents" and v}
               for name, s in stats.items()}
        if any(cut.values()):
            from tffre.text.document_features import LIMIT_KEYS
            limits = {k: getattr(featurizer, k) for k in LIMIT_KEYS}
            print(f"site {(site or {}).get('site', '')}: the job's row limits {limits} cut "
                  f"rows of its documents: {cut}", flush=True)
        return ({name: (x, y) for name, (x, y, _) in encoded.items()},
                {name: notes for name, (_, _, notes) in encoded.items()})

    def evaluation(self, options, labels):
        """The "docre" evaluation at ``--threshold`` (a number, or ``dev``: tuned at each
        evaluation on the dev split)."""
        return Evaluation(self.EVALUATION, {"threshold": options.threshold})

    @staticmethod
    def deal_held_out(documents, split, kept, options, seed):
        """The kept clients' shares of a held-out split (index arrays, in ``kept``'s order),
        as the training documents were dealt, so that each client's own scores are on
        documents like its own (per-site evaluation): under the structural-entropy split
        (``split`` an EntropySplit) each document goes to the client whose entropy interval
        holds it (:meth:`EntropySplit.assign`; an interval whose client was dropped, to the
        nearest kept one); IID, dealt evenly (seed + 1). The pooled split is the same either
        way."""
        from tffre.data.doc_graph import degree_entropy, document_graph, iid_split
        if split is None:
            return iid_split(len(documents), len(kept), seed + 1)
        entropies = [degree_entropy(document_graph(d), options.entropy_form)
                     for d in documents]
        owner = split.assign(entropies, clients=kept)
        return [np.flatnonzero(owner == j).astype(np.int64) for j in range(len(kept))]

    @staticmethod
    def split_training(loaded, options, num_clients, seed):
        """(parts, EntropySplit or None, entropies): each client's training document
        indices, by the structural-entropy rule (FedLCC Sect. 4.2) or IID (what
        :meth:`simulate` deals; empty clients included)."""
        from tffre.data.doc_graph import (degree_entropy, document_graph, iid_split,
                                          structural_entropy_split)
        train = loaded.splits["train"]
        if options.partition == "structural-entropy":
            split = structural_entropy_split(train, num_clients, form=options.entropy_form)
            return split.parts(), split, split.entropies
        entropies = np.array([degree_entropy(document_graph(d), options.entropy_form)
                              for d in train])
        return iid_split(len(train), num_clients, seed), None, entropies

    def simulate(self, cfg, loaded, resources, built):
        """The clients: every split featurized (the DocRED training facts beside the test
        pairs: Ign F1), the training documents over the non-empty entropy intervals (an
        empty client dropped, printed), dev and test dealt as train (:meth:`deal_held_out`);
        the info the summary
        holds (relation and pair types, row limits and cuts, each split's pairs and
        unscorable gold pairs, the guesses' F1, the partition) and ``partition.csv`` /
        ``partition.png`` (FedLCC Figure 2)."""
        import pandas as pd

        from tffre.data import FederatedData
        from tffre.data.doc_graph import describe_split, iid_split, plot_split
        from tffre.data.formats.docred import fact_keys
        from tffre.metrics import docre_baselines
        from tffre.text.relation_tokenizer import default_encoder_dir
        o, splits, notes = cfg.options, loaded.splits, loaded.notes
        relation_types = list(loaded.labels)
        featurizer = built.encoder
        facts = fact_keys(splits["train"]) if cfg.dataset == "docred" else None
        arrays, stats = encode_splits(featurizer, splits, facts)

        parts, split, entropies = self.split_training(loaded, o, cfg.run.clients,
                                                      cfg.run.seed)
        kept = [k for k, part in enumerate(parts) if len(part)]
        dropped = [k for k in range(len(parts)) if k not in kept]
        if dropped:
            print(f"note: client(s) {', '.join(map(str, dropped))} got no training document "
                  f"(empty entropy intervals) and are dropped: {len(kept)} clients")
        if len(kept) < cfg.run.clients_per_round:
            raise ValueError(f"--partition {o.partition}: only {len(kept)} of "
                             f"{cfg.run.clients} clients hold training documents, fewer than "
                             f"--clients-per-round {cfg.run.clients_per_round}; lower "
                             f"--clients or --clients-per-round")
        held_out = {name: self.deal_held_out(splits[name], split, kept, o, cfg.run.seed)
                    for name in ("dev", "test")}

        def rows(name, index):
            x, y, notes_of = arrays[name]
            return ({k: v[index] for k, v in x.items()}, y[index],
                    {k: v[index] for k, v in notes_of.items()})

        clients, annotations = {}, {}
        for j, k in enumerate(kept):
            cid = f"client_{k}"
            clients[cid], annotations[cid] = {}, {}
            for name, index in (("train", parts[k]), ("dev", held_out["dev"][j]),
                                ("test", held_out["test"][j])):
                x, y, notes_of = rows(name, index)
                clients[cid][name] = (x, y)
                annotations[cid][name] = notes_of
        skew = "IID" if o.partition == "iid" else f"structural entropy ({o.entropy_form})"
        source = "invented sample" if o.data == SAMPLE else o.data
        data = FederatedData(clients, num_classes=len(relation_types),
                             name=f"{cfg.dataset} ({source}), {len(kept)} clients, {skew}",
                             annotations=annotations)

        table = pd.DataFrame({
            "client": [f"client_{k}" for k in range(len(parts))],
            "documents": [len(p) for p in parts],
            "mean_entropy": [float(np.mean(entropies[p])) if len(p) else float("nan")
                             for p in parts]})
        if split is not None:
            table["entropy_interval"] = [split.interval(k) for k in range(len(parts))]
            print(describe_split(split))
        else:
            print(f"IID split, documents per client: {table['documents'].tolist()}")
        count = {name: {"documents": len(docs),
                        "pairs": int(arrays[name][1][..., -1].sum()),
                        "positive_pairs": int((arrays[name][1][..., :-1].max(-1)
                                               * arrays[name][1][..., -1]).sum()),
                        # Gold relations no candidate pair holds: misses in the split's scores.
                        "unscorable_gold_pairs": int(arrays[name][2]["unscored_gold"].sum())}
                 for name, docs in splits.items()}
        pair_types = featurizer.pair_types
        info = {"labels": relation_types, "pair_types": pair_types,
                "encoder": o.encoder or default_encoder_dir(),
                "max_len": featurizer.max_length, "loss": o.loss,
                "limits": {k: getattr(featurizer, k) for k in ("max_mentions", "max_entities",
                                                               "max_mentions_per_entity",
                                                               "max_pairs")},
                "featurizer": stats, "splits": count, "data_notes": notes,
                **docre_baselines(arrays["test"][1][..., :-1], arrays["test"][1][..., -1]),
                "partition": {"method": o.partition, "entropy_form": o.entropy_form,
                              "documents_per_client": table["documents"].tolist(),
                              "dropped_clients": dropped,
                              "edges": None if split is None else split.edges.tolist()}}
        cut = {name: {k: v for k, v in s.items() if k != "documents" and v}
               for name, s in stats.items()}
        print(f"\n{data.name}: " + ", ".join(
            f"{name} {c['documents']} documents / {c['pairs']} pairs ({c['positive_pairs']} "
            f"positive; {c['unscorable_gold_pairs']} unscorable gold, counted as misses)"
            for name, c in count.items())
            + f"; relations {relation_types}; candidate pairs "
            + ("all" if pair_types is None else ", ".join(f"{s}->{o}" for s, o in pair_types))
            + f"; featurizer cuts {cut}")

        def write_extras(out_dir):
            table.to_csv(os.path.join(out_dir, "partition.csv"), index=False)
            if split is not None:   # FedLCC Figure 2: documents per client and entropy interval
                plot_split(split, os.path.join(out_dir, "partition.png"), title=data.name)

        return Simulated(data, info, write_extras)


#: The task's one declaration: ``prepare``, ``check``, ``check_data`` and the deployment's
#: sites are derived from it (:mod:`tffre.tasks.recipe`).
RECIPE = DocumentRecipe()
