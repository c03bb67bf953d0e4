"""TrainConfig: what to train on, how big, how long and where to write.

Every field is a flag of `python -m attnscope train` (attnscope.cli.train builds them: `max_tokens` ->
`--max-tokens`; a few keep shorter historical spellings, given in the field's metadata), so a new setting
needs one line here and nothing else.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from attnscope.model.config import PRESETS
from attnscope.training.data import TOY_TASKS


def _flag(name: str, help: str = "", **argparse_kwargs: Any) -> dict[str, Any]:
    """Field metadata: the CLI flag's spelling and help (and any argparse option)."""
    return {"flag": name, "help": help, **argparse_kwargs}


@dataclass(frozen=True)
class TrainConfig:
    """What to train on, how big, how long, and where to write."""

    out_dir: str = field(metadata=_flag("--out", "run directory (checkpoints, log.jsonl); resumes if it has one",
                                        required=True))
    task: str = "multi30k"  # or a toy task: copy / reverse / sort
    src_lang: str = field(default="en", metadata=_flag("--src"))
    tgt_lang: str = field(default="de", metadata=_flag("--tgt"))
    data_dir: str | None = None  # Multi30k directory; default $ATTNSCOPE_DATA
    vocab_size: int = 8000  # joint BPE vocabulary
    preset: str = field(default="small", metadata=_flag("--preset", choices=sorted(PRESETS)))
    model: dict[str, Any] = field(default_factory=dict, metadata=_flag(  # ModelConfig overrides
        "--set", "override a ModelConfig field, e.g. --set dropout=0.3 --set positional=learned"))
    max_tokens: int = 4000  # padded tokens per batch (per process under torchrun)
    epochs: int = 20
    max_steps: int | None = None
    lr: float = 1e-3  # peak learning rate, reached after `warmup` steps
    warmup: int = 1000
    label_smoothing: float = 0.1
    clip: float = 1.0
    seed: int = 1
    precision: str = field(default="auto", metadata=_flag("--precision", choices=["auto", "fp32", "bf16"]))
    device: str = "auto"
    threads: int | None = None
    eval_every: int | None = None  # steps between validations; default once per epoch
    patience: int | None = field(default=None, metadata=_flag(  # early stopping; best.safetensors is the model to use
        "--patience", "stop after this many validations without a better val BLEU"))
    save_minutes: float = 10.0  # also save `last` this often, so a killed run loses little
    bleu_sentences: int | None = None  # validate BLEU on the first N val sentences (None = all)
    toy_size: int = 5000  # training pairs for toy tasks
    half: bool = field(default=False, metadata=_flag("--half", "store checkpoints in fp16"))
    keep_evals: bool = field(default=False, metadata=_flag(  # eval-<step>.safetensors at every validation
        "--keep-evals", "keep a checkpoint of every validation (for averaging)"))
    name: str | None = None  # checkpoint name shown in the app; default e.g. multi30k-en-de
    init_from: str | None = field(default=None, metadata=_flag(  # weights, tokenizers and step count; fresh optimizer
        "--init-from", "start from a checkpoint (e.g. a shipped one) with a fresh optimizer"))

    def __post_init__(self) -> None:
        if self.task != "multi30k" and self.task not in TOY_TASKS:
            raise ValueError(f"unknown task {self.task!r}; use multi30k or {', '.join(TOY_TASKS)}")
        if self.preset not in PRESETS:
            raise ValueError(f"unknown preset {self.preset!r}; choose {', '.join(PRESETS)}")

    @property
    def run_name(self) -> str:
        pair = f"{self.src_lang}-{self.tgt_lang}"
        return self.name or (f"multi30k-{pair}" if self.task == "multi30k" else f"toy-{self.task}")
