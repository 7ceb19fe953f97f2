"""torchdevice-lint: find and fix device-portability hazards in PyTorch code."""

__version__ = "0.1.3"
