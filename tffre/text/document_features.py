"""Document-level relation-extraction inputs (FedLCC 3.2, after ATLOP): fixed-shape arrays.

:class:`DocREFeaturizer` turns :class:`tffre.data.document_schema.Document` objects
into what :func:`tffre.models.document_model.build_docre_model` takes: a dict of int32
numpy arrays, one row per document, that ``tf.data.Dataset.from_tensor_slices``
slices and ``.batch`` batches::

    input_ids        [n, max_length]       [CLS] ... * w1 w2 * ... [SEP] pad
    attention_mask   [n, max_length]       1 on the real tokens (markers included)
    mention_pos      [n, max_mentions]     token index of each mention's leading "*", -1 pad
    entity_mentions  [n, max_entities, max_mentions_per_entity]
                                           mention rows (indices into mention_pos), -1 pad
    pairs            [n, max_pairs, 2]     (subject, object) entity rows, -1 pad
    labels           [n, max_pairs, num_relations]  multi-hot over ``relation_types``
    pair_mask        [n, max_pairs]        1 on real pairs
    pair_intra       [n, max_pairs]        1 where the pair's entities share a sentence
                                           (some mention of each in one sentence, as EoG's
                                           NON-CROSS), 0 across sentences and on padding
    unscored_gold    [n]                   gold relations (distinct type, id1, id2) whose
                                           pair is no row of ``pairs``: the model cannot
                                           score them
    unscored_gold_intra [n]                those of them whose entities share a sentence

``pair_intra`` is for the evaluation only (CDR's and GDA's intra-/inter-sentence
F1, :func:`tffre.metrics.docre_scores`), never a model input; it reads the
mentions' ``sentence`` indices, so a mention without one (-1) shares no
sentence. So are ``unscored_gold`` and ``unscored_gold_intra``: the evaluation
counts every gold relation, as BioCreative V's CID evaluation counts every gold
(chemical, disease) pair, so one the pairs do not hold is a miss, a false
negative (:class:`tffre.evaluation.DocREEvaluator`); an entity without a
mention shares no sentence.

:meth:`DocREFeaturizer.limits` gives the row limits a set of documents needs,
so that nothing is cut; :meth:`DocREFeaturizer.for_documents` builds a
featurizer with them.

Markers (FedLCC 3.2, "inserting a special entity marker * at the start and
end of each mention"): the text is tokenised once by a Hugging Face *fast*
tokenizer with its offsets mapping; each mention covers the word pieces whose
character span overlaps the mention's, and one ``*`` (an ordinary vocabulary
token, as in ATLOP, not an added special token) is inserted before its first
and after its last piece. The mention embedding is the hidden state at the
leading ``*`` (Eq. 2's h_m). There is one marker per boundary piece:
mentions that start (or end) at the same piece share it. (ATLOP inserts one
per distinct mention, so nested mentions with a common first word get two
``*`` there, and both point at the first; the difference only touches nested
mentions.) Only mentions of normalised
entities (ids other than ``-1``) are marked; a composite mention (``D1|D2``)
is one mention of each of its entities.

Rows: entities in first-mention order (:meth:`Document.entities`), mention
rows in text order (only mentions of kept entities), pairs subject-major over
the entity rows: every ordered pair of distinct entities, or, with
``pair_types`` (e.g. ``[("Chemical", "Disease")]`` for CDR, whose candidate
pairs are chemical -> disease), only pairs whose (subject type, object type) is
listed (types are those of the entities' first mentions, compared exactly).

Labels and "no relation": ``labels`` is a multi-hot over ``relation_types``
only; a pair with no relation is all zeros. That is exactly the target of the
paper's sigmoid/BCE loss (Eq. 10-11). The featurizer does not depend on the
loss: the model's ``loss="softmax"`` option (the authors' code's
``CrossEntropyLoss`` over ``{'1:NR:2': 0, '1:CID:2': 1}``) adds the "no
relation" class itself, as class 0 of its ``num_relations + 1`` logits (see
:func:`tffre.models.document_model.docre_loss`).

Nothing is dropped silently. Over the size limits, the featurizer cuts and
counts: :attr:`DocREFeaturizer.stats` (cumulative) and
:attr:`DocREFeaturizer.last_stats` (the last :meth:`DocREFeaturizer.encode`
call) hold

* ``documents``: documents encoded;
* ``truncated_documents``: more tokens than ``max_length`` (ATLOP keeps the
  first ``max_length - 2`` and adds [CLS]/[SEP]; so do we);
* ``truncated_mentions``: mention rows whose leading ``*`` fell beyond the
  cut: their ``mention_pos`` is -1 (the entity keeps its other mentions; an
  entity with none left gets a zero embedding in the model, as in ATLOP);
* ``unaligned_mentions``: mentions covering no word piece (e.g. only
  whitespace): no marker, ``mention_pos`` -1;
* ``overflow_entities``, ``overflow_mentions``, ``overflow_entity_mentions``,
  ``overflow_pairs``: rows beyond ``max_entities``, ``max_mentions``,
  ``max_mentions_per_entity``, ``max_pairs``;
* ``unmatched_relations``: gold relations (distinct type, id1, id2) whose
  (id1, id2) pair is not among the encoded pairs (an entity without mentions or
  cut by ``max_entities``, a pair excluded by ``pair_types`` or cut by
  ``max_pairs``): no pair row carries their label, and the evaluation counts
  each as a miss (``unscored_gold``). A pair whose entity lost every mention to
  the ``max_length`` cut keeps its row (the entity's embedding is zero): it is
  scored, as in ATLOP.

and each ``encode`` call that cut anything logs one warning saying what.

Transformers is imported only when a tokenizer is loaded from a folder.
"""

