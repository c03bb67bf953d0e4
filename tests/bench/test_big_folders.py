"""A big shape's Hugging Face folder written shard by shard (bench/big_folders.sharded_folder): transformers loads it
as a sharded checkpoint with every weight it expects, and attnscope's import of the sharded folder translates as
transformers' generate does."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from attnscope.bench.big_folders import sharded_folder
from attnscope.bench.big_models import MBART
from attnscope.checkpoints.importers.huggingface import import_hf
from attnscope.checkpoints.tensor_stream import read_header
from attnscope.engine.decoding.translator import Translator

transformers = pytest.importorskip("transformers")
TINY_NLLB = MBART | dict(vocab_size=4000, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                         decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=128,
                         activation_function="relu")
LIMIT = 60_000  # bytes a shard: the 512 KB embedding alone, then a shard for about each layer


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sharded_folder("nllb", TINY_NLLB, tmp_path_factory.mktemp("nllb"), LIMIT)


def test_the_weights_are_cut_into_shards_the_index_lists(folder: Path) -> None:
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    files = sorted(set(index["weight_map"].values()))
    assert len(files) >= 3 and files == sorted(p.name for p in folder.glob("model-*.safetensors"))
    headers = {f: read_header(folder / f)[0] for f in files}
    assert {name: f for f, entries in headers.items() for name in entries} == index["weight_map"]
    sizes = [sum(e.end - e.start for e in entries.values()) for entries in headers.values()]
    assert index["metadata"]["total_size"] == sum(sizes)
    assert all(size <= LIMIT or len(entries) == 1 for size, entries in zip(sizes, headers.values()))


def test_transformers_loads_every_weight_and_the_import_translates_as_generate(folder: Path) -> None:
    model, info = transformers.AutoModelForSeq2SeqLM.from_pretrained(str(folder), output_loading_info=True)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    shared = model.get_input_embeddings().weight.detach()
    assert float(shared[model.config.pad_token_id].abs().max()) == 0.0 and 0.015 < float(shared.std()) < 0.025
    imported = import_hf(folder, src_lang="eng_Latn", tgt_lang="deu_Latn")
    tr = Translator(imported.model, imported.bundle)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    sentence = "A man in an orange hat starring at something."
    result = model.eval().generate(**tokenizer([sentence], return_tensors="pt"), max_new_tokens=8, do_sample=False,
                                   forced_bos_token_id=tokenizer.convert_tokens_to_ids("deu_Latn"))  # as NLLB is run
    ours = [imported.tgt_order[i] for i in tr.translate(sentence, max_len=8).target_ids]
    assert ours == result[0].tolist()[1:] and len(ours) == 8  # </s> suppressed: it runs to its length
