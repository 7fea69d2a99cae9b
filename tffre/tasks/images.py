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
import dataclasses

from tffre import resources
from tffre.hparams import boolean, choice, non_negative_float, param, positive_int
from tffre.lazy import np
from tffre.runner.settings import Job
from tffre.tasks import (SAMPLE, ConceptOption, DataOption, Task, label_mix_writer,
                         require_data)

SAMPLE_DIR = resources.path("image_sample")
PARTITIONS = ("label-dirichlet", "iid")


@dataclasses.dataclass(frozen=True)
class Options(DataOption, ConceptOption):
    """The medical image sets' options."""
    partition: str = param("label-dirichlet", choice(*PARTITIONS), "how the training images "
                           "are split over clients")
    alpha: float = param(0.5, non_negative_float, "Dirichlet concentration of each label "
                         "over clients (FedCB's beta)", paper="FedCB Sect. 4")
    image_size: int = param(32, positive_int, "images are resized to N x N (the sample is "
                            "32x32; the paper's ResNet-18 takes 224)")
    resnet_width: int = param(64, positive_int, "ResNet-18's first-stage channels (64: the "
                              "standard 11.2M-parameter net; smaller for CPU runs)")
    small_input: bool = param(False, boolean, "ResNet-18 with a 3x3 stride-1 stem and no max "
                              "pool (for small images)", flag=True)


TASK = Task("images", "medical image classification (FedCB Tables 2-5)", ("oct-c8", "kvasir"),
            ("resnet18",), Options, defaults={"clients": 10, "batch_size": 8},
            dataset_defaults={"oct-c8": {"clients": 12, "data": SAMPLE}},
            # TF 2.14's oneDNN convolutions corrupt memory (double free, segfault) when a
            # compiled ResNet step sees a batch of another size (a client's last batch);
            # without oneDNN they are also faster on these small images (DEVELOPERS.md).
            environment={"TF_ENABLE_ONEDNN_OPTS": "0"},
            dp_refusal="ResNet-18's BatchNorm statistics are averaged without noise, which "
            "client-level DP does not cover")


def check(cfg):
    """The options' checks that need no data."""
    require_data(cfg)
    if cfg.options.partition == "label-dirichlet" and not cfg.options.alpha > 0:
        raise ValueError(f"--alpha must be > 0 for the Dirichlet partition, got "
                         f"{cfg.options.alpha}")


def check_data(dataset, options, *, tokenizer=None, max_len=None, seed=0):
    """The data check of what a run would load (``python -m tffre data check``): the image
    files per class and split, unreadable images and images of an odd size."""
    from tffre.data.check import check_dataset
    path = SAMPLE_DIR if options.data == SAMPLE else options.data
    # OCT-C8 ships its train/val/test folders; Kvasir-v2 is split 7:1:2 (load's loaders).
    return check_dataset("images", dataset, path, seed=seed,
                         split_folders=dataset == "oct-c8")


def load(cfg):
    """({"train", "val", "test": (x, y)}, class names) of ``cfg``'s image set."""
    from tffre.data.images import load_kvasir, load_oct_c8
    o = cfg.options
    size = (o.image_size, o.image_size)
    if cfg.dataset == "oct-c8":
        return load_oct_c8(SAMPLE_DIR if o.data == SAMPLE else o.data, size)
    return load_kvasir(o.data, size, seed=cfg.run.seed)


def prepare(cfg):
    """Loads and splits the image set of ``cfg``; returns the :class:`Job`."""
    import tensorflow as tf
    from tffre.data import FederatedData
    from tffre.data.concepts import concepts_for
    from tffre.data.partition import (dirichlet_label_split, format_label_mix, iid_split,
                                      label_mix)
    from tffre.metrics import trivial_baselines
    from tffre.models.resnet import resnet18_classifier
    from tffre.text.encoder import ImageEncoder

    o, seed, num_clients = cfg.options, cfg.run.seed, cfg.run.clients
    splits, class_names = load(cfg)
    x_train, y_train = splits["train"]
    if o.partition == "iid":
        parts = iid_split(len(y_train), num_clients, seed)
    else:
        parts = dirichlet_label_split(y_train, num_clients, o.alpha, seed)
    held_out = {name: iid_split(len(splits[name][1]), num_clients, seed + 1)
                for name in ("val", "test")}
    clients = {}
    for k, part in enumerate(parts):
        clients[f"client_{k}"] = {
            "train": (x_train[part], y_train[part]),
            # "dev" is the runner's name for the validation split.
            "dev": (splits["val"][0][held_out["val"][k]], splits["val"][1][held_out["val"][k]]),
            "test": (splits["test"][0][held_out["test"][k]],
                     splits["test"][1][held_out["test"][k]])}
    skew = "IID" if o.partition == "iid" else f"label Dirichlet beta={o.alpha}"
    source = "invented sample" if o.data == SAMPLE else o.data
    data = FederatedData(clients, num_classes=len(class_names),
                         name=f"{cfg.dataset} ({source}), {num_clients} clients, {skew}")
    mix = label_mix(y_train, parts, label_names=list(range(len(class_names))))
    mix.columns = [class_names[c] if isinstance(c, (int, np.integer)) else c
                   for c in mix.columns]
    concepts = concepts_for(class_names, o.concept_file)
    y_test = splits["test"][1]
    info = {"labels": class_names, "concepts": concepts, "image_size": o.image_size,
            "resnet_width": o.resnet_width, "small_input": o.small_input,
            "train_examples": int(len(y_train)), "test_examples": int(len(y_test)),
            **trivial_baselines(y_train, y_test, len(class_names))}
    print(f"\n{data.name}: {len(y_train)} train / {len(splits['val'][1])} val / "
          f"{len(y_test)} test images, {len(class_names)} classes")
    print(format_label_mix(mix))
    shape = (o.image_size, o.image_size, 3)

    def model_fn():
        return resnet18_classifier(shape, len(class_names), small_input=o.small_input,
                                   base_width=o.resnet_width, seed=seed)

    return Job(data=data, model_fn=model_fn,
               loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
               title=f"{data.name}, ResNet-18 (width {o.resnet_width})",
               label_names=class_names, encoder=ImageEncoder(o.image_size), info=info,
               write_extras=label_mix_writer(mix, data.name),
               concepts=concepts, prompts="image",
               macro_f1=True)
