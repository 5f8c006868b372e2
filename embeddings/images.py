"""CNN image features for the image path: VGG19 fc7 (4096-d, after ReLU) or ResNet-50 pool5
(2048-d global average pool), with ImageNet preprocessing (resize 256, centre crop 224).

torchvision is used when it imports; otherwise the plain-torch definitions below are used.
Their state_dict keys equal torchvision's, so torchvision weight files
(vgg19-dcbb9e9d.pth, resnet50-0676ba61.pth) load by path. Nothing is downloaded.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from rerank.device import check_state_dict, load_tensors
from rerank.errors import InputError
from rerank.progress import Progress, track

BACKBONES = {"vgg19-fc7": 4096, "resnet50-pool5": 2048}
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
VGG19_CFG = [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M"]


class VGG19(nn.Module):
    """VGG19 with torchvision's module names; forward returns fc7 after ReLU (eval mode)."""

    def __init__(self):
        super().__init__()
        layers, channels = [], 3
        for v in VGG19_CFG:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(channels, v, 3, padding=1), nn.ReLU(inplace=True)]
                channels = v
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(nn.Linear(512 * 49, 4096), nn.ReLU(True), nn.Dropout(), nn.Linear(4096, 4096),
                                        nn.ReLU(True), nn.Dropout(), nn.Linear(4096, 1000))

    def forward(self, x):
        x = torch.flatten(self.avgpool(self.features(x)), 1)
        return self.classifier[:5](x)


class Bottleneck(nn.Module):
    """ResNet v1.5 bottleneck (stride on the 3x3 convolution), torchvision names."""

    def __init__(self, inplanes: int, planes: int, stride: int = 1):
        super().__init__()
        out = planes * 4
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or inplanes != out:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, out, 1, stride, bias=False), nn.BatchNorm2d(out))

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + (x if self.downsample is None else self.downsample(x)))


class ResNet50(nn.Module):
    """ResNet-50 with torchvision's module names; forward returns the 2048-d pool5 vector."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        inplanes = 64
        for i, (planes, blocks, stride) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)], start=1):
            layer = []
            for b in range(blocks):
                layer.append(Bottleneck(inplanes, planes, stride if b == 0 else 1))
                inplanes = planes * 4
            setattr(self, f"layer{i}", nn.Sequential(*layer))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(2048, 1000)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return torch.flatten(self.avgpool(x), 1)


def _torchvision_model(backbone: str):
    """The torchvision network truncated like ours, or None when torchvision does not import."""
    try:
        from torchvision import models
    except Exception:  # noqa: BLE001 - broken or missing torchvision: use the plain definitions
        return None
    if backbone == "vgg19-fc7":
        net = models.vgg19(weights=None)
        return net, lambda m, x: m.classifier[:5](torch.flatten(m.avgpool(m.features(x)), 1))
    net = models.resnet50(weights=None)
    net.fc = nn.Identity()
    return net, lambda m, x: m(x)


def build_backbone(backbone: str, weights: str, use_torchvision: bool = True) -> tuple[nn.Module, Callable]:
    """Network for `backbone` with weights loaded from the file `weights`; (model, forward fn)."""
    if backbone not in BACKBONES:
        raise InputError(f"unknown backbone {backbone!r}: expected one of {', '.join(BACKBONES)}")
    if not weights or not os.path.exists(weights):
        raise InputError("weights file not found (pass a torchvision .pth file by path; nothing is downloaded)", weights)
    tv = _torchvision_model(backbone) if use_torchvision else None
    if tv is not None:
        net, fwd = tv
    else:
        net = VGG19() if backbone == "vgg19-fc7" else ResNet50()
        fwd = lambda m, x: m(x)  # noqa: E731
    state = load_tensors(weights, "weights")
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    if isinstance(state, dict) and isinstance(getattr(net, "fc", None), nn.Identity):
        state = {k: v for k, v in state.items() if not k.startswith("fc.")}
    check_state_dict(net.state_dict(), state, weights, backbone)
    net.load_state_dict(state)
    return net.eval(), fwd


def preprocess(path: str) -> np.ndarray:
    """(3, 224, 224) float32: RGB, shorter side resized to 256 (bilinear), centre crop 224, ImageNet mean/std."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            im = im.convert("RGB")
            w, h = im.size
            scale = 256 / min(w, h)
            nw, nh = max(224, round(w * scale)), max(224, round(h * scale))
            im = im.resize((nw, nh), Image.BILINEAR)
            left, top = (nw - 224) // 2, (nh - 224) // 2
            im = im.crop((left, top, left + 224, top + 224))
            arr = np.asarray(im, dtype=np.float32) / 255.0
    except OSError as exc:
        raise InputError(f"cannot read image: {exc}", path) from None
    return ((arr - MEAN) / STD).transpose(2, 0, 1).copy()


def extract_features(images_dir: str, names: list[str], backbone: str, weights: str, batch_size: int = 32,
                     device: str = "cpu", progress: Progress = True, use_torchvision: bool = True) -> np.ndarray:
    """(len(names), D) float32 features, row i for image names[i] under images_dir."""
    from rerank.device import resolve_device

    for name in names:
        if not os.path.exists(os.path.join(images_dir, name)):
            raise InputError(f"image {name!r} of the list not found under {images_dir}")
    dev = resolve_device(device)
    net, fwd = build_backbone(backbone, weights, use_torchvision)
    net = net.to(dev)
    out = np.zeros((len(names), BACKBONES[backbone]), dtype=np.float32)
    starts = track(range(0, len(names), batch_size), progress, f"{backbone} features", unit="batch")
    with torch.inference_mode():
        for s in starts:
            batch = np.stack([preprocess(os.path.join(images_dir, n)) for n in names[s:s + batch_size]])
            out[s:s + len(batch)] = fwd(net, torch.from_numpy(batch).to(dev)).float().cpu().numpy()
    return out
