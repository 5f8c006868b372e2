"""CNN feature extraction with torchvision-compatible networks, random weights saved to a temp
file (loaded by path) and a few generated PIL images."""

import numpy as np
import pytest
import torch
from PIL import Image

from rerank.embeddings.images import MEAN, STD, ResNet50, VGG19, build_backbone, extract_features, preprocess
from rerank.cli import main
from rerank.errors import InputError

pytestmark = pytest.mark.neural



@pytest.fixture(scope="module")
def images(tmp_path_factory):
    d = tmp_path_factory.mktemp("img")
    rng = np.random.default_rng(0)
    names = []
    for i, size in enumerate([(320, 240), (200, 300), (256, 256)]):
        arr = rng.integers(0, 256, size=(size[1], size[0], 3), dtype=np.uint8)
        name = f"im{i}.jpg" if i != 1 else f"im{i}.png"
        Image.fromarray(arr).save(d / name)
        names.append(name)
    Image.new("L", (300, 260), 128).save(d / "gray.png")   # greyscale: converted to RGB
    return d, names


@pytest.fixture(scope="module")
def resnet_weights(tmp_path_factory):
    torch.manual_seed(0)
    net = ResNet50()
    for m in net.modules():   # non-trivial BN statistics so eval-mode normalisation matters
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    path = tmp_path_factory.mktemp("w") / "resnet50-random.pth"
    torch.save(net.state_dict(), path)
    return str(path)


def test_torchvision_key_names():
    v, r = VGG19().state_dict(), ResNet50().state_dict()
    assert len(v) == 38 and {"features.0.weight", "features.34.bias", "classifier.6.weight"} <= set(v)
    assert sum(x.numel() for x in v.values()) == 143_667_240
    assert len(r) == 320 and {"layer1.0.downsample.1.num_batches_tracked", "layer4.2.bn3.running_var", "fc.bias"} <= set(r)


def test_preprocess_resize_crop_normalise(images):
    d, _ = images
    x = preprocess(str(d / "gray.png"))
    assert x.shape == (3, 224, 224) and x.dtype == np.float32
    np.testing.assert_allclose(x[:, 100, 100], (128 / 255 - MEAN) / STD, atol=1e-5)


def test_resnet_features_shape_determinism_batch_invariance(images, resnet_weights):
    d, names = images
    a = extract_features(str(d), names, "resnet50-pool5", resnet_weights, batch_size=2, progress=False)
    b = extract_features(str(d), names[::-1], "resnet50-pool5", resnet_weights, batch_size=1, progress=False)[::-1]
    assert a.shape == (3, 2048) and a.dtype == np.float32
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert not np.allclose(a[0], a[1])
    # pool5 = the spatial mean of layer4's (7, 7) output maps, computed here from the trunk
    net, _ = build_backbone("resnet50-pool5", resnet_weights, use_torchvision=False)
    with torch.no_grad():
        x = torch.from_numpy(preprocess(str(d / names[2])))[None]
        x = net.maxpool(net.relu(net.bn1(net.conv1(x))))
        maps = net.layer4(net.layer3(net.layer2(net.layer1(x))))[0].numpy()
    assert maps.shape == (2048, 7, 7)
    np.testing.assert_allclose(a[2], maps.mean(axis=(1, 2)), rtol=1e-4, atol=1e-5)


def test_vgg19_fc7_one_image(images, tmp_path):
    d, names = images
    torch.manual_seed(1)
    path = tmp_path / "vgg19-random.pth"
    torch.save(VGG19().state_dict(), path)
    f = extract_features(str(d), names[:1], "vgg19-fc7", str(path), progress=False)
    assert f.shape == (1, 4096)
    # fc7 after its ReLU, from the pooled conv features by hand: relu(W7 relu(W6 x + b6) + b7)
    net, _ = build_backbone("vgg19-fc7", str(path), use_torchvision=False)
    with torch.no_grad():
        x = torch.from_numpy(preprocess(str(d / names[0])))[None]
        pooled = torch.flatten(net.avgpool(net.features(x)), 1)[0].double().numpy()
    w = {k: v.double().numpy() for k, v in net.classifier.state_dict().items()}
    fc7 = np.maximum(w["3.weight"] @ np.maximum(w["0.weight"] @ pooled + w["0.bias"], 0) + w["3.bias"], 0)
    assert (fc7 == 0).any() and (fc7 > 0).any()  # the ReLU cuts some units, so its place is checked
    np.testing.assert_allclose(f[0], fc7, rtol=1e-4, atol=1e-4 * np.abs(fc7).max())


def test_weights_errors(images, resnet_weights, tmp_path):
    d, names = images
    with pytest.raises(InputError, match="weights file not found"):
        build_backbone("resnet50-pool5", str(tmp_path / "nope.pth"))
    with pytest.raises(InputError, match="do not fit vgg19-fc7"):
        build_backbone("vgg19-fc7", resnet_weights)
    junk = tmp_path / "junk.pth"
    junk.write_bytes(b"not a torch file")
    with pytest.raises(InputError, match="cannot read the weights: not a PyTorch file"):
        build_backbone("resnet50-pool5", str(junk))
    with pytest.raises(InputError, match="unknown backbone"):
        build_backbone("alexnet", resnet_weights)
    with pytest.raises(InputError, match="'missing.jpg' of the list not found"):
        extract_features(str(d), ["missing.jpg"], "resnet50-pool5", resnet_weights, progress=False)


def test_cli_extract(images, resnet_weights, tmp_path):
    d, names = images
    lst = tmp_path / "split.txt"
    lst.write_text("\n".join(names[:2]) + "\n")
    out = tmp_path / "feats.npy"
    assert main(["embed", "extract-image-features", "--images", str(d), "--list", str(lst), "--backbone",
                 "resnet50-pool5", "--weights", resnet_weights, "--output", str(out), "--batch-size", "2"]) == 0
    got = np.load(out)
    ref = extract_features(str(d), names[:2], "resnet50-pool5", resnet_weights, progress=False)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
