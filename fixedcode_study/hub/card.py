"""The model card (README.md) of an exported folder, filled from the job's record.

Every number comes from results.json (the job's and, for the seed table, its sibling jobs' in the
same study folder: same input, model and data, status completed); nothing is typed in by hand. A
checkpoint exported without its job directory gets a card that says its record was not found.
"""

from __future__ import annotations

import json
import statistics
from typing import Any

import yaml

from ..accounting import input_split
from ..record.checkpoint import Checkpoint
from ..record.jobdir import COMPLETED, RESULTS_FILE, JobDir

INPUT_PROPS_SHOWN = ("type", "code_type", "map", "hidden", "activation", "rank", "trainable", "init_rms",
                     "code_width", "minimal_code_width", "values", "scale", "tile_factor", "injective",
                     "code_injective", "nonconstant_bits", "hamming_min", "matrix_seed", "min_weight", "affine",
                     "gf2_rank", "min_row_weight", "min_col_weight", "matrix_sha256", "permutation_seed", "extra",
                     "code_seed", "spelling_bits", "id_bits", "max_ngram", "hashes", "collided_tokens",
                     "vocabulary_sha256", "code_sha256")
SPLIT_KEYS = ("input_token_specific_trainable", "input_shared_trainable")  # results.json params (accounting.py)
FINAL_SHOWN = ("val_loss", "val_ppl", "val_bpb")
OUTPUT_PROPS_SHOWN = ("type", "code", "code_type", "code_width", "scale_mode", "scale", "code_rank", "pairs",
                      "free_steps_mean", "forced_bits", "logit_rank_bound", "tied_to")
LICENSE = "mit"  # the workbench's (pyproject.toml); the card's weights are trained by its code on the named corpus
TABLE_FREE_HEADS = ("fixed", "bitchain")  # no trainable parameter of the head depends on V (heads/)
TRAINED_INPUTS = ("learned", "learned_lowdim", "learned_lowrank", "code_map")  # a trainable input parameter


def _head_sentence(kind: str, code: Any, stored: bool = False) -> str:
    """What the output head is, in one sentence (the untied one as every card before heads said it).
    stored: the head's code is a table in the weights (a Gaussian code), not computed from config.json."""
    where = ("held in the weights as `lm_head.code_values`" if stored else
             "computed by `modeling_fixedcode.py` from `config.json`'s `output_head`")
    if kind == "tied":
        return ("the output head is the input table itself (**tied**, `tie_word_embeddings`: the one V x d table "
                "is trained by both uses), as in the original SmolLM2.")
    if kind == "fixed":
        return (f"the output head is **table-free on the output side**: logits = C (P h), C the fixed V x K code "
                f"`{code}` (never trained; {where}), "
                "P a trainable K x d projection, so no trainable parameter depends on the vocabulary and the "
                "logits have rank at most K.")
    if kind == "bitchain":
        return (f"the output head is **table-free on the output side**: a bit chain, p(v | h) = prod_k "
                f"p(b_k(v) | b_<k(v), h) over the fixed bits of `{code}`, a shared bilinear conditional (no "
                "trainable parameter depends on the vocabulary), exactly normalised over the vocabulary; its "
                f"code {where}.")
    return "the output head is a trainable, untied projection."


def _input_fact(key: str, inp: dict[str, Any], props: dict[str, Any]) -> Any:
    """One setting of the input: what the built input reported (input_props), else its config."""
    value = props.get(key)
    if value is None:
        value = inp.get(key)
        if key == "code_type":  # a code_map's config names its code by its settings
            code = inp.get("code")
            value = code.get("type") if isinstance(code, dict) else code
    return value


def _code_phrase(code_type: Any, width: Any) -> str:
    """What a fixed code is computed from, with its width."""
    k = f"K = {_fmt(width)} coordinates" if width is not None else "K coordinates"
    if code_type == "spelling":
        return (f"a **fixed code of the token's spelling** (`spelling`: hashed character n-grams of its vocabulary "
                f"string, with the ID's bits where two spellings collide; {k})")
    return f"a **fixed code of the token ID** (`{code_type}`, {k})"


