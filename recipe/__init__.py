"""A minimal ScaleRL reference trainer (torch + transformers): ``python -m recipe.train``.

Modules, one job each: ``config`` (the config dataclass, YAML + ``--set``), ``task`` (addition
prompts, verifier, split), ``model`` (tiny Llama, tokenizer, FP32 head, warm-up), ``generate``
(generation interface, torch sampler), ``loss`` (CISPO/DAPO/GRPO/GSPO, aggregation),
``advantages`` (group baseline, normalization, zero-variance filter), ``curriculum`` (prompt pool,
no-positive-resampling), ``train`` (the loop). The trainer does not import ``rlcurves``; rlcurves
reads its ``log.jsonl`` as a file format.
"""
