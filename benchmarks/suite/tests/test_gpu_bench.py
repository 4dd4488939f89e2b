"""The pieces of the GPU benchmark (configs/gpu_llm.toml) that need no torch: its
configuration, the decode floor from safetensors headers, seeded prompts, the run budget
and the build marker, the summary table."""
import json
import struct
import tempfile
import time
import unittest
from pathlib import Path

from luminal_bench import config, models, prompt, report, runner
from luminal_bench.paths import Job, PATHS, cpu_twin
from luminal_bench.store import Result, Store

from .test_store_report import GIT, MACHINE


def write_safetensors(path: Path, sizes: dict[str, int]) -> None:
    """A file whose header names tensors of the given byte sizes (u8, 1-D)."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, size in sizes.items():
        header[name] = {"dtype": "U8", "shape": [size], "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + bytes(offset))


def random_hf(**options):
    return {"key": "m", "source": "random_hf", "config": "tests/data/configs/llama31_8b",
            "tokenizer": "tests/data/tokenizers/llama3.json", "paths": ["torch-eager-cuda", "ours-cuda"], **options}


class GpuConfigTest(unittest.TestCase):
    def test_the_issue_20_configuration_has_its_models_and_peers(self):
        gpu = config.load("gpu_llm")
        self.assertGreater(gpu.bandwidth_gib, 1)
        by_key = {m.key: m for m in gpu.models}
        llama = by_key["llama-3-8b-bf16"]
        self.assertEqual((llama.dtype, llama.source), ("bf16", "random_hf"))
        self.assertEqual(set(llama.paths), {"ours-cuda", "torch-eager-cuda", "torch-compile-cuda"})
        self.assertLess(llama.timeout_s("torch-compile-cuda", gpu.timeout_s), gpu.timeout_s)
        self.assertEqual(llama.timeout_s("ours-cuda", gpu.timeout_s), gpu.timeout_s)

    def test_a_dry_run_runs_cpu_twins_at_tiny_dims(self):
        dry = config.dry_run(config.load("gpu_llm"))
        for model in dry.models:
            self.assertTrue(model.options["tiny"])
            self.assertFalse([p for p in model.paths if p.endswith("-cuda")], model.paths)
        small = next(m for m in dry.models if m.key.startswith("smollm2"))
        self.assertEqual(small.paths, ("torch-eager", "ours-cpu"))  # ours-cuda and ours-cpu become one
        self.assertLessEqual(dry.bandwidth_gib, 1 / 16)
        self.assertEqual(cpu_twin("torch-compile-cuda"), "torch-compile")

    def test_skipped_paths_leave_the_run(self):
        parsed = config.parse("t", {"settings": [{"prompt_tokens": 8, "decode_tokens": 2}],
                                    "models": [random_hf(), random_hf(key="n", paths=["ours-cuda"])]})
        left = config.without_paths(parsed, {"ours-cuda"})
        self.assertEqual([(m.key, m.paths) for m in left.models], [("m", ("torch-eager-cuda",))])

    def test_bad_options_fail_before_anything_runs(self):
        for options, message in (({"dtype": "int4"}, "dtype"), ({"timeouts": {"nope": 5}}, "timeouts"),
                                 ({"prompt": "random"}, "prompt"), ({"tokenizer": None}, "tokenizer")):
            with self.subTest(options=options), self.assertRaisesRegex(config.ConfigError, message):
                config.parse("t", {"settings": [{"prompt_tokens": 8, "decode_tokens": 2}],
                                   "models": [random_hf(**options)]})

    def test_tiny_overrides_touch_only_keys_the_config_has(self):
        model = config.parse("t", {"settings": [{"prompt_tokens": 8, "decode_tokens": 2}],
                                   "models": [random_hf(set={"num_hidden_layers": 8})]}).models[0]
        self.assertEqual(models.random_hf_overrides(model), {"num_hidden_layers": 8})
        tiny = models.random_hf_overrides(config.dry_run(config.parse("t", {
            "settings": [{"prompt_tokens": 8, "decode_tokens": 2}], "models": [random_hf()]})).models[0])
        self.assertEqual(tiny["num_hidden_layers"], 2)
        self.assertNotIn("num_experts", tiny)  # a dense Llama has no experts to shrink


class CommandTest(unittest.TestCase):
    def test_bf16_reaches_ours_and_torch(self):
        job = Job(model_file=Path("m"), prompt_ids=[1, 2], decode_tokens=4, iters=2, warmups=1, threads=None,
                  search=1, binaries=Path("b"), dtype="bf16", compile_mode="reduce-overhead")
        ours = PATHS["ours-cuda"].command(job)
        self.assertEqual(ours[ours.index("--weights") + 1], "bf16")
        compiled = PATHS["torch-compile-cuda"].command(job)
        self.assertEqual(compiled[compiled.index("--dtype") + 1], "bfloat16")
        self.assertEqual(compiled[compiled.index("--compile-mode") + 1], "reduce-overhead")
        self.assertNotIn("--compile-mode", PATHS["torch-eager-cuda"].command(job))

    def test_f32_commands_are_unchanged(self):
        job = Job(model_file=Path("m"), prompt_ids=[1], decode_tokens=1, iters=1, warmups=0, threads=None, search=1,
                  binaries=Path("b"))
        self.assertNotIn("--weights", PATHS["ours-cpu"].command(job))
        self.assertNotIn("--dtype", PATHS["llama.cpp"].command(job))


class FloorTest(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.TemporaryDirectory()
        self.dir = Path(self.folder.name)

    def tearDown(self):
        self.folder.cleanup()

    def model(self, config_json, sizes):
        (self.dir / "config.json").write_text(json.dumps(config_json))
        write_safetensors(self.dir / "model.safetensors", sizes)
        return models.decode_bytes(self.dir)

    def test_an_untied_embedding_table_is_not_read_but_a_tied_one_is(self):
        sizes = {"model.embed_tokens.weight": 1000, "lm_head.weight": 1000, "model.layers.0.mlp.up_proj.weight": 300}
        self.assertEqual(self.model({"tie_word_embeddings": False}, sizes), {"weight_bytes": 2300, "decode_bytes": 1300})
        tied = {k: v for k, v in sizes.items() if k != "lm_head.weight"}
        self.assertEqual(self.model({"tie_word_embeddings": True}, tied)["decode_bytes"], 1300)

    def test_a_token_reads_its_top_k_experts_only(self):
        sizes = {f"model.layers.0.mlp.experts.{e}.{p}.weight": 100 for e in range(4)
                 for p in ("gate_proj", "up_proj", "down_proj")}
        sizes["model.layers.0.mlp.gate.weight"] = 40  # the router reads all of its rows
        got = self.model({"num_experts": 4, "num_experts_per_tok": 1, "tie_word_embeddings": True}, sizes)
        self.assertEqual(got, {"weight_bytes": 1240, "decode_bytes": 340})

    def test_the_floor_divides_by_the_measured_bandwidth(self):
        self.model({"tie_word_embeddings": True}, {"w": 4_000_000})
        fields = runner.floor_fields(self.dir, {"bandwidth_gbs": 2.0, "name": "gpu"})
        self.assertAlmostEqual(fields["floor_ms"], 2.0)
        self.assertNotIn("floor_ms", runner.floor_fields(self.dir, {"error": "no device"}))
        self.assertEqual(runner.floor_fields(self.dir / "missing", None), {})

    def test_seeded_prompts_are_the_same_ids_in_the_vocabulary(self):
        (self.dir / "config.json").write_text(json.dumps({"vocab_size": 50}))
        ids = prompt.seeded_ids(self.dir, 128)
        self.assertEqual(ids, prompt.seeded_ids(self.dir, 128))
        self.assertTrue(all(0 <= i < 50 for i in ids))
        self.assertNotEqual(ids, prompt.seeded_ids(self.dir, 128, seed=1))


class BudgetTest(unittest.TestCase):
    def test_the_budget_left_counts_from_the_start(self):
        options = runner.Options(budget_s=10, started=time.monotonic() - 4)
        self.assertAlmostEqual(options.left_s(), 6, delta=0.5)
        self.assertIsNone(runner.Options().left_s())

    def test_waiting_for_the_build_ends_with_the_marker_or_the_budget(self):
        with tempfile.TemporaryDirectory() as folder:
            marker = Path(folder) / "done"
            spent = runner.Options(budget_s=0, build_marker=marker, started=time.monotonic())
            start = time.monotonic()
            runner._wait_for_build(spent)  # budget spent: returns at once
            marker.write_text("0")
            runner._wait_for_build(runner.Options(build_marker=marker))
            self.assertLess(time.monotonic() - start, 2)


class SummaryTest(unittest.TestCase):
    def test_ratios_floor_and_failures_in_one_table(self):
        with tempfile.TemporaryDirectory() as folder:
            store = Store(Path(folder) / "bench.db")
            run_id = store.begin_run("gpu_llm", GIT, MACHINE)
            floor = {"floor_ms": 4.0, "bandwidth_gbs": 4000.0, "bandwidth_device": "GPU"}

            def row(path, ttft, tpot, ids):
                return Result(model="m", model_title="Model M", path=path, setting="prompt 128, decode 64",
                              status="ok", ttft_ms=ttft, tpot_ms=tpot, generated_ids=ids, raw=dict(floor))

            store.add_result(run_id, row("torch-eager-cuda", 60.0, 25.0, [1, 2, 3, 4]))
            store.add_result(run_id, row("ours-cuda", 30.0, 5.0, [1, 2, 9, 4]))
            store.add_result(run_id, Result(model="m", model_title="Model M", path="torch-compile-cuda",
                                            setting="prompt 128, decode 64", status="failed",
                                            error="timed out after 200 s"))
            text = report.summary(store, run_id)
            store.close()
        eager = next(line for line in text.splitlines() if "PyTorch eager" in line).split()
        self.assertEqual(eager[-3:], ["2.00×", "5.00×", "2/4"])  # peer / ours, leading ids equal to ours
        ours = next(line for line in text.splitlines() if "luminal (CUDA)" in line).split()
        self.assertEqual(ours[-1], "1.25×")  # 5 ms over a 4 ms floor
        self.assertIn("torch.compile (CUDA)   FAILED: timed out after 200 s", text)
        self.assertIn("4000 GB/s on GPU", text)


if __name__ == "__main__":
    unittest.main()
