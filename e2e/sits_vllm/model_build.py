"""Builds the tiny random Llama and its LoRA adapters. Runs INSIDE the vLLM venv.

Why a separate entry point: building needs torch, transformers, tokenizers and peft, which
only the vLLM venv has; ``sits_vllm.model`` calls this module as a subprocess with that
venv's interpreter (``python -m sits_vllm.model_build ...`` with ``PYTHONPATH=e2e``), so
the project's venv never imports torch.

Why these numbers: no model can be downloaded here, and a random model is enough to drive
vLLM for real (tokenise, schedule, KV-cache, sample, stream, metrics). head_dim must be 64:
the CPU attention kernel rejects head_dim 16. Everything is seeded, so two builds of the
same recipe give byte-identical files; ``sits_vllm.model`` hashes this file's source as
the cache key, so any change here yields a new cache entry.

Usage:
    python -m sits_vllm.model_build model OUT_DIR
    python -m sits_vllm.model_build lora MODEL_DIR OUT_DIR SEED
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MODEL_SEED = 1234
VOCAB_SIZE = 512
SPECIAL_TOKENS = ("<unk>", "<s>", "</s>", "<pad>")
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}</s>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
LLAMA_CONFIG: dict[str, Any] = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 64,
    "max_position_embeddings": 512,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
}
LORA_RANK = 8
LORA_TARGETS = ("q_proj", "v_proj")
LORA_B_STD = 0.5

# A fixed, varied corpus: enough distinct byte pairs for ~250 merges on top of the 256-byte
# alphabet, and words that look like what tests will send (prompts, chat roles).
CORPUS = (
    "The quick brown fox jumps over the lazy dog while the operator watches the canary.",
    "A canary rollout sends a small share of traffic to the new revision first.",
    "If the error rate or the latency objective is breached, roll back at once.",
    "Large language model inference services stream tokens to their clients.",
    "The gateway splits requests between the stable and the canary backends.",
    "Prometheus scrapes metrics such as time to first token and queue length.",
    "LoRA adapters are small low rank weight deltas loaded at runtime.",
    "Hello world! How are you today? I am fine, thank you very much.",
    "system user assistant: answer briefly and politely, please.",
    "Numbers 0 1 2 3 4 5 6 7 8 9 10 100 1000 and symbols , . ; : ! ? ( ) [ ] { } \" '",
    "Kubernetes schedules pods onto nodes; each GPU may be sliced into MIG instances.",
    "Once upon a time there was a tiny model that knew nothing at all.",
)


def _lib(name: str) -> Any:
    """Import a library that only the vLLM venv has.

    Untyped on purpose: the project's venv, where mypy runs, has no torch, transformers,
    tokenizers or peft, and must not need them.
    """
    return importlib.import_module(name)


def _train_tokenizer() -> Any:
    """A byte-level BPE, trained on CORPUS: any text encodes, and training is deterministic."""
    tok = _lib("tokenizers")
    pre_tokenizers = tok.pre_tokenizers
    tokenizer = tok.Tokenizer(tok.models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = tok.decoders.ByteLevel()
    trainer = tok.trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(list(CORPUS) * 4, trainer=trainer)
    return tokenizer


def _save_tokenizer(out_dir: Path) -> Any:
    """Wrap in PreTrainedTokenizerFast (what vLLM loads), with a chat template for chat."""
    fast = _lib("transformers").PreTrainedTokenizerFast(
        tokenizer_object=_train_tokenizer(),
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        model_max_length=LLAMA_CONFIG["max_position_embeddings"],
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(out_dir))
    return fast


def build_model(out_dir: Path) -> None:
    """Write tokenizer, config and seeded random float32 weights to ``out_dir``."""
    torch, transformers = _lib("torch"), _lib("transformers")
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = _save_tokenizer(out_dir)
    config = transformers.LlamaConfig(
        **LLAMA_CONFIG,
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(MODEL_SEED)
    model = transformers.LlamaForCausalLM(config).to(torch.float32).eval()
    model.save_pretrained(str(out_dir))


def build_lora(model_dir: Path, out_dir: Path, seed: int) -> None:
    """A seeded rank-8 LoRA on q_proj/v_proj with non-zero B, so its outputs differ.

    peft initialises lora_B to zeros (an adapter that changes nothing); tests need one
    that visibly changes the answers, hence the explicit normal init of every lora_B.
    """
    torch, transformers, peft = _lib("torch"), _lib("transformers"), _lib("peft")
    torch.manual_seed(seed)
    base = transformers.LlamaForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    config = peft.LoraConfig(
        r=LORA_RANK,
        lora_alpha=2 * LORA_RANK,
        lora_dropout=0.0,
        target_modules=list(LORA_TARGETS),
        task_type="CAUSAL_LM",
    )
    model = peft.get_peft_model(base, config)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(mean=0.0, std=LORA_B_STD)
    model.save_pretrained(str(out_dir))
    _make_reproducible(out_dir)


def _make_reproducible(out_dir: Path) -> None:
    """Remove what varies between identical builds: the base model's path, set order.

    peft's generated README.md holds only the path and boilerplate; vLLM reads just the
    config and the weights.
    """
    (out_dir / "README.md").unlink(missing_ok=True)
    config_path = out_dir / "adapter_config.json"
    config = json.loads(config_path.read_text())
    config["base_model_name_or_path"] = "sits-tiny-llama"
    # peft keeps target_modules as a set: its order follows string hash randomisation.
    config["target_modules"] = sorted(config["target_modules"])
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m sits_vllm.model_build")
    sub = parser.add_subparsers(dest="what", required=True)
    model = sub.add_parser("model", help="build the tiny random Llama")
    model.add_argument("out_dir", type=Path)
    lora = sub.add_parser("lora", help="build a LoRA adapter for a built model")
    lora.add_argument("model_dir", type=Path)
    lora.add_argument("out_dir", type=Path)
    lora.add_argument("seed", type=int)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point for the subprocess call from ``sits_vllm.model``."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args = _parse(argv)
    if args.what == "model":
        build_model(args.out_dir)
    else:
        build_lora(args.model_dir, args.out_dir, args.seed)


if __name__ == "__main__":
    main()
