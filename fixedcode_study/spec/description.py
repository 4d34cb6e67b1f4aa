"""What `fixedcode describe` prints, computed from resolved job specs (no training).

`describe(spec)` is one (model, input, output head) combination as a dict: the architecture as built, parameter
groups, the input's properties, the init seeds, the recipe (tokens, steps, batch split, training
FLOPs) and, for the controls, the size- and FLOP-matching figures. The model is built on the meta
device (shapes only), so the 1.7B preset is instant. `ladder_markdown` (one row per model preset)
and `inputs_markdown` (one row per input variant) tabulate such dicts; the command composes and
resolves the configs (cli/describe.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ..accounting import FLOPS_FORMULA, flops_per_token, matmul_params, parameter_groups
from ..build import build_decoder
from .job import JobSpec

__all__ = ["FIXED_REFERENCE", "LADDER_INPUTS", "MATCHED_REFERENCE", "OUTPUT_INPUTS", "describe", "inputs_markdown",
           "ladder_markdown", "ladder_rows", "output_order", "outputs_markdown", "recipe_summary"]

FIXED_REFERENCE = "binary16"            # the ladder's "fixed input" column
MATCHED_REFERENCE = "binary16_sizematched"
LADDER_INPUTS = {"learned": "learned", "fixed": FIXED_REFERENCE, "matched": MATCHED_REFERENCE}  # role -> input
OUTPUT_INPUTS = ("learned", FIXED_REFERENCE)  # the inputs `describe outputs=true` pairs every head with
OUTPUT_ORDER = ("untied", "tied", "fixed", "fixed_gaussian", "bitchain", "bitchain_gf2")  # reading order; others after


def output_order(names: list[str]) -> list[str]:
    return sorted(names, key=lambda n: (OUTPUT_ORDER.index(n) if n in OUTPUT_ORDER else len(OUTPUT_ORDER), n))


def recipe_summary(spec: JobSpec) -> dict[str, Any]:
    """Tokens, steps, batch split and training FLOPs of a job (describe, sweeps)."""
    plan, mcfg = spec.plan, spec.model.config
    per_token = flops_per_token(mcfg, plan.seq_len, spec.model.head_flops())  # the built model's, its head included
    total = per_token["total"] * plan.tokens  # the budget rounded up to whole steps
    return {
        "tokens_budget": spec.train.tokens,
        "tokens_trained": plan.tokens,
        "steps": plan.max_steps,
        "global_batch_tokens": plan.tokens_per_step,
        "global_batch_sequences": plan.tokens_per_step // plan.seq_len,
        "seq_len": plan.seq_len,
        "micro_batch_per_device": plan.micro_batch,
        "grad_accum": plan.grad_accum,
        "world_size": plan.world,
        "flops_params_N": matmul_params(mcfg),
        "flops_per_token": per_token,
        "flops_total": float(total),
        "flops_total_readable": f"{total:.3e}",
        "flops_method": FLOPS_FORMULA,
    }


def describe(spec: JobSpec) -> dict[str, Any]:
    with torch.device("meta"):
        model = build_decoder(spec.model, seed=spec.seed)
    params = parameter_groups(model)
    props = model.input.properties()
    preset = spec.model.preset.to_dict()
    out = {
        "input": spec.input_name,
        "model": spec.model_name,
        "model_source": spec.model_source,
        "architecture": model.config.to_dict(),  # what was built (size matching may change the preset)
        "params": params,
        "input_table_share_of_trainable": params["input_trainable"] / params["trainable"],
        "input_props": props,
        "output": spec.output_name,
        "output_props": model.head.properties(),
        "init": model.init_record(),  # the per-stream generator seeds this run's init draws from
        "recipe": recipe_summary(spec),  # tokens, steps, batch split, training FLOPs
    }
    if props.get("flop_match"):
        seq_len, budget = spec.plan.seq_len, spec.train.tokens
        baseline = flops_per_token(spec.model.preset, seq_len)["total"]
        own = spec.model.flops_per_token(seq_len)
        tokens = spec.model.flop_matched_tokens(budget, seq_len)
        out["flop_match"] = {
            "target": props["flop_match"],
            "flops_per_token (learned input)": baseline,
            "flops_per_token (this model)": own,
            "tokens_budget": budget,
            "tokens_flop_matched": tokens,
            "training_flops_ratio_vs_learned": tokens * own / (budget * baseline),
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


def _n(x: int) -> str:
    return f"{x:,}"


def ladder_rows(described: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """One row per model preset ({preset: {role: describe(...)}}): architecture and trainable counts
    for the learned, fixed and size-matched inputs (LADDER_INPUTS)."""
    rows = []
    for model, by_role in described.items():
        learned, fixed, matched = (by_role[role] for role in LADDER_INPUTS)
        rows.append({
            "model": model, "source": learned["model_source"], "arch": learned["architecture"],
            "learned": learned["params"], "fixed": fixed["params"], "matched_arch": matched["architecture"],
            "matched": matched["params"],
        })
    return sorted(rows, key=lambda r: r["learned"]["trainable"])


def ladder_markdown(described: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
    """The ladder table from ladder_rows' input: {preset: {role: describe(...)}} (roles: LADDER_INPUTS)."""
    lines = [
        "| preset | layers | d_model | heads (kv) | d_ff | V | trainable, learned input | trainable, fixed input "
        "| input table share | size-matched fixed (d_ff → trainable) | source |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in ladder_rows(described):
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


def inputs_markdown(described: Mapping[str, Mapping[str, Any]]) -> str:
    """Input variants on one model preset ({input name: describe(...)}): parameters, FLOPs and the
    code's properties."""
    lines = ["| input | type | trainable | input trainable | body | head | FLOPs/token | code width "
             "| varying bits | bit entropy mean / min | Hamming mean / min | input RMS | notes |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    model = None
    for name, d in described.items():
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
        if props.get("map"):
            notes.append(f"{props['map']} map" + (f" (hidden {props['hidden']})" if props.get("hidden") else "")
                         + f" over the {props['code_type']} code")
        if props.get("rank"):
            notes.append(f"V x {props['rank']} table times {props['rank']} x d map")
        if props.get("spelling_bits"):
            notes.append(f"spelling: {props['spelling_bits']} n-gram bits + {props['id_bits']} ID bits "
                         f"for {props['collided_tokens']} colliding tokens")
        if p.get("input_shared_trainable"):
            notes.append(f"input trainable: {_n(p['input_token_specific_trainable'])} token-specific + "
                         f"{_n(p['input_shared_trainable'])} shared")
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


def outputs_markdown(described: Mapping[tuple[str, str], Mapping[str, Any]]) -> str:
    """Output heads on one model preset ({(input, output): describe(...)}): what each head costs and
    whether any trainable parameter is left that belongs to one token."""
    lines = ["| input | output | trainable | input trainable | head trainable | token-specific trainable "
             "| FLOPs/token | head code | K | logit rank ≤ |",
             "|---|---|---:|---:|---:|---:|---:|---|---:|---:|"]
    model = None
    for (input_name, output), d in described.items():
        p, o, model = d["params"], d["output_props"], d["model"]
        lines.append(f"| {input_name} | {output} | {_n(p['trainable'])} | {_n(p['input_trainable'])} "
                     f"| {_n(p['head_trainable'])} | {_n(p['token_specific_trainable'])} "
                     f"| {_n(d['recipe']['flops_per_token']['total'])} | {o.get('code') or '–'} "
                     f"| {o.get('code_width') or '–'} | {_stat(o.get('logit_rank_bound'), 'd')} |")
    return (f"Model preset: {model}\n\n" + "\n".join(lines) + "\n\n"
            "Token-specific: trainable parameters in tensors with a dimension of size V (an input table, an untied "
            "head). A tied head owns no parameter (its table is the input's) and needs a learned input. logit rank: "
            "the bound on the rank of the logits over the vocabulary (untied / tied: d_model; fixed: rank of C; "
            "bitchain: – , its log-probabilities are not a linear map of h).")
