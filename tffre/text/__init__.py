"""Chinese text preprocessing: jieba segmentation with a medical dictionary, Word2Vec, vocabularies."""

from tffre.text.encoder import FeatureEncoder, TextEncoder
from tffre.text.segment import MedicalSegmenter, default_dictionary_path
from tffre.text.vocab import Vocabulary

__all__ = ["FeatureEncoder", "MedicalSegmenter", "TextEncoder", "Vocabulary",
           "default_dictionary_path"]
