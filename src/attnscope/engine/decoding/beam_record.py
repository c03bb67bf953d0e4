"""One source's beam search with every head recorded while it searches (`beam_decode`), step by step
(`beam_decode_steps`, which `BeamStream` follows): the record of any hypothesis of the tree, read from the beam rows
that computed its tokens, without a second pass."""
from __future__ import annotations

from contextlib import closing
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import numpy as np
import torch
from torch import Tensor

from attnscope.checkpoints.decoding_rules import ATTNSCOPE, DecodingRules
from attnscope.engine.decoding.beam import BeamRun, beam_steps
from attnscope.engine.decoding.beam_result import BeamNode, BeamResult
from attnscope.engine.decoding.decode import Decoded, RawStep, entropy
from attnscope.engine.recording.steps import join_steps
from attnscope.model.transformer import DecoderOutput, EncoderOutput, Transformer


@dataclass
class _StepStats:
    """What one step of a one-source search offers each beam row: its top-k, entropy and the ranked candidates'
    log-probabilities (the chosen token is always among them), and every row's weights."""

    top_probs: Tensor  # (k, top_k)
    top_ids: Tensor  # (k, top_k)
    entropy: Tensor  # (k,)
    candidates: dict[int, float]  # flat index row * V + token -> that token's log-probability in that row
    attention: dict[str, Tensor]  # "decoder" / "cross" -> (L, k, H, Q, K_t)


@dataclass
class _Recorder:
    """The Watcher of a one-source search: the encoder's weights and each step's statistics."""

    top_k: int
    encoder: Tensor | None = None  # (L, H, S, S)
    steps: list[_StepStats] = field(default_factory=list)

    def encoded(self, source: EncoderOutput) -> None:
        self.encoder = torch.cat(source.attentions)

    def stepped(self, log_probs: Tensor, top_idx: Tensor, step: DecoderOutput) -> None:
        probs = log_probs.exp()
        top = probs.topk(min(self.top_k, probs.shape[-1]), dim=-1)
        flat = top_idx[0]
        lps = log_probs.view(-1)[flat]
        self.steps.append(_StepStats(top.values, top.indices, entropy(probs, log_probs),
                                     dict(zip(flat.tolist(), lps.tolist())),
                                     {"decoder": torch.stack(step.self_attentions),
                                      "cross": torch.stack(step.cross_attentions)}))


@dataclass
class RecordedBeam:
    """A one-source beam search as far as it has gone, with what its recorder saw."""

    run: BeamRun
    seen: _Recorder
    vocab: int

    @property
    def tree(self) -> BeamResult:
        return self.run.results[0]

    def chain(self, node_id: int) -> list[BeamNode]:
        """The nodes from the first output token to `node_id` (node t+1 was chosen at step t+1 from row `slot`)."""
        nodes, chain = self.tree.nodes, []
        node = nodes[node_id]
        while node.parent is not None:
            chain.append(node)
            node = nodes[node.parent]
        return chain[::-1]

    def best(self) -> int | None:
        """The node of the best hypothesis so far by the search's own score (log-prob / penalty(length)): finished, or,
        while the search goes on, still in the beam (scored as a finished one of its length); None before step 1."""
        rules = self.run.rules
        scored = [(n.score, n.id) for n in self.tree.nodes if n.status == "finished"]
        if not self.run.finished:
            scored += [(n.log_prob / rules.divisor(n.step), n.id) for n in self.run.alive()]
        return max(scored, key=lambda s: s[0])[1] if scored else None

    def cross_rows(self, node_id: int, last: int) -> list[np.ndarray]:
        """The last layer's mean of heads cross-attention rows of the latest `last` tokens of `node_id`'s hypothesis."""
        return [self.seen.steps[n.step - 1].attention["cross"][-1, n.slot, :, -1].float().mean(0).cpu().numpy()
                for n in self.chain(node_id)[-last:]]

    def decoded(self, node_id: int | None) -> Decoded:
        """The hypothesis ending at `node_id` as `greedy` gives a sentence: its steps (top-k, entropy) and attention,
        read from the rows of the beam that computed each of its tokens (the nodes' slots; the KV cache was reordered
        with the beam, so each row attends over that hypothesis' own prefix). None: no token (stopped at once)."""
        chain = [] if node_id is None else self.chain(node_id)
        out = Decoded([n.token_id for n in chain])
        for node in chain:
            stats, row = self.seen.steps[node.step - 1], node.slot
            out.steps.append(RawStep(node.token_id, stats.candidates[row * self.vocab + node.token_id],
                                     stats.top_ids[row].tolist(), stats.top_probs[row].tolist(),
                                     float(stats.entropy[row])))
        if chain:
            out.encoder = self.seen.encoder
            for kind in ("decoder", "cross"):
                rows = [self.seen.steps[node.step - 1].attention[kind][:, node.slot] for node in chain]
                setattr(out, kind, join_steps(rows, last_query=True))
        return out

    def settle(self, stopped: bool = False) -> tuple[BeamResult, Decoded]:
        """The search's result (BeamRun.settle: call once) and the record of its best hypothesis."""
        result = self.run.settle(stopped)[0]
        if not result.hypotheses:
            return result, self.decoded(None)
        best_ids = result.hypotheses[0][0]
        best = next(n for n in result.nodes if n.status in ("finished", "stopped") and result.path(n.id) == best_ids)
        return result, self.decoded(best.id)


@torch.inference_mode()  # not only no_grad: views and small ops skip autograd's bookkeeping
def beam_decode_steps(model: Transformer, src_ids: Sequence[int], beam_size: int, *, max_len: int | None = None,
                      length_penalty: float | None = None, use_cache: bool = True, top_k: int = 10,
                      rules: DecodingRules = ATTNSCOPE) -> Iterator[RecordedBeam]:
    """`beam_decode`, one step at a time: yields once the source is encoded, then after every step (the same
    object, grown). Closing the generator stops the search."""
    src = torch.tensor([list(src_ids)], dtype=torch.long, device=next(model.parameters()).device)
    seen = _Recorder(top_k)
    with closing(beam_steps(model, src, beam_size, max_len=max_len, length_penalty=length_penalty,
                            use_cache=use_cache, watch=seen, rules=rules)) as steps:
        for run in steps:
            yield RecordedBeam(run, seen, model.config.tgt_vocab_size)


def beam_decode(model: Transformer, src_ids: Sequence[int], beam_size: int, *, max_len: int | None = None,
                length_penalty: float | None = None, use_cache: bool = True, top_k: int = 10,
                rules: DecodingRules = ATTNSCOPE) -> tuple[BeamResult, Decoded]:
    """Beam search for one source, recording every head while it searches, and the best hypothesis' record
    (`RecordedBeam.decoded`). No second pass: the record is what the search computed."""
    *_, searched = beam_decode_steps(model, src_ids, beam_size, max_len=max_len, length_penalty=length_penalty,
                                     use_cache=use_cache, top_k=top_k, rules=rules)
    return searched.settle()
