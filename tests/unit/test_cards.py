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


def test_objectives_that_recommend_the_same_option_share_one_card():
    # both objectives chose dgx/gpu_hbm with the same figures and reasons: one card names both (issue 44)
    same = pl.DataFrame([BASE, BASE | {"objective": "perf_per_watt"}, BASE | {"model_name": "dcn"}])
    html = cards(same)
    assert html.count('<div class="card">') == 2
    assert "<h3>dlrm · perf per watt and throughput</h3>" in html and "<h3>dcn · throughput</h3>" in html
    # a recommendation listed twice is still one card
    assert cards(pl.DataFrame([BASE, BASE])).count('<div class="card">') == 1


def test_objectives_that_recommend_different_options_keep_a_card_each():
    other = BASE | {
        "objective": "perf_per_watt",
        "platform": "cpx",
        "explanation": "Recommended. cpx/gpu_hbm.",
    }
    html = cards(pl.DataFrame([BASE, other]))
    assert html.count('<div class="card">') == 2
    assert "<h3>dlrm · perf per watt</h3>" in html and "<h3>dlrm · throughput</h3>" in html
    assert html.index("cpx / gpu_hbm") < html.index("dgx / gpu_hbm")  # in the order of the objectives


def test_no_recommendations_says_why_runs_from_telemetry_give_none():
    from dashboards.cards import why_no_recommendations
    from workload_model import fields

    assert "they need runs in the lake" in why_no_recommendations(pl.DataFrame())
    shape = {c: [None, None] for c in fields.numeric_features()}
    telemetry = pl.DataFrame(
        {
            "status": ["succeeded", "failed"],
            "throughput_eps": [None, None],
            "placement": [None, None],
            **shape,
        }
    )
    said = why_no_recommendations(telemetry)
    assert "of the 2 runs in range, 0 succeeded with a throughput and 0 of them record their workload" in said
    assert "need runs in the lake" not in said and "fleet recommend --config" in said
