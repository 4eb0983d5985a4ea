"""The tiny policy: a character tokenizer, a Llama-style model, the FP32 LM head, the warm-up.

The model folder is a normal Hugging Face folder (``config.json``, ``model.safetensors``,
``tokenizer.json``), so vLLM and ``AutoModelForCausalLM`` load it; :func:`load_policy` also loads
any real causal-LM checkpoint folder. Nothing is downloaded.

``python -m recipe.model --out DIR`` builds the seeded model and runs the deterministic supervised
warm-up: batches of carry-free problems (the easier sub-distribution, see
:func:`recipe.tasks.addition.easy_problems`) with a share ``mix`` (default config 0.25) of
full-distribution problems from the training pool. Why the mix (measured on this task): a warm-up on
carry-free problems alone leaves the model confidently wrong on carries, so zero-variance filtering
drops ~90% of prompts and RL barely moved in 200 steps; a warm-up on the full distribution alone
sits on supervised learning's own steep rise (pass rate 0.004 after 150 steps, 0.005 after 250 with
noisy sampling). The mix starts RL near 0.19 with about a third of the prompts carrying signal.

A task with ``warmup_examples`` (:class:`recipe.tasks.Task`; the ``addition_lsb`` task) supplies
its own supervised examples in its own answer format instead; the old path above is unchanged
for every other task, so the bundled runs' warm-ups are reproduced bit for bit.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import torch
from tqdm import tqdm
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerFast,
)

from recipe.config import ConfigError
from recipe.forward import (
    body,
    completion_logprobs,
    head_logits,
    left_pad,
    model_device,
    positions,
)
from recipe.tasks import Prompt
from recipe.tasks.addition import Problem, easy_problems, reward, split_problems

SPECIAL = ["<pad>", "<bos>", "<eos>", "<unk>"]
CHARS = [*"0123456789", "+", "="]


def build_tokenizer() -> PreTrainedTokenizerFast:
    """A character-level WordLevel tokenizer (16 ids) that prepends BOS to every text."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors

    vocab = {tok: i for i, tok in enumerate(SPECIAL + CHARS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A $B", special_tokens=[("<bos>", vocab["<bos>"])]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<bos>",
        eos_token="<eos>",
        pad_token="<pad>",
        unk_token="<unk>",
    )


def build_model(
    vocab_size: int,
    n_layer: int,
    hidden: int,
    heads: int,
    intermediate: int,
    seed: int,
    max_positions: int = 64,
) -> LlamaForCausalLM:
    """A freshly initialised Llama-style causal LM (untied head, seeded); ``max_positions``:
    the longest prompt + completion it serves (vLLM refuses longer; RoPE has no weights, so the
    initialisation does not depend on it)."""
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=n_layer,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)


def save_policy(model: PreTrainedModel, tokenizer, out: str | Path, state_dict=None) -> Path:
    """Save model and tokenizer as a Hugging Face folder that transformers 4.x and 5.x load;
    ``state_dict``: these (full) weights instead of the model's own (a sharded model's)."""
    out = Path(out)
    model.save_pretrained(out, state_dict=state_dict)
    tokenizer.save_pretrained(out)
    # transformers 5 writes its own class name; the 4.x name loads in both (and in vLLM)
    cfg_path = out / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg_path.write_text(json.dumps(cfg, indent=2))
    return out


