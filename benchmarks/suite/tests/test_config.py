import unittest

from luminal_bench import config


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
        self.assertEqual((parsed.iters, parsed.warmups, parsed.search), (3, 1, 1))

    def test_mistakes_are_reported(self):
        cases = {"unknown path": minimal(models=[{"key": "m", "source": "file", "paths": ["torch-jit"]}]),
                 "unknown source": minimal(models=[{"key": "m", "source": "hub", "paths": ["ours-cpu"]}]),
                 "no settings": minimal(settings=[]),
                 "zero iters": minimal(iters=0),
                 "typo": minimal(iter=3),
                 "setting typo": minimal(settings=[{"prompt_tokens": 8, "decode_token": 2}]),
                 "duplicate keys": minimal(models=[{"key": "m", "source": "file", "paths": ["ours-cpu"]}] * 2)}
        for name, raw in cases.items():
            with self.subTest(name=name), self.assertRaises(config.ConfigError):
                config.parse("t", raw)

    def test_unknown_name_lists_the_known_ones(self):
        with self.assertRaisesRegex(config.ConfigError, "smoke"):
            config.load("no-such-config")


if __name__ == "__main__":
    unittest.main()
