"""Document-level biomedical relation extraction (FedLCC Tables 3-5, 7) on a Hugging Face encoder.

Loads CDR, GDA or CHR (PubTator or EoG ``.data``) or DocRED-style JSON with
:func:`tffre.data.document_sets.load_document_splits` (the embedded, invented CDR-style sample
by default for ``--dataset cdr``), marks and packs the documents with
:class:`tffre.text.document_features.DocREFeaturizer`, splits the training
documents over the clients by the paper's structural-entropy rule (Sect. 4.2,
:func:`tffre.data.doc_graph.structural_entropy_split`, ``--entropy-form``) or
IID, and builds the ATLOP-style model of :func:`tffre.models.documents.build_docre_model`
(pretrained encoder weights enter the server state after ``initialize``).

The client loop sees ``x`` = the dict of model inputs and ``y`` = labels ⊕
pair mask (:func:`tffre.models.documents.pack_targets`), trained with
:class:`tffre.models.documents.DocRELoss` (``--loss bce``, Eq. 11, or ``softmax``,
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
  counted (``summary.json`` -> ``featurizer``).
* **Empty clients**: an entropy interval without documents leaves its client
  empty; it is dropped (printed), the others keep their interval's index.

Dev and test documents are dealt evenly over the clients and pooled by the
evaluation (a common test set, as the paper's).
"""

import dataclasses
import os
from typing import Optional

from tffre.hparams import choice, optional, param, positive_int
from tffre.lazy import np
from tffre.runner.settings import Job
from tffre.tasks import (SAMPLE, DataOption, EncoderOptions, Task, check_encoder, require_data,
                         with_cached_prefix)

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


TASK = Task("documents", "document-level relation extraction (FedLCC Tables 3-5, 7)",
            ("cdr", "gda", "chr", "docred"), ("encoder",), Options,
            defaults={"clients": 10, "batch_size": 3, "trainable_layers": 2,
                      "executor": "local"},
            learning_rates={"adam": 3e-4},
            dataset_defaults={"cdr": {"data": SAMPLE}})


def check(cfg):
    """The options' checks that need no data."""
    require_data(cfg)
    check_encoder(cfg)


def data_path(cfg):
    """The file or folder ``cfg.options.data`` names (the embedded sample for "sample")."""
    from tffre.data.document_sets import sample_path
    return sample_path() if cfg.options.data == SAMPLE else cfg.options.data


def check_data(dataset, options, *, tokenizer=None, max_len=None, seed=0):
    """The data check of what a run would load (``python -m tffre data check``)."""
    from tffre.data.check import check_dataset
    from tffre.data.document_sets import sample_path
    path = sample_path() if options.data == SAMPLE else options.data
    return check_dataset("documents", dataset, path, tokenizer=tokenizer,
                         max_len=max_len or options.max_len or DEFAULT_MAX_LEN, seed=seed,
                         eog_variant=options.eog_variant, dev_as_test=dataset == "docred")


def load_splits(cfg):
    """{"train", "dev", "test": [Document]} of ``cfg``, and the notes on what was held out
    (:func:`tffre.data.document_sets.load_document_splits`: DocRED's dev split scored as test, a
    missing dev split a seeded 20% of train)."""
    from tffre.data.document_sets import load_document_splits
    notes = []
    splits = load_document_splits(data_path(cfg), seed=cfg.run.seed,
                                  eog_variant=cfg.options.eog_variant,
                                  dev_as_test=cfg.dataset == "docred", notes=notes)
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


def prepare(cfg):
    """Loads, featurizes and splits the document set of ``cfg``; returns the :class:`Job`."""
    import pandas as pd

    from tffre.data import FederatedData
    from tffre.data.doc_graph import describe_split, iid_split, plot_split
    from tffre.data.formats.docred import fact_keys
    from tffre.metrics import docre_baselines
    from tffre.models.documents import (DocRELoss, build_docre_model, build_docre_prefix,
                                        docre_config_for, has_prefix, load_pretrained_encoder,
                                        model_inputs, pack_targets)
    from tffre.text.document_features import DocREFeaturizer
    from tffre.text.relation_tokenizer import default_encoder_dir

    splits, notes = load_splits(cfg)
    for note in notes:
        print(f"note: {note}")
    relation_types, pair_types = relation_schema(cfg.dataset, splits["train"])
    encoder_dir = cfg.options.encoder or default_encoder_dir()
    everything = [doc for docs in splits.values() for doc in docs]
    featurizer = DocREFeaturizer.for_documents(
        encoder_dir, relation_types, everything, max_length=cfg.options.max_len or DEFAULT_MAX_LEN,
        pair_types=pair_types)
    facts = fact_keys(splits["train"]) if cfg.dataset == "docred" else None
    arrays, stats = {}, {}
    for name, docs in splits.items():
        encoded = featurizer.encode(docs)
        stats[name] = dict(featurizer.last_stats)
        notes_of = {"pair_intra": encoded["pair_intra"]}
        if facts is not None:
            notes_of["pair_in_train"] = facts_seen_in_training(featurizer, docs, facts)
        arrays[name] = (model_inputs(encoded), pack_targets(encoded["labels"],
                                                            encoded["pair_mask"]), notes_of)

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
                                           * arrays[name][1][..., -1]).sum())}
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
        f"positive)" for name, c in count.items())
        + f"; relations {relation_types}; candidate pairs "
        + ("all" if pair_types is None else ", ".join(f"{s}->{o}" for s, o in pair_types))
        + f"; featurizer cuts {cut}")
    config = docre_config_for(featurizer, encoder_dir, loss=cfg.options.loss,
                              num_layers=cfg.options.encoder_layers,
                              freeze_embeddings=cfg.options.freeze_embedding,
                              partial=cfg.options.partial())
    load = lambda model: load_pretrained_encoder(model, encoder_dir)  # noqa: E731
    if has_prefix(config):   # a frozen prefix: each client's activations once
        data, _, _, info["partial"] = with_cached_prefix(
            data, config, lambda: build_docre_prefix(config), load, cfg)

    def model_fn():
        return build_docre_model(config)

    def write_extras(out_dir):
        table.to_csv(os.path.join(out_dir, "partition.csv"), index=False)
        if split is not None:   # FedLCC Figure 2: documents per client and entropy interval
            plot_split(split, os.path.join(out_dir, "partition.png"), title=data.name)

    return Job(data=data, model_fn=model_fn, loss=DocRELoss(cfg.options.loss),
               title=f"{data.name}, {os.path.basename(os.path.normpath(encoder_dir))}",
               label_names=relation_types, encoder=None, info=info, write_extras=write_extras,
               load_pretrained=load, evaluation="docre")
