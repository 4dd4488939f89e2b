import sys
import unittest
from pathlib import Path

from luminal_bench import config, process, runner
from luminal_bench.paths import Job, PathSpec
from luminal_bench.store import Result


def base(path="ours-cpu"):
    return Result(model="m", path=path, setting="s", status="failed")


def job(ids=(1, 2, 3)):
    return Job(model_file=Path("m.gguf"), prompt_ids=list(ids), decode_tokens=2, iters=3, warmups=1, threads=None,
               search=1, binaries=Path("."))


def python_path(name, code):
    """A path whose process is a Python one-liner."""
    return PathSpec(name, name, False, lambda _job: [sys.executable, "-c", code], lambda _job: None)


RESULT = ('{"ttft_ms_samples": [100, 10, 30], "tpot_ms_samples": [4, 2, 3], "prompt_ids": [1, 2, 3], '
          '"generated_ids": [5, 6, 7, 8], "dtype": "float32"}')


class ResultTest(unittest.TestCase):
    def test_statistics_are_recomputed_from_samples_after_the_warmups(self):
        row = runner.result_from_bench(
            {"ttft_ms_samples": [100, 10, 30], "tpot_ms_samples": [4, 2, 3], "ttft_ms": 999, "tpot_ms": 999,
             "prompt_ids": [1], "generated_ids": [2]}, base(), warmups=1, sent_ids=[1])
        self.assertEqual((row.status, row.ttft_ms_samples, row.ttft_ms, row.tpot_ms), ("ok", [10, 30], 20, 3))
        self.assertAlmostEqual(row.throughput_tps, 1000 / 3)

    def test_other_prompt_ids_than_sent_are_an_error(self):
        with self.assertRaisesRegex(ValueError, "prompt ids"):
            runner.result_from_bench({"ttft_ms_samples": [1], "tpot_ms_samples": [1], "prompt_ids": [9],
                                      "generated_ids": []}, base(), 0, sent_ids=[1])

    def test_missing_fields_are_an_error(self):
        with self.assertRaisesRegex(ValueError, "lacks"):
            runner.result_from_bench({"ttft_ms_samples": [1]}, base(), 0, None)

    def test_compile_only_rows_take_the_compile_samples(self):
        row = runner.result_from_bench({"compile_ms_samples": [5, 1, 3]}, base("ours-compile"), 0, None)
        self.assertEqual((row.status, row.compile_ms), ("ok", 3))


def measured(ttft, peak_rss, ids=(5, 6)):
    row = base()
    row.status, row.ttft_ms_samples, row.tpot_ms_samples = "ok", list(ttft), [2.0, 4.0]
    row.peak_rss_mib, row.wall_s, row.iters, row.generated_ids, row.load_ms = peak_rss, 1.5, 3, list(ids), 7.0
    return row


class RoundsTest(unittest.TestCase):
    def test_rounds_pool_their_samples_and_keep_the_highest_peak_rss(self):
        row = runner.merge_rounds([measured([10, 30], 100), measured([20, 40], 300), measured([50], 200, (5, 9))])
        self.assertEqual((row.ttft_ms_samples, row.ttft_ms, row.tpot_ms), ([10, 30, 20, 40, 50], 30, 3))
        self.assertEqual((row.peak_rss_mib, row.wall_s, row.iters, row.load_ms), (300, 4.5, 9, 7.0))
        self.assertEqual([r["ttft_ms_samples"] for r in row.raw["rounds"]], [[10, 30], [20, 40], [50]])
        self.assertEqual(row.raw["rounds"][2]["generated_ids"], [5, 9])

    def test_one_round_is_the_row_itself_and_a_failed_round_is_the_row(self):
        one = measured([10], 100)
        self.assertIs(runner.merge_rounds([one]), one)
        failed = base()
        failed.error = "exit code 1"
        row = runner.merge_rounds([measured([10], 100), failed])
        self.assertEqual((row.status, row.error), ("failed", "round 2 of 2: exit code 1"))

    def test_every_round_of_a_timed_path_is_a_process(self):
        parsed = config.parse("t", {"rounds": 3, "settings": [{"prompt_tokens": 8, "decode_tokens": 2}],
                                    "models": [{"key": "m", "source": "file", "path": "x",
                                                "paths": ["ours-cpu", "torch-eager", "ours-compile"]}]})
        self.assertEqual(runner.count_jobs(parsed), 3 * 2 + 1)


class MeasureTest(unittest.TestCase):
    def test_a_path_that_prints_a_result_gives_a_row_with_memory_and_time(self):
        row = runner._measure(python_path("p", f"print('BENCH_RESULT ' + {RESULT!r})"), job(), base(), 30, 1)
        self.assertEqual(row.status, "ok", row.error)
        self.assertEqual(row.ttft_ms, 20)
        self.assertGreater(row.peak_rss_mib, 1)

    def test_a_crashing_path_is_a_failed_row_with_its_output(self):
        row = runner._measure(python_path("p", "import sys; print('boom'); sys.exit(3)"), job(), base(), 30, 1)
        self.assertEqual(row.status, "failed")
        self.assertIn("exit code 3", row.error)
        self.assertIn("boom", row.error)

    def test_a_hanging_path_times_out(self):
        row = runner._measure(python_path("p", "import time; time.sleep(30)"), job(), base(), 1, 1)
        self.assertEqual((row.status, row.error), ("failed", "timed out after 1 s"))

    def test_an_unavailable_path_is_skipped_with_its_reason(self):
        spec = PathSpec("p", "p", False, lambda _job: ["false"], lambda _job: "no CUDA device")
        row = runner._measure(spec, job(), base(), 30, 1)
        self.assertEqual((row.status, row.error), ("skipped", "no CUDA device"))

    def test_garbage_after_the_marker_is_reported(self):
        row = runner._measure(python_path("p", "print('BENCH_RESULT {not json')"), job(), base(), 30, 1)
        self.assertEqual(row.status, "failed")
        self.assertIn("unparsable", row.error)


class ProcessTest(unittest.TestCase):
    def test_parse_results_reads_every_marked_line(self):
        self.assertEqual(process.parse_results("text\nBENCH_RESULT {\"a\": 1}\nBENCH_RESULT {\"a\": 2}\n"),
                         [{"a": 1}, {"a": 2}])
        with self.assertRaises(ValueError):
            process.parse_results("BENCH_RESULT [1]")


if __name__ == "__main__":
    unittest.main()
