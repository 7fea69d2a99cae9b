"""RETokenizer: entity markers, masks, truncation window, blinding, persistence, folder checks."""

import os
import shutil

import numpy as np
import pandas as pd
import pytest

from tiny_encoder import make_encoder_folder, write_tokenizer
from tffre.text.encoder import ENCODERS
from tffre.text.relation_tokenizer import EncoderFolderError, RETokenizer

TEXT = "The patient was given aspirin for his headache."


def span(text, word, occurrence=0):
    start = -1
    for _ in range(occurrence + 1):
        start = text.index(word, start + 1)
    return start, start + len(word)


def example(text=TEXT, e1="headache", e2="aspirin", e1_type="problem", e2_type="treatment",
            **extra):
    (s1, t1), (s2, t2) = span(text, e1), span(text, e2)
    return dict(text=text, e1_start=s1, e1_end=t1, e2_start=s2, e2_end=t2, e1_type=e1_type,
                e2_type=e2_type, **extra)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_encoder_folder(str(tmp_path_factory.mktemp("encoder")))[0]


def tokens(tok, row):
    """The word pieces of one packed row, padding dropped."""
    ids = row[0][row[1] == 1]
    return tok.tokenizer.convert_ids_to_tokens(ids.tolist())


def masked(tok, row, k):
    return tok.tokenizer.convert_ids_to_tokens(row[0][row[1 + k] == 1].tolist())


def test_markers_surround_the_entities(folder):
    tok = RETokenizer.from_pretrained(folder, max_length=24)
    x = tok.encode([example()])
    assert x.shape == (1, 4, 24) and x.dtype == np.int32
    assert tokens(tok, x[0]) == ["[CLS]", "the", "patient", "was", "given", "<e2>", "aspirin",
                                 "</e2>", "for", "his", "<e1>", "head", "##ache", "</e1>", ".",
                                 "[SEP]"]
    # e1 first in the text this time.
    x = tok.encode([example(e1="aspirin", e2="headache")])
    assert tokens(tok, x[0])[5:13] == ["<e1>", "aspirin", "</e1>", "for", "his", "<e2>", "head",
                                       "##ache"]
    assert tok.vocab_size == len(tok.tokenizer) == 38  # 34 words + 4 markers


def test_entity_masks_cover_exactly_the_entity_pieces(folder):
    tok = RETokenizer.from_pretrained(folder, max_length=24)
    x = tok.encode([example()])[0]
    assert masked(tok, x, 1) == ["head", "##ache"]
    assert masked(tok, x, 2) == ["aspirin"]
    n = len(tokens(tok, x))
    np.testing.assert_array_equal(x[1], [1] * n + [0] * (24 - n))
    assert (x[0][n:] == tok.tokenizer.pad_token_id).all()
    assert not (x[2] & x[3]).any()


def test_adjacent_and_nested_entities(folder):
    tok = RETokenizer.from_pretrained(folder, max_length=24)
    text = "severe chest pain improved"
    adjacent = dict(text=text, e1_start=0, e1_end=6, e2_start=7, e2_end=17)
    nested = dict(text=text, e1_start=0, e1_end=17, e2_start=7, e2_end=12)
    same = dict(text=text, e1_start=7, e1_end=17, e2_start=7, e2_end=17)
    x = tok.encode([adjacent, nested, same])
    assert tokens(tok, x[0])[1:8] == ["<e1>", "severe", "</e1>", "<e2>", "chest", "pain", "</e2>"]
    assert tokens(tok, x[1])[1:8] == ["<e1>", "severe", "<e2>", "chest", "</e2>", "pain", "</e1>"]
    assert masked(tok, x[1], 1) == ["severe", "chest", "pain"]  # markers excluded
    assert masked(tok, x[1], 2) == ["chest"]
    assert tokens(tok, x[2])[1:8] == ["severe", "<e1>", "<e2>", "chest", "pain", "</e2>", "</e1>"]
    assert masked(tok, x[2], 1) == masked(tok, x[2], 2) == ["chest", "pain"]


