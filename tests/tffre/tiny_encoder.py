"""A tiny random BERT encoder folder, laid out like a downloaded Hugging Face model.

``make_encoder_folder(folder)`` writes ``config.json`` (hidden 32, 2 layers,
2 heads), a WordPiece ``BertTokenizerFast`` over :data:`VOCAB` (``vocab.txt``,
``tokenizer.json``, ...) and, on request, weights: TF (``tf_model.h5``) or a
PyTorch-format ``model.safetensors`` written with numpy (no torch). Tests load
it through the users' code path, i.e. from the folder.
"""

import os

import numpy as np

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
         "the", "patient", "was", "given", "aspirin", "for", "his", "her", "head", "##ache",
         "and", "fever", "chest", "pain", "improved", "after", "morphine", "with", "a",
         "severe", "cough", "no", "history", "of", "diabetes", "is", "on", ".", ","]


def bert_config(vocab_size=len(VOCAB)):
    from transformers import BertConfig
    return BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=37, vocab_size=vocab_size,
                      max_position_embeddings=128)


def write_tokenizer(folder, vocab=VOCAB):
    """Writes ``vocab.txt`` and a saved ``BertTokenizerFast`` (lower-casing) into ``folder``."""
    from transformers import BertTokenizerFast
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in vocab))
    BertTokenizerFast(vocab_file=path, do_lower_case=True).save_pretrained(folder)
    return folder


def random_bert(config, seed=0):
    """A built ``TFBertModel`` of ``config`` with seeded random weights."""
    import tensorflow as tf
    from transformers import TFBertModel
    tf.keras.utils.set_random_seed(seed)
    model = TFBertModel(config)
    model(model.dummy_inputs)
    return model


def write_safetensors(model, path):
    """Saves a ``TFBertModel``'s weights as a PyTorch ``BertModel`` state dict (safetensors)."""
    from safetensors.numpy import save_file
    from transformers.modeling_tf_pytorch_utils import (TransposeType,
                                                        convert_tf_weight_name_to_pt_weight_name)
    tensors = {}
    for v in model.weights:
        name, transpose = convert_tf_weight_name_to_pt_weight_name(
            v.name, start_prefix_to_remove=model.name + "/", tf_weight_shape=v.shape)
        value = v.numpy()
        if transpose is TransposeType.SIMPLE:
            value = value.T
        elif transpose is not TransposeType.NO:
            raise NotImplementedError(f"{v.name}: transpose {transpose}")
        # BertModel's own state dict has no "bert." prefix (like all-MiniLM-L6-v2's file).
        tensors[name.removeprefix("bert.")] = np.ascontiguousarray(value)
    save_file(tensors, path, metadata={"format": "pt"})
    return path


def make_encoder_folder(folder, *, weights=None, vocab=VOCAB, seed=0):
    """A tiny encoder folder; ``weights`` None (config + tokenizer), "tf" or "safetensors".

    Returns ``(folder, model)`` where ``model`` is the saved ``TFBertModel``
    (None without weights), whose values tests compare against.
    """
    os.makedirs(folder, exist_ok=True)
    config = bert_config(len(vocab))
    write_tokenizer(folder, vocab)
    model = None
    if weights is None:
        config.save_pretrained(folder)
    elif weights == "tf":
        model = random_bert(config, seed)
        model.save_pretrained(folder)  # config.json and tf_model.h5
    elif weights == "safetensors":
        model = random_bert(config, seed)
        config.save_pretrained(folder)
        write_safetensors(model, os.path.join(folder, "model.safetensors"))
    else:
        raise ValueError(f"weights must be None, 'tf' or 'safetensors', got {weights!r}")
    return folder, model
