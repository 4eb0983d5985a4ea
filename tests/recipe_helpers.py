"""Shared pieces of the trainer tests: a tiny run's config and its log."""

import json
from pathlib import Path

from recipe import config as C


def read_log(path):
    """The records of a run's log.jsonl."""
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


class SleepyGenerator:
    """A generator engine for a :class:`~recipe.generate_process.ProcessGenerator` child: each
    ``generate`` call takes ``seconds`` (sleeping) and returns one-token completions stamped
    with the version of the last push."""

    def __init__(self, seconds):
        import torch

        self.seconds = seconds
        self.version = 0
        self.rng = torch.Generator().manual_seed(0)

    def generate(self, prompts, n, *, max_new_tokens, temperature=1.0):
        import time

        from recipe.generate import Completion

        time.sleep(self.seconds)
        return [[Completion([1], [-0.5], [self.version], False)] * n for _ in prompts]

    def push_weights(self, state_dict, version):
        self.version = version

    def close(self):
        pass


def tiny_cfg(init, **extra):
    """A run of a few steps on a tiny warmed-up model (``init``): seconds on one CPU thread."""
    values = {
        "init": str(init), "train_prompts": 300, "val_prompts": 16, "val_samples_per_prompt": 2,
        "steps": 8, "prompts_per_step": 4, "generations": 4, "eval_every": 4,
        "checkpoint_every": 2, "threads": 1, "zero_variance_filter": False,
    }  # fmt: skip
    values.update(extra)
    return C.from_dict(values)


# --------------------------------------------------------------------------- tiny HF models
# Built locally, nothing downloaded: a character-level tokenizer over printable ASCII with the
# special tokens and chat template of each family, and a random-initialised 2-layer model
# (hidden 64, head_dim 32: the smallest vLLM's CPU attention takes).

CHAT = {
    # Qwen2.5-style: no BOS, turns end with <|im_end|>, <|endoftext|> also ends (and pads)
    "qwen2": {
        "specials": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        "eos": "<|im_end|>", "pad": "<|endoftext|>", "bos": None,
        "generation_eos": ["<|im_end|>", "<|endoftext|>"],
        "template": "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content']"
        " + '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}"
        "{{ '<|im_start|>assistant\\n' }}{% endif %}",
    },
    # Llama-3-style: BOS, no pad token, the tokenizer's EOS is <|end_of_text|> but chat turns end
    # with <|eot_id|> (only generation_config.json says so)
    "llama": {
        "specials": ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"],
        "eos": "<|end_of_text|>", "pad": None, "bos": "<|begin_of_text|>",
        "generation_eos": ["<|end_of_text|>", "<|eot_id|>"],
        "template": "{{ bos_token }}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}"
        "<|eot_id|>{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}",
    },
}  # fmt: skip


def build_chat_tokenizer(kind):
    import string

    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
    )
    from transformers import PreTrainedTokenizerFast

    spec = CHAT[kind]
    chars = [c for c in string.printable if c not in "\t\r\x0b\x0c"]
    vocab = {t: i for i, t in enumerate(spec["specials"] + chars + ["<unk>"])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t in spec["specials"]]
    )
    if spec["bos"]:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{spec['bos']} $A", special_tokens=[(spec["bos"], vocab[spec["bos"]])]
        )
    kw = {"eos_token": spec["eos"], "unk_token": "<unk>"}
    if spec["pad"]:
        kw["pad_token"] = spec["pad"]
    if spec["bos"]:
        kw["bos_token"] = spec["bos"]
    out = PreTrainedTokenizerFast(tokenizer_object=tok, **kw)
    out.chat_template = spec["template"]
    return out


def build_hf_folder(kind, out, seed=0):
    """A tiny random Qwen2 (tied embeddings) or Llama (untied) folder with its tokenizer."""
    import torch
    from transformers import (
        GenerationConfig,
        LlamaConfig,
        LlamaForCausalLM,
        Qwen2Config,
        Qwen2ForCausalLM,
    )

    from recipe.model import save_policy

    tok = build_chat_tokenizer(kind)
    spec = CHAT[kind]
    ids = {t: tok.convert_tokens_to_ids(t) for t in spec["specials"]}
    common = {
        "vocab_size": len(tok), "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
        "max_position_embeddings": 512, "eos_token_id": ids[spec["eos"]],
        "pad_token_id": ids[spec["pad"]] if spec["pad"] else None,
        "bos_token_id": ids[spec["bos"]] if spec["bos"] else None,
    }  # fmt: skip
    torch.manual_seed(seed)
    if kind == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(tie_word_embeddings=True, **common))
    else:
        model = LlamaForCausalLM(LlamaConfig(tie_word_embeddings=False, **common))
    model.generation_config = GenerationConfig(
        eos_token_id=[ids[t] for t in spec["generation_eos"]],
        bos_token_id=common["bos_token_id"], pad_token_id=common["pad_token_id"],
    )  # fmt: skip
    save_policy(model, tok, out)
    return Path(out)


def hf_cfg(init, **extra):
    """A few RL steps on a tiny HF folder with the digit task (tests/data/digit_task.py)."""
    values = {
        "init": str(init), "task": f"{DIGIT_TASK}:DigitTask", "chat_template": True,
        "val_prompts": 4, "val_samples_per_prompt": 2, "steps": 3, "prompts_per_step": 3,
        "generations": 4, "max_new_tokens": 6, "eval_every": 3, "checkpoint_every": 3,
        "threads": 1, "device": "cpu", "lr": 1e-2, "lr_warmup_steps": 1,
    }  # fmt: skip
    values.update(extra)
    return C.from_dict(values)


DIGIT_TASK = Path(__file__).resolve().parent / "data" / "digit_task.py"
