import json
import tempfile
import unittest
from pathlib import Path

from luminal_bench import config, models


def minimal(**overrides):
    raw = {"settings": [{"prompt_tokens": 8, "decode_tokens": 2}],
           "models": [{"key": "m", "source": "file", "path": "x", "paths": ["ours-cpu"]}]}
    raw.update(overrides)
    return raw


class ConfigTest(unittest.TestCase):
    def test_every_shipped_configuration_parses(self):
        for name in config.available():
            with self.subTest(name=name):
                self.assertTrue(config.load(name).models)

    def test_lists_in_a_setting_expand_to_every_combination(self):
        parsed = config.parse("t", minimal(settings=[{"prompt_tokens": [8, 16], "decode_tokens": 2,
                                                      "threads": [1, 2]}]))
        self.assertEqual([(s.prompt_tokens, s.threads) for s in parsed.settings], [(8, 1), (8, 2), (16, 1), (16, 2)])

    def test_threads_absent_means_one_thread(self):
        setting = config.parse("t", minimal()).settings[0]
        self.assertIsNone(setting.threads)
        self.assertEqual(setting.effective_threads, 1)

    def test_defaults(self):
        parsed = config.parse("t", minimal())
        self.assertEqual((parsed.iters, parsed.warmups, parsed.search, parsed.rounds), (3, 1, 1, 1))

    def test_bounds_name_known_checks_with_positive_numbers(self):
        model = {"key": "m", "source": "file", "path": "x", "paths": ["ours-cpu"]}
        parsed = config.parse("t", minimal(models=[{**model, "bounds": {"ttft_over_peer": 2}}]))
        self.assertEqual(parsed.models[0].options["bounds"], {"ttft_over_peer": 2})
        parsed = config.parse("t", minimal(models=[{**model, "bounds": {"compile_ms": 100}}]))
        self.assertEqual(parsed.models[0].options["bounds"], {"compile_ms": 100})
        for bounds in ({"ttft_over_torch": 2}, {"ttft_over_peer": 0}, {"rss_over_file_and_kv": "1.3"}, [1.3]):
            with self.subTest(bounds=bounds), self.assertRaises(config.ConfigError):
                config.parse("t", minimal(models=[{**model, "bounds": bounds}]))

    def test_mistakes_are_reported(self):
        cases = {"unknown path": minimal(models=[{"key": "m", "source": "file", "paths": ["torch-jit"]}]),
                 "unknown source": minimal(models=[{"key": "m", "source": "hub", "paths": ["ours-cpu"]}]),
                 "no settings": minimal(settings=[]),
                 "zero iters": minimal(iters=0),
                 "zero rounds": minimal(rounds=0),
                 "typo": minimal(iter=3),
                 "setting typo": minimal(settings=[{"prompt_tokens": 8, "decode_token": 2}]),
                 "duplicate keys": minimal(models=[{"key": "m", "source": "file", "paths": ["ours-cpu"]}] * 2)}
        for name, raw in cases.items():
            with self.subTest(name=name), self.assertRaises(config.ConfigError):
                config.parse("t", raw)

    def test_a_selection_keeps_matching_models_and_settings(self):
        models = [{"key": k, "source": "file", "path": "x", "paths": ["ours-cpu"]} for k in ("a-q4", "a-q8", "b-q4")]
        parsed = config.parse("t", minimal(models=models, settings=[{"prompt_tokens": [8, 16], "decode_tokens": 2,
                                                                     "threads": [1, 2]}]))
        part = config.select(parsed, models=["*-q4"], threads=[2], prompt_tokens=[16], rounds=3)
        self.assertEqual([m.key for m in part.models], ["a-q4", "b-q4"])
        self.assertEqual([(s.prompt_tokens, s.threads) for s in part.settings], [(16, 2)])
        self.assertEqual(part.rounds, 3)
        self.assertEqual(config.select(parsed), parsed)
        for empty in ({"models": ["c*"]}, {"threads": [4]}, {"prompt_tokens": [9]}, {"rounds": 0}):
            with self.subTest(empty=empty), self.assertRaises(config.ConfigError):
                config.select(parsed, **empty)

    def test_unknown_name_lists_the_known_ones(self):
        with self.assertRaisesRegex(config.ConfigError, "smoke"):
            config.load("no-such-config")


class MemoryFieldsTest(unittest.TestCase):
    def test_file_bytes_and_the_kv_cache_of_the_context(self):
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder)
            (root / "model.safetensors").write_bytes(b"x" * 1000)
            (root / "config.json").write_text(json.dumps({"num_attention_heads": 32, "hidden_size": 2048,
                                                          "num_key_value_heads": 4, "head_dim": 128,
                                                          "num_hidden_layers": 4}))
            fields = models.memory_fields(root, 140, "f32")
            self.assertEqual(fields, {"file_bytes": 1000, "kv_bytes": 4 * 2 * 4 * 128 * 140 * 4, "kv_context": 140,
                                      "kv_dtype": "f32"})
            self.assertEqual(models.memory_fields(root, 140, "bfloat16")["kv_bytes"], 4 * 2 * 4 * 128 * 140 * 2)
            self.assertEqual(models.memory_fields(root, 140, None), {})
            self.assertEqual(models.memory_fields(root / "absent", 140, "f32"), {})


if __name__ == "__main__":
    unittest.main()