def load_policy(path: str | Path, device: str | torch.device = "cpu", *, weights: bool = True):
    """Load a Hugging Face causal-LM folder (ours or a real checkpoint) and its tokenizer.

    The weights are FP32 (the trainer's master weights; the compute dtype is an autocast setting,
    see :mod:`recipe.forward`) on ``device``. A tokenizer without a pad token (Llama-3) gets its
    EOS token as pad: padding is masked out everywhere, so only its id must exist.
    ``weights=False``: the model is built from ``config.json`` on the meta device, nothing read
    or allocated (a torchrun rank other than 0: :func:`recipe.distributed.shard` fills its
    shards from rank 0's weights).
    """
    if weights:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(device)
    else:
        from transformers import AutoConfig

        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path))
        model = model.to(torch.float32)
    tok_cfg = Path(path) / "tokenizer_config.json"
    declared = json.loads(tok_cfg.read_text()).get("tokenizer_class") if tok_cfg.exists() else None
    # transformers 5's AutoTokenizer rebuilds a tokenizer from the model type (Qwen2 -> its BPE
    # pipeline) even when the folder declares the generic class; honour the declaration
    loader = PreTrainedTokenizerFast if declared == "PreTrainedTokenizerFast" else AutoTokenizer
    tokenizer = loader.from_pretrained(path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def stop_token_ids(tokenizer, path: str | Path | None = None) -> list[int]:
    """Every id that ends a completion: the tokenizer's EOS and the generation config's.

    Instruct models often end a turn with a token other than the tokenizer's EOS (Qwen2.5:
    ``<|im_end|>`` and ``<|endoftext|>``; Llama-3: ``<|eot_id|>`` and ``<|end_of_text|>``);
    ``generation_config.json`` lists them all.
    """
    ids = [] if tokenizer.eos_token_id is None else [tokenizer.eos_token_id]
    gen_cfg = Path(path) / "generation_config.json" if path is not None else None
    if gen_cfg is not None and gen_cfg.exists():
        eos = json.loads(gen_cfg.read_text()).get("eos_token_id")
        for i in eos if isinstance(eos, list) else [eos]:
            if isinstance(i, int) and i not in ids:
                ids.append(i)
    if not ids:
        raise ValueError(
            f"the tokenizer of {path} has no EOS token and generation_config.json names none; "
            "completions could never finish"
        )
    return ids


def encode_prompts(tokenizer, texts: Sequence[str], chat_template: bool) -> list[list[int]]:
    """Prompt ids: the raw text (with the tokenizer's own special tokens, e.g. BOS), or the user
    turn wrapped in the tokenizer's chat template with the assistant turn opened."""
    if not chat_template:
        return [tokenizer(t)["input_ids"] for t in texts]
    if getattr(tokenizer, "chat_template", None) is None:
        raise ValueError("chat_template=true, but the tokenizer has no chat template")
    out = []
    for t in texts:
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": t}], tokenize=False, add_generation_prompt=True
        )
        out.append(tokenizer(text, add_special_tokens=False)["input_ids"])
    return out


def encode(tokenizer, problems: Sequence[Problem]) -> list[list[int]]:
    """Prompt ids (BOS + characters) for each problem."""
    return [tokenizer(p.prompt)["input_ids"] for p in problems]


