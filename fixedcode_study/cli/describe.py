"""`python -m fixedcode_study.describe [overrides]`: parameter accounting and input properties as JSON.

The model is built on the meta device (shapes only, no memory), so `model=paper_1p7b` is instant.
  python -m fixedcode_study.describe model=paper_1p7b input=binary16      # one combination, JSON
  python -m fixedcode_study.describe --inputs model=cpu_tiny              # every conf/input variant, markdown
  python -m fixedcode_study.describe --ladder                             # every conf/model preset, markdown
`--ladder` and `--inputs` take further overrides applied to every row (e.g. model.vocab_size=32768).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from ..accounting import flops_per_token, parameter_groups
from ..build import build_model, flop_matched_tokens
from ..config import available, compose
from ..errors import ConfigError
from ..model import ModelConfig
from ..training.plan import recipe_summary

FIXED_REFERENCE = "binary16"            # the ladder's "fixed input" column
MATCHED_REFERENCE = "binary16_sizematched"


def describe(cfg: DictConfig) -> dict[str, Any]:
    with torch.device("meta"):
        model = build_model(cfg.model, cfg.input, seed=int(cfg.seed))
    params = parameter_groups(model)
    props = model.input.properties()
    preset = {k: v for k, v in OmegaConf.to_container(cfg.model, resolve=True).items() if k not in ("name", "source")}
    out = {
        "input": cfg.input.name,
        "model": cfg.model.name,
        "model_source": cfg.model.get("source"),
        "architecture": model.config.to_dict(),  # what was built (size matching may change the preset)
        "params": params,
        "input_table_share_of_trainable": params["input_trainable"] / params["trainable"],
        "input_props": props,
        "init": model.init_record(),  # the per-stream generator seeds this run's init draws from
        "recipe": recipe_summary(cfg),  # tokens, steps, batch split, training FLOPs
    }
    if props.get("flop_match"):
        seq_len = int(cfg.train.seq_len)
        baseline = flops_per_token(ModelConfig.from_mapping(cfg.model), seq_len)["total"]
        own = flops_per_token(model.config, seq_len)["total"]
        tokens = flop_matched_tokens(cfg.model, cfg.input, int(cfg.train.tokens), seq_len)
        out["flop_match"] = {
            "target": props["flop_match"],
            "flops_per_token (learned input)": baseline,
            "flops_per_token (this model)": own,
            "tokens_budget": int(cfg.train.tokens),
            "tokens_flop_matched": tokens,
            "training_flops_ratio_vs_learned": tokens * own / (int(cfg.train.tokens) * baseline),
        }
    if props.get("size_match"):
        out["preset_architecture"] = preset
        out["size_match"] = {
            "target_trainable (learned input)": props["size_match_target_trainable"],
            "unmatched_trainable (this input, preset body)": props["size_match_unmatched_trainable"],
            "matched_trainable": params["trainable"],
            "relative_error": props["size_match_rel_error"],
            "changed": {k: [props[f"size_match_base_{k}"], props[f"size_match_{k}"]] for k in ("n_layer", "d_ff")
                        if props[f"size_match_base_{k}"] != props[f"size_match_{k}"]},
        }
    return out


def describe_overrides(overrides: list[str]) -> dict[str, Any]:
    return describe(compose(overrides))


def _n(x: int) -> str:
    return f"{x:,}"


def ladder_rows(extra: list[str] | None = None) -> list[dict[str, Any]]:
    """One row per model preset: architecture and trainable counts for learned vs fixed inputs."""
    rows = []
    for model in available("model"):
        base = [f"model={model}", *(extra or [])]
        learned = describe_overrides([*base, "input=learned"])
        fixed = describe_overrides([*base, f"input={FIXED_REFERENCE}"])
        matched = describe_overrides([*base, f"input={MATCHED_REFERENCE}"])
        arch = learned["architecture"]
        rows.append({
            "model": model, "source": learned["model_source"], "arch": arch,
            "learned": learned["params"], "fixed": fixed["params"], "matched_arch": matched["architecture"],
            "matched": matched["params"],
        })
    return sorted(rows, key=lambda r: r["learned"]["trainable"])


def ladder_markdown(extra: list[str] | None = None) -> str:
    lines = [
        "| preset | layers | d_model | heads (kv) | d_ff | V | trainable, learned input | trainable, fixed input "
        "| input table share | size-matched fixed (d_ff → trainable) | source |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in ladder_rows(extra):
        a = r["arch"]
        heads = f"{a['n_head']} ({a['n_kv_head'] or a['n_head']})"
        share = r["learned"]["input_trainable"] / r["learned"]["trainable"]
        lines.append(
            f"| {r['model']} | {a['n_layer']} | {a['d_model']} | {heads} | {a['d_ff']} | {_n(a['vocab_size'])} "
            f"| {_n(r['learned']['trainable'])} | {_n(r['fixed']['trainable'])} | {share:.1%} "
            f"| {r['matched_arch']['d_ff']} → {_n(r['matched']['trainable'])} | {r['source']} |"
        )
    lines.append("")
    lines.append(f"Fixed input = {FIXED_REFERENCE} (0 trainable input parameters; every fixed code gives the same "
                 f"counts). Size-matched = {MATCHED_REFERENCE}: d_ff widened until trainable is within 1% of the "
                 "learned column. Untied heads throughout.")
    return "\n".join(lines)


def _bit_ranges(indices: list[int]) -> str:
    """[12, 13, 14, 15] -> '12-15'; [1, 3, 4] -> '1, 3-4'."""
    runs: list[list[int]] = []
    for i in indices:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def _stat(value: Any, fmt: str) -> str:
    return "–" if value is None else format(value, fmt)


def inputs_markdown(extra: list[str] | None = None) -> str:
    """Every conf/input variant on one model preset: parameters, FLOPs and the code's properties."""
    lines = ["| input | type | trainable | input trainable | body | head | FLOPs/token | code width "
             "| varying bits | bit entropy mean / min | Hamming mean / min | input RMS | notes |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    model = None
    for name in available("input"):
        d = describe_overrides([f"input={name}", *(extra or [])])
        p, props, model = d["params"], d["input_props"], d["model"]
        notes = []
        if props.get("constant_bits"):
            notes.append(f"constant bits {_bit_ranges(props['constant_bits'])}")
        if props.get("size_match"):
            notes.append(f"d_ff {props['size_match_base_d_ff']}→{props['size_match_d_ff']}, "
                         f"{props['size_match_rel_error']:+.3%} vs learned")
        if d.get("flop_match"):
            fm = d["flop_match"]
            notes.append(f"trains {fm['tokens_flop_matched'] / fm['tokens_budget']:.3f}x the tokens "
                         f"(training FLOPs = learned's)")
        if props.get("trainable") is False:
            notes.append("frozen table")
        if props.get("permutation_seed") is not None:
            notes.append(f"IDs permuted (seed {props['permutation_seed']})")
        if props.get("rms_reference"):
            notes.append(f"RMS matched to {props['rms_reference']}")
        if props.get("scale_mode") == "match_init":
            notes.append(f"scale {props['scale']:.4g}")
        if props.get("init_code"):
            notes.append(f"init {props['init']} of {props['init_code']}")
        varying = "–" if props.get("nonconstant_bits") is None else f"{props['nonconstant_bits']}"
        entropy = (f"{_stat(props.get('bit_entropy_mean'), '.3f')} / {_stat(props.get('bit_entropy_min'), '.3f')}"
                   if props.get("bit_entropy_mean") is not None else "–")
        hamming = (f"{_stat(props.get('hamming_mean'), '.2f')} / {_stat(props.get('hamming_min'), 'd')}"
                   if props.get("hamming_mean") is not None else "–")
        learned_table = props.get("trainable") is not None  # only learned tables report trainable
        rms = _stat(props.get("code_rms"), ".4g") + (" (init)" if learned_table else "")
        lines.append(f"| {name} | {props['type']} | {_n(p['trainable'])} | {_n(p['input_trainable'])} "
                     f"| {_n(p['body'])} | {_n(p['head'])} | {_n(d['recipe']['flops_per_token']['total'])} "
                     f"| {props.get('code_width')} | {varying} | {entropy} | {hamming} | {rms} | {'; '.join(notes)} |")
    return (f"Model preset: {model}\n\n" + "\n".join(lines) + "\n\n"
            "Code statistics are over token IDs 0..V-1, before tiling (stats.py): varying bits = code coordinates "
            "not constant over the vocabulary; bit entropy in bits (1 = balanced); Hamming distances between "
            "codewords over all pairs of IDs. input RMS = the first block's input, scaled and tiled (learned "
            "tables: expected at init). FLOPs/token = accounting.flops_per_token (an input lookup costs none).")


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if {"-h", "--help"} & set(args):
        print(__doc__)
        return
    try:
        if "--ladder" in args:
            print(ladder_markdown([a for a in args if a != "--ladder"]))
        elif "--inputs" in args:
            print(inputs_markdown([a for a in args if a != "--inputs"]))
        else:
            print(json.dumps(describe_overrides(args), indent=2))
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
