"""Token-to-index vocabularies with padding, OOV and masking up to a maximum length."""

import numpy as np

PAD, OOV = 0, 1


class Vocabulary:
    """Maps tokens to indices: 0 is padding (masked), 1 is out-of-vocabulary.

    Args:
      tokens: the known tokens, in index order from 2.
    """

    def __init__(self, tokens):
        self.tokens = ["<pad>", "<oov>"] + [t for t in dict.fromkeys(tokens) if t not in ("<pad>", "<oov>")]
        self.index = {t: i for i, t in enumerate(self.tokens)}

    def __len__(self):
        return len(self.tokens)

    @classmethod
    def from_vectors(cls, keyed_vectors):
        """The vocabulary of a gensim ``KeyedVectors`` (its word order)."""
        return cls(keyed_vectors.index_to_key)

    def encode(self, token_lists, max_len):
        """Encodes token lists as an int32 [n, max_len] array: truncated, right-padded with 0."""
        out = np.zeros((len(token_lists), max_len), dtype=np.int32)
        for i, tokens in enumerate(token_lists):
            ids = [self.index.get(t, OOV) for t in tokens[:max_len]]
            out[i, :len(ids)] = ids
        return out

    def oov_rate(self, token_lists):
        """Fraction of tokens that map to OOV."""
        total = sum(len(t) for t in token_lists)
        missing = sum(1 for ts in token_lists for t in ts if t not in self.index)
        return missing / total if total else 0.0

    def embedding_matrix(self, keyed_vectors):
        """A float32 [len(self), dim] matrix from ``keyed_vectors``.

        Padding is zero; OOV and tokens without a vector get the mean vector.
        """
        dim = keyed_vectors.vector_size
        mean = keyed_vectors.vectors.mean(axis=0) if len(keyed_vectors) else np.zeros(dim)
        matrix = np.tile(mean.astype(np.float32), (len(self), 1))
        matrix[PAD] = 0.0
        for token, i in self.index.items():
            if i > OOV and token in keyed_vectors.key_to_index:
                matrix[i] = keyed_vectors[token]
        return matrix
