"""jieba segmentation with a medical user dictionary.

The shipped dictionary ``tffre/resources/medical_dict.txt`` starts from the IMCS public
symptom-norm list (331 terms, ``imcs_symptom_norm.csv`` of the corpus
authors) plus the 10 IMCS diagnoses; loaders add the norms they find in a
training split with :meth:`MedicalSegmenter.add_terms`. With it, terms such
as 支气管肺炎 stay one token.

A segmenter remembers every dictionary file it loaded and every term it was
given, so :meth:`MedicalSegmenter.save_dictionary` can write them as one jieba
user dictionary that reproduces its segmentation (a saved model needs the
tokenizer it was trained with).
"""

import os
import threading

import jieba

from tffre import resources

# Frequency given to added terms: high enough to win over jieba's split of the term.
TERM_FREQ = 100000

# jieba's main dictionary as read once in this process: {path: (word frequencies, total)}.
_MAIN = {}
_MAIN_LOCK = threading.Lock()


def fresh_tokenizer():
    """A private ``jieba.Tokenizer`` on jieba's main dictionary, read once per process.

    jieba reads the main dictionary (about 500,000 words, from its cache file) for every
    tokenizer it initializes: 1.6 CPU-s each on a 2-core machine. A copy of the words read
    takes 0.02 s and segments the same, since jieba's prefix dictionary is the whole of a
    tokenizer's state. The words a tokenizer adds (``load_userdict``, ``add_word``) go into
    its own copy.
    """
    tokenizer = jieba.Tokenizer()
    with _MAIN_LOCK:
        if tokenizer.dictionary not in _MAIN:
            first = jieba.Tokenizer(tokenizer.dictionary)
            first.initialize()
            _MAIN[tokenizer.dictionary] = (first.FREQ, first.total)
        words, total = _MAIN[tokenizer.dictionary]
    tokenizer.FREQ, tokenizer.total = dict(words), total
    tokenizer.initialized = True
    return tokenizer


def default_dictionary_path():
    """Path of the shipped medical user dictionary (jieba format: word [freq] [tag])."""
    return resources.path("medical_dict.txt")


class MedicalSegmenter:
    """A private jieba tokenizer with a medical user dictionary.

    Args:
      dictionary: a jieba user dictionary file; None for the shipped one,
        "" for none.
      terms: extra terms to add (e.g. the training split's symptom norms).
      user_dicts: extra jieba user dictionary files, loaded after ``dictionary``.
    """

    def __init__(self, dictionary=None, terms=(), user_dicts=()):
        jieba.setLogLevel(60)  # jieba logs its dictionary loading at INFO
        self._tokenizer = fresh_tokenizer()
        # What was fed to jieba, in order: ("file", path, bytes) and ("term", text) entries.
        self._history = []
        path = default_dictionary_path() if dictionary is None else dictionary
        paths = ([path] if path else []) + [os.fspath(p) for p in user_dicts]
        for p in paths:  # check them all first, so a typo fails before any loading
            if not os.path.isfile(p):
                raise FileNotFoundError(f"jieba user dictionary not found: {p}")
        for p in paths:
            with open(p, "rb") as f:
                # Keep the bytes jieba read: the file may change after loading, the merged
                # dictionary must still reproduce this segmenter.
                data = f.read()
            self._tokenizer.load_userdict(p)
            self._history.append(("file", p, data))
        self.add_terms(terms)

    @property
    def dictionary_files(self):
        """The user dictionary files loaded, in loading order."""
        return [entry[1] for entry in self._history if entry[0] == "file"]

    @property
    def added_terms(self):
        """The terms added (constructor ``terms`` and :meth:`add_terms`), in order."""
        return [entry[1] for entry in self._history if entry[0] == "term"]

    def add_terms(self, terms):
        """Adds terms that must stay single tokens (a high frequency wins over the split)."""
        for term in terms:
            term = str(term).strip()
            if term:
                self._tokenizer.add_word(term, freq=TERM_FREQ)
                self._history.append(("term", term))

    def save_dictionary(self, path):
        """Writes one jieba user dictionary merging everything this segmenter loaded.

        The lines of every loaded dictionary file, in loading order, then each
        added term with the frequency :meth:`add_terms` gives it. jieba applies
        the entries in order (an entry without a frequency gets one computed
        from the entries before it), so ``MedicalSegmenter(dictionary=path)``
        segments exactly like this one. Returns ``path``.
        """
        chunks = []
        for entry in self._history:
            if entry[0] == "file":
                data = entry[2]
                chunks.append(data if not data or data.endswith(b"\n") else data + b"\n")
            else:
                term = entry[1]
                if "\n" in term:
                    raise ValueError(f"term {term!r} contains a newline; a jieba dictionary "
                                     "line cannot hold it")
                # The trailing frequency makes jieba's line pattern read the whole term as
                # the word, even one that ends in digits or lowercase letters.
                chunks.append(f"{term} {TERM_FREQ}\n".encode("utf-8"))
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        with open(path, "wb") as f:
            f.write(b"".join(chunks))
        return path

    def cut(self, text):
        """Returns the list of tokens of ``text`` (whitespace dropped)."""
        return [t for t in self._tokenizer.lcut(str(text)) if t.strip()]

    def cut_all(self, texts):
        """Segments every text of an iterable."""
        return [self.cut(t) for t in texts]
