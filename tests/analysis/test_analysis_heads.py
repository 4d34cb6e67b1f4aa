"""The analysis of an output-head study: the head names the variant, the untied head stays the
baseline, and the report says what each head is (its parameters and its logit rank bound)."""

from __future__ import annotations

from pathlib import Path

from helpers import analysis as fx

from fixedcode_study.analysis.read.runs import load_run_dirs
from fixedcode_study.analysis.report import write_report
from fixedcode_study.analysis.tables.heads import heads_table

HEAD_BPB = {("learned", "untied"): 1.90, ("learned", "tied"): 1.93, ("binary16", "untied"): 1.96,
            ("binary16", "bitchain"): 2.10}
HEAD_PARAMS = {"untied": (fx.HEAD, fx.HEAD), "tied": (0, 0), "bitchain": (8_840, 0)}


def build_heads_sweep(root: Path) -> Path:
    sweep = root / "multirun" / "output_side"
    for (name, output), bpb in HEAD_BPB.items():
        head, token_head = HEAD_PARAMS[output]
        for i, seed in enumerate(fx.SEEDS):
            params = fx.params_for(name)
            params.update(head=head, head_trainable=head, trainable=params["trainable"] - fx.HEAD + head,
                          total=params["total"] - fx.HEAD + head,
                          token_specific_trainable=params["input_trainable"] + token_head)
            fx.write_job(sweep, name, seed, val_ppl=2 ** (4 * (bpb + 0.01 * i)), val_bpb=bpb + 0.01 * i, crn=True,
                         extra_key=f",output={output}",
                         config_extra={"output": {"name": output, "type": output}},
                         results_extra={"output": output, "params": params,
                                        "output_props": {"type": output, "code": None if output != "bitchain" else "binary16",
                                                         "code_width": 16 if output == "bitchain" else None,
                                                         "logit_rank_bound": None if output == "bitchain" else fx.D_MODEL}})
    return sweep


def md_rows(path: Path) -> list[list[str]]:
    lines = [l for l in path.read_text().splitlines() if l.startswith("|")][2:]
    return [[c.strip() for c in l.strip("|").split("|")] for l in lines]


def test_the_head_names_the_variant_and_the_untied_head_is_the_baseline(tmp_path):
    study = load_run_dirs([build_heads_sweep(tmp_path)])
    order = study.jobs.drop_duplicates("variant").sort_values("variant_order")["variant"].tolist()
    assert order == ["learned (output=untied)", "learned (output=tied)", "binary16 (output=untied)",
                     "binary16 (output=bitchain)"]
    assert not any("output" in n for n in study.notes)  # the head is labelled, not a confounding setting
    write_report(study, tmp_path / "report")
    compared = {r[0]: r for r in md_rows(tmp_path / "report" / "tables" / "comparisons.md")}
    assert {"learned (output=tied) − learned (output=untied)", "binary16 (output=bitchain) − learned (output=untied)",
            "binary16 (output=untied) − learned (output=untied)"} <= set(compared)
    params = {r[0]: r for r in md_rows(tmp_path / "report" / "tables" / "params.md")}
    assert params["learned (output=untied)"][-1] == "baseline"
    assert params["learned (output=tied)"][-1] != "baseline"
    assert params["binary16 (output=bitchain)"][5] == "0"  # token-specific trainable: none at all
    heads = {r[0]: r for r in md_rows(tmp_path / "report" / "tables" / "output_heads.md")}
    assert heads["binary16 (output=bitchain)"][1:5] == ["bitchain", "binary16", "16", "—"]
    assert heads["learned (output=tied)"][5] == "0"  # a tied head owns no parameter
    assert "## Output heads" in (tmp_path / "report" / "report.md").read_text()


def test_a_study_of_untied_heads_only_has_no_head_table_or_labels(tmp_path):
    study = load_run_dirs([fx.build_main_sweep(tmp_path)])
    assert set(study.jobs["variant"]) >= {"learned", "binary16", "gf2"}
    assert heads_table(study) is None
