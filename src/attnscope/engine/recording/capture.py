"""The recorder: capture every attention head of one forward pass (or of a decoding loop).

Works on any model, with no glue in the user's code:
- models built of attnscope's attention: the tracer's weights-only listeners on each module's PATTERN hook point
  (tracer.py, model/hooks.py; attnscope's own decoding asks the model for its weights instead, see
  model/transformer.py);
- modules built from `torch.nn.MultiheadAttention` (nn.Transformer, hand-written encoder-decoders): a
  pre-hook asks for per-head weights and a forward hook reads them, then hands the caller exactly
  what it asked for (None, head-averaged or per-head);
- attention computed in the user's own code: a softmax over keys inside a module's forward (modules
  that return their weights, that keep them, or that do neither) and calls of
  `F.scaled_dot_product_attention`, found by a TorchFunctionMode pushed only inside the context
  (attention_mode.py), which also tells self- from cross-attention by where queries and keys came
  from (streams.py).
Hooks and the mode live only inside the context manager and are removed in `finally`.

Every call is kept separately (`Recording.calls`, recorded.py); `Recording.modules` and
`Recording.to_record` join a module's calls into whole sentences however the loop ran (loop_calls.py).
"""
from __future__ import annotations

import threading
import warnings
from contextlib import ExitStack, contextmanager
from typing import Any, Iterator, Sequence

import torch
from torch import Tensor, nn

from attnscope.engine.recording.attention_mode import AttentionMode
from attnscope.engine.recording.recorded import Recording, Structure, infer_kind
from attnscope.engine.recording.sharing import eval_mode, model_lock
from attnscope.engine.recording.streams import Streams
from attnscope.engine.recording.trace import WEIGHTS
from attnscope.engine.recording.tracer import Calls, install
from attnscope.model.attention import MultiHeadAttention
from attnscope.model.hooks import PATTERN
from attnscope.model.kinds import Kind
from attnscope.records.attention import RecordError

__all__ = ["Recording", "infer_kind", "record_attention"]

# torch.nn building blocks that compute no attention of their own: a model made of these and attnscope's
# attention needs no TorchFunctionMode.
PLAIN_BLOCKS = (nn.Linear, nn.Embedding, nn.LayerNorm, nn.Dropout, nn.ModuleList, nn.ModuleDict, nn.Sequential,
                nn.Identity, nn.ReLU, nn.GELU)

_FASTPATH_GUARD = threading.Lock()
_fastpath_users = 0
_fastpath_before = True  # the setting found when the first recording started, restored by the last


def native_attention(module: nn.Module, modules: Sequence[tuple[str, nn.Module]] | None = None
                     ) -> dict[str, MultiHeadAttention] | None:
    """attnscope's attention modules by name when they are all the attention `module` computes (their hooks
    suffice), else None. `modules`: module.named_modules() when the caller has walked them already (this runs
    before every translation the app makes)."""
    found = {}
    for name, m in module.named_modules() if modules is None else modules:
        if isinstance(m, MultiHeadAttention):
            found[name] = m
        elif not (type(m) in PLAIN_BLOCKS or type(m).__module__.startswith("attnscope.")):
            return None
    return found or None


def is_torch_block(m: nn.Module) -> bool:
    """A building block of torch.nn (nn.Softmax, nn.Linear, nn.Transformer...), not a module of the user's."""
    return type(m).__module__.startswith("torch.nn.")


def constants(module: nn.Module) -> Iterator[Tensor]:
    """The model's own tensors: parameters, buffers and tensors kept as plain attributes (a scale)."""
    yield from module.parameters()
    yield from module.buffers()
    for m in module.modules():
        yield from (v for v in vars(m).values() if isinstance(v, Tensor))


_MHA_OPTIONAL_ARGS = ("key_padding_mask", "need_weights", "attn_mask", "average_attn_weights", "is_causal")


