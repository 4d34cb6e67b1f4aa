"""The output-head benchmark (`bench-output`): a smoke run of each part at a tiny width, in process.

No timing is asserted (timings on a shared box are noise): every head has a row, every number is
positive and finite, and the counted columns equal the counts from shapes.
"""

from __future__ import annotations

import math

import pytest

from fixedcode_study.cli.bench_output import DEFAULT_OUTPUTS, head_cases
from fixedcode_study.cli.bench_output import main as bench_output_main
from fixedcode_study.config import available
from fixedcode_study.heads import output_trainable_params
from fixedcode_study.systems.bench_output import (OutputBenchOptions, format_head_table, format_model_table,
                                                  run_head_bench, run_model_bench)

HEADS = DEFAULT_OUTPUTS.split(",")
QUIET = {"log": lambda line: None}


def _finite_positive(row: dict, keys: tuple[str, ...]) -> None:
    for key in keys:
        assert math.isfinite(row[key]) and row[key] > 0, (row["name"], key, row[key])


def test_every_conf_output_head_is_benchmarked_by_default():
    assert sorted(HEADS) == available("output") and HEADS[0] == "untied"


def test_head_bench_small_width():
    V, d = 512, 64
    cases = head_cases([], HEADS)
    rep = run_head_bench(cases, OutputBenchOptions(vocab_size=V, d_model=d, batch=2, seq=16, repeats=1, device="cpu"),
                         **QUIET)
    rows = {r["name"]: r for r in rep["rows"]}
    assert list(rows) == HEADS and rep["tokens"] == 32
    for name, r in rows.items():
        _finite_positive(r, ("forward_ms", "backward_ms", "forward_backward_ms", "training_tokens_per_s",
                             "generation_ms", "generation_tokens_per_s", "training_flops_per_token",
                             "forward_backward_vs_untied", "generation_vs_untied"))
        want = output_trainable_params(cases[name].spec.model.output, V, d)
        assert r["trainable_params"] == want, name
        assert r["optimizer_state_bytes"] == 8 * want, name  # two fp32 AdamW moments per trainable parameter
        assert r["state_bytes"] == 16 * want + r["buffer_bytes"], name  # + weight and gradient
    assert rows["untied"]["trainable_params"] == V * d and rows["tied"]["trainable_params"] == 0
    assert rows["fixed"]["buffer_bytes"] == 4 * V * 16 and rows["fixed_gaussian"]["buffer_bytes"] == 4 * V * d
    assert rows["untied"]["forward_backward_vs_untied"] == 1.0
    table = format_head_table(rep)
    assert all(f"| {name} " in table for name in HEADS)


def test_model_bench_tiny_preset_leaves_tied_out_on_a_fixed_input():
    overrides = ["model=test_micro", "train.batch_size=2", "input=binary16"]
    heads = ["untied", "tied", "bitchain"]
    said: list[str] = []
    cases = head_cases(overrides, heads)
    assert [n for n, c in cases.items() if not c.usable] == ["tied"]  # a fixed input has no table to tie
    rep = run_model_bench(cases,
                          OutputBenchOptions(batch=2, repeats=1, steps=1, warmup=0, prompt_len=4, new_tokens=2,
                                             device="cpu"), log=said.append)
    rows = {r["name"]: r for r in rep["rows"]}
    assert list(rows) == ["untied", "bitchain"] and any("tied left out" in line for line in said)
    for name, r in rows.items():
        _finite_positive(r, ("step_ms", "training_tokens_per_s", "generation_ms", "generation_tokens_per_s",
                             "trainable_params", "optimizer_state_bytes", "state_bytes", "first_loss"))
        assert r["head_trainable_params"] == output_trainable_params(cases[name].spec.model.output, 512, 64), name
        # AdamW's two fp32 moments per trainable parameter, plus a step counter per tensor
        assert 8 * r["trainable_params"] <= r["optimizer_state_bytes"] <= 8 * r["trainable_params"] + 4096, name
    assert rows["untied"]["trainable_params"] - rows["bitchain"]["trainable_params"] == \
        512 * 64 - rows["bitchain"]["head_trainable_params"]
    assert "| bitchain " in format_model_table(rep)


@pytest.mark.parametrize("argv, named", [(["--repetas", "2"], "--repetas"), (["repeats=many"], "repeats"),
                                         (["outputs=untied,bitchian"], "outputs"), (["part=all,head"], "part"),
                                         (["batch=0"], "batch")])
def test_a_bad_option_is_one_line_and_exit_2(argv, named, capsys):
    assert bench_output_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and named in err and "\n" not in err, err
