"""The torch front end: torch.compile(model, backend="luminal") (registered on import) and
luminal.torch.compile(model, example_inputs, dynamic_shapes=...) through torch.export."""
from __future__ import annotations

from . import backend
from .aot import compile
from .backend import luminal_backend
from .table import TRANSLATIONS

__all__ = ["compile", "luminal_backend", "TRANSLATIONS", "backend"]