import copy
import logging
import os

import numpy as np

from tffre.data.document_schema import Document
from tffre.errors import positive_int
from tffre.jsonio import write_json
from tffre.text.relation_tokenizer import FORMAT_VERSION, check_encoder_folder, read_saved_settings

MARKER = "*"
FEATURE_KEYS = ("input_ids", "attention_mask", "mention_pos", "entity_mentions", "pairs",
                "labels", "pair_mask", "pair_intra", "unscored_gold", "unscored_gold_intra")
LIMIT_KEYS = ("max_mentions", "max_entities", "max_mentions_per_entity", "max_pairs")
STAT_KEYS = ("documents", "truncated_documents", "truncated_mentions", "unaligned_mentions",
             "overflow_entities", "overflow_mentions", "overflow_entity_mentions",
             "overflow_pairs", "unmatched_relations")

_log = logging.getLogger(__name__)

__all__ = ["DocREFeaturizer", "FEATURE_KEYS", "LIMIT_KEYS", "MARKER", "STAT_KEYS",
           "template_tokens"]


def template_tokens(tokenizer):
    """The ids a tokenizer puts around a sequence: ``(prefix, suffix)``, e.g. ``([CLS], [SEP])``.

    Read off ``build_inputs_with_special_tokens`` around a one-token input, so
    BERT gives ``((101,), (102,))`` and RoBERTa ``((0,), (2,))``. They are also
    the start/end tokens of the long-input windows (ATLOP's ``start_tokens`` /
    ``end_tokens``; see :func:`tffre.models.document_model.split_long_input`).
    """
    probe = tokenizer.convert_tokens_to_ids(MARKER)
    if probe is None:
        probe = 0
    with_specials = list(tokenizer.build_inputs_with_special_tokens([probe]))
    cut = with_specials.index(probe)
    prefix, suffix = with_specials[:cut], with_specials[cut + 1:]
    return tuple(int(i) for i in prefix), tuple(int(i) for i in suffix)


