"""The toy preset of the Train page: a model and schedule that learn a toy task while you watch.

Chosen by measurement on 2 shared CPU cores (see BENCHMARKS.md, "toy training"): one encoder and
one decoder layer, pre-LN (post-LN at this learning rate oscillated between 30% and 85% exact),
no label smoothing (a reversal is right or wrong), one thread (two threads on a busy 2-core
machine made each step ~15x slower), positions up to 32 (an untrained model that never stops
decodes only that far at each validation), a validation every 50 steps so the page shows progress
and the run can be judged early, and 24 epochs: with 12, three of six seeds never reached 95% exact
and the last validation ranged from 87.5% to 94.5%; with 24, every seed reached 95% by step 850, and
its last validation (97-99.5%) and the model it saves (99.5-100%) stay above it (BENCHMARKS.md).
"""
from __future__ import annotations

from typing import Any

TOY_MODEL: dict[str, Any] = dict(d_model=64, n_heads=4, n_encoder_layers=1, n_decoder_layers=1, d_ff=128,
                                 dropout=0.0, attention_dropout=0.0, norm="pre", max_len=32)
TOY_SCHEDULE: dict[str, Any] = dict(toy_size=5000, max_tokens=800, lr=3e-3, warmup=100, epochs=24, eval_every=50,
                                    label_smoothing=0.0, threads=1)
