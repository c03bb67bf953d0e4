"""The one vocabulary for the three kinds of attention, used by the model, the record, analysis and views."""
from __future__ import annotations

from typing import Literal

Kind = Literal["encoder", "decoder", "cross"]
KINDS: tuple[Kind, ...] = ("encoder", "decoder", "cross")  # in forward order
KIND_LABELS: dict[Kind, str] = {"encoder": "Encoder self-attention", "decoder": "Decoder masked self-attention",
                                "cross": "Cross-attention (decoder → source)"}
