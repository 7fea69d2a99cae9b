"""The document-level RE featurizer: `*` markers, mention/entity/pair maps, labels, limits."""

import logging

import numpy as np
import pytest

from tiny_encoder import VOCAB, make_encoder_folder
from tffre.data.document_schema import Document, Mention, Relation
from tffre.text.document_features import DocREFeaturizer, FEATURE_KEYS, STAT_KEYS

TEXT = "aspirin was given for headache and fever . the patient on aspirin improved ."
#       0      7   11    17  21       30  34    40 42  46      54 57      65       74


def mention(text, word, typ, *ids, nth=0):
    start = -1
    for _ in range(nth + 1):
        start = text.index(word, start + 1)
    return Mention(start, start + len(word), word, typ, tuple(ids))


def document(relations=(("CID", "C1", "D1"),)):
    mentions = [mention(TEXT, "aspirin", "Chemical", "C1"),
                mention(TEXT, "headache", "Disease", "D1"),
                mention(TEXT, "fever", "Disease", "D2"),
                mention(TEXT, "patient", "Species", "-1"),       # unnormalised: not an entity
                mention(TEXT, "aspirin", "Chemical", "C1", nth=1)]
    return Document("doc1", TEXT, mentions, [Relation(*r) for r in relations],
                    [(0, 42), (43, len(TEXT))])


# The marked document, written out by hand: a "*" before and after each entity mention.
MARKED = ["[CLS]", "*", "aspirin", "*", "was", "given", "for", "*", "head", "##ache", "*",
          "and", "*", "fever", "*", ".", "the", "patient", "on", "*", "aspirin", "*",
          "improved", ".", "[SEP]"]
STARS = [1, 7, 12, 19]                          # mention rows: aspirin, headache, fever, aspirin
ALL_PAIRS = [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]   # entities C1, D1, D2


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_encoder_folder(str(tmp_path_factory.mktemp("docre_tok")), vocab=VOCAB + ["*"])[0]


def featurizer(folder, **kwargs):
    args = dict(max_length=32, max_mentions=6, max_entities=4, max_mentions_per_entity=3,
                max_pairs=8)
    args.update(kwargs)
    return DocREFeaturizer(folder, ["CID"], **args)


def tokens(feat, out, row=0):
    ids = out["input_ids"][row][out["attention_mask"][row] == 1]
    return feat.tokenizer.convert_ids_to_tokens(ids.tolist())


def test_markers_mentions_entities_pairs_and_labels(folder):
    feat = featurizer(folder)
    out = feat.encode([document()])
    assert sorted(out) == sorted(FEATURE_KEYS)
    assert all(v.dtype == np.int32 for v in out.values())
    assert {k: v.shape[1:] for k, v in out.items()} == feat.shapes()
    assert tokens(feat, out) == MARKED
    assert out["attention_mask"][0].tolist() == [1] * len(MARKED) + [0] * (32 - len(MARKED))
    assert (out["input_ids"][0, len(MARKED):] == 0).all()           # [PAD]
    assert out["mention_pos"][0].tolist() == STARS + [-1, -1]
    star = feat.tokenizer.convert_tokens_to_ids("*")
    assert (out["input_ids"][0, STARS] == star).all()
    assert out["entity_mentions"][0].tolist() == [[0, 3, -1], [1, -1, -1], [2, -1, -1],
                                                  [-1, -1, -1]]
    assert out["pairs"][0].tolist() == [list(p) for p in ALL_PAIRS] + [[-1, -1]] * 2
    assert out["pair_mask"][0].tolist() == [1] * 6 + [0] * 2
    assert out["labels"][0, :, 0].tolist() == [1, 0, 0, 0, 0, 0, 0, 0]
    assert feat.entity_ids(document()) == ["C1", "D1", "D2"]
    assert feat.pair_ids(document())[:2] == [("C1", "D1"), ("C1", "D2")]
    assert feat.last_stats == {**dict.fromkeys(STAT_KEYS, 0), "documents": 1}
    assert (feat.start_tokens, feat.end_tokens) == ((2,), (3,))


def test_pair_types_restrict_the_pairs_and_labels_are_multi_hot(folder):
    feat = DocREFeaturizer(folder, ["CID", "TREATS"], max_length=32, max_mentions=6,
                           max_entities=4, max_mentions_per_entity=3, max_pairs=4,
                           pair_types=[("Chemical", "Disease")])
    doc = document([("CID", "C1", "D1"), ("TREATS", "C1", "D1"), ("TREATS", "C1", "D2")])
    out = feat.encode([doc, document(())])
    assert out["pairs"][0].tolist() == [[0, 1], [0, 2], [-1, -1], [-1, -1]]
    assert out["labels"][0].tolist() == [[1, 1], [0, 1], [0, 0], [0, 0]]
    assert out["labels"][1].tolist() == [[0, 0]] * 4                  # no relation: all zeros
    assert out["pair_mask"].tolist() == [[1, 1, 0, 0], [1, 1, 0, 0]]
    assert feat.pair_ids(doc) == [("C1", "D1"), ("C1", "D2")]


