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


def test_user_dicts_load_after_the_shipped_dictionary(tmp_path):
    extra = tmp_path / "extra.txt"
    extra.write_text("喘憋性支气管\n", encoding="utf-8")
    seg = MedicalSegmenter(user_dicts=[str(extra)])
    assert "喘憋性支气管" in seg.cut("孩子喘憋性支气管问题")
    assert "支气管肺炎" in seg.cut("医生说是支气管肺炎")  # the shipped one is still loaded
    assert seg.dictionary_files[1:] == [str(extra)]


def test_missing_user_dict_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="extra_missing.txt"):
        MedicalSegmenter(user_dicts=[str(tmp_path / "extra_missing.txt")])


def test_saved_dictionary_reproduces_the_segmenter(tmp_path):
    from tffre import resources
    from tffre.data import imcs_dialogues as imcs

    splits = imcs.load_imcs(resources.path("imcs_sample"), verbose=False)
    texts = list(imcs.to_examples(splits["dev"], "symptom")["text"])
    extra = tmp_path / "extra.txt"
    extra.write_text("喘憋性支气管 5 n\n嗓子哑\n", encoding="utf-8")  # no trailing newline needed
    seg = MedicalSegmenter(terms=imcs.symptom_norms(splits["train"]), user_dicts=[str(extra)])
    seg.add_terms(["小儿手足口", "维生素D3"])   # added after construction: saved too
    assert seg.added_terms[-2:] == ["小儿手足口", "维生素D3"]
    path = seg.save_dictionary(str(tmp_path / "merged" / "jieba_dict.txt"))
    reloaded = MedicalSegmenter(dictionary=path)
    # jieba's whole state matches (entries without a frequency get one computed in order).
    assert reloaded._tokenizer.FREQ == seg._tokenizer.FREQ
    assert reloaded._tokenizer.total == seg._tokenizer.total
    probe = ["孩子喘憋性支气管问题", "得了小儿手足口吗", "吃维生素D3了", "医生说是支气管肺炎"]
    assert reloaded.cut_all(texts + probe) == seg.cut_all(texts + probe)
    cut = reloaded.cut_all(probe)
    assert "喘憋性支气管" in cut[0] and "小儿手足口" in cut[1] and "维生素D3" in cut[2]


def test_saved_dictionary_of_a_plain_segmenter_is_empty(tmp_path):
    seg = MedicalSegmenter(dictionary="")
    path = seg.save_dictionary(str(tmp_path / "d.txt"))
    assert open(path, encoding="utf-8").read() == ""
    assert MedicalSegmenter(dictionary=path).cut("孩子咳嗽三天了") == seg.cut("孩子咳嗽三天了")


def test_segmenters_share_the_main_dictionary_read_but_not_their_words():
    """jieba's main dictionary is read once per process (``fresh_tokenizer``): a segmenter
    cuts as a tokenizer jieba initializes itself, with the same user dictionary, and the
    words one segmenter adds stay its own."""
    import jieba
    from tffre.text.segment import default_dictionary_path
    text = ("孩子咳嗽三天，医生说是支气管肺炎，大便干燥，不发热。"
            "The patient was given aspirin; 喘憋性支气管问题明显，夜间加重。")
    first = MedicalSegmenter()
    first.add_terms(["喘憋性支气管"])
    second = MedicalSegmenter()
    reference = jieba.Tokenizer()
    reference.initialize()    # reads jieba's main dictionary itself
    reference.load_userdict(default_dictionary_path())
    assert second.cut(text) == [t for t in reference.lcut(text) if t.strip()]
    assert "喘憋性支气管" in first.cut(text) and "喘憋性支气管" not in second.cut(text)
