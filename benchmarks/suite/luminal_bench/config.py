"""Named configurations: benchmarks/suite/configs/NAME.toml (or .json), validated into
plain dataclasses so that a typo fails before anything runs."""
from __future__ import annotations

import fnmatch
import json
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"

MODEL_SOURCES = {"smollm2", "random_llama", "random_hf", "file", "hf_config", "quantized"}
DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}  # ours' --weights -> torch's dtype
# A model's `bounds`, checked in the run's summary (reported, not enforced):
#   rss_over_file_and_kv  our peak RSS over the weight files' bytes + the KV cache's bytes
#   ttft_over_peer        our TTFT median over each peer's
#   compile_ms            our compile time median (ours-compile, ours-compile-cuda), in milliseconds
BOUNDS = {"rss_over_file_and_kv", "ttft_over_peer", "compile_ms"}


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class Setting:
    """One measurement point: prompt length, decode steps and, when given, the thread count
    every path is asked to use (absent: every path runs on one thread)."""
    prompt_tokens: int
    decode_tokens: int
    threads: int | None = None

    @property
    def label(self) -> str:
        label = f"prompt {self.prompt_tokens}, decode {self.decode_tokens}"
        return label + (f", {self.threads} thread{'s' if self.threads != 1 else ''}" if self.threads else "")

    @property
    def effective_threads(self) -> int:
        return self.threads or 1


@dataclass(frozen=True)
class Model:
    key: str
    title: str
    source: str
    paths: tuple[str, ...]
    options: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def dtype(self) -> str:
        """The weights' dtype every path runs in: ours' --weights, torch's --dtype."""
        return self.options.get("dtype", "f32")

    def timeout_s(self, path: str, default: int) -> int:
        """A path's own time cap (`timeouts = { "torch-compile-cuda" = 180 }`), else the config's."""
        return self.options.get("timeouts", {}).get(path, default)


@dataclass(frozen=True)
class Config:
    name: str
    description: str
    iters: int
    warmups: int
    timeout_s: int
    search: int
    prompt_text: str
    settings: tuple[Setting, ...]
    models: tuple[Model, ...]
    # GiB copied to measure the device's bandwidth once per run (0: not measured), the
    # device being the one the first CUDA path runs on, else the CPU.
    bandwidth_gib: float = 0.0
    # Processes per path and setting, run in turns (ours, peer, ours, peer, ...) so that a
    # machine whose load drifts weighs on every path alike; a row pools its rounds' samples.
    rounds: int = 1


def available() -> list[str]:
    return sorted({p.stem for p in CONFIG_DIR.glob("*.toml")} | {p.stem for p in CONFIG_DIR.glob("*.json")})


def load(name_or_path: str) -> Config:
    path = Path(name_or_path)
    if not (path.suffix in (".toml", ".json") and path.is_file()):
        matches = [CONFIG_DIR / f"{name_or_path}{ext}" for ext in (".toml", ".json")]
        path = next((m for m in matches if m.exists()), None)
        if path is None:
            raise ConfigError(f"no configuration {name_or_path!r}; known: {', '.join(available())}")
    text = path.read_text()
    try:
        raw = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"{path}: {error}") from error
    return parse(path.stem, raw, where=str(path))


def _positive(raw: dict, key: str, where: str, default: int | None = None, minimum: int = 1) -> int:
    value = raw.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"{where}: {key} must be an integer >= {minimum}, got {value!r}")
    return value


def _expand_settings(raw: dict, where: str) -> list[Setting]:
    """A [[settings]] table may list several values per key; they expand to every combination."""
    def values(key: str, required: bool) -> list:
        value = raw.get(key)
        if value is None:
            if required:
                raise ConfigError(f"{where}: {key} is required")
            return [None]
        return value if isinstance(value, list) else [value]

    unknown = set(raw) - {"prompt_tokens", "decode_tokens", "threads"}
    if unknown:
        raise ConfigError(f"{where}: unknown keys {sorted(unknown)}")
    out = []
    for prompt in values("prompt_tokens", True):
        for decode in values("decode_tokens", True):
            for threads in values("threads", False):
                point = {"prompt_tokens": prompt, "decode_tokens": decode}
                _positive(point, "prompt_tokens", where)
                _positive(point, "decode_tokens", where)
                if threads is not None:
                    _positive({"threads": threads}, "threads", where)
                out.append(Setting(prompt, decode, threads))
    return out


def parse(name: str, raw: dict, where: str = "config") -> Config:
    from .paths import PATHS  # the path registry names what a model may list

    unknown = set(raw) - {"description", "iters", "warmups", "timeout_s", "search", "prompt_text", "settings",
                          "models", "bandwidth_gib", "rounds"}
    if unknown:
        raise ConfigError(f"{where}: unknown keys {sorted(unknown)}")
    settings = [s for i, table in enumerate(raw.get("settings", []))
                for s in _expand_settings(table, f"{where}: settings[{i}]")]
    if not settings:
        raise ConfigError(f"{where}: at least one [[settings]] table is required")
    models = []
    for i, table in enumerate(raw.get("models", [])):
        here = f"{where}: models[{i}]"
        key, source = table.get("key"), table.get("source")
        if not isinstance(key, str) or not key:
            raise ConfigError(f"{here}: key (a short name) is required")
        if source not in MODEL_SOURCES:
            raise ConfigError(f"{here} ({key}): source must be one of {sorted(MODEL_SOURCES)}, got {source!r}")
        paths = table.get("paths", [])
        bad = [p for p in paths if p not in PATHS]
        if not paths or bad:
            raise ConfigError(f"{here} ({key}): paths must name known paths {sorted(PATHS)}; bad: {bad or 'none'}")
        options = {k: v for k, v in table.items() if k not in {"key", "title", "source", "paths"}}
        _check_options(options, source, f"{here} ({key})")
        models.append(Model(key, table.get("title", key), source, tuple(paths), options))
    if not models:
        raise ConfigError(f"{where}: at least one [[models]] table is required")
    if len({m.key for m in models}) != len(models):
        raise ConfigError(f"{where}: model keys must be unique")
    bandwidth_gib = raw.get("bandwidth_gib", 0.0)
    if not isinstance(bandwidth_gib, (int, float)) or isinstance(bandwidth_gib, bool) or bandwidth_gib < 0:
        raise ConfigError(f"{where}: bandwidth_gib must be a number >= 0, got {bandwidth_gib!r}")
    return Config(name=name, description=raw.get("description", ""), bandwidth_gib=float(bandwidth_gib),
                  iters=_positive(raw, "iters", where, 3), warmups=_positive(raw, "warmups", where, 1, minimum=0),
                  timeout_s=_positive(raw, "timeout_s", where, 600), search=_positive(raw, "search", where, 1),
                  rounds=_positive(raw, "rounds", where, 1),
                  prompt_text=raw.get("prompt_text", DEFAULT_PROMPT_TEXT), settings=tuple(settings),
                  models=tuple(models))


