"""The report's recommendation cards say what software an answer assumed, its range, and a flip (issue 42
item 2)."""

import polars as pl

from dashboards.cards import cards

BASE = {
    "model_name": "dlrm",
    "objective": "throughput",
    "recommended": True,
    "platform": "dgx",
    "placement": "gpu_hbm",
    "p10_throughput_eps": 1.0e7,
    "p50_throughput_eps": 1.5e7,
    "p90_throughput_eps": 2.0e7,
    "eps_per_w": 2000.0,
    "bottleneck": "mlp_compute",
    "explanation": "Recommended. dgx/gpu_hbm.",
    "basis": "analytical model only",
    "cv_mdape": None,
    "precision": "fp16",
    "optimizer": "sgd",
    "kernels": "compiled",
}


def test_a_card_names_the_assumed_inputs_the_range_and_the_flip():
    assumed = BASE | {
        "defaulted_inputs": "precision,optimizer,kernels",
        "throughput_low_eps": 2.3e6,
        "throughput_high_eps": 2.1e7,
        "stack_alternatives": "kernels=per_table 2343202; kernels=graph 20769231",
        "stack_flips": "kernels=per_table: cpx/system_memory",
    }
    html = cards(pl.DataFrame([assumed]))
    assert "Assumed, not stated: precision=fp16, optimizer=sgd, kernels=compiled" in html
    assert "2,300,000-21,000,000 examples/s under the alternatives (kernels=per_table 2343202" in html
    assert '<p class="note flip"><b>Would change under kernels=per_table: cpx/system_memory.</b></p>' in html
    stated = BASE | {
        "defaulted_inputs": "",
        "throughput_low_eps": 1.5e7,
        "throughput_high_eps": 1.5e7,
        "stack_alternatives": None,
        "stack_flips": None,
    }
    assert "Assumed" not in cards(pl.DataFrame([stated])) and "flip" not in cards(pl.DataFrame([stated]))