def test_dataframe_and_records_agree_and_other_columns_are_ignored(folder):
    tok = RETokenizer.from_pretrained(folder, max_length=20)
    rows = [example(label="TrAP", example_id="a"), example(e1="patient", e2="aspirin")]
    np.testing.assert_array_equal(tok.encode(pd.DataFrame(rows)), tok.encode(rows))
    assert tok.stats == {"n": 4, "truncated": 0, "centred": 0, "entities_cut": 0}
    assert tok.encode([]).shape == (0, 4, 20)


def test_long_text_is_centred_on_the_entities(folder):
    tok = RETokenizer.from_pretrained(folder, max_length=16)
    filler = "and the patient was given a " * 6          # 36 word pieces before the entities
    text = filler + "severe cough for his chest pain and no fever after morphine"
    ex = example(text=text, e1="cough", e2="chest")
    x = tok.encode([ex])[0]
    assert tok.stats == {"n": 1, "truncated": 1, "centred": 1, "entities_cut": 0}
    seq = tokens(tok, x)
    assert len(seq) == 16 and seq[0] == "[CLS]" and seq[-1] == "[SEP]"
    assert masked(tok, x, 1) == ["cough"] and masked(tok, x, 2) == ["chest"]
    # Centred: the span <e1> cough </e1> for his <e2> chest </e2> (8 pieces) sits in the
    # middle of the 14-piece window, 3 pieces on each side.
    body = seq[1:-1]
    assert body.index("<e1>") == 3 and len(body) - 1 - body.index("</e2>") == 3

    # Entities inside the head of a long text: truncated at the end, window not moved.
    tok.reset_stats()
    head = example(text="the patient was given aspirin for his headache " + filler)
    x = tok.encode([head])[0]
    assert tok.stats == {"n": 1, "truncated": 1, "centred": 0, "entities_cut": 0}
    assert tokens(tok, x)[:7] == ["[CLS]", "the", "patient", "was", "given", "<e2>", "aspirin"]

    # Entities at the very end: the window is clamped to the text's end.
    tok.reset_stats()
    tail = filler + "chest pain ."
    x = tok.encode([example(text=tail, e1="chest", e2="pain")])[0]
    assert tokens(tok, x)[-8:] == ["<e1>", "chest", "</e1>", "<e2>", "pain", "</e2>", ".",
                                   "[SEP]"]
    assert tok.stats["centred"] == 1


def test_entities_farther_apart_than_the_window_are_cut(folder):
    tok = RETokenizer.from_pretrained(folder, max_length=12)
    text = "the patient " + "was given a " * 5 + "fever after morphine"
    ex = example(text=text, e1="patient", e2="morphine")
    x = tok.encode([ex])[0]
    assert tok.stats == {"n": 1, "truncated": 1, "centred": 0, "entities_cut": 1}
    seq = tokens(tok, x)
    assert seq[:4] == ["[CLS]", "<e1>", "patient", "</e1>"]  # the window starts at <e1>
    assert len(seq) == 12 and seq[-1] == "[SEP]"
    assert masked(tok, x, 1) == ["patient"]
    assert not x[3].any()  # e2 fell outside the window: its mask is all zero


@pytest.mark.parametrize("change, message", [
    (dict(e1_end=99), "e1 span [38, 99)"),
    (dict(e2_start=-1), "e2 span [-1, 29)"),
    (dict(e1_start=40, e1_end=40), "e1 span [40, 40)"),
    (dict(e2_end="29"), "e2_end must be an integer"),
])
def test_offsets_are_validated(folder, change, message):
    tok = RETokenizer.from_pretrained(folder, max_length=16)
    bad = {**example(example_id="note-7"), **change}
    with pytest.raises(ValueError, match=r"example 'note-7' \(row 1\)") as err:
        tok.encode([example(), bad])
    assert message in str(err.value) and "\n" not in str(err.value)
    del bad["example_id"]
    with pytest.raises(ValueError, match=r"^row 1: "):
        tok.encode(pd.DataFrame([example(), bad]))


