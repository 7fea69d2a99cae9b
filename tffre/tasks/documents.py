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
  (:class:`DocumentSites`) they are the largest of the sites' fitted limits.
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

Dev and test documents are dealt evenly over the clients and pooled by the
evaluation (a common test set, as the paper's).

Across sites (``python -m tffre deploy``), :data:`SITES` (:class:`DocumentSites`) builds the
same featurizer and model from each side's own files with the functions ``prepare`` uses
(:func:`featurizer_for`, :func:`encode_splits`, :func:`model_config`, :func:`prefix_parts`).
"""

import dataclasses
import json
import os
from typing import Optional

from tffre.hparams import choice, optional, param, positive_int, threshold_or_dev
from tffre.lazy import np
from tffre.runner.run_settings import Job
from tffre import resources
from tffre.tasks import (SAMPLE, DataOption, EncoderOptions, Task, check_encoder, data_path,
                         require_data, with_cached_prefix)
from tffre.tasks.sites import (SiteData, SiteDataError, SiteModel, Sites, check_any_site,
                               check_report_line, site_path)

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


def check(cfg):
    """The options' checks that need no data."""
    require_data(cfg)
    check_encoder(cfg)
    if cfg.options.threshold == "dev" and cfg.options.loss != "bce":
        raise ValueError("--threshold dev applies to --loss bce (softmax predicts the argmax): "
                         "with --loss softmax give --threshold 0.5, which it leaves unused")


def check_data(dataset, options, *, tokenizer=None, max_len=None, seed=0):
    """The data check of what a run would load (``python -m tffre data check``)."""
    from tffre.data.check import check_dataset
    path = data_path(dataset, options.data)
    return check_dataset("documents", dataset, path, tokenizer=tokenizer,
                         max_len=max_len or options.max_len or DEFAULT_MAX_LEN, seed=seed,
                         eog_variant=options.eog_variant, dev_as_test=dataset == "docred")


def load_splits(cfg):
    """{"train", "dev", "test": [Document]} of ``cfg``, and the notes on what was held out
    (:func:`read_splits`)."""
    return read_splits(cfg.dataset, data_path(cfg.dataset, cfg.options.data), cfg.run.seed, cfg.options.eog_variant)


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


def partition(cfg, train):
    """(parts, EntropySplit or None, entropies): the clients' training document indices."""
    from tffre.data.doc_graph import (degree_entropy, document_graph, iid_split,
                                      structural_entropy_split)
    if cfg.options.partition == "structural-entropy":
        split = structural_entropy_split(train, cfg.run.clients, form=cfg.options.entropy_form)
        return split.parts(), split, split.entropies
    entropies = np.array([degree_entropy(document_graph(d), cfg.options.entropy_form) for d in train])
    return iid_split(len(train), cfg.run.clients, cfg.run.seed), None, entropies


def featurizer_for(encoder_dir, relation_types, pair_types, max_len, documents=None,
                   limits=None):
    """The run's :class:`tffre.text.document_features.DocREFeaturizer`: ``max_len`` word pieces
    (default :data:`DEFAULT_MAX_LEN`), the candidate ``pair_types``, and row limits fitted to
    ``documents`` (a run, which sees all the documents) or the given ``limits`` (a deployment:
    the job's, the same at every site so that the input shapes agree)."""
    from tffre.text.document_features import DocREFeaturizer
    kwargs = dict(max_length=max_len or DEFAULT_MAX_LEN, pair_types=pair_types)
    if limits is None:
        return DocREFeaturizer.for_documents(encoder_dir, relation_types, documents, **kwargs)
    return DocREFeaturizer(encoder_dir, relation_types, **kwargs, **limits)


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


def prefix_parts(config, encoder_dir):
    """(build, load) of a split ``config``'s frozen prefix: ``build()`` the prefix model with
    random weights, ``load(model)`` the checkpoint's weights into it (or into the whole
    model: the pretrained weights of the server's initial state)."""
    from tffre.models.document_model import build_docre_prefix, load_pretrained_encoder
    return (lambda: build_docre_prefix(config),
            lambda model: load_pretrained_encoder(model, encoder_dir))


def prepare(cfg):
    """Loads, featurizes and splits the document set of ``cfg``; returns the :class:`Job`."""
    import pandas as pd

    from tffre.data import FederatedData
    from tffre.data.doc_graph import describe_split, iid_split, plot_split
    from tffre.data.formats.docred import fact_keys
    from tffre.metrics import docre_baselines
    from tffre.models.document_model import DocRELoss, build_docre_model, has_prefix
    from tffre.models.partial import exporter
    from tffre.text.relation_tokenizer import default_encoder_dir

    splits, notes = load_splits(cfg)
    for note in notes:
        print(f"note: {note}")
    relation_types, pair_types = relation_schema(cfg.dataset, splits["train"])
    encoder_dir = cfg.options.encoder or default_encoder_dir()
    everything = [doc for docs in splits.values() for doc in docs]
    featurizer = featurizer_for(encoder_dir, relation_types, pair_types, cfg.options.max_len,
                                documents=everything)
    facts = fact_keys(splits["train"]) if cfg.dataset == "docred" else None
    arrays, stats = encode_splits(featurizer, splits, facts)

    parts, split, entropies = partition(cfg, splits["train"])
    kept = [k for k, part in enumerate(parts) if len(part)]
    dropped = [k for k in range(len(parts)) if k not in kept]
    if dropped:
        print(f"note: client(s) {', '.join(map(str, dropped))} got no training document "
              f"(empty entropy intervals) and are dropped: {len(kept)} clients")
    if len(kept) < cfg.run.clients_per_round:
        raise ValueError(f"--partition {cfg.options.partition}: only {len(kept)} of {cfg.run.clients} "
                         f"clients hold training documents, fewer than --clients-per-round "
                         f"{cfg.run.clients_per_round}; lower --clients or --clients-per-round")
    held_out = {name: iid_split(len(splits[name]), len(kept), cfg.run.seed + 1)
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
    skew = "IID" if cfg.options.partition == "iid" else f"structural entropy ({cfg.options.entropy_form})"
    source = "invented sample" if cfg.options.data == SAMPLE else cfg.options.data
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
    info = {"labels": relation_types, "pair_types": pair_types, "encoder": encoder_dir,
            "max_len": featurizer.max_length, "loss": cfg.options.loss,
            "limits": {k: getattr(featurizer, k) for k in ("max_mentions", "max_entities",
                                                           "max_mentions_per_entity",
                                                           "max_pairs")},
            "featurizer": stats, "splits": count, "data_notes": notes,
            **docre_baselines(arrays["test"][1][..., :-1], arrays["test"][1][..., -1]),
            "partition": {"method": cfg.options.partition, "entropy_form": cfg.options.entropy_form,
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
    config = model_config(featurizer, encoder_dir, cfg.options)
    build_prefix, load = prefix_parts(config, encoder_dir)
    export = None
    if has_prefix(config):   # a frozen prefix: each client's activations once
        data, prefix, _, info["partial"] = with_cached_prefix(data, config, build_prefix, load,
                                                              cfg)
        # The saved model is the whole one, the prefix's weights grafted in: it reads documents.
        export = exporter(lambda: build_docre_model(config.full()), prefix)

    def model_fn():
        return build_docre_model(config)

    def write_extras(out_dir):
        table.to_csv(os.path.join(out_dir, "partition.csv"), index=False)
        if split is not None:   # FedLCC Figure 2: documents per client and entropy interval
            plot_split(split, os.path.join(out_dir, "partition.png"), title=data.name)

    return Job(data=data, model_fn=model_fn, loss=DocRELoss(cfg.options.loss),
               title=f"{data.name}, {os.path.basename(os.path.normpath(encoder_dir))}",
               label_names=relation_types, encoder=featurizer, info=info,
               write_extras=write_extras, load_pretrained=load, export=export, evaluation="docre",
               evaluation_options={"threshold": cfg.options.threshold})


class DocumentSites(Sites):
    """Document-level relation extraction across sites (:mod:`tffre.tasks.sites`).

    Node configuration: ``data`` (the site's documents: a file, or a folder of train/dev/test
    files, of the dataset's format, read as a run reads ``--data``: :func:`read_splits`, a
    single file being the whole set), ``encoder`` (the local Hugging Face encoder folder;
    default the packaged all-MiniLM-L6-v2, as a run's) and, with a split encoder
    (``trainable-layers``, ``lora-rank``), ``prefix-cache`` (a folder for the site's cached
    frozen-prefix activations; default memory).

    What the sites agree on (their surveys, :meth:`agree`): the relation types (the job's
    ``labels``) and the candidate pair types (:func:`relation_schema` of each site's training
    documents) must be the same at every site, else the site is refused. The featurizer's row
    limits (mentions, entities, mention slots, pairs per document), which a run fits to all its
    documents, are the maxima of the sites' own fitted limits: every site featurizes with the
    job's limits, so the model's inputs have the same shapes everywhere and nothing a site
    holds is cut (a site that joins later with larger documents has its extra rows cut and
    counted). ``max-len`` and the loss are the job's options.

    Evaluation is the "docre" kind (:class:`tffre.federation.site_evaluation.SiteEvaluator`): each site sends
    its TP/FP/FN counts (and intra-/inter-sentence ones, loss sums and pairs), and the server's
    P/R/F1 are those of :class:`tffre.evaluation.DocREEvaluator` on the pooled splits. DocRED's
    Ign F1 is left out: it needs the facts of every site's training split.

    With a split encoder each side builds the frozen prefix from its own encoder folder and the
    job's seed (:func:`tffre.models.partial.frozen_prefix`); the prefix's fingerprint is part
    of the round's layout, so a site whose prefix differs from the server's is refused.
    """

    #: The survey's facts every site must report alike: the relation types and the candidate
    #: pair types (a JSON text: Flower's config records hold no nested lists).
    AGREED = ("labels", "pair_types")
    #: Nothing is united: the featurizer does not read entity types beyond the pair types.
    UNITED = ()

    def __init__(self):
        self._prefixes = {}   # (job key, encoder folder, cache folder) -> (prefix, store)

    @staticmethod
    def options(job):
        """The task's :class:`Options` of the job (its local paths unset)."""
        names = set(Options.names()) - set(Sites.LOCAL_OPTIONS)
        return Options.resolve({k: v for k, v in job.options.items() if k in names})

    @staticmethod
    def encoder_dir(site):
        """The encoder folder of a side's configuration (default the packaged MiniLM)."""
        from tffre.text.relation_tokenizer import default_encoder_dir
        return site_path(site, "encoder", required=False) or default_encoder_dir()

    def _documents(self, job, site):
        """(path, {split: [Document]}, relation types, pair types) of the site's data."""
        path = site_path(site, "data")
        try:
            splits, _ = read_splits(job.dataset, path, job.seed, self.options(job).eog_variant)
            types, pairs = relation_schema(job.dataset, splits["train"])
        except ValueError as err:   # DocREFormatError: "file line N: field: message"
            raise SiteDataError(f"{path}: {err}" if path not in str(err) else str(err)) \
                from None
        return path, splits, types, pairs

    def survey(self, job, site):
        """{labels (relation types), pair_types, row_limits, examples (training documents)} of
        the site's data (:class:`tffre.tasks.sites.SiteDataError` if bad); ``row_limits`` are
        the limits that encode all its documents without a cut
        (:meth:`tffre.text.document_features.DocREFeaturizer.limits`), in ``LIMIT_KEYS`` order."""
        from tffre.text.document_features import LIMIT_KEYS
        _, splits, types, pairs = self._documents(job, site)
        probe = featurizer_for(self.encoder_dir(site), types, pairs,
                               self.options(job).max_len, limits={})
        need = probe.limits([doc for docs in splits.values() for doc in docs])
        return {"labels": types, "pair_types": json.dumps(pairs),
                "row_limits": [int(need[k]) for k in LIMIT_KEYS],
                "examples": len(splits["train"])}

    @staticmethod
    def refusal(job):
        """A threshold tuned on dev (``threshold dev``): it needs the pooled dev
        probabilities, which no site sends (the sites count at the job's fixed threshold), so
        :meth:`agree` refuses it."""
        if job.options.get("threshold") == "dev":
            return ("threshold dev: a deployment scores at a fixed threshold (the sites send "
                    "counts, not the pooled dev probabilities a tuned threshold needs)")
        return None

    def agree(self, head, sites, log, concept_file=None):
        """:meth:`tffre.tasks.sites.Sites.agree` (relation types and pair types equal, else the
        site is refused; a job :meth:`refusal` names is refused), and the job's row limits:
        each the largest of the agreeing sites' (``job.facts["limits"]``), so that every
        site's documents fit."""
        from tffre.text.document_features import LIMIT_KEYS
        job = super().agree(head, sites, log, concept_file)
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

    @staticmethod
    def schema(job):
        """(relation types, pair types or None, row limits) the job agreed on."""
        if "limits" not in job.facts:
            raise SiteDataError("the job holds no row limits: the sites' surveys were not "
                                "agreed (DocumentSites.agree)")
        pairs = json.loads(job.facts.get("pair_types", "null"))
        return (list(job.labels), None if pairs is None else [tuple(p) for p in pairs],
                dict(job.facts["limits"]))

    def _built(self, job, encoder_dir):
        """(featurizer, model config) of the job at a side with ``encoder_dir``."""
        types, pairs, limits = self.schema(job)
        options = self.options(job)
        featurizer = featurizer_for(encoder_dir, types, pairs, options.max_len, limits=limits)
        return featurizer, model_config(featurizer, encoder_dir, options)

    def _prefix(self, job, encoder_dir, config, folder=None):
        """The frozen prefix of a split ``config`` and its activation store, built once per
        (job, encoder folder, cache folder) in this process."""
        from tffre.models.partial import frozen_prefix
        key = (job.key(), encoder_dir, folder)
        if key not in self._prefixes:
            self._prefixes.clear()   # one job at a time: a new job frees the last prefix
            build, load = prefix_parts(config, encoder_dir)
            self._prefixes[key] = frozen_prefix(build, load, job.seed, folder)
        return self._prefixes[key]

    def model(self, job, site):
        """The job's :class:`tffre.tasks.sites.SiteModel` built from this side's encoder folder:
        the ATLOP-style model (:func:`tffre.models.document_model.build_docre_model`), the loss of
        ``--loss`` (FedLCC Eq. 11 for "bce") and the inputs of the job's featurizer."""
        import tensorflow as tf
        from tffre.data.federated import ordered
        from tffre.models.document_model import (MODEL_INPUTS, DocRELoss, build_docre_model,
                                            has_prefix)
        encoder_dir = self.encoder_dir(site)
        featurizer, config = self._built(job, encoder_dir)
        threshold = self.options(job).threshold
        shapes = featurizer.shapes()
        x_spec = {k: tf.TensorSpec((None,) + shapes[k], tf.int32) for k in MODEL_INPUTS}
        identity, export = "", None
        if has_prefix(config):
            from tffre.models.partial import HIDDEN, exporter
            prefix, store = self._prefix(job, encoder_dir, config,
                                         site_path(site, "prefix-cache", required=False))
            identity = store.identity
            x_spec[HIDDEN] = tf.TensorSpec((None,) + tuple(prefix.output_shape[1:]), tf.float32)
            export = exporter(lambda: build_docre_model(config.full()), prefix)
        _, load = prefix_parts(config, encoder_dir)
        return SiteModel(
            model_fn=lambda: build_docre_model(config), loss=DocRELoss(config.loss),
            # As FederatedData orders a dict of inputs (by key); y: labels and pair mask.
            input_spec=(ordered(x_spec), tf.TensorSpec(
                (None,) + shapes["labels"][:-1] + (featurizer.num_relations + 1,), tf.float32)),
            load_pretrained=load, identity=identity, evaluation="docre", encoder=featurizer,
            export=export,
            # A number the sites count at; "dev" agree() has refused.
            evaluation_options={} if threshold == "dev" else {"threshold": threshold})

    def site_data(self, job, site):
        """The site's featurized :class:`tffre.tasks.sites.SiteData` (the job's relation types,
        pair types and row limits): train, dev and test, with each split's ``pair_intra``."""
        path, splits, types, pairs = self._documents(job, site)
        want_types, want_pairs, _ = self.schema(job)
        if types != want_types or pairs != want_pairs:
            raise SiteDataError(f"{path}: relation types {types} and candidate pairs {pairs} "
                                f"differ from the run's {want_types} and {want_pairs}")
        encoder_dir = self.encoder_dir(site)
        featurizer, config = self._built(job, encoder_dir)
        try:
            encoded, stats = encode_splits(featurizer, splits)
        except ValueError as err:   # names the document and the field
            raise SiteDataError(f"{path}: {err}") from None
        cut = {name: {k: v for k, v in s.items() if k != "documents" and v}
               for name, s in stats.items()}
        if any(cut.values()):   # a site that joined after the limits were agreed
            print(f"site {site.get('site', '')}: the job's row limits {self.schema(job)[2]} "
                  f"cut rows of its documents: {cut}", flush=True)
        arrays = {name: (x, y) for name, (x, y, _) in encoded.items()}
        annotations = {name: notes for name, (_, _, notes) in encoded.items()}
        from tffre.models.document_model import has_prefix
        if has_prefix(config):   # this site's activations of the frozen prefix, once
            from tffre.models.partial import cache_clients
            prefix, store = self._prefix(job, encoder_dir, config,
                                         site_path(site, "prefix-cache", required=False))
            arrays = next(iter(cache_clients({site.get("site", "site"): arrays}, prefix,
                                             store).values()))
        train = arrays.pop("train")
        return SiteData(train=train, held_out=arrays, annotations=annotations)

    def check_site(self, site, dataset=None):
        """A site's data before it starts (:func:`tffre.tasks.sites.check_site_data`): one line
        on what it holds, or :class:`tffre.tasks.sites.SiteDataError` when it has nothing to
        train on. With ``dataset`` (the format, e.g. "cdr") the data is checked as ``python -m
        tffre data check --dataset DATASET --data PATH`` checks it (:func:`check_data`: every
        problem counted, the first named); without, :func:`tffre.tasks.sites.check_any_site`."""
        if not dataset:
            return check_any_site(site)
        path = site_path(site, "data")
        return check_report_line(check_data(dataset, Options(data=path)), dataset, path)


#: What ``python -m tffre deploy`` runs at each side (:mod:`tffre.tasks.sites`).
SITES = DocumentSites()
