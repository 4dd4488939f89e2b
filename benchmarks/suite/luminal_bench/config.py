"""Named configurations: benchmarks/suite/configs/NAME.toml (or .json), validated into
plain dataclasses so that a typo fails before anything runs."""
from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"

MODEL_SOURCES = {"smollm2", "random_llama", "file", "hf_config", "quantized"}


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class Setting:
    """One measurement point: prompt length, decode steps and, when given, the thread count
    every path is asked to use (absent: peers are pinned to one thread and ours gets no
    --threads flag, as it runs on one thread without one)."""
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
                          "models"}
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
        models.append(Model(key, table.get("title", key), source, tuple(paths), options))
    if not models:
        raise ConfigError(f"{where}: at least one [[models]] table is required")
    if len({m.key for m in models}) != len(models):
        raise ConfigError(f"{where}: model keys must be unique")
    return Config(name=name, description=raw.get("description", ""),
                  iters=_positive(raw, "iters", where, 3), warmups=_positive(raw, "warmups", where, 1, minimum=0),
                  timeout_s=_positive(raw, "timeout_s", where, 600), search=_positive(raw, "search", where, 1),
                  prompt_text=raw.get("prompt_text", DEFAULT_PROMPT_TEXT), settings=tuple(settings),
                  models=tuple(models))


DEFAULT_PROMPT_TEXT = (
    "The history of computing is a story of people who wanted to count faster than their hands allowed. "
    "Early merchants used pebbles and knotted strings, and later the abacus let a trained clerk add long "
    "columns of numbers in a few moments. In the seventeenth century, inventors built gears that could carry "
    "a digit from one wheel to the next, and a century later weavers used punched cards to control the "
    "patterns of silk on their looms. Those cards returned when engineers needed a way to feed instructions "
    "to large machines that filled whole rooms. The first electronic computers were slow, hot and fragile, "
    "yet they solved problems in hours that had taken teams of people many weeks.")
