import unittest
from pathlib import Path

from luminal_bench import config
from luminal_bench.paths import PATHS, Job
from luminal_bench.workers.measure import measure


def job(threads):
    return Job(model_file=Path("m.gguf"), prompt_ids=[1, 2], decode_tokens=4, iters=3, warmups=1, threads=threads,
               search=1, binaries=Path("build"))


class PathsTest(unittest.TestCase):
    def test_ours_runs_on_one_thread_unless_the_setting_asks_for_more(self):
        # generate alone would take every core while the peers run on one
        command = PATHS["ours-cpu"].command(job(None))
        self.assertEqual(command[command.index("--threads") + 1], "1")
        command = PATHS["ours-cpu"].command(job(2))
        self.assertEqual(command[command.index("--threads") + 1], "2")

    def test_ours_generates_the_first_token_a_warmup_step_and_the_timed_steps(self):
        command = PATHS["ours-cpu"].command(job(None))
        self.assertEqual(command[command.index("--max-tokens") + 1], "6")
        self.assertEqual(command[command.index("--prompt-ids") + 1], "1,2")

    def test_peers_are_pinned_to_one_thread_when_the_setting_leaves_threads_alone(self):
        command = PATHS["torch-eager"].command(job(None))
        self.assertEqual(command[command.index("--threads") + 1], "1")

    def test_the_python_package_path_runs_the_torch_worker_with_our_backend(self):
        command = PATHS["luminal-python"].command(job(None))
        self.assertIn("luminal_bench.workers.torch_worker", command)
        self.assertEqual(command[command.index("--mode") + 1], "luminal")
        self.assertEqual(command[command.index("--threads") + 1], "1")
        self.assertTrue(PATHS["luminal-python"].ours)

    def test_the_cuda_plan_compile_runs_bench_model_build_with_cuda_and_the_default_config_bounds_it(self):
        command = PATHS["ours-compile-cuda"].command(job(None))
        self.assertEqual(command[1:], ["--cuda", "3", "m.gguf"])
        default = config.load("default")
        bounds = {m.key: m.options["bounds"]["compile_ms"] for m in default.models if "ours-compile-cuda" in m.paths}
        self.assertEqual(bounds, {"llama-3.1-8b-shape-cuda": 300})

    def test_llama_cpp_runs_gguf_files_only(self):
        folder = Job(**{**vars(job(None)), "model_file": Path("model_dir")})
        self.assertEqual(PATHS["llama.cpp"].unavailable(folder), "runs GGUF files only")


class MeasureTest(unittest.TestCase):
    def test_the_protocol(self):
        calls = []
        result = measure(reset=lambda: calls.append("reset"),
                         prefill=lambda ids: calls.append(("prefill", tuple(ids))) or 7,
                         step=lambda token, position: calls.append(("step", token, position)) or token + 1,
                         prompt_ids=[1, 2, 3], iters=2, decode_tokens=3)
        self.assertEqual(calls[:4], ["reset", ("prefill", (1, 2, 3)), "reset", ("prefill", (1, 2, 3))])
        self.assertEqual(calls[4:], [("step", 7, 3), ("step", 8, 4), ("step", 9, 5), ("step", 10, 6)])
        self.assertEqual(len(result["ttft_ms_samples"]), 2)
        self.assertEqual(len(result["tpot_ms_samples"]), 3)  # the first step is the warm-up
        self.assertEqual(result["generated_ids"], [7, 8, 9, 10, 11])


if __name__ == "__main__":
    unittest.main()