def sft_step_loss(model, tokenizer, examples: Sequence[Prompt]) -> torch.Tensor:
    """Teacher-forced cross-entropy on the answer and EOS tokens only."""
    prompts = [tokenizer(p.text)["input_ids"] for p in examples]
    targets = [
        tokenizer(p.answer, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        for p in examples
    ]
    logp, mask = completion_logprobs(
        model, prompts, targets, fp32_head=True, temperature=1.0, pad_id=tokenizer.pad_token_id
    )
    return -(logp * mask).sum() / mask.sum()


def check_out(out: Path) -> None:
    """Refuse an ``out`` that :func:`warm_up` would destroy: it replaces the whole folder, so
    it must be new, empty, or an earlier warm-up's output (``warmup.json`` in it)."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out} is a file; the warm-up writes a model folder: name a new one")
    if out.is_dir() and not (out / "warmup.json").exists() and any(out.iterdir()):
        names = sorted(p.name for p in out.iterdir())
        held = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
        raise ConfigError(
            f"{out} holds other files ({held}): the warm-up replaces the whole folder with "
            "its model, so it takes a new or empty folder, or an earlier warm-up's"
        )


def warm_up(
    out: str | Path,
    *,
    digits: int = 3,
    n_layer: int = 3,
    hidden: int = 128,
    heads: int = 4,
    intermediate: int = 512,
    steps: int = 400,
    batch: int = 64,
    lr: float = 1e-3,
    mix: float = 0.0,
    pool: Sequence[Problem] = (),
    target: float | None = None,
    probe_every: int = 50,
    seed: int = 0,
    device: str | torch.device = "cpu",
    task=None,
    final_per_class: int = 256,
    max_new_tokens: int | None = None,
    max_positions: int = 64,
) -> Path:
    """Build the seeded tiny model, train it on carry-free problems, save it to ``out``.

    A share ``mix`` of each batch is drawn instead from ``pool`` (the training prompts, full
    distribution), so that the model has seen carries without mastering them. With ``target``,
    training stops at the first multiple of ``probe_every`` steps where the sampled pass rate on
    256 pool prompts (8 samples each) reaches ``target`` (``steps`` is then a cap): seeds reach a
    given pass rate at quite different step counts. Deterministic for a given seed and thread
    count (on CPU; the model is built on CPU and moved to ``device``). Returns the folder.

    ``task`` (a :class:`recipe.tasks.Task`, optional): when its ``warmup_examples(steps * batch,
    seed + 1)`` returns examples, the warm-up trains on those (``mix`` and ``pool`` unused) and
    the target probes sample its first 256 training prompts, scored by its ``reward``. When it
    has ``prompt_class``, ``warmup.json`` also records the final sampled pass rate per class
    (``final_by_class``: up to ``final_per_class`` training prompts per class, 8 samples each)
    and the final overall rate on the probe prompts (``final_pass_rate``).

    ``max_new_tokens``: the probes' completion length limit (default ``digits + 2``, the
    addition tasks' answers; the run's ``max_new_tokens`` for longer ones); ``max_positions``:
    see :func:`build_model`.
    """
    out = Path(out)
    check_out(out)
    probe_len = digits + 2 if max_new_tokens is None else max_new_tokens
    tokenizer = build_tokenizer()
    model = build_model(
        len(tokenizer), n_layer, hidden, heads, intermediate, seed, max_positions
    ).to(device)
    supply = getattr(task, "warmup_examples", None)
    data = supply(steps * batch, seed + 1) if callable(supply) else None
    from_task = data is not None
    if from_task:
        if len(data) != steps * batch or not all(isinstance(p, Prompt) for p in data):
            raise ValueError(
                f"task.warmup_examples({steps * batch}, {seed + 1}) must return "
                f"{steps * batch} recipe.tasks.Prompt, got {len(data)} items"
            )
        probe_set = list(task.train_prompts()[:256])

        def probe() -> float:
            return _task_pass_rates(model, tokenizer, probe_set, task, probe_len, seed)[0]
    else:
        problems = easy_problems(digits, steps * batch, seed + 1)
        gen = torch.Generator().manual_seed(seed + 3)
        n_hard = round(mix * batch)
        if (n_hard or target is not None) and not pool:
            raise ValueError("warm-up mix > 0 or a target needs the training pool (pool=...)")
        for i in range(steps if n_hard else 0):
            picks = torch.randint(0, len(pool), (n_hard,), generator=gen).tolist()
            problems[i * batch : i * batch + n_hard] = [pool[j] for j in picks]
        data = [Prompt(p.prompt, p.answer) for p in problems]

        def probe() -> float:
            return sampled_pass_rate(model, tokenizer, pool[:256], probe_len, seed)

    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    model.train()
    done, probes = 0, []
    for i in tqdm(range(steps), desc="warm-up", leave=False, disable=None):
        loss = sft_step_loss(model, tokenizer, data[i * batch : (i + 1) * batch])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        done = i + 1
        if target is not None and done % probe_every == 0:
            probes.append((done, probe()))
            if probes[-1][1] >= target:
                break
    model.eval()
    record = {"steps_done": done, "steps_max": steps, "mix": None if from_task else mix,
              "examples": "task.warmup_examples" if from_task else "carry-free + mix",
              "target": target, "probes": probes, "seed": seed}  # fmt: skip
    if callable(getattr(task, "prompt_class", None)):
        record.update(final_rates(model, tokenizer, task, probe_len, seed, final_per_class))
    check_out(out)  # again before the folder is replaced: it may have changed meanwhile
    # write beside, then rename: a kill mid-save never leaves a half-written folder at ``out``
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    save_policy(model.cpu(), tokenizer, tmp)
    (tmp / "warmup.json").write_text(json.dumps(record, indent=1))
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return out


def sampled_pass_rate(
    model, tokenizer, problems: Sequence[Problem], max_new_tokens: int, seed: int, n: int = 8
) -> float:
    """Mean 0/1 reward of ``n`` samples (temperature 1) per problem, with a seeded sampler."""
    from recipe.generate import TorchGenerator

    gen = TorchGenerator(
        model, eos_ids=[tokenizer.eos_token_id], pad_id=tokenizer.pad_token_id, fp32_head=True,
        seed=seed, copy=False,
    )  # fmt: skip
    total = 0.0
    for group, p in zip(
        gen.generate(encode(tokenizer, problems), n, max_new_tokens=max_new_tokens),
        problems,
        strict=True,
    ):
        for c in group:
            body = c.tokens if c.truncated else c.tokens[:-1]
            total += reward(tokenizer.decode(body), p.answer, not c.truncated)
    return total / (n * len(problems))


def _task_pass_rates(
    model, tokenizer, prompts: Sequence[Prompt], task, max_new_tokens: int, seed: int, n: int = 8
) -> tuple[float, list[float]]:
    """(mean, per-prompt means) of the task's reward over ``n`` seeded samples per prompt,
    scored as the trainer scores (:func:`recipe.train.score`: no EOS, no reward)."""
    from recipe.generate import TorchGenerator

    gen = TorchGenerator(
        model, eos_ids=[tokenizer.eos_token_id], pad_id=tokenizer.pad_token_id, fp32_head=True,
        seed=seed, copy=False,
    )  # fmt: skip
    ids = [tokenizer(p.text)["input_ids"] for p in prompts]
    means = []
    for group, p in zip(gen.generate(ids, n, max_new_tokens=max_new_tokens), prompts, strict=True):
        total = 0.0
        for c in group:
            finished = not c.truncated
            if finished or getattr(task, "score_truncated", False):
                body = c.tokens[:-1] if finished else c.tokens
                total += float(task.reward(p, tokenizer.decode(body, skip_special_tokens=True)))
        means.append(total / n)
    return sum(means) / max(1, len(means)), means


def final_rates(
    model, tokenizer, task, max_new_tokens: int, seed: int, per_class: int = 256, n: int = 8
) -> dict:
    """The warm-up's end state per prompt class: ``final_by_class`` (sampled pass rate on up to
    ``per_class`` training prompts of each class, ``n`` samples each), ``final_prompts_by_class``
    and ``final_pass_rate`` (the first 256 training prompts, all classes, as the probes)."""
    train = task.train_prompts()
    chosen: dict[str, list[Prompt]] = {}
    for p in train:
        cls = task.prompt_class(p)
        if cls is not None and len(chosen.setdefault(str(cls), [])) < per_class:
            chosen[str(cls)].append(p)
    names = sorted(chosen)
    flat = [p for name in names for p in chosen[name]]
    # one seeded sampling pass for the classes, one (as the probes) for the overall rate; a
    # task whose prompt_class says None for every prompt (the Task default) has no classes
    means = (
        _task_pass_rates(model, tokenizer, flat, task, max_new_tokens, seed + 5, n)[1]
        if flat
        else []
    )
    by_class, at = {}, 0
    for name in names:
        k = len(chosen[name])
        by_class[name] = sum(means[at : at + k]) / k
        at += k
    overall, _ = _task_pass_rates(model, tokenizer, train[:256], task, max_new_tokens, seed, n)
    return {
        "final_pass_rate": overall,
        "final_by_class": by_class,
        "final_prompts_by_class": {name: len(chosen[name]) for name in names},
    }


def greedy_pass_rate(model, tokenizer, problems: Sequence[Problem], max_new_tokens: int) -> float:
    """Greedy exact-match rate (a quick check of a checkpoint; training uses sampling)."""
    ids = encode(tokenizer, problems)
    with torch.no_grad():
        seqs = [list(s) for s in ids]
        done = [False] * len(seqs)
        outs: list[list[int]] = [[] for _ in seqs]
        for _ in range(max_new_tokens):
            p_ids, p_mask = left_pad(seqs, tokenizer.pad_token_id, model_device(model))
            h = body(model, p_ids, p_mask, positions(p_mask))[:, -1]
            nxt = head_logits(model, h, True).argmax(-1).tolist()
            for i, t in enumerate(nxt):
                if not done[i]:
                    outs[i].append(t)
                    done[i] = t == tokenizer.eos_token_id
                seqs[i].append(t)
    hits = 0.0
    for p, o in zip(problems, outs, strict=True):
        finished = bool(o) and o[-1] == tokenizer.eos_token_id
        text = tokenizer.decode(o[:-1] if finished else o)
        hits += reward(text, p.answer, finished)
    return hits / len(problems)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m recipe.model",
        description="Build the tiny Llama policy and run the deterministic supervised warm-up.",
    )
    parser.add_argument("--out", required=True, help="folder for the Hugging Face checkpoint")
    parser.add_argument("--digits", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300, help="warm-up optimizer steps")
    parser.add_argument(
        "--target", type=float, help="stop once the sampled pass rate reaches this (steps = cap)"
    )
    parser.add_argument("--mix", type=float, default=0.25, help="share of full problems per batch")
    parser.add_argument("--train-prompts", type=int, default=20000, help="pool to draw them from")
    parser.add_argument("--val-prompts", type=int, default=500, help="held out (never drawn)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args(argv)
    for flag, value, low in (
        ("--digits", args.digits, 1),
        ("--steps", args.steps, 0),
        ("--train-prompts", args.train_prompts, 1),
        ("--val-prompts", args.val_prompts, 1),
        ("--threads", args.threads, 1),
    ):
        if value < low:
            parser.error(f"argument {flag}: must be at least {low}, got {value}")
    if not 0 <= args.mix <= 1:
        parser.error(f"argument --mix: a share in [0, 1], got {args.mix}")
    if args.target is not None and not 0 < args.target <= 1:
        parser.error(f"argument --target: a pass rate in (0, 1], got {args.target}")
    if args.train_prompts + args.val_prompts > 10 ** (2 * args.digits):
        parser.error(
            f"--train-prompts + --val-prompts = {args.train_prompts + args.val_prompts} exceed the "
            f"{10 ** (2 * args.digits)} distinct {args.digits}-digit problems; lower them"
        )
    try:
        check_out(Path(args.out))
    except ConfigError as err:
        parser.error(f"argument --out: {err}")
    torch.set_num_threads(args.threads)
    train, val = split_problems(args.digits, args.train_prompts, args.val_prompts, args.seed)
    out = warm_up(
        args.out, digits=args.digits, steps=args.steps, mix=args.mix, pool=train,
        target=args.target, seed=args.seed,
    )  # fmt: skip
    model, tok = load_policy(out)
    easy = easy_problems(args.digits, 500, args.seed + 2)
    print(
        f"saved {out}: greedy pass rate {greedy_pass_rate(model, tok, val, args.digits + 2):.3f} "
        f"(full distribution), {greedy_pass_rate(model, tok, easy, args.digits + 2):.3f} "
        "(carry-free)"
    )


if __name__ == "__main__":
    main()
