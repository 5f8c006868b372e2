"""Fine-tuning (`init`: training starts from a trained model, as the pseudo-pair fine-tuning of
Kadar et al. 2019): the run takes the model's vocabularies, sizes and weights. A learned word
map W (embeddings.align) that the model lacks starts at the identity; one the run does not use
is dropped."""

from __future__ import annotations

from rerank.device import load_weights
from rerank.errors import InputError


def init_settings(path: str, cfg: dict) -> tuple[dict, dict, int]:
    """(vocabularies, state_dict, image_dim) of the model at `path`; sets the run's sizes to its.
    InputError if its languages are not the run's."""
    from rerank.embeddings.encoder import Encoder, model_paths

    enc = Encoder.load(path)
    mc = enc.model.cfg
    if list(cfg["languages"]) != list(mc.languages):
        raise InputError(f"the model to fine-tune has languages {mc.languages}, the run {cfg['languages']}: "
                         "give the same (in the same order)", model_paths(path)[0])
    recorded = (enc.meta.get("training") or {}).get("config") or {}
    cfg.update(word_dim=mc.word_dim, hidden_dim=mc.hidden_dim, joint_dim=mc.joint_dim,
               preset=recorded.get("preset", "of the init model"))
    return enc.vocabs, enc.model.state_dict(), mc.image_dim


def check_image_dim(path: str, init_dim: int, features_dim: int | None) -> int:
    """The image dimension of a fine-tuned model: the init model's, which the features must have."""
    if features_dim is not None and init_dim != features_dim:
        what = "has no image projection" if init_dim == 0 else f"takes {init_dim}-d image features"
        raise InputError(f"the model to fine-tune {what}, the training features have {features_dim} dimensions", path)
    return init_dim


def load_init_weights(model, state: dict, path: str) -> None:
    """The init model's weights into `model` (checked key by key), W maps as described above."""
    own = model.state_dict()
    state = {k: v for k, v in state.items() if not k.startswith("align.") or k in own}
    state.update({k: v for k, v in own.items() if k.startswith("align.") and k not in state})
    load_weights(model, state, path, "the model of this run")
