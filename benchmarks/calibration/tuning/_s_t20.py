"""pytorch/tutorials, advanced_source/neural_style_tutorial.py: the input image optimized by
L-BFGS to match content features and Gram-matrix style features of a conv feature network,
MSE losses (style weight 1e6), the image clamped to [0, 1] inside the closure; two 8x8 digits
upscaled to 16x16 as content and style, a fixed random 3-conv feature network (no download),
the image held in a one-parameter module so that it can be recorded."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from _s_common import digits, recorder, setup, step


def gram_matrix(x: torch.Tensor) -> torch.Tensor:
    b, c, h, w = x.size()
    features = x.view(b * c, h * w)
    return features @ features.t() / (b * c * h * w)


class Canvas(nn.Module):
    """The image being optimized (the tutorial's input_img with requires_grad)."""

    def __init__(self, img: torch.Tensor):
        super().__init__()
        self.img = nn.Parameter(img.clone())

    def forward(self):
        return self.img


def train(run_dir: str, seed: int, *, zero_grad: bool = True) -> None:
    setup(seed)
    x, _, _, _ = digits()
    content = F.interpolate(x[0].view(1, 1, 8, 8) / 16, size=16, mode="bilinear")
    style = F.interpolate(x[1].view(1, 1, 8, 8) / 16, size=16, mode="bilinear")
    cnn = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1),
                        nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU())
    cnn.requires_grad_(False)
    style_layers, content_layer = (1, 3, 6), 3

    def features(img):
        out, feats = img, {}
        for i, layer in enumerate(cnn):
            out = layer(out)
            feats[i] = out
        return feats

    style_targets = {i: gram_matrix(f) for i, f in features(style).items() if i in style_layers}
    content_target = features(content)[content_layer]
    canvas = Canvas(content)
    optimizer = torch.optim.LBFGS(canvas.parameters())
    style_weight, content_weight = 1e6, 1.0
    with recorder(run_dir, canvas, optimizer, config={"style_weight": style_weight, "num_steps": 30}) as rec:
        for _ in range(30):
            def closure():
                with torch.no_grad():
                    canvas.img.clamp_(0, 1)
                if zero_grad:
                    optimizer.zero_grad()
                feats = features(canvas())
                style_score = sum(F.mse_loss(gram_matrix(feats[i]), style_targets[i]) for i in style_layers)
                content_score = F.mse_loss(feats[content_layer], content_target)
                loss = style_weight * style_score + content_weight * content_score
                loss.backward()
                return loss

            loss = optimizer.step(closure)
            step(rec, loss=loss, inputs=content, outputs=canvas.img)
        with torch.no_grad():
            canvas.img.clamp_(0, 1)