def test_pair_intra_marks_entities_sharing_a_sentence_and_limits_fit_the_data(folder):
    import dataclasses
    # Sentences: 0 = [0, 42) "aspirin ... fever .", 1 = the rest (the second "aspirin").
    doc = document()
    doc.mentions = [dataclasses.replace(m, sentence=0 if m.start < 42 else 1)
                    for m in doc.mentions]
    doc.mentions.append(dataclasses.replace(mention(TEXT, "improved", "Disease", "D3"),
                                            sentence=1))
    feat = featurizer(folder, max_entities=4, max_pairs=12)
    out = feat.encode([doc])
    pairs = feat.pair_ids(doc)
    intra = dict(zip(pairs, out["pair_intra"][0].tolist()))
    # C1 is in both sentences; D1, D2 only in 0; D3 only in 1.
    assert intra == {("C1", "D1"): 1, ("C1", "D2"): 1, ("C1", "D3"): 1, ("D1", "C1"): 1,
                     ("D1", "D2"): 1, ("D1", "D3"): 0, ("D2", "C1"): 1, ("D2", "D1"): 1,
                     ("D2", "D3"): 0, ("D3", "C1"): 1, ("D3", "D1"): 0, ("D3", "D2"): 0}
    assert out["pair_intra"][0, len(pairs):].sum() == 0
    # Mentions without a sentence index (-1) share none.
    assert featurizer(folder).encode([document()])["pair_intra"].sum() == 0
    assert feat.limits([doc, document()]) == {"max_mentions": 5, "max_entities": 4,
                                              "max_mentions_per_entity": 2, "max_pairs": 12}
    fitted = DocREFeaturizer.for_documents(folder, ["CID"], [doc], max_length=32,
                                           pair_types=[("Chemical", "Disease")])
    assert (fitted.max_pairs, fitted.max_entities) == (3, 4)
    assert fitted.encode([doc])["pair_intra"][0].tolist() == [1, 1, 1]


def test_gold_relations_no_pair_holds_are_counted_per_document(folder):
    import dataclasses
    # Sentences: 0 = [0, 42) "aspirin ... fever .", 1 = the rest. Gold: C1 -> D1 (a candidate
    # pair), D1 -> C1 (Disease -> Chemical: no candidate; both in sentence 0: intra), C1 -> D9
    # (D9 has no mention: no entity row; it shares no sentence: inter); D1 -> C1 given twice
    # is one fact.
    doc = document([("CID", "C1", "D1"), ("CID", "D1", "C1"), ("CID", "C1", "D9"),
                    ("CID", "D1", "C1")])
    doc.mentions = [dataclasses.replace(m, sentence=0 if m.start < 42 else 1)
                    for m in doc.mentions]
    feat = featurizer(folder, pair_types=[("Chemical", "Disease")])
    out = feat.encode([doc, document(())])
    assert feat.pair_ids(doc) == [("C1", "D1"), ("C1", "D2")]
    assert out["labels"][0, :2, 0].tolist() == [1, 0]
    assert out["unscored_gold"].tolist() == [2, 0]
    assert out["unscored_gold_intra"].tolist() == [1, 0]
    assert feat.last_stats["unmatched_relations"] == 2


def test_a_composite_mention_belongs_to_each_of_its_entities(folder):
    text = "aspirin was given for chest pain ."
    doc = Document("c", text, [mention(text, "aspirin", "Chemical", "C1"),
                               mention(text, "chest pain", "Disease", "D1", "D2")],
                   [Relation("CID", "C1", "D2")], [(0, len(text))])
    feat = featurizer(folder)
    out = feat.encode(doc)
    assert tokens(feat, out) == ["[CLS]", "*", "aspirin", "*", "was", "given", "for", "*",
                                 "chest", "pain", "*", ".", "[SEP]"]
    assert out["mention_pos"][0, :2].tolist() == [1, 7]
    assert out["entity_mentions"][0, :3, 0].tolist() == [0, 1, 1]
    assert out["labels"][0, :6, 0].tolist() == [0, 1, 0, 0, 0, 0]     # (C1, D2) is pair 1


def test_truncation_is_counted_and_logged(folder, caplog):
    feat = featurizer(folder, max_length=12)
    with caplog.at_level(logging.WARNING, logger="tffre.text.document_features"):
        out = feat.encode([document(), document()])
    # 10 tokens fit between [CLS] and [SEP]: "* aspirin * was given for * head ##ache *".
    assert tokens(feat, out) == MARKED[:11] + ["[SEP]"]
    assert out["mention_pos"][0].tolist() == [1, 7, -1, -1, -1, -1]   # fever, 2nd aspirin cut
    assert out["entity_mentions"][0, 0].tolist() == [0, 3, -1]        # kept; the model skips 3
    assert out["pair_mask"][0].sum() == 6                             # pairs are kept
    assert feat.last_stats["truncated_documents"] == 2
    assert feat.last_stats["truncated_mentions"] == 4
    assert "truncated_documents=2" in caplog.text and "truncated_mentions=4" in caplog.text
    feat.encode([document()])
    assert feat.stats["truncated_documents"] == 3 and feat.stats["documents"] == 3
    feat.reset_stats()
    assert feat.stats == dict.fromkeys(STAT_KEYS, 0)


