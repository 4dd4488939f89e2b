import re
import tempfile
import unittest
from pathlib import Path

from luminal_bench import report
from luminal_bench.store import Result, Store

GIT = {"git_commit": "0123456789abcdef", "git_branch": "main", "git_dirty": False, "git_subject": "a change"}
MACHINE = {"cpu_model": "Test CPU", "cpu_cores": 2, "memory_gib": 8.0, "gpu": None, "os": "Linux",
           "hostname": "host"}


def measured(path, ttft, tpot, ids=(1, 2, 3)):
    return Result(model="m", model_title="Model M", path=path, setting="prompt 8, decode 2", status="ok",
                  ttft_ms=ttft, tpot_ms=tpot, throughput_tps=1000 / tpot,
                  ttft_ms_samples=[ttft * 0.9, ttft, ttft * 1.2],
                  tpot_ms_samples=[tpot, tpot * 1.1], generated_ids=list(ids), peak_rss_mib=100.0, dtype="float32")


class StoreReportTest(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.TemporaryDirectory()
        self.store = Store(Path(self.folder.name) / "bench.db")

    def tearDown(self):
        self.store.close()
        self.folder.cleanup()

    def add_run(self, ours_ttft):
        run = self.store.begin_run("default", GIT, MACHINE)
        self.store.add_result(run, measured("ours-cpu", ours_ttft, 10))
        self.store.add_result(run, measured("llama.cpp", 50, 5, ids=(1, 2, 4)))
        self.store.add_result(run, Result(model="m", model_title="Model M", path="torch-eager",
                                          setting="prompt 8, decode 2", status="failed", error="exit code 1: <oops>"))
        self.store.add_result(run, Result(model="m", model_title="Model M", path="ours-cuda",
                                          setting="prompt 8, decode 2", status="skipped", error="no CUDA device"))
        self.store.finish_run(run)
        return run

    def test_rows_round_trip_with_their_samples(self):
        run = self.add_run(100)
        rows = self.store.results(run)
        self.assertEqual([r["status"] for r in rows], ["ok", "ok", "failed", "skipped"])
        self.assertEqual(rows[0]["ttft_ms_samples"], [90.0, 100, 120.0])
        self.assertEqual(self.store.runs()[0]["cpu_model"], "Test CPU")

    def test_report_is_offline_and_shows_ratios_errors_and_history(self):
        self.add_run(100)
        self.add_run(80)
        html = report.render(self.store)
        self.assertNotRegex(html, r"(src|href)=['\"]?https?:")
        self.assertIn("<svg", html)
        self.assertIn("2.00× best", html)                       # TPOT: 10 / llama.cpp's 5
        self.assertIn("1.60×", html)                            # TTFT of the latest run: 80 / 50
        self.assertIn("exit code 1: &lt;oops&gt;", html)         # escaped error text
        self.assertIn("skipped: no CUDA device", html)
        self.assertIn("2/3", html)                              # greedy ids agreement with ours
        self.assertIn("<polyline", html)                        # a history line over the two runs
        self.assertEqual(len(re.findall("Configuration “default”", html)), 1)  # the latest run only

    def test_markdown_table_of_the_newest_run(self):
        self.add_run(100)
        self.store.add_result(self.store.begin_run("default", GIT, MACHINE),
                              Result(model="m", path="ours-cpu", setting="s", status="failed", error="a | b"))
        table = report.markdown(self.store, "default")
        self.assertIn("| m (s) | luminal (CPU) | failed | | | | | a \\| b |", table)
        self.assertNotIn("llama.cpp", table)  # the older run is not shown
        self.assertIn("no run", report.markdown(self.store, "gpu"))

    def test_ratios_in_the_markdown_table(self):
        self.add_run(100)
        self.assertIn("TTFT 2.00× (llama.cpp), TPOT 2.00× (llama.cpp)", report.markdown(self.store, "default"))

    def test_a_model_with_bounds_prints_its_checks(self):
        run = self.store.begin_run("moe_cpu", GIT, MACHINE)
        memory = {"bounds": {"rss_over_file_and_kv": 1.3, "ttft_over_peer": 2.0}, "file_bytes": 1000 * 2**20,
                  "kv_bytes": 24 * 2**20, "kv_context": 140, "kv_dtype": "f32"}
        ours = measured("ours-cpu", 300, 10, ids=(7, 1))
        ours.peak_rss_mib, ours.raw = 1536.0, {**memory, "rounds": [{"ttft_ms_samples": [270, 300]},
                                                                   {"ttft_ms_samples": [360]}]}
        torch = measured("torch-eager", 100, 10, ids=(7, 2))
        torch.raw = {**memory, "kv_dtype": "bfloat16"}
        self.store.add_result(run, ours)
        self.store.add_result(run, torch)
        text = report.summary(self.store, run)
        self.assertIn("TTFT luminal (CPU): median 300.0 ms, min-max 270.0-360.0 ms over 3 prefills, "
                      "round medians 285.0 / 360.0", text)
        self.assertIn("TTFT ours / PyTorch eager: 3.00× (bound 2×: OVER)", text)
        self.assertIn("peak RSS luminal (CPU): 1,536 MiB / (files 1,000 MiB + KV 24.0 MiB: 140 tokens of f32) "
                      "= 1.500× (bound 1.3×: OVER)", text)
        self.assertRegex(text, r"peak RSS PyTorch eager: 100 MiB .* = 0\.098×\n")  # no bound on a peer
        self.assertIn("first greedy token: ours 7, PyTorch eager 7: agree", text)

    def test_a_compile_time_bound_prints_its_check_and_phases(self):
        run = self.store.begin_run("default", GIT, MACHINE)
        for key, samples in (("fast", [60.0, 70.0, 65.0]), ("slow", [250.0, 240.0, 260.0])):
            self.store.add_result(run, Result(model=key, model_title=key, path="ours-compile", setting="compile only",
                                              status="ok", compile_ms=sorted(samples)[1], compile_ms_samples=samples,
                                              raw={"bounds": {"compile_ms": 100},
                                                   "phases_ms": {"saturation": 40.0, "choice": 5.5}}))
        text = report.summary(self.store, run)
        self.assertIn("compile luminal compile: median 65.0 ms, min-max 60.0-70.0 ms over 3 compiles "
                      "(bound 100 ms: within)", text)
        self.assertIn("compile luminal compile: median 250.0 ms, min-max 240.0-260.0 ms over 3 compiles "
                      "(bound 100 ms: OVER)", text)
        self.assertIn("phases (medians, ms): saturation 40.0, choice 5.5", text)

    def test_empty_database_says_what_to_do(self):
        self.assertIn("scripts/bench.sh", report.render(self.store))


if __name__ == "__main__":
    unittest.main()
