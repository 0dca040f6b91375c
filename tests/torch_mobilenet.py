"""torchvision's MobileNetV2 (width 1.0) in plain torch, with torchvision's module names.

torchvision is not installable here; this is the reference the MobileNetV2 port is checked
and benchmarked against: ``load_state_dict(strict=True)`` takes the checkpoint as it is.
"""

from __future__ import annotations

import torch
from spawnml_models.mobilenet import STAGES
from torch import nn


def conv_bn(inputs: int, outputs: int, stride: int = 1, groups: int = 1, kernel: int = 3) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(inputs, outputs, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(outputs),
        nn.ReLU6(inplace=True),
    )


class InvertedResidual(nn.Module):
    def __init__(self, inputs: int, outputs: int, stride: int, expansion: int) -> None:
        super().__init__()
        hidden = inputs * expansion
        self.residual = stride == 1 and inputs == outputs
        layers = [conv_bn(inputs, hidden, kernel=1)] if expansion != 1 else []
        layers += [
            conv_bn(hidden, hidden, stride, groups=hidden),
            nn.Conv2d(hidden, outputs, 1, bias=False),
            nn.BatchNorm2d(outputs),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.residual else self.conv(x)


class MobileNetV2(nn.Module):
    """torchvision.models.MobileNetV2 (width 1.0), module for module."""

    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        features: list[nn.Module] = [conv_bn(3, 32, stride=2)]
        channels = 32
        for expansion, outputs, blocks, stride in STAGES:
            for index in range(blocks):
                features.append(InvertedResidual(channels, outputs, stride if index == 0 else 1, expansion))
                channels = outputs
        features.append(conv_bn(channels, 1280, kernel=1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1))
