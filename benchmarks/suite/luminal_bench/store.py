"""SQLite storage: one `runs` row per suite invocation (commit, machine, config), one
`results` row per model x setting x path with every sample as JSON."""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    config TEXT NOT NULL,
    git_commit TEXT, git_branch TEXT, git_dirty INTEGER, git_subject TEXT,
    cpu_model TEXT, cpu_cores INTEGER, memory_gib REAL, gpu TEXT, os TEXT, hostname TEXT
);
CREATE TABLE IF NOT EXISTS results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    model TEXT NOT NULL, model_title TEXT, path TEXT NOT NULL, setting TEXT NOT NULL,
    prompt_tokens INTEGER, decode_tokens INTEGER, threads INTEGER, iters INTEGER, warmups INTEGER,
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'skipped')),
    error TEXT,
    dtype TEXT, device TEXT,
    ttft_ms REAL, tpot_ms REAL, throughput_tps REAL, compile_ms REAL, load_ms REAL,
    peak_rss_mib REAL, wall_s REAL,
    ttft_ms_samples TEXT, tpot_ms_samples TEXT, compile_ms_samples TEXT,
    prompt_ids TEXT, generated_ids TEXT, raw TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS results_run ON results(run_id);
CREATE INDEX IF NOT EXISTS results_model_path ON results(model, path);
"""

SAMPLE_COLUMNS = ("ttft_ms_samples", "tpot_ms_samples", "compile_ms_samples", "prompt_ids", "generated_ids", "raw")


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class Result:
    model: str
    path: str
    setting: str
    status: str
    model_title: str = ""
    prompt_tokens: int | None = None
    decode_tokens: int | None = None
    threads: int | None = None
    iters: int | None = None
    warmups: int | None = None
    error: str | None = None
    dtype: str | None = None
    device: str | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    throughput_tps: float | None = None
    compile_ms: float | None = None
    load_ms: float | None = None
    peak_rss_mib: float | None = None
    wall_s: float | None = None
    ttft_ms_samples: list = field(default_factory=list)
    tpot_ms_samples: list = field(default_factory=list)
    compile_ms_samples: list = field(default_factory=list)
    prompt_ids: list = field(default_factory=list)
    generated_ids: list = field(default_factory=list)
    raw: dict = field(default_factory=dict)


class Store:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA foreign_keys = ON")
        self.db.executescript(SCHEMA)

    def close(self) -> None:
        self.db.close()

    def begin_run(self, config: str, git: dict, machine: dict) -> int:
        columns = {"started_at": now(), "config": config, **git, **machine}
        cursor = self.db.execute(f"INSERT INTO runs ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                                 list(columns.values()))
        self.db.commit()
        return cursor.lastrowid

    def finish_run(self, run_id: int) -> None:
        self.db.execute("UPDATE runs SET finished_at = ? WHERE id = ?", (now(), run_id))
        self.db.commit()

    def add_result(self, run_id: int, result: Result) -> None:
        """Committed at once, so an interrupted suite keeps what it measured."""
        columns = dict(vars(result))
        for key in SAMPLE_COLUMNS:
            columns[key] = json.dumps(columns[key])
        columns.update(run_id=run_id, created_at=now())
        self.db.execute(f"INSERT INTO results ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                        list(columns.values()))
        self.db.commit()

    def runs(self) -> list[dict]:
        return [dict(r) for r in self.db.execute("SELECT * FROM runs ORDER BY id")]

    def results(self, run_id: int | None = None) -> list[dict]:
        query = "SELECT * FROM results" + (" WHERE run_id = ?" if run_id is not None else "") + " ORDER BY id"
        rows = [dict(r) for r in self.db.execute(query, () if run_id is None else (run_id,))]
        for row in rows:
            for key in SAMPLE_COLUMNS:
                row[key] = json.loads(row[key]) if row[key] else ([] if key != "raw" else {})
        return rows
