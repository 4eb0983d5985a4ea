"""A minimal ScaleRL reference trainer (torch + transformers): ``python -m recipe.train``.

Modules, one job each: ``config`` (the config dataclass, YAML + ``--set``), ``tasks`` (the Task
plug-in and the built-in tasks: addition with its prompts, verifier and split; GSM8K-format math;
user tasks), ``forward`` (device, precision, FP32 head, chunked log-probs), ``model`` (tiny
Llama, tokenizer, warm-up, HF folders), ``generate`` (generation interface, torch sampler),
``length_control``, ``run`` and ``cli`` (plumbing and command line beside the loop), ``loss``
(CISPO/DAPO/GRPO/GSPO, aggregation), ``advantages`` (group baseline, normalization, zero-variance
filter), ``curriculum`` (prompt pool, no-positive-resampling), ``weights`` and
``weight_broadcast`` (what a push carries; the one-group NCCL push), ``versions`` (the supported
torch and vLLM), ``train`` (the loop). The trainer does not import ``rlcurves``; rlcurves reads
its ``log.jsonl`` as a file format.
"""