def input_sentence(inp: dict[str, Any], props: dict[str, Any], input_code: dict[str, Any] | None) -> str:
    """What a non-learned input is, from its properties (else its config) and the folder's `input_code`
    (hub/codes.py input_code_spec): which parts are fixed, which are trained, which are token-specific,
    and where the folder holds each. No trailing punctuation: the head's sentence follows."""
    kind = _input_fact("type", inp, props)
    width = _input_fact("code_width", inp, props)
    stored = (input_code or {}).get("kind") == "table"
    where = ("held in the weights as the V x K table `model.embed_tokens.code_values`" if stored else
             "computed on the fly by `modeling_fixedcode.py` from `config.json`'s `input_code`")
    if kind == "code_map":
        hidden, activation = _input_fact("hidden", inp, props), _input_fact("activation", inp, props)
        if _input_fact("map", inp, props) == "mlp":
            layers = (f"a trainable **MLP shared by every token** (K -> {_fmt(hidden)} -> d_model: a biased hidden "
                      f"layer, {activation}, an unbiased output layer; `model.embed_tokens.map.fc_in`, "
                      "`model.embed_tokens.map.proj`)")
        else:
            layers = ("a trainable **linear map shared by every token** (K x d_model, no bias; "
                      "`model.embed_tokens.map.proj`)")
        return (f"A decoder whose input is {_code_phrase(_input_fact('code_type', inp, props), width)}, never "
                f"trained and {where}, fed untiled to {layers}: the map's weights are trainable parameters of the "
                "folder's model, and no trainable input parameter belongs to one token (no input table)")
    if kind == "learned_lowrank":
        rank = _input_fact("rank", inp, props)
        state = "trainable" if _input_fact("trainable", inp, props) is not False else "frozen"
        return (f"A decoder whose input is a **learned low-rank table**: a {state} V x {_fmt(rank)} table (one row per "
                f"token: token-specific; `model.embed_tokens.code_values`) times a {state} {_fmt(rank)} x d_model "
                "linear map shared by every token (no bias; `model.embed_tokens.map.proj`), both parameters of the "
                "folder's model, so no V x d input table")
    if kind == "learned_lowdim":
        return (f"A decoder whose input is a **learned low-dimensional table**: a V x {_fmt(width)} table trained "
                "with the model (one row per token: token-specific), tiled to d_model with no projection; the "
                "folder holds the trained table as `model.embed_tokens.code_values`, a buffer (it is not trained "
                "further in transformers)")
    return (f"A decoder whose input is {_code_phrase(kind, width)} tiled to d_model, {where} "
            "(no trainable input table, no projection)")


def _split_sentence(split: dict[str, Any]) -> str:
    """The input's trainable parameters, token-specific and shared (accounting.input_split)."""
    if not all(isinstance(split.get(k), int) for k in SPLIT_KEYS):
        return ""
    specific, shared = (split[k] for k in SPLIT_KEYS)
    return (f" Trainable input parameters: {_fmt(specific)} token-specific (one row per token ID) + "
            f"{_fmt(shared)} shared by every token.")