def test_size_limits_cut_and_count(folder):
    feat = featurizer(folder, max_entities=2, max_pairs=1, max_mentions_per_entity=1)
    out = feat.encode([document([("CID", "C1", "D1"), ("CID", "C1", "D2")])])
    # Markers stay in the text for every entity mention; D2 is past max_entities.
    assert tokens(feat, out) == MARKED
    assert out["mention_pos"][0].tolist() == [1, 7, 19, -1, -1, -1]
    assert out["entity_mentions"][0].tolist() == [[0], [1]]
    assert out["pairs"][0].tolist() == [[0, 1]] and out["labels"][0].tolist() == [[1]]
    assert feat.last_stats == {**dict.fromkeys(STAT_KEYS, 0), "documents": 1,
                               "overflow_entities": 1, "overflow_entity_mentions": 1,
                               "overflow_pairs": 1, "unmatched_relations": 1}
    feat = featurizer(folder, max_mentions=2)
    out = feat.encode([document()])
    assert out["mention_pos"][0].tolist() == [1, 7]
    assert out["entity_mentions"][0, :3].tolist() == [[0, -1, -1], [1, -1, -1], [-1, -1, -1]]
    assert feat.last_stats["overflow_mentions"] == 2


def test_bad_inputs_raise(folder, tmp_path):
    feat = featurizer(folder)
    with pytest.raises(ValueError, match="relation type 'TREATS' is not one of"):
        feat.encode([document([("TREATS", "C1", "D1")])])
    assert feat.stats["documents"] == 0                               # nothing counted
    no_star = make_encoder_folder(str(tmp_path / "plain"))[0]
    with pytest.raises(ValueError, match=r"marker '\*' is not in the tokenizer's vocabulary"):
        DocREFeaturizer(no_star, ["CID"])
    with pytest.raises(ValueError, match="duplicates"):
        DocREFeaturizer(folder, ["CID", "CID"])
    with pytest.raises(TypeError, match="expected a Document"):
        feat.encode([{"text": TEXT}])
    assert all(v.shape[0] == 0 for v in feat.encode([]).values())


def test_arrays_batch_in_tf_data(folder):
    import tensorflow as tf
    feat = featurizer(folder)
    out = feat.encode([document(), document(()), document()])
    batches = list(tf.data.Dataset.from_tensor_slices(out).batch(2))
    assert [b["pairs"].shape.as_list() for b in batches] == [[2, 8, 2], [1, 8, 2]]
    np.testing.assert_array_equal(batches[1]["input_ids"].numpy(), out["input_ids"][2:])


def test_the_shipped_minilm_tokenizer_marks_mentions():
    from tffre.text.relation_tokenizer import EncoderFolderError, default_encoder_dir
    try:
        folder = default_encoder_dir()
    except EncoderFolderError as err:
        pytest.skip(str(err))
    text = "Clotiazepam-induced hepatitis. We report hepatitis after clotiazepam."
    doc = Document("1", text, [mention(text, "Clotiazepam", "Chemical", "C1"),
                               mention(text, "hepatitis", "Disease", "D1"),
                               mention(text, "hepatitis", "Disease", "D1", nth=1),
                               mention(text, "clotiazepam", "Chemical", "C1")],
                   [Relation("CID", "C1", "D1")], [(0, 30), (31, len(text))])
    feat = DocREFeaturizer(folder, ["CID"], max_length=64, max_mentions=4, max_entities=2,
                           max_mentions_per_entity=2, max_pairs=2,
                           pair_types=[("Chemical", "Disease")])
    out = feat.encode([doc])
    pieces = tokens(feat, out)
    assert pieces[:10] == ["[CLS]", "*", "cl", "##ot", "##ia", "##ze", "##pa", "##m", "*", "-"]
    assert [pieces[p] for p in out["mention_pos"][0]] == ["*"] * 4
    assert [pieces[p + 1] for p in out["mention_pos"][0]] == ["cl", "hepatitis", "hepatitis",
                                                              "cl"]
    assert out["entity_mentions"][0].tolist() == [[0, 3], [1, 2]]
    assert out["pairs"][0].tolist() == [[0, 1], [-1, -1]]
    assert out["labels"][0].tolist() == [[1], [0]]
    assert (feat.start_tokens, feat.end_tokens) == ((101,), (102,))