def dry_run(config: Config) -> Config:
    """The configuration as a CPU check of its code paths: random_hf models at TINY dims
    (models.TINY), each CUDA path replaced by its CPU twin, a 64 MiB bandwidth copy."""
    from .paths import cpu_twin

    models = []
    for model in config.models:
        paths = tuple(dict.fromkeys(cpu_twin(p) for p in model.paths))
        options = {**model.options, "tiny": True} if model.source == "random_hf" else model.options
        models.append(replace(model, title=f"{model.title} [dry run: tiny dims, CPU]", paths=paths, options=options))
    return replace(config, name=f"{config.name}-dry-run", models=tuple(models),
                   bandwidth_gib=min(config.bandwidth_gib, 1 / 16))


def without_paths(config: Config, skipped: set[str]) -> Config:
    """The configuration with the named paths left out (a model left with none is dropped)."""
    models = [replace(m, paths=tuple(p for p in m.paths if p not in skipped)) for m in config.models]
    return replace(config, models=tuple(m for m in models if m.paths))


def select(config: Config, models: list[str] = (), threads: list[int] = (), prompt_tokens: list[int] = (),
           rounds: int | None = None) -> Config:
    """Part of a configuration, to measure a long one in several sittings: the models whose
    key matches one of the `models` patterns (fnmatch), the settings with one of the
    `threads` and `prompt_tokens` (empty: all), and `rounds` in place of the configured
    rounds. A selection that leaves nothing to run is a ConfigError."""
    chosen = tuple(m for m in config.models if not models or any(fnmatch.fnmatchcase(m.key, p) for p in models))
    settings = tuple(s for s in config.settings
                     if (not threads or s.effective_threads in threads)
                     and (not prompt_tokens or s.prompt_tokens in prompt_tokens))
    if not chosen:
        raise ConfigError(f"{config.name}: no model key matches {list(models)}; keys: "
                          f"{', '.join(m.key for m in config.models)}")
    if not settings:
        raise ConfigError(f"{config.name}: no setting has threads in {list(threads) or 'any'} and prompt_tokens in "
                          f"{list(prompt_tokens) or 'any'}; settings: {', '.join(s.label for s in config.settings)}")
    if rounds is not None and rounds < 1:
        raise ConfigError(f"{config.name}: rounds must be >= 1, got {rounds}")
    return replace(config, models=chosen, settings=settings, rounds=config.rounds if rounds is None else rounds)


def _check_options(options: dict, source: str, where: str) -> None:
    from .paths import PATHS

    if options.get("dtype", "f32") not in DTYPES:
        raise ConfigError(f"{where}: dtype must be one of {sorted(DTYPES)}, got {options['dtype']!r}")
    timeouts = options.get("timeouts", {})
    if not isinstance(timeouts, dict) or any(p not in PATHS or not isinstance(s, int) or s < 1
                                             for p, s in timeouts.items()):
        raise ConfigError(f"{where}: timeouts maps path names to seconds (integers >= 1), got {timeouts!r}")
    bounds = options.get("bounds", {})
    if not isinstance(bounds, dict) or any(k not in BOUNDS or not isinstance(v, (int, float)) or isinstance(v, bool)
                                           or v <= 0 for k, v in bounds.items()):
        raise ConfigError(f"{where}: bounds maps {sorted(BOUNDS)} to positive numbers, got {bounds!r}")
    if options.get("prompt", "text") not in ("text", "seeded"):
        raise ConfigError(f"{where}: prompt must be \"text\" or \"seeded\", got {options['prompt']!r}")
    if source == "random_hf":
        for required in ("config", "tokenizer"):
            if not isinstance(options.get(required), str):
                raise ConfigError(f"{where}: a random_hf model needs {required} = \"<repository path>\"")
        if not isinstance(options.get("set", {}), dict):
            raise ConfigError(f"{where}: set is a table of config.json overrides")


DEFAULT_PROMPT_TEXT = (
    "The history of computing is a story of people who wanted to count faster than their hands allowed. "
    "Early merchants used pebbles and knotted strings, and later the abacus let a trained clerk add long "
    "columns of numbers in a few moments. In the seventeenth century, inventors built gears that could carry "
    "a digit from one wheel to the next, and a century later weavers used punched cards to control the "
    "patterns of silk on their looms. Those cards returned when engineers needed a way to feed instructions "
    "to large machines that filled whole rooms. The first electronic computers were slow, hot and fragile, "
    "yet they solved problems in hours that had taken teams of people many weeks.")