class _Asked:
    """What each caller of an nn.MultiheadAttention asked for, so it gets exactly that back, and
    whether its queries and keys came from one tensor (self-attention) or two (cross-attention)."""

    def __init__(self, streams: Streams) -> None:
        self.streams = streams
        self.pending: dict[tuple[int, int], list[tuple[bool, bool, Structure, bool]]] = {}

    def force(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Pre-hook: remember (need_weights, average_attn_weights), then ask for per-head weights."""
        named = {**dict(zip(_MHA_OPTIONAL_ARGS, args[3:])), **kwargs}  # after (query, key, value)
        query, key = (args[0] if args else named["query"]), (args[1] if len(args) > 1 else named["key"])
        keys = self.streams.of(key)
        structure: Structure = "self" if self.streams.of(query) & keys else "cross"
        wish = (bool(named.get("need_weights", True)), bool(named.get("average_attn_weights", True)), structure,
                bool(keys & self.streams.reordered))
        self.pending.setdefault((threading.get_ident(), id(module)), []).append(wish)
        return args[:3], {**named, "need_weights": True, "average_attn_weights": False}

    def structure(self, module: nn.Module) -> tuple[Structure, bool]:
        """(self or cross, whether its keys' batch rows were reordered) of the call now running."""
        return self.pending[(threading.get_ident(), id(module))][-1][2:]

    def give_back(self, module: nn.Module, output: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor | None]:
        """What the caller would have received: no weights, head-averaged, or per-head."""
        need, average, *_ = self.pending[(threading.get_ident(), id(module))].pop()
        out, weights = output
        if not need:
            return out, None
        return (out, weights.mean(dim=-3)) if average else (out, weights)


@contextmanager
def _fastpath_disabled() -> Iterator[None]:
    """Fused encoder kernels and nested tensors skip attention hooks (and trim padded maps)."""
    global _fastpath_users, _fastpath_before
    with _FASTPATH_GUARD:
        if _fastpath_users == 0:
            _fastpath_before = torch.backends.mha.get_fastpath_enabled()
        _fastpath_users += 1
        torch.backends.mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        with _FASTPATH_GUARD:
            _fastpath_users -= 1
            if _fastpath_users == 0:
                torch.backends.mha.set_fastpath_enabled(_fastpath_before)


@contextmanager
def record_attention(module: nn.Module, kinds: dict[str, Kind] | None = None) -> Iterator[Recording]:
    """Record the attention weights of every head while the block runs.

    Only calls made from the recording thread are kept, and the model's lock is held
    throughout, so sessions sharing one model never see each other's weights. A module in
    training mode is switched to eval mode for the duration (dropout would distort the
    weights) and a note says so. What the caller's code receives is unchanged: softmax results
    are recorded as they are, fused attention calls run as they would (their weights are computed
    beside them); only an nn.MultiheadAttention must compute its weights to be recorded, so its
    output may differ from an unrecorded call in the last float bits, as with need_weights=True.
    `kinds` names the kind (encoder, decoder, cross) of modules the recorder cannot tell.
    """
    if not isinstance(module, nn.Module):
        raise RecordError(f"record_attention records a torch.nn.Module (your model), not a {type(module).__name__}: "
                          "pass the model itself, e.g. record_attention(model)")
    recording = Recording()
    given: dict[str, Kind | None] = dict(kinds or {})
    with model_lock(module), _fastpath_disabled(), ExitStack() as cleanup:
        modules = list(module.named_modules())  # one walk for both: it runs before every translation the app makes
        if cleanup.enter_context(eval_mode(module, [m for _, m in modules])):
            note = "the model was in training mode; switched to eval mode while recording (dropout would distort the weights)"
            recording.notes.append(note)
            warnings.warn(note, stacklevel=3)
        cleanup.callback(recording.resolve_kinds, given)
        native = native_attention(module, modules)
        if native is not None:
            _hook_native(module, native, recording, given, cleanup)
            yield recording
        else:
            mode = _hook_any(module, recording, given, cleanup)
            cleanup.callback(_report, mode, recording)
            with mode:
                yield recording


def _report(mode: AttentionMode, recording: Recording) -> None:
    """Say in the recording's notes (and a warning) which calls the recorder could not follow."""
    if mode.problems:
        note = (f"{len(mode.problems)} torch calls could not be followed, so attention computed from them may be "
                f"missing from this recording (first: {mode.problems[0]})")
        recording.notes.append(note)
        warnings.warn(note, stacklevel=4)


def _hook_native(module: nn.Module, modules: dict[str, MultiHeadAttention], recording: Recording,
                 given: dict[str, Kind | None], cleanup: ExitStack) -> None:
    """A model built of attnscope's attention: the tracer's weights-only listeners, each attention module's softmaxed
    weights appended to the recording's calls, nothing else."""
    for name, m in modules.items():
        given.setdefault(name, m.kind)
        recording.kinds[name] = given[name]
    install(cleanup, module, WEIGHTS, Calls(recording.calls), modules)


def _hook_any(module: nn.Module, recording: Recording, given: dict[str, Kind | None], cleanup: ExitStack) -> AttentionMode:
    """Any model: the mode that finds attention in its code, the hooks that tell it which module runs,
    and the hooks that read nn.MultiheadAttention and attnscope attention modules themselves."""
    me = threading.get_ident()

    def keep(name: str, weights: Tensor, structure: Structure | None = None, reordered: bool = False) -> None:
        if threading.get_ident() == me:
            recording.keep(name, weights.detach(), structure, reordered)

    streams = Streams(constants(module))
    mode = AttentionMode(streams, keep)
    asked = _Asked(streams)
    for name, m in module.named_modules():
        hooked = isinstance(m, (MultiHeadAttention, nn.MultiheadAttention))
        if is_torch_block(m) and not hooked:
            continue  # nn.Softmax, nn.Linear...: what runs inside belongs to the module that called them

        def enter(_m: nn.Module, _args: Any, name: str = name, hooked: bool = hooked) -> None:
            if threading.get_ident() == me:
                mode.enter(name, hooked)

        def leave(_m: nn.Module, _args: Any, _out: Any) -> None:
            if threading.get_ident() == me:
                mode.leave()
        cleanup.callback(m.register_forward_pre_hook(enter).remove)
        cleanup.callback(m.register_forward_hook(leave, always_call=True).remove)
        if isinstance(m, MultiHeadAttention):
            given.setdefault(name, m.kind)
            structure: Structure = "cross" if m.kind == "cross" else "self"
            m.hooks.listen(cleanup, PATTERN, lambda w, name=name, structure=structure: keep(name, w, structure))
        elif isinstance(m, nn.MultiheadAttention):
            def read(mha: nn.Module, _args: Any, output: tuple[Tensor, Tensor], name: str = name) -> tuple[Tensor, Tensor | None]:
                keep(name, _per_head(output[1], mha), *asked.structure(mha))
                return asked.give_back(mha, output)
            cleanup.callback(m.register_forward_pre_hook(asked.force, with_kwargs=True).remove)
            cleanup.callback(m.register_forward_hook(read).remove)
    return mode


def _per_head(weights: Tensor, mha: nn.MultiheadAttention) -> Tensor:
    """nn.MultiheadAttention returns (B, H, Q, K), or (H, Q, K) for unbatched input."""
    if weights.dim() == 3:
        weights = weights.unsqueeze(0)
    if weights.shape[1] != mha.num_heads:
        raise RuntimeError(f"expected per-head weights with {mha.num_heads} heads, got shape {list(weights.shape)}")
    return weights
