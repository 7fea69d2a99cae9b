"""Medical image classification (FedCB Tables 2-5) on ResNet-18.

Loads OCT-C8 (its official train/val/test split; the embedded invented sample
by default) or Kvasir-v2 (a seeded, stratified 7:1:2 split) from folders of
class folders (:mod:`tffre.data.images`), splits the training images over the
clients by label Dirichlet(β = ``--alpha``), as FedCB does, or IID, and builds
ResNet-18 with a linear head (:func:`tffre.models.resnet.resnet18_classifier`).
FedCB and FedETF replace the head with their frozen classifiers, FedRoD adds
a personal head (each algorithm's ``model_fn``). The class concepts FedCB
embeds come from ``--concept-file`` or the built-in names
(:mod:`tffre.data.concepts`). Validation and test images are dealt evenly
over the clients; the evaluation pools them (a common test set, as the
paper's), reporting accuracy and macro-F1.
"""


import numpy as np

from tffre import resources
from tffre.config import SAMPLE
from tffre.experiments import Job, label_mix_writer

SAMPLE_DIR = resources.path("image_sample")


def load(cfg):
    """({"train", "val", "test": (x, y)}, class names) of ``cfg``'s image set."""
    from tffre.data.images import load_kvasir, load_oct_c8
    size = (cfg.image_size, cfg.image_size)
    if cfg.dataset == "oct-c8":
        return load_oct_c8(SAMPLE_DIR if cfg.data == SAMPLE else cfg.data, size)
    return load_kvasir(cfg.data, size, seed=cfg.seed)


def prepare(cfg):
    """Loads and splits the image set of ``cfg``; returns the :class:`Job`."""
    import tensorflow as tf
    from tffre.data import FederatedData
    from tffre.data.concepts import concepts_for
    from tffre.data.partition import (dirichlet_label_split, format_label_mix, iid_split,
                                      label_mix)
    from tffre.models.resnet import resnet18_classifier
    from tffre.text.encoder import ImageEncoder

    splits, class_names = load(cfg)
    x_train, y_train = splits["train"]
    if cfg.partition == "iid":
        parts = iid_split(len(y_train), cfg.clients, cfg.seed)
    else:
        parts = dirichlet_label_split(y_train, cfg.clients, cfg.alpha, cfg.seed)
    held_out = {name: iid_split(len(splits[name][1]), cfg.clients, cfg.seed + 1)
                for name in ("val", "test")}
    clients = {}
    for k, part in enumerate(parts):
        clients[f"client_{k}"] = {
            "train": (x_train[part], y_train[part]),
            # "dev" is the runner's name for the validation split.
            "dev": (splits["val"][0][held_out["val"][k]], splits["val"][1][held_out["val"][k]]),
            "test": (splits["test"][0][held_out["test"][k]],
                     splits["test"][1][held_out["test"][k]])}
    skew = "IID" if cfg.partition == "iid" else f"label Dirichlet beta={cfg.alpha}"
    source = "invented sample" if cfg.data == SAMPLE else cfg.data
    data = FederatedData(clients, num_classes=len(class_names),
                         name=f"{cfg.dataset} ({source}), {cfg.clients} clients, {skew}")
    mix = label_mix(y_train, parts, label_names=list(range(len(class_names))))
    mix.columns = [class_names[c] if isinstance(c, (int, np.integer)) else c
                   for c in mix.columns]
    concepts = concepts_for(class_names, cfg.concept_file)
    y_test = splits["test"][1]
    info = {"labels": class_names, "concepts": concepts, "image_size": cfg.image_size,
            "resnet_width": cfg.resnet_width, "small_input": cfg.small_input,
            "train_examples": int(len(y_train)), "test_examples": int(len(y_test)),
            "majority_class_test_accuracy": float(np.mean(
                y_test == np.bincount(y_train).argmax()))}
    print(f"\n{data.name}: {len(y_train)} train / {len(splits['val'][1])} val / "
          f"{len(y_test)} test images, {len(class_names)} classes")
    print(format_label_mix(mix))
    shape = (cfg.image_size, cfg.image_size, 3)

    def model_fn():
        return resnet18_classifier(shape, len(class_names), small_input=cfg.small_input,
                                   base_width=cfg.resnet_width, seed=cfg.seed)

    return Job(data=data, model_fn=model_fn,
               loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
               title=f"{data.name}, ResNet-18 (width {cfg.resnet_width})",
               label_names=class_names, encoder=ImageEncoder(cfg.image_size), info=info,
               write_extras=label_mix_writer(mix, data.name),
               context={"concepts": concepts, "prompts": "image"},
               macro_f1=True)