class DocREFeaturizer:
    """Marks mentions with ``*`` and packs documents into fixed-shape arrays (module docstring).

    Args:
      tokenizer_dir: a Hugging Face encoder folder with a fast tokenizer (e.g.
        :func:`tffre.text.relation_tokenizer.default_encoder_dir`), or an already loaded fast
        tokenizer. Nothing is downloaded and no token is added: ``*`` must be in its
        vocabulary.
      relation_types: the relation types, in label-column order (e.g. ``["CID"]``).
      max_length: tokens per document, [CLS], [SEP] and markers included (ATLOP: 1024;
        the model reads more than 512 through two windows).
      max_mentions: mention rows per document.
      max_entities: entity rows per document.
      max_mentions_per_entity: mention slots per entity row.
      max_pairs: pair rows per document.
      pair_types: None for all ordered pairs of distinct entities, or the allowed
        (subject type, object type) pairs, e.g. ``[("Chemical", "Disease")]``.

    A model bundle's encoder (kind "documents"): :meth:`save` writes the tokenizer and these
    settings, :meth:`load` reads them back, and :meth:`fitted` sizes the rows for the
    documents to predict.
    """

    kind = "documents"
    CONFIG = "doc_featurizer.json"
    FOLDER = "tokenizer"
    FILES = (CONFIG, os.path.join(FOLDER, "tokenizer.json"))

    def __init__(self, tokenizer_dir, relation_types, max_length=1024, max_mentions=128,
                 max_entities=64, max_mentions_per_entity=32, max_pairs=512, pair_types=None):
        if isinstance(tokenizer_dir, (str, os.PathLike)):
            folder = check_encoder_folder(tokenizer_dir)
            from transformers import AutoTokenizer
            tokenizer = AutoTokenizer.from_pretrained(folder, use_fast=True,
                                                      local_files_only=True)
        else:
            tokenizer = tokenizer_dir
        if not getattr(tokenizer, "is_fast", False):
            raise TypeError(f"DocREFeaturizer needs a fast (Rust) Hugging Face tokenizer "
                            f"(it reads the offsets mapping), got {type(tokenizer).__name__}")
        self.tokenizer = tokenizer
        if isinstance(relation_types, str):
            relation_types = [relation_types]
        self.relation_types = [str(t) for t in relation_types]
        if not self.relation_types:
            raise ValueError("relation_types is empty")
        if len(set(self.relation_types)) != len(self.relation_types):
            raise ValueError(f"relation_types has duplicates: {self.relation_types}")
        self._relation_index = {t: i for i, t in enumerate(self.relation_types)}
        self.max_length = positive_int(max_length, "max_length")
        self.max_mentions = positive_int(max_mentions, "max_mentions")
        self.max_entities = positive_int(max_entities, "max_entities")
        self.max_mentions_per_entity = positive_int(max_mentions_per_entity,
                                                     "max_mentions_per_entity")
        self.max_pairs = positive_int(max_pairs, "max_pairs")
        if pair_types is None:
            self.pair_types = None
        else:
            pairs = [tuple(p) for p in pair_types]
            if not pairs or any(len(p) != 2 for p in pairs):
                raise ValueError(f"pair_types must be (subject type, object type) pairs, got "
                                 f"{pair_types!r}")
            self.pair_types = [(str(s), str(o)) for s, o in pairs]
        self._allowed = None if self.pair_types is None else set(self.pair_types)

        self.marker_id = tokenizer.convert_tokens_to_ids(MARKER)
        unk = tokenizer.unk_token_id
        if self.marker_id is None or (unk is not None and self.marker_id == unk):
            raise ValueError(f"the entity marker {MARKER!r} is not in the tokenizer's vocabulary")
        self.start_tokens, self.end_tokens = template_tokens(tokenizer)
        self._budget = self.max_length - len(self.start_tokens) - len(self.end_tokens)
        if self._budget < 3:
            raise ValueError(f"max_length {self.max_length} leaves no room for a mention")
        pad = tokenizer.pad_token_id
        self.pad_id = 0 if pad is None else int(pad)
        self.reset_stats()

    # ------------------------------------------------------------------ properties

    @property
    def num_relations(self):
        """The label columns: ``len(relation_types)``."""
        return len(self.relation_types)

    @property
    def vocab_size(self):
        """The tokenizer's size (nothing is added: ``*`` is an ordinary token)."""
        return len(self.tokenizer)

    def shapes(self):
        """{key: per-document shape} of :meth:`encode`'s arrays (all int32)."""
        return {"input_ids": (self.max_length,), "attention_mask": (self.max_length,),
                "mention_pos": (self.max_mentions,),
                "entity_mentions": (self.max_entities, self.max_mentions_per_entity),
                "pairs": (self.max_pairs, 2), "labels": (self.max_pairs, self.num_relations),
                "pair_mask": (self.max_pairs,), "pair_intra": (self.max_pairs,),
                "unscored_gold": (), "unscored_gold_intra": ()}

    def reset_stats(self):
        """Zeroes :attr:`stats` and :attr:`last_stats`."""
        self.stats = dict.fromkeys(STAT_KEYS, 0)
        self.last_stats = dict.fromkeys(STAT_KEYS, 0)

    # ------------------------------------------------------------------ layout

    def _layout(self, doc, counts):
        """Entity ids, mention rows (document mention indices), entity -> rows, pairs."""
        entities = doc.entities()
        ids = list(entities)
        kept = ids[:self.max_entities]
        counts["overflow_entities"] += len(ids) - len(kept)
        wanted = sorted({i for eid in kept for i in entities[eid]})
        rows = wanted[:self.max_mentions]
        counts["overflow_mentions"] += len(wanted) - len(rows)
        row_of = {m: r for r, m in enumerate(rows)}
        entity_rows = []
        for eid in kept:
            mine = [row_of[m] for m in entities[eid] if m in row_of]
            counts["overflow_entity_mentions"] += max(0, len(mine) - self.max_mentions_per_entity)
            entity_rows.append(mine[:self.max_mentions_per_entity])
        types = doc.entity_types()
        pairs = [(s, o) for s in range(len(kept)) for o in range(len(kept)) if s != o
                 and (self._allowed is None or (types[kept[s]], types[kept[o]]) in self._allowed)]
        counts["overflow_pairs"] += max(0, len(pairs) - self.max_pairs)
        pairs = pairs[:self.max_pairs]
        return kept, rows, entity_rows, pairs

    def limits(self, documents):
        """{max_mentions, max_entities, max_mentions_per_entity, max_pairs}: the smallest row
        limits (at least 1) that encode ``documents`` without cutting a row (with this
        featurizer's ``pair_types``)."""
        big = copy.copy(self)   # the same tokenizer and pair types, no row limits
        for key in LIMIT_KEYS:
            setattr(big, key, 2 ** 31 - 1)
        need = dict.fromkeys(LIMIT_KEYS, 1)
        for doc in documents:
            kept, rows, entity_rows, pairs = big._layout(doc, dict.fromkeys(STAT_KEYS, 0))
            for key, value in (("max_entities", len(kept)), ("max_mentions", len(rows)),
                               ("max_mentions_per_entity",
                                max((len(r) for r in entity_rows), default=0)),
                               ("max_pairs", len(pairs))):
                need[key] = max(need[key], value)
        return need

    @classmethod
    def for_documents(cls, tokenizer_dir, relation_types, documents, **kwargs):
        """A featurizer whose row limits (:data:`LIMIT_KEYS`) fit ``documents`` exactly
        (:meth:`limits`); ``kwargs`` are the other constructor arguments."""
        return cls(tokenizer_dir, relation_types, **kwargs).fitted(documents)

    def fitted(self, documents):
        """This featurizer with row limits that fit ``documents`` (:meth:`limits`): the model
        takes any number of mention, entity and pair rows, only ``max_length`` is fixed."""
        return type(self)(self.tokenizer, self.relation_types, max_length=self.max_length,
                          pair_types=self.pair_types, **self.limits(documents))

    def save(self, folder):
        """Writes ``tokenizer/`` (the Hugging Face tokenizer) and ``doc_featurizer.json`` (the
        relation types, ``max_length``, the candidate pair types and the row limits)."""
        os.makedirs(folder, exist_ok=True)
        self.tokenizer.save_pretrained(os.path.join(folder, self.FOLDER))
        write_json(os.path.join(folder, self.CONFIG), {
            "format_version": FORMAT_VERSION, "kind": self.kind,
            "relation_types": self.relation_types, "max_length": self.max_length,
            "pair_types": None if self.pair_types is None else [list(p) for p in self.pair_types],
            **{key: getattr(self, key) for key in LIMIT_KEYS}})
        return folder

    @classmethod
    def load(cls, folder):
        """Reads a featurizer written by :meth:`save` (the same arrays for the same
        documents); ValueError names the file and field of a bad setting."""
        path, config = read_saved_settings(folder, cls.FILES)
        types = config.get("relation_types")
        if not isinstance(types, list) or not types or not all(isinstance(t, str) for t in types):
            raise ValueError(f"{path}: relation_types must be a non-empty list of strings")
        from transformers import AutoTokenizer
        tokenizer = AutoTokenizer.from_pretrained(os.path.join(folder, cls.FOLDER),
                                                  use_fast=True, local_files_only=True)
        try:
            return cls(tokenizer, types, pair_types=config.get("pair_types"),
                       **{key: positive_int(config.get(key), key)
                          for key in ("max_length",) + LIMIT_KEYS})
        except (TypeError, ValueError) as err:
            raise ValueError(f"{path}: {err}") from None

    def entity_ids(self, document):
        """The entity ids of ``document``'s entity rows, in row order."""
        return self._layout(document, dict.fromkeys(STAT_KEYS, 0))[0]

    def pair_ids(self, document):
        """The (subject id, object id) of ``document``'s pair rows, in row order (to map
        predictions back to entities)."""
        kept, _, _, pairs = self._layout(document, dict.fromkeys(STAT_KEYS, 0))
        return [(kept[s], kept[o]) for s, o in pairs]

    # ------------------------------------------------------------------ encoding

    def encode(self, documents):
        """Encodes documents as the dict of int32 arrays described in the module docstring.

        Args:
          documents: a :class:`~tffre.data.document_schema.Document` or a sequence of them.

        Raises ValueError naming the document for a relation type not in
        ``relation_types`` and for an empty mention span or one outside its text.
        """
        if isinstance(documents, Document):
            documents = [documents]
        documents = list(documents)
        for i, doc in enumerate(documents):
            if not isinstance(doc, Document):
                raise TypeError(f"item {i}: expected a Document, got {type(doc).__name__}")
        n = len(documents)
        shapes = self.shapes()
        out = {key: np.full((n,) + shape, -1 if key in ("mention_pos", "entity_mentions",
                                                         "pairs") else 0, np.int32)
               for key, shape in shapes.items()}
        out["input_ids"][:] = self.pad_id
        counts = dict.fromkeys(STAT_KEYS, 0)
        counts["documents"] = n
        if n:
            enc = self.tokenizer([d.text for d in documents], add_special_tokens=False,
                                 return_offsets_mapping=True, verbose=False)
            for row, doc in enumerate(documents):
                self._encode_one(doc, enc["input_ids"][row], enc["offset_mapping"][row],
                                 out, row, counts)
        self.last_stats = counts
        for key, value in counts.items():  # counted only when the whole call succeeds
            self.stats[key] += value
        cut = {k: v for k, v in counts.items() if k != "documents" and v}
        if cut:
            _log.warning("DocREFeaturizer: of %d documents, %s", n,
                         ", ".join(f"{k}={v}" for k, v in cut.items()))
        return out

    def _encode_one(self, doc, piece_ids, offsets, out, row, counts):
        name = f"document {doc.pmid!r}"
        for r in doc.relations:
            if r.type not in self._relation_index:
                raise ValueError(f"{name}: relation type {r.type!r} is not one of "
                                 f"relation_types {self.relation_types}")
        kept, rows, entity_rows, pairs = self._layout(doc, counts)

        # Word pieces of each entity mention: those whose character span overlaps it.
        starts = np.array([a for a, _ in offsets], np.int64)
        ends = np.array([b for _, b in offsets], np.int64)
        real = ends > starts
        marked = sorted({i for idx in doc.entities().values() for i in idx})
        first_piece = {}
        opens, closes = set(), set()
        for m in marked:
            mention = doc.mentions[m]
            if not 0 <= mention.start < mention.end <= len(doc.text):
                raise ValueError(f"{name}: mention {m} span [{mention.start}, {mention.end}) "
                                 f"is not a non-empty span of the text ({len(doc.text)} "
                                 f"characters)")
            hit = np.flatnonzero(real & (starts < mention.end) & (ends > mention.start))
            if len(hit) == 0:
                continue
            first_piece[m] = int(hit[0])
            opens.add(int(hit[0]))
            closes.add(int(hit[-1]))

        # ATLOP's layout: "*" before a mention's first piece and after its last (Eq. 1's input).
        body, star_at = [], {}
        for k, piece in enumerate(piece_ids):
            if k in opens:
                star_at[k] = len(body)
                body.append(self.marker_id)
            body.append(int(piece))
            if k in closes:
                body.append(self.marker_id)
        if len(body) > self._budget:
            counts["truncated_documents"] += 1
            body = body[:self._budget]
        ids = list(self.start_tokens) + body + list(self.end_tokens)
        out["input_ids"][row, :len(ids)] = ids
        out["attention_mask"][row, :len(ids)] = 1

        offset = len(self.start_tokens)
        for r, m in enumerate(rows):
            if m not in first_piece:
                counts["unaligned_mentions"] += 1
                continue
            pos = star_at[first_piece[m]]
            if pos >= len(body):
                counts["truncated_mentions"] += 1
                continue
            out["mention_pos"][row, r] = offset + pos
        for e, mine in enumerate(entity_rows):
            out["entity_mentions"][row, e, :len(mine)] = mine
        if pairs:
            out["pairs"][row, :len(pairs)] = pairs
            out["pair_mask"][row, :len(pairs)] = 1
        # Intra-sentence pairs: some mention of each entity in one sentence (EoG's NON-CROSS).
        entities = doc.entities()
        sentences = [{doc.mentions[m].sentence for m in entities[eid]} - {-1} for eid in kept]
        for p, (s, o) in enumerate(pairs):
            out["pair_intra"][row, p] = int(bool(sentences[s] & sentences[o]))
        pair_row = {(kept[s], kept[o]): p for p, (s, o) in enumerate(pairs)}
        # Every gold fact once (a relation line given twice is one fact): a pair row's label,
        # or one the model cannot score, which the evaluation counts as a miss.
        for r in dict.fromkeys(doc.relations):
            p = pair_row.get((r.id1, r.id2))
            if p is not None:
                out["labels"][row, p, self._relation_index[r.type]] = 1
                continue
            counts["unmatched_relations"] += 1
            out["unscored_gold"][row] += 1
            shared = ({doc.mentions[m].sentence for m in entities.get(r.id1, ())}
                      & {doc.mentions[m].sentence for m in entities.get(r.id2, ())}) - {-1}
            out["unscored_gold_intra"][row] += bool(shared)