def test_integral_float_offsets_are_accepted_and_marker_text_is_refused(folder):
    tok = RETokenizer.from_pretrained(folder, max_length=24)
    ex = example()
    floats = {**ex, **{k: float(ex[k]) for k in ("e1_start", "e1_end", "e2_start", "e2_end")}}
    np.testing.assert_array_equal(tok.encode([floats]), tok.encode([ex]))
    with pytest.raises(ValueError, match="row 0: the text itself contains the marker token <e1>"):
        tok.encode([example(text="<e1> " + TEXT)])


def test_blinding_replaces_the_entity_text(folder):
    tok = RETokenizer.from_pretrained(folder, max_length=24, blind_entities=True,
                                      entity_types=["problem", "treatment"])
    assert tok.vocab_size == 34 + 4 + 3  # markers, @ENTITY$, @PROBLEM$, @TREATMENT$
    x = tok.encode([example(), example(e2_type="test"), example(e1_type=None)])
    assert tokens(tok, x[0])[5:14] == ["<e2>", "@TREATMENT$", "</e2>", "for", "his", "<e1>",
                                       "@PROBLEM$", "</e1>", "."]
    assert masked(tok, x[0], 1) == ["@PROBLEM$"] and masked(tok, x[0], 2) == ["@TREATMENT$"]
    ids = tok.tokenizer.convert_tokens_to_ids(["aspirin", "head", "##ache"])
    assert not np.isin(x[0][0], ids).any()
    assert masked(tok, x[1], 2) == ["@ENTITY$"]  # a type not given at construction
    assert masked(tok, x[2], 1) == ["@ENTITY$"]  # a missing type
    with pytest.raises(ValueError, match="overlap"):
        tok.encode([dict(text="severe chest pain", e1_start=0, e1_end=12, e2_start=7,
                         e2_end=17, e1_type="problem", e2_type="problem")])
    assert RETokenizer.entity_types_of([example(), example(e2_type="test")]) == \
        ["problem", "test", "treatment"]


def test_save_and_load_give_the_same_encoding(folder, tmp_path):
    tok = RETokenizer.from_pretrained(folder, max_length=20, blind_entities=True,
                                      entity_types=["treatment", "problem", "lab test"])
    rows = [example(), example(e1="patient", e2="aspirin", e1_type="lab test")]
    before = tok.encode(rows)
    tok.save(str(tmp_path))
    for name in RETokenizer.FILES:
        assert os.path.isfile(tmp_path / name)
    loaded = ENCODERS[RETokenizer.kind].load(str(tmp_path))
    assert isinstance(loaded, RETokenizer)
    assert (loaded.max_length, loaded.blind_entities, loaded.entity_types, loaded.vocab_size) == \
        (20, True, ["lab test", "problem", "treatment"], tok.vocab_size)
    np.testing.assert_array_equal(loaded.encode(rows), before)
    assert "@LAB_TEST$" in tokens(loaded, loaded.encode(rows)[1])


@pytest.mark.parametrize("remove, missing", [
    (["config.json"], "missing config.json)"),
    (["tokenizer.json", "vocab.txt"], "missing a tokenizer (tokenizer.json or vocab.txt))"),
    (["config.json", "tokenizer.json", "vocab.txt"],
     "missing config.json and a tokenizer (tokenizer.json or vocab.txt))"),
])
def test_incomplete_encoder_folders_say_what_is_missing(folder, tmp_path, remove, missing):
    bad = tmp_path / "enc"
    write_tokenizer(str(bad))
    shutil.copy(os.path.join(folder, "config.json"), bad / "config.json")
    for name in remove:
        os.remove(bad / name)
    with pytest.raises(EncoderFolderError) as err:
        RETokenizer.from_pretrained(str(bad))
    message = str(err.value)
    assert message.endswith(missing) and str(bad) in message and "\n" not in message
    with pytest.raises(EncoderFolderError, match="^encoder folder not found: .*nowhere$"):
        RETokenizer.from_pretrained(str(tmp_path / "nowhere"))
