"""jieba segmentation with a medical user dictionary.

The shipped dictionary ``tffre/resources/medical_dict.txt`` starts from the IMCS public
symptom-norm list (331 terms, ``imcs_symptom_norm.csv`` of the corpus
authors) plus the 10 IMCS diagnoses; loaders add the norms they find in a
training split with :meth:`MedicalSegmenter.add_terms`. With it, terms such
as 支气管肺炎 stay one token.
"""

import os

import jieba

from tffre import resources

def default_dictionary_path():
    """Path of the shipped medical user dictionary (jieba format: word [freq] [tag])."""
    return resources.path("medical_dict.txt")


class MedicalSegmenter:
    """A private jieba tokenizer with a medical user dictionary.

    Args:
      dictionary: a jieba user dictionary file; None for the shipped one,
        "" for none.
      terms: extra terms to add (e.g. the training split's symptom norms).
    """

    def __init__(self, dictionary=None, terms=()):
        jieba.setLogLevel(60)  # jieba logs its dictionary loading at INFO
        self._tokenizer = jieba.Tokenizer()
        path = default_dictionary_path() if dictionary is None else dictionary
        if path:
            if not os.path.isfile(path):
                raise FileNotFoundError(f"jieba user dictionary not found: {path}")
            self._tokenizer.load_userdict(path)
        self.add_terms(terms)

    def add_terms(self, terms):
        """Adds terms that must stay single tokens (a high frequency wins over the split)."""
        for term in terms:
            term = str(term).strip()
            if term:
                self._tokenizer.add_word(term, freq=100000)

    def cut(self, text):
        """Returns the list of tokens of ``text`` (whitespace dropped)."""
        return [t for t in self._tokenizer.lcut(str(text)) if t.strip()]

    def cut_all(self, texts):
        """Segments every text of an iterable."""
        return [self.cut(t) for t in texts]
