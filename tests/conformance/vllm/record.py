#!/usr/bin/env python3
"""Records vLLM V1's scheduling decisions, step by step, as kvsim's conformance goldens.

    /usr/bin/python3 tests/conformance/vllm/record.py cases  tests/conformance/vllm/cases
    /usr/bin/python3 tests/conformance/vllm/record.py record tests/conformance/vllm/cases \
        --vllm-src ../shared/third_party/vllm-v1-scheduler [--only NAME ...]

`cases DIR` writes each case's kvsim scenario (DIR/NAME/scenario.yaml) and trace (trace.csv or
trace.jsonl), deterministically. `record DIR` runs each case through vLLM's own scheduler
(vllm/v1/core/sched/scheduler.py, or async_scheduler.py when the scenario's engine says
async_scheduling: true), loaded unmodified from the vLLM source folder by vllm_loader.py, and
writes DIR/NAME/steps.jsonl and DIR/NAME/provenance.json (vLLM commit, command, totals).

The scenario is the single description of a case: its engine section is turned into vLLM's
SchedulerConfig and CacheConfig (num_gpu_blocks = kv.num_blocks + 1: vLLM's block pool keeps
block 0 as its null block; a model with local_attention gets the KV cache groups vLLM's own
get_kv_cache_groups makes of its layers: hybrid_kv_cache_groups), and its engine.step_time is the
time model of both sides, so the
goldens do not depend on kvsim's latency model. Times are integer nanoseconds here as in
kvsim, so an arrival and a step end compare exactly.

The engine loop is vLLM's EngineCore with a stand-in model runner. Synchronous (EngineCore.step):
arrivals due by now are added, schedule(), then update_from_output() with one sampled token for
every scheduled request that is not mid-prefill (Request.is_prefill_chunk, as the GPU model
runner discards a partial prefill's sample); a step lasts
fixed + per_token x scheduled tokens + per_seq x scheduled requests. A schedule() that
schedules nothing is no step (the engine only hands finished requests back; what it preempted,
if anything, is listed with the next step); with nothing to run the clock moves to the next
arrival. Async (EngineCore.step_with_batch_queue with a batch
queue of 2, vLLM's AsyncScheduler): the next batch is scheduled when the current one starts on
the GPU, before its output is applied (see run_async). Requests are
SamplingParams(max_tokens=output_tokens, ignore_eos=True); each request samples its own token
id, so no two requests' generated blocks are equal. With engine.speculative_config the scheduler gets vLLM's SpeculativeConfig fields it reads, a decode that verified d drafts
samples 1 + a tokens, a drawn as kvsim draws it (accepted_drafts below) when the output is applied,
and, synchronously, after each step the scheduler gets k drafts for every request run
(update_draft_token_ids, as EngineCore.post_step; AsyncScheduler gives them placeholders itself).

A step's line: {"step", "t_ns" (its start), "run": [[id, tokens], ...] in vLLM's scheduled
order, "preempted": [ids, sorted]}. Ids are trace row numbers from 0 (kvsim's request ids).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import sys
from collections import deque

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
HASH_TOKENS = 512  # Mooncake's hash_ids: one per 512 prompt tokens (kvsim's reader)


# --- the cases ---------------------------------------------------------------------------------

def _engine(num_blocks, batched, seqs=256, prefix=False, chunked=True, async_scheduling=False,
            **extra):
    # async_scheduling is written in every case: both sides default it to on (vLLM resolves it
    # to on; kvsim's engine follows), and most cases are the synchronous loop.
    e = {"scheduler": "continuous", "max_num_seqs": seqs, "max_num_batched_tokens": batched,
         "chunked_prefill": chunked, "async_scheduling": async_scheduling,
         "step_time": {"fixed_s": 0.01, "per_token_s": 0.000002, "per_seq_s": 0.00001},
         "kv": {"type": "paged", "block_size": 16, "num_blocks": num_blocks,
                "enable_prefix_caching": prefix}}
    e.update(extra)
    return e


def _scenario(name, engine, trace_file, fmt, model="llama-tiny"):
    return {"name": name, "seed": 1, "model": model, "gpu": "cpu-host",
            "engine": dict(engine, max_model_len=8192, allow_long_max_model_len=True),
            "workload": {"trace": {"path": trace_file, "format": fmt}},
            "policies": [{"name": "vllm-v1", "guards": []}]}


def _poisson(rng, n, rate_per_s):
    t, out = 0.0, []
    for _ in range(n):
        out.append(round(t * 1000))
        t += rng.expovariate(rate_per_s)
    return out


def make_cases():
    """name -> (engine, rows): rows are dicts arrival_ms, prompt, output, and optionally
    hash_ids (shared prefixes) or priority."""
    cases = {}
    r = random.Random(101)
    arr = sorted(r.randrange(0, 60) for _ in range(20))
    cases["preempt"] = (_engine(64, 2048), [
        {"arrival_ms": a, "prompt": r.randint(64, 400), "output": r.randint(40, 300)} for a in arr])
    r = random.Random(102)
    arr = sorted(r.randrange(0, 400) for _ in range(20))
    cases["chunked"] = (_engine(2000, 512), [
        {"arrival_ms": a, "prompt": r.randint(300, 1800), "output": r.randint(8, 64)} for a in arr])
    r = random.Random(103)
    rows, uniq = [], 1000
    for a in sorted(r.randrange(0, 300) for _ in range(20)):
        g, p = r.randrange(3), r.randint(1100, 2000)
        ids = [g * 10 + 1, g * 10 + 2] + list(range(uniq, uniq + (-(-p // HASH_TOKENS)) - 2))
        uniq += 10
        rows.append({"arrival_ms": a, "prompt": p, "output": r.randint(16, 128), "hash_ids": ids})
    cases["prefix"] = (_engine(400, 2048, prefix=True), rows)
    r = random.Random(104)
    tight = [{"arrival_ms": a, "prompt": r.randint(300, 1800), "output": r.randint(50, 200)}
             for a in sorted(r.randrange(0, 300) for _ in range(20))]
    cases["tight"] = (_engine(200, 512), tight)
    cases["tight-noisl"] = (_engine(200, 512, scheduler_reserve_full_isl=False), tight)
    r = random.Random(105)
    big = [{"arrival_ms": a, "prompt": min(4000, int(r.lognormvariate(6.2, 0.8))) + 1,
            "output": min(1000, int(r.lognormvariate(5.0, 0.7))) + 1}
           for a in _poisson(r, 300, 8.0)]
    cases["big300"] = (_engine(1000, 2048, seqs=64), big)
    cases["big300-pc"] = (_engine(1000, 2048, seqs=64, prefix=True), big)
    # Bursts: 4 bursts of 30 requests each at the same millisecond, a tight pool.
    r = random.Random(106)
    rows = []
    for b in range(4):
        for _ in range(30):
            rows.append({"arrival_ms": b * 1500, "prompt": r.randint(50, 900),
                         "output": r.randint(20, 250)})
    cases["bursts"] = (_engine(500, 1024, seqs=48), rows)
    # Long prompts (6,000-7,500 tokens) among short chat turns, chunked, a pool of 1,200.
    r = random.Random(107)
    rows = []
    for a in sorted(r.randrange(0, 4000) for _ in range(60)):
        if r.random() < 0.12:
            rows.append({"arrival_ms": a, "prompt": r.randint(6000, 7500), "output": r.randint(20, 80)})
        else:
            rows.append({"arrival_ms": a, "prompt": r.randint(30, 400), "output": r.randint(30, 300)})
    cases["long-among-chat"] = (_engine(1200, 1024, seqs=64), rows)
    # Prefix sharing with eviction: 8 system prompts of 1,024-2,048 tokens, a pool too small
    # to keep them all cached, preemption.
    r = random.Random(108)
    rows, uniq = [], 5000
    for a in sorted(r.randrange(0, 5000) for _ in range(80)):
        g = r.randrange(8)
        shared = [900 + 10 * g + k for k in range(2 + g % 3)]
        p = len(shared) * HASH_TOKENS + r.randint(20, 600)
        n = -(-p // HASH_TOKENS)
        ids = shared + list(range(uniq, uniq + n - len(shared)))
        uniq += 10
        rows.append({"arrival_ms": a, "prompt": p, "output": r.randint(20, 200), "hash_ids": ids})
    cases["prefix-eviction"] = (_engine(450, 2048, seqs=32, prefix=True), rows)
    # Priority: three priority classes, a tight pool: preemption takes the lowest priority.
    r = random.Random(109)
    rows = [{"arrival_ms": a, "prompt": r.randint(100, 700), "output": r.randint(40, 300),
             "priority": r.choice([0, 1, 2])} for a in sorted(r.randrange(0, 500) for _ in range(40))]
    cases["priority"] = (_engine(160, 1024, scheduling_policy="priority"), rows)
    # Async scheduling: cases again under vLLM's AsyncScheduler.
    cases["tight-async"] = (_engine(200, 512, async_scheduling=True), tight)
    cases["big300-async"] = (_engine(1000, 2048, seqs=64, async_scheduling=True), big)
    cases["bursts-async"] = (_engine(500, 1024, seqs=48, async_scheduling=True), cases["bursts"][1])
    cases["priority-async"] = (_engine(160, 1024, scheduling_policy="priority",
                                       async_scheduling=True), cases["priority"][1])
    cases["big300-pc-async"] = (_engine(1000, 2048, seqs=64, prefix=True, async_scheduling=True), big)
    cases["prefix-eviction-async"] = (_engine(450, 2048, seqs=32, prefix=True,
                                              async_scheduling=True), cases["prefix-eviction"][1])
    # long_prefill_token_threshold: long prompts among chat, each prefill capped at 256 tokens a
    # step, so several partial prefills run among the decodes, in running order.
    cases["long-prefill-threshold"] = (_engine(1200, 1024, seqs=64, long_prefill_token_threshold=256),
                                       cases["long-among-chat"][1])
    cases["long-prefill-threshold-async"] = (
        _engine(1200, 1024, seqs=64, long_prefill_token_threshold=256, async_scheduling=True),
        cases["long-among-chat"][1])
    # Speculative decoding, synchronous and under AsyncScheduler (placeholders for 1 + k). Each
    # decode schedules 1 + k tokens; the stand-in model runner accepts drafts by kvsim's draw
    # (accepted_drafts, SplitMix64 over seed, request id and its output tokens so far), so both
    # sides accept the same drafts.
    eagle = {"method": "eagle", "num_speculative_tokens": 3,
             "acceptance_per_position": [0.8, 0.55, 0.3], "seed": 7}
    r = random.Random(110)
    rows = [{"arrival_ms": a, "prompt": r.randint(40, 900), "output": r.randint(20, 300)}
            for a in sorted(r.randrange(0, 300) for _ in range(60))]
    cases["spec-eagle"] = (_engine(3000, 256, seqs=128, speculative_config=eagle), rows)
    cases["spec-eagle-tight"] = (_engine(200, 512, speculative_config=eagle), tight)
    cases["spec-eagle-long"] = (_engine(700, 1024, seqs=64, speculative_config=eagle),
                                cases["long-among-chat"][1])
    cases["spec-eagle-async"] = (_engine(3000, 256, seqs=128, speculative_config=eagle,
                                         async_scheduling=True), cases["spec-eagle"][1])
    cases["spec-eagle-tight-async"] = (_engine(200, 512, speculative_config=eagle,
                                               async_scheduling=True), tight)
    cases["spec-eagle-long-async"] = (_engine(700, 1024, seqs=64, speculative_config=eagle,
                                              async_scheduling=True), cases["long-among-chat"][1])
    cases["spec-ngram"] = (_engine(500, 1024, seqs=48, speculative_config={
        "method": "ngram", "num_speculative_tokens": 5,
        "acceptance_per_position": [0.5, 0.25, 0.125, 0.0625, 0.03125], "seed": 3}),
        cases["bursts"][1])
    # vLLM accepts async scheduling with the GPU n-gram proposer, not the CPU one; the two
    # schedule alike (no lookahead).
    spec_ngram_gpu = dict(cases["spec-ngram"][0]["speculative_config"], method="ngram_gpu")
    cases["spec-ngram-async"] = (dict(cases["spec-ngram"][0], async_scheduling=True,
                                      speculative_config=spec_ngram_gpu), cases["bursts"][1])
    # Speculative decoding with long_prefill_token_threshold: vLLM's running loop cuts every
    # running request's new tokens to the threshold, a prefill's chunk and a decode's 1 + k
    # alike. 256 cuts prefills only; 3 cuts the decodes' 1 + 3 too.
    cases["spec-eagle-threshold"] = (
        _engine(700, 1024, seqs=64, speculative_config=eagle, long_prefill_token_threshold=256),
        cases["long-among-chat"][1])
    cases["spec-eagle-threshold-async"] = (
        _engine(700, 1024, seqs=64, speculative_config=eagle, long_prefill_token_threshold=256,
                async_scheduling=True), cases["long-among-chat"][1])
    cases["spec-eagle-threshold-3"] = (
        _engine(3000, 256, seqs=128, speculative_config=eagle, long_prefill_token_threshold=3),
        cases["spec-eagle"][1])
    cases.update(prefix_shared_cases())
    cases.update(hybrid_cases(cases["bursts"][1]))
    return cases


def _hybrid_model(layers, window, global_every):
    """llama-tiny's layer with a sliding window on every layer but each global_every-th (kvsim's
    local_attention: layer i is global when (i + 1) % global_every == 0)."""
    return {"display_name": f"hybrid-tiny ({layers} layers, window {window})",
            "layers": layers, "heads": 8, "kv_heads": 2, "head_dim": 64, "hidden": 512,
            "ffn": 1408, "vocab": 32000, "max_position": 8192, "weight_dtype": "fp32",
            "kv_dtype": "fp32", "local_attention": {"kind": "sliding_window", "size": window,
                                                    "global_every": global_every}}


def hybrid_cases(bursts):
    """Several KV cache groups: a gpt-oss-like model (sliding window 128 on every other layer: one
    sliding and one full group, the sliding one first as layer 0 slides) and a Gemma-3-like one
    (five sliding layers of 256 and one global: five sliding groups and a full one). Shared system
    prompts with prefix caching on, in a pool tight enough to preempt, sync and async; and
    `bursts`' trace without prefix caching."""
    gpt_oss, gemma = _hybrid_model(4, 128, 2), _hybrid_model(6, 256, 6)
    r = random.Random(601)
    rows, uniq = [], 9000
    for a in _poisson(r, 80, 6.0):
        g, shared_blocks = r.randrange(6), 1 + r.randrange(2)
        p = shared_blocks * HASH_TOKENS + min(600, int(r.lognormvariate(5.0, 1.0)) + 1)
        if r.random() < 0.2:
            p = r.randint(100, shared_blocks * HASH_TOKENS)
        n = -(-p // HASH_TOKENS)
        ids = ([800 + 10 * g + k for k in range(min(n, shared_blocks))]
               + list(range(uniq, uniq + max(0, n - shared_blocks))))
        uniq += 10
        rows.append({"arrival_ms": a, "prompt": p,
                     "output": min(800, int(r.lognormvariate(5.6, 0.6)) + 1), "hash_ids": ids})
    cases = {}
    for sync in (True, False):
        sfx = "" if sync else "-async"
        cases["hybrid-swa-pc" + sfx] = (_engine(260, 512, seqs=48, prefix=True,
                                                async_scheduling=not sync), rows, gpt_oss)
        cases["hybrid-gemma-pc" + sfx] = (_engine(660, 512, seqs=48, prefix=True,
                                                  async_scheduling=not sync), rows, gemma)
        cases["hybrid-swa-bursts" + sfx] = (_engine(300, 1024, seqs=48,
                                                    async_scheduling=not sync), bursts, gpt_oss)
    return cases


def prefix_shared_cases():
    """Shared prefixes in a tight pool, prefix caching on: six system prompts (one or two 512-token
    hash blocks each), chat turns behind them and one prompt in five shorter than its system
    prompt, so that requests recompute blocks other requests still cache (a prompt's last block
    is never a hit: vLLM computes at least its last token). Two traces, a 300-block pool, budgets
    of 512 and 2,048, synchronous and async."""
    cases = {}
    for seed in (1, 4):
        r = random.Random(500 + seed)
        rows, uniq = [], 9000
        n_requests = r.choice([60, 90, 120])
        rate = r.choice([3.0, 6.0, 10.0])
        shared_blocks = r.choice([1, 1, 2])
        for a in _poisson(r, n_requests, rate):
            g = r.randrange(6)
            p = shared_blocks * HASH_TOKENS + min(2500, int(r.lognormvariate(5.5, 1.0)) + 1)
            if r.random() < 0.2:
                p = r.randint(100, shared_blocks * HASH_TOKENS)
            n = -(-p // HASH_TOKENS)
            ids = ([800 + 10 * g + k for k in range(min(n, shared_blocks))]
                   + list(range(uniq, uniq + max(0, n - shared_blocks))))
            uniq += 10
            rows.append({"arrival_ms": a, "prompt": p,
                         "output": min(600, int(r.lognormvariate(4.8, 0.8)) + 1), "hash_ids": ids})
        for batched in (512, 2048):
            for sync in (True, False):
                name = f"prefix-shared-{seed}-{batched}" + ("" if sync else "-async")
                cases[name] = (_engine(300, batched, seqs=48, prefix=True,
                                       async_scheduling=not sync), rows)
    return cases


def write_cases(out):
    for name, (engine, rows, *model) in make_cases().items():
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        if any("hash_ids" in r for r in rows):
            trace, fmt = "trace.jsonl", "mooncake"
            uniq = 10_000_000
            with open(os.path.join(d, trace), "w") as f:
                for r in rows:
                    ids = r.get("hash_ids")
                    if not ids:  # a prompt of its own
                        ids = list(range(uniq, uniq + (-(-r["prompt"] // HASH_TOKENS))))
                        uniq += 100
                    f.write(json.dumps({"timestamp": r["arrival_ms"], "input_length": r["prompt"],
                                        "output_length": r["output"], "hash_ids": ids}) + "\n")
        else:
            trace, fmt = "trace.csv", "normalized"
            pri = any("priority" in r for r in rows)
            with open(os.path.join(d, trace), "w") as f:
                f.write("arrival_s,prompt_tokens,output_tokens" + (",priority" if pri else "") + "\n")
                for r in rows:
                    f.write(f"{r['arrival_ms'] / 1000:.3f},{r['prompt']},{r['output']}"
                            + (f",{r['priority']}" if pri else "") + "\n")
        with open(os.path.join(d, "scenario.yaml"), "w") as f:
            f.write("# vLLM V1 conformance case (tests/conformance/vllm/record.py cases)\n")
            yaml.safe_dump(_scenario(name, engine, trace, fmt, *model), f, sort_keys=False)


# --- reading a case ----------------------------------------------------------------------------

def read_trace(path):
    """Rows as kvsim reads them: ids from 0 in file order, arrival in ns relative to the first."""
    rows = []
    if path.endswith(".jsonl"):
        for line in open(path):
            if line.strip():
                j = json.loads(line)
                rows.append({"t_ns": int(round(float(j["timestamp"]) * 1_000_000)),
                             "prompt": int(j["input_length"]), "output": int(j["output_length"]),
                             "hash_ids": [int(x) for x in j["hash_ids"]], "priority": 0})
    else:
        import csv
        for r in csv.DictReader(open(path, newline="")):
            whole, _, frac = r["arrival_s"].partition(".")
            ns = int(whole) * 1_000_000_000 + int((frac + "000000000")[:9])
            rows.append({"t_ns": ns, "prompt": int(r["prompt_tokens"]),
                         "output": int(r["output_tokens"]), "hash_ids": [],
                         "priority": int(r.get("priority") or 0)})
    t0 = rows[0]["t_ns"] if rows else 0
    for i, r in enumerate(rows):
        r["id"], r["t_ns"] = str(i), r["t_ns"] - t0
    return rows


def step_time_ns(engine):
    st = engine["step_time"]
    ns = lambda k: int(round(float(st.get(k, 0)) * 1e9))  # noqa: E731 (kvsim rounds the same)
    return ns("fixed_s"), ns("per_token_s"), ns("per_seq_s")


class Config:
    """An attribute bag that refuses any field not set here: every value the scheduler reads
    is one of these."""

    def __init__(self, what, **fields):
        self.__dict__.update(fields, _what=what)

    def __getattr__(self, key):
        raise AttributeError(f"{self._what}.{key} is read by the scheduler but not set")


def vllm_config(engine, max_model_len):
    kv = engine["kv"]
    batched = int(engine["max_num_batched_tokens"])
    return Config(
        "vllm_config",
        scheduler_config=Config(
            "scheduler_config", max_num_seqs=int(engine["max_num_seqs"]),
            max_num_batched_tokens=batched, max_num_scheduled_tokens=None,
            max_model_len=max_model_len,
            long_prefill_token_threshold=int(engine.get("long_prefill_token_threshold", 0)),
            enable_chunked_prefill=bool(engine.get("chunked_prefill", False)),
            disable_chunked_mm_input=False, policy=engine.get("scheduling_policy", "fcfs"),
            async_scheduling=bool(engine.get("async_scheduling", True)),
            scheduler_reserve_full_isl=bool(engine.get("scheduler_reserve_full_isl", True)),
            disable_hybrid_kv_cache_manager=False,
            max_num_encoder_input_tokens=batched, encoder_cache_size=batched),
        cache_config=Config(
            "cache_config", block_size=int(kv["block_size"]),
            num_gpu_blocks=int(kv["num_blocks"]) + 1,  # + vLLM's null block
            enable_prefix_caching=bool(kv.get("enable_prefix_caching", False)),
            prefix_caching_hash_algo="sha256", mamba_cache_mode="none"),
        model_config=Config("model_config", max_model_len=max_model_len,
                            is_encoder_decoder=False, enable_return_routed_experts=False,
                            runner_type="generate"),
        parallel_config=Config("parallel_config", pipeline_parallel_size=1,
                               data_parallel_index=0, data_parallel_rank=0,
                               decode_context_parallel_size=1, prefill_context_parallel_size=1),
        observability_config=Config("observability_config", kv_cache_metrics=False,
                                    kv_cache_metrics_sample=0.01, enable_mfu_metrics=False),
        lora_config=None, kv_events_config=None, kv_transfer_config=None,
        ec_transfer_config=None, speculative_config=speculative_config(engine),
        use_v2_model_runner=False)


def hybrid_kv_cache_groups(model, cfg, block_size, torch):
    """The KV cache groups vLLM builds for a model with local and global layers: one spec per
    layer in the model's order (FullAttentionSpec, or SlidingWindowSpec for a local layer, as
    the attention layers' get_kv_cache_spec gives them), grouped by vLLM's own get_kv_cache_groups
    (vllm/v1/core/kv_cache_utils.py: unify_kv_cache_spec_page_size, then
    _get_kv_cache_groups_uniform_page_size: group size, padding and layers[i::num_groups], the
    types in the order their first layer appears). The pool's size is the scenario's
    kv.num_blocks, as get_kv_cache_config_from_groups would give for that memory."""
    from vllm.v1.core.kv_cache_utils import get_kv_cache_groups
    from vllm.v1.kv_cache_interface import FullAttentionSpec, SlidingWindowSpec
    local = model["local_attention"]
    if local["kind"] != "sliding_window" or "global_every" not in local:
        raise SystemExit("the recorder builds sliding_window local_attention with global_every")
    shape = dict(block_size=block_size, num_kv_heads=int(model["kv_heads"]),
                 head_size=int(model["head_dim"]), dtype=torch.float16)
    specs = {}
    for i in range(int(model["layers"])):
        glob = (i + 1) % int(local["global_every"]) == 0  # kvsim's rule for global_every
        specs[f"model.layers.{i}.attn"] = (FullAttentionSpec(**shape) if glob else
                                           SlidingWindowSpec(sliding_window=int(local["size"]),
                                                             **shape))
    return get_kv_cache_groups(cfg, specs)


def speculative_config(engine):
    """vLLM's SpeculativeConfig as the scheduler reads it: num_speculative_tokens, use_eagle()
    (eagle, eagle3 and mtp: num_lookahead_tokens = k) and uses_draft_model()."""
    spec = engine.get("speculative_config")
    if not spec:
        return None
    method = spec["method"]
    return Config("speculative_config", num_speculative_tokens=int(spec["num_speculative_tokens"]),
                  use_eagle=lambda: method in ("eagle", "eagle3", "mtp"),
                  uses_draft_model=lambda: method == "draft_model")


def _mix(z):
    """SplitMix64's finaliser, as kvsim's accepted_drafts (sim/serving/speculative_config.cc)."""
    m = (1 << 64) - 1
    z = (z + 0x9E3779B97F4A7C15) & m
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    return z ^ (z >> 31)


def accepted_drafts(spec, request_id, step, drafts):
    """kvsim's draw: one uniform from (seed, request, its output tokens so far); the accepted
    drafts are the positions whose rate is above it (a prefix: the rates do not grow)."""
    h = _mix(_mix(_mix(int(spec.get("seed", 0))) ^ request_id) ^ step)
    u = (h >> 11) * 2.0 ** -53
    rates = spec["acceptance_per_position"]
    a = 0
    while a < drafts and u < rates[a]:
        a += 1
    return a


def prompt_token_ids(row):
    """Equal Mooncake hash ids at equal positions give equal tokens; a prompt without hash ids
    has tokens of its own."""
    vocab = 1 << 20
    if row["hash_ids"]:
        return [vocab + (row["hash_ids"][p // HASH_TOKENS] * 7919 + p % HASH_TOKENS) % vocab
                for p in range(row["prompt"])]
    base = vocab * (2 + int(row["id"]))
    return [base + p for p in range(row["prompt"])]


# --- the engine loops --------------------------------------------------------------------------

class Engine:
    def __init__(self, src, case_dir):
        self.commit = sys.modules["vllm_loader"].load(src)
        scen = yaml.safe_load(open(os.path.join(case_dir, "scenario.yaml")))
        self.engine = scen["engine"]
        self.rows = read_trace(os.path.join(case_dir, scen["workload"]["trace"]["path"]))
        self.fixed, self.per_token, self.per_seq = step_time_ns(self.engine)
        import logging
        logging.basicConfig(level=logging.WARNING)
        import torch  # the loader's stand-in when torch is absent
        from vllm.sampling_params import SamplingParams
        from vllm.utils.hashing import get_hash_fn_by_name
        from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
        from vllm.v1.core.sched.async_scheduler import AsyncScheduler
        from vllm.v1.core.sched.scheduler import Scheduler
        from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
        from vllm.v1.outputs import DraftTokenIds, ModelRunnerOutput
        from vllm.v1.request import Request
        self.SamplingParams, self.Request, self.Output = SamplingParams, Request, ModelRunnerOutput
        self.DraftTokenIds = DraftTokenIds
        self.spec = self.engine.get("speculative_config")
        max_model_len = int(self.engine["max_model_len"])
        kv = self.engine["kv"]
        bs = int(kv["block_size"])
        cfg = vllm_config(self.engine, max_model_len)
        groups = [KVCacheGroupSpec(["layer"], FullAttentionSpec(
            block_size=bs, num_kv_heads=1, head_size=1, dtype=torch.float16))]
        if isinstance(scen["model"], dict) and "local_attention" in scen["model"]:
            groups = hybrid_kv_cache_groups(scen["model"], cfg, bs, torch)
        kv_config = KVCacheConfig(num_blocks=cfg.cache_config.num_gpu_blocks,
                                  kv_cache_tensors=[], kv_cache_groups=groups)
        self.async_ = bool(self.engine.get("async_scheduling", True))  # kvsim's default too
        cls = AsyncScheduler if self.async_ else Scheduler  # SchedulerConfig.get_scheduler_cls
        self.sched = cls(vllm_config=cfg, kv_cache_config=kv_config,
                         structured_output_manager=sys.modules["vllm_loader"].StructuredOutputManager(),
                         block_size=bs, log_stats=False)
        self.hasher = None
        if kv.get("enable_prefix_caching"):  # EngineCore makes the hasher only then
            fn = get_hash_fn_by_name("sha256")
            init_none_hash(fn)
            self.hasher = get_request_block_hasher(bs, fn)
        self.pending = deque(sorted(self.rows, key=lambda r: r["t_ns"]))  # stable: file order
        self.steps = []
        self.reqs = {}
        # Preempted by a schedule() that scheduled nothing (no step): shown with the next step.
        self.carry = set()

    def add_due(self, now):
        while self.pending and self.pending[0]["t_ns"] <= now:
            r = self.pending.popleft()
            sp = self.SamplingParams(max_tokens=r["output"], ignore_eos=True, temperature=0.0)
            # Fixed-width ids: vLLM breaks priority ties by request_id as a string
            # (Request.__lt__), so that string order is kvsim's numeric id order.
            req = self.Request(request_id=f"{int(r['id']):09d}", prompt_token_ids=prompt_token_ids(r),
                               sampling_params=sp, pooling_params=None,
                               arrival_time=r["t_ns"] / 1e9, block_hasher=self.hasher,
                               priority=r["priority"])
            self.sched.add_request(req)
            self.reqs[r["id"]] = req

    def batch(self, out):
        """The scheduled batch's record and its stand-in model output (decided now, as the GPU
        model runner's discard mask is: mid-prefill requests sample nothing)."""
        ids = list(out.num_scheduled_tokens)
        sampled = [[] if self.sched.requests[i].is_prefill_chunk else [(1 << 19) + int(i)]
                   for i in ids]
        if self.spec and not self.async_:
            self.accept(out, sampled)
        mro = self.Output(req_ids=ids, req_id_to_index={i: k for k, i in enumerate(ids)},
                          sampled_token_ids=sampled)
        run = [[int(i), int(out.num_scheduled_tokens[i])] for i in ids]
        dur = (self.fixed + self.per_token * out.total_num_scheduled_tokens
               + self.per_seq * len(ids))
        rec = {"step": len(self.steps), "t_ns": None, "run": run,
               "preempted": sorted(int(i) for i in set(out.preempted_req_ids) | self.carry)}
        self.carry = set()
        return rec, mro, max(dur, 1)

    def accept(self, out, sampled):
        """The bonus token after the accepted drafts (rejection sampling's output), drawn from the
        request's output tokens so far when the step's output is applied (async: after the next
        batch was scheduled)."""
        for k, i in enumerate(out.num_scheduled_tokens):
            drafts = len(out.scheduled_spec_decode_tokens.get(i, ()))
            req = self.sched.requests.get(i)
            if sampled[k] and drafts and req is not None:
                a = accepted_drafts(self.spec, int(i), req.num_output_tokens, drafts)
                sampled[k] = [(1 << 19) + int(i)] * (1 + a)

    def empty_output(self):
        return self.Output(req_ids=[], req_id_to_index={})

    def run_sync(self):
        now = 0
        while True:
            if self.pending and not self.sched.has_requests():
                now = max(now, self.pending[0]["t_ns"])
            self.add_due(now)
            if not self.sched.has_requests():
                if not self.pending:
                    return
                continue
            out = self.sched.schedule()
            if out.total_num_scheduled_tokens == 0:
                self.carry |= set(out.preempted_req_ids)  # shown with the next step
                self.sched.update_from_output(out, self.empty_output())
                if not self.sched.has_unfinished_requests():
                    continue
                if self.sched.running or not self.pending:
                    raise SystemExit(f"step {len(self.steps)}: nothing can be scheduled")
                now = max(now, self.pending[0]["t_ns"])
                continue
            rec, mro, dur = self.batch(out)
            rec["t_ns"] = now
            self.sched.update_from_output(out, mro)
            if self.spec:  # EngineCore.post_step: the drafter's k drafts for every request run
                ids = list(out.num_scheduled_tokens)
                k = int(self.spec["num_speculative_tokens"])
                self.sched.update_draft_token_ids(self.DraftTokenIds(
                    ids, [[(1 << 18) + j for j in range(k)] for _ in ids]))
            self.steps.append(rec)
            now += dur

    def run_async(self):
        """EngineCore.run_busy_loop over step_with_batch_queue (vllm/v1/engine/core.py) with
        batch_queue_size 2 (the executors' max_concurrent_batches with async scheduling and one
        pipeline stage). One pass: the arrivals due by the CPU time `now` (_process_input_queue);
        if the scheduler has requests, schedule() a batch and launch it (it runs on the GPU from
        max(now, end of the batch before) for its duration); if it has tokens, the queue holds
        only it and it has not ended, return (schedule the next one before blocking); otherwise
        wait for the oldest batch (now = its end) and update_from_output() it. An empty batch is
        done at once (the executor answers it immediately). CPU work takes no time."""
        queue = deque()  # oldest on the right: (rec or None, scheduler output, model output, end)
        now = gpu_free = 0
        while True:
            if self.pending and not self.sched.has_requests() and not queue:
                now = max(now, self.pending[0]["t_ns"])
            self.add_due(now)
            if not self.sched.has_requests() and not queue:
                if not self.pending:
                    return
                continue
            if self.sched.has_requests():
                out = self.sched.schedule()
                if out.total_num_scheduled_tokens > 0:
                    rec, mro, dur = self.batch(out)
                    start = max(now, gpu_free)
                    rec["t_ns"] = start
                    gpu_free = start + dur
                    self.steps.append(rec)
                    queue.appendleft((rec, out, mro, gpu_free))
                    if len(queue) < 2 and gpu_free > now:
                        continue
                else:
                    self.carry |= set(out.preempted_req_ids)  # shown with the next step
                    queue.appendleft((None, out, self.empty_output(), now))
            rec, out, mro, end = queue.pop()
            if self.spec and mro.sampled_token_ids:
                self.accept(out, mro.sampled_token_ids)
            self.sched.update_from_output(out, mro)
            if rec is not None:
                now = max(now, end)
                continue
            if any(q[0] is not None for q in queue) or not self.sched.has_unfinished_requests():
                continue
            if self.sched.running or not self.pending:
                raise SystemExit(f"step {len(self.steps)}: nothing can be scheduled")
            now = max(now, self.pending[0]["t_ns"])


def record(case_dir, src, command):
    e = Engine(src, case_dir)
    e.run_async() if e.async_ else e.run_sync()
    short = [r["id"] for r in e.rows if e.reqs.get(r["id"]) is None
             or e.reqs[r["id"]].num_output_tokens != r["output"]]
    if short:
        raise SystemExit(f"{case_dir}: requests {short[:5]} did not get their output tokens")
    tmp = os.path.join(case_dir, "steps.jsonl.tmp")
    with open(tmp, "w") as f:
        for s in e.steps:
            f.write(json.dumps(s, separators=(",", ":")) + "\n")
    os.replace(tmp, os.path.join(case_dir, "steps.jsonl"))
    prov = {"vllm_commit": e.commit,
            "vllm_files": "vllm/v1/core/sched/" + ("async_scheduler.py over scheduler.py"
                                                   if e.async_ else "scheduler.py"),
            "command": command, "requests": len(e.rows), "steps": len(e.steps),
            "preemptions": sum(len(s["preempted"]) for s in e.steps),
            "end_ns": (e.steps[-1]["t_ns"] if e.steps else 0)}
    with open(os.path.join(case_dir, "provenance.json"), "w") as f:
        json.dump(prov, f, indent=1)
        f.write("\n")
    print(f"{os.path.basename(case_dir)}: {prov['steps']} steps, {prov['preemptions']} preemptions")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("cases", help="write the cases' scenarios and traces")
    c.add_argument("dir")
    r = sub.add_parser("record", help="record vLLM's steps for the cases")
    r.add_argument("dir")
    r.add_argument("--vllm-src", required=True, help="folder holding vllm/ and VLLM_COMMIT")
    r.add_argument("--only", nargs="*", help="case names (default: every folder in dir)")
    a = ap.parse_args()
    if a.cmd == "cases":
        write_cases(a.dir)
        return
    sys.path.insert(0, HERE)
    import vllm_loader  # noqa: F401
    command = "/usr/bin/python3 tests/conformance/vllm/record.py " + " ".join(
        shlex.quote(x) for x in sys.argv[1:])
    names = a.only or sorted(n for n in os.listdir(a.dir)
                             if os.path.isfile(os.path.join(a.dir, n, "scenario.yaml")))
    for n in names:
        record(os.path.join(a.dir, n), a.vllm_src, command)


if __name__ == "__main__":
    main()