def _fmt(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    return str(value)


def _table(header: tuple[str, ...], rows: list[tuple[Any, ...]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(_fmt(v) for v in row) + " |" for row in rows)]


def sibling_records(job: JobDir, record: dict[str, Any]) -> list[dict[str, Any]]:
    """Completed jobs of the same study folder with this job's input, model and data (all seeds)."""
    same = ("input", "model")
    found = []
    for path in sorted(job.path.parent.glob(f"*/{RESULTS_FILE}")):
        try:
            other = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if (other.get("status") == COMPLETED and all(other.get(k) == record.get(k) for k in same)
                and (other.get("data") or {}).get("cache_key") == (record.get("data") or {}).get("cache_key")):
            found.append(other)
    return sorted(found, key=lambda r: (r.get("seed") is None, r.get("seed")))


def _load_snippet(fixed: bool, context: Any, table_free_head: bool = False, input_kind: str | None = None) -> list[str]:
    """The card's loading code (tests/hub/test_hub_users.py runs it as written) and what a user should know.
    input_kind: the input's type, for what `get_input_embeddings().weight` is (fixed: a non-learned input)."""
    weight = {"code_map": "the V x d matrix of input vectors (the fixed code through the map's current weights)",
              "learned_lowrank": "the V x d matrix of input vectors (the low-rank table through its map)",
              "learned_lowdim": "the V x d matrix of input vectors (the stored table, tiled)"}.get(
        input_kind or "", "the fixed V x d code")
    remote = ", trust_remote_code=True" if fixed or table_free_head else ""
    lines = ["```python", "from transformers import AutoModelForCausalLM, AutoTokenizer",
             f"model = AutoModelForCausalLM.from_pretrained(FOLDER{remote})",
             "tokenizer = AutoTokenizer.from_pretrained(FOLDER)", "```", ""]
    if fixed:
        lines += ["The tokenizer needs no custom code. The model does: without `trust_remote_code=True` transformers "
                  "builds a plain Llama and stops at `model.embed_tokens.weight`, which this folder holds as an empty "
                  "(vocabulary x 0) placeholder, instead of loading with a random input table. "
                  f"`get_input_embeddings().weight` is {weight}, computed when read (not a parameter).", ""]
    elif table_free_head:
        lines += ["The tokenizer needs no custom code. The model does: without `trust_remote_code=True` transformers "
                  "builds a plain Llama and stops at `lm_head.weight`, which this folder holds as an empty "
                  "(vocabulary x 0) placeholder, instead of loading with a random output table.", ""]
    lines.append(f"Trained on contexts of {_fmt(context)} tokens (`max_position_embeddings`). As for any Llama, "
                 "`generate` does not stop there; positions past it were never trained.")
    lines += ["", f"Scoring it with lm-evaluation-harness: `lm_eval --model hf` stops with a bare `AssertionError` on "
              f"any task whose continuation alone is longer than {_fmt(context)} tokens (a PIQA solution can be). "
              "`fixedcode evaluate hf=FOLDER` runs lm-eval's own `hf` model with the workbench's rule for such a "
              "continuation (its last tokens are scored, the rest moves into the context) and states the rule in "
              "its record; `max_length=` in `--model_args` instead scores positions the model never trained on."]
    if fixed:
        lines += ["", "The vocabulary is part of the input: `resize_token_embeddings` is refused (a fixed code, or "
                  "a table the folder holds outside `nn.Embedding`, is defined for its vocabulary only)."]
    return lines


def model_card(ckpt: Checkpoint, record: dict[str, Any] | None, job: JobDir | None, hf_config: Any) -> str:
    inp = ckpt.config.get("input") or {}
    props = ckpt.config.get("input_props") or {}
    kind = props.get("type") or inp.get("type")
    fixed = kind != "learned"
    name = inp.get("name") or props.get("type")
    out = ckpt.config.get("output") or {}
    out_props = ckpt.config.get("output_props") or {}
    head = out_props.get("type") or out.get("type") or "untied"
    head_name = out.get("name") or head
    code = out_props.get("code") or out.get("code")
    params = (record or {}).get("params") or {}
    split = params if all(k in params for k in SPLIT_KEYS) else input_split(ckpt.model)  # the checkpoint's own
    frozen_from = (f"its values from init `{props.get('init')}` of `{props['init_code']}`" if props.get("init_code")
                   else "random values")
    table = (f"a **frozen input table** (never trained: {frozen_from})" if props.get("trainable") is False
             else "a **learned input table**")
    described = input_sentence(inp, props, getattr(hf_config, "input_code", None)) + "; " if fixed else ""
    if head == "untied":  # every learned card before heads could be exported said exactly this
        tags, title = f"[fixedcode-study, {name}]", f"`{name}` input"
        about = ((described + "the output head is a trainable, untied projection.") if fixed else
                 f"The control: a decoder with {table}, as a plain `LlamaForCausalLM` (untied head).")
    else:
        tags, title = f"[fixedcode-study, {name}, {head_name}]", f"`{name}` input, `{head_name}` head"
        about = (described if fixed else
                 f"A decoder with {table}" + (", as a plain `LlamaForCausalLM`; " if head == "tied"
                                              else "; ")) + _head_sentence(
            head, code, ((getattr(hf_config, "output_head", None) or {}).get("code") or {}).get("kind") == "table")
    if fixed:
        about += _split_sentence(split)
    lines = ["---", "library_name: transformers", "pipeline_tag: text-generation", f"license: {LICENSE}",
             f"tags: {tags}", *_model_index(title, (record or {}).get("eval") or {}), "---", "",
             f"# fixedcode-study: {title}, seed {ckpt.config.get('seed')}", "", about,
             "", "Written by `fixedcode export` from the workbench checkpoint "
             f"`{ckpt.path}`.", "", *_load_snippet(fixed, ckpt.model.config.max_seq_len, head in TABLE_FREE_HEADS, kind), ""]
    model = ckpt.config.get("model") or {}
    lines += ["## Architecture", "", *_table(("setting", "value"), [
        (k, model.get(k)) for k in ("name", "vocab_size", "n_layer", "d_model", "n_head", "n_kv_head", "d_ff",
                                    "max_seq_len", "rope_theta") if k in model]), ""]
    lines += ["## Input", "", *_table(("property", "value"), [(k, props[k]) for k in INPUT_PROPS_SHOWN
                                                              if props.get(k) is not None]), ""]
    if head != "untied":
        lines += ["## Output head", "", *_table(("property", "value"), [
            (k, out_props[k]) for k in OUTPUT_PROPS_SHOWN if out_props.get(k) not in (None, [])]), ""]
    if record is None:
        lines += ["## Training record", "", f"The job's {RESULTS_FILE} was not found beside this checkpoint, so "
                  "the card carries no parameter accounting or metrics from it (a count above is the checkpoint's "
                  "own).", ""]
        return "\n".join(lines)
    lines += ["## Parameters", "", *_table(("group", "parameters"), [(k, v) for k, v in params.items()]), "",
              f"`trainable` counts what the optimizer updates; `input_trainable` is {_fmt(params.get('input_trainable'))} "
              + ("for a fixed code." if kind not in TRAINED_INPUTS else
                 "for this input" + (f" ({_fmt(split[SPLIT_KEYS[0]])} token-specific + {_fmt(split[SPLIT_KEYS[1]])} "
                                     "shared)." if all(k in split for k in SPLIT_KEYS) else ".")), ""]
    data = record.get("data") or {}
    lines += ["## Data and training", "", *_table(("fact", "value"), [
        ("corpus", data.get("name")), ("data cache key", data.get("cache_key")),
        ("corpus train tokens", data.get("train_tokens")), ("tokens trained", record.get("tokens_seen")),
        ("optimizer steps", record.get("steps")), ("status", record.get("status")),
        ("training code sha", ((record.get("fingerprint") or {}).get("code_sha") or "")[:12]),
        ("job fingerprint", ((record.get("fingerprint") or {}).get("sha") or "")[:16]),
    ]), ""]
    final = record.get("final") or {}
    lines += ["## Results (held-out split of the corpus)", "",
              *_table(("metric", "this model"), [(k, final.get(k)) for k in FINAL_SHOWN if k in final]), ""]
    siblings = sibling_records(job, record) if job else []
    if len(siblings) > 1:
        rows = [(s.get("seed"), *((s.get("final") or {}).get(k) for k in FINAL_SHOWN)) for s in siblings]
        lines += [f"Every completed seed of `{name}` in study `{record.get('sweep')}` (same model and data):", "",
                  *_table(("seed", *FINAL_SHOWN), rows)]
        cols = list(zip(*rows))[1:]
        if all(all(isinstance(v, (int, float)) for v in c) for c in cols):
            lines.append("| mean ± sd | " + " | ".join(f"{statistics.mean(c):.4g} ± {statistics.stdev(c):.2g}"
                                                      for c in cols) + " |")
        lines.append("")
    lines += _downstream(record.get("eval") or {})
    return "\n".join(lines)


def _model_index(title: str, evaluation: dict[str, Any]) -> list[str]:
    """The Hub's model-index metadata (its leaderboard and eval widgets read it) for a full-set
    evaluation only: a smoke test (eval.limit) is never declared as the model's result."""
    tasks = evaluation.get("tasks") or {}
    if not tasks or (evaluation.get("settings") or {}).get("limit") is not None:
        return []
    results = [{"task": {"type": "text-generation"}, "dataset": {"name": task, "type": task},
                "metrics": [{"type": m, "name": m, "value": v} for m, v in metrics.items()
                            if "_stderr" not in m and isinstance(v, (int, float))]}
               for task, metrics in tasks.items()]
    text = yaml.safe_dump({"model-index": [{"name": f"fixedcode-study {title}".replace("`", ""),
                                            "results": [r for r in results if r["metrics"]]}]}, sort_keys=False)
    return text.rstrip("\n").splitlines()


def _downstream(evaluation: dict[str, Any]) -> list[str]:
    """The lm-eval scores with what they rest on: samples per task, stderr, shots, and a smoke-test
    warning when eval.limit cut the tasks (the analysis flags such a limit; the card must too)."""
    tasks = evaluation.get("tasks") or {}
    if not tasks:
        return []
    settings = evaluation.get("settings") or {}
    samples = evaluation.get("n_samples") or {}
    limit = settings.get("limit")
    lines = ["## Downstream (lm-evaluation-harness)", ""]
    if limit is not None:
        lines += [f"> **A smoke test, not a result:** each task was scored on at most {_fmt(limit)} examples "
                  f"(`eval.limit={limit}`), not on its full set; these numbers are not comparable with published "
                  "scores.", ""]
    lines += [f"lm-evaluation-harness {evaluation.get('lm_eval_version') or '(version not recorded)'}, suite "
              f"`{evaluation.get('suite')}`, {_fmt(settings.get('num_fewshot'))}-shot; ± is lm-eval's stderr "
              "(— where it gives none).", ""]
    rows = [(t, m, v, ms.get(_stderr_key(m)), samples.get(t)) for t, ms in tasks.items() for m, v in ms.items()
            if "_stderr" not in m and v is not None]
    return lines + [*_table(("task", "metric", "value", "± stderr", "examples"),
                            [(t, m, v, "—" if se is None else se, "—" if n is None else n) for t, m, v, se, n in rows]),
                    ""]


def _stderr_key(metric: str) -> str:
    """lm-eval's name for a metric's stderr: "acc" -> "acc_stderr", "exact_match,strict" -> "exact_match_stderr,strict"."""
    base, _, filt = metric.partition(",")
    return f"{base}_stderr" + (f",{filt}" if filt else "")
