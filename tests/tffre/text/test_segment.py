"""jieba with the shipped medical dictionary."""

import pytest

from tffre.text import MedicalSegmenter


def test_dictionary_keeps_medical_terms_whole():
    text = "医生说是支气管肺炎，大便干燥"
    with_dict = MedicalSegmenter().cut(text)
    without = MedicalSegmenter(dictionary="").cut(text)
    assert "支气管肺炎" in with_dict and "大便干燥" in with_dict
    assert "支气管肺炎" not in without  # plain jieba splits it


def test_add_terms_from_a_training_split():
    seg = MedicalSegmenter(dictionary="")
    assert "喘憋性支气管" not in seg.cut("孩子喘憋性支气管问题")
    seg.add_terms(["喘憋性支气管"])
    assert "喘憋性支气管" in seg.cut("孩子喘憋性支气管问题")


def test_negation_stays_a_separate_token():
    assert MedicalSegmenter().cut("不咳嗽") == ["不", "咳嗽"]


def test_missing_dictionary_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        MedicalSegmenter(dictionary=str(tmp_path / "nope.txt"))
