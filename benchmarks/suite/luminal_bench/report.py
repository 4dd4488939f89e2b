"""The HTML report: one self-contained file (inline CSS and SVG, no scripts, no network).
For the latest run of each configuration: per model and setting, TTFT and TPOT bars by
path with the samples' spread, our ratios to the best peer, a table of every row (errors
included), and the history of our medians over earlier runs."""
from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timezone
from html import escape
from pathlib import Path

from . import stats
from .paths import COMPILE_ONLY, PATHS
from .store import Store
from .svg import Bar, Point, bar_chart, color, fmt, line_chart

CSS = """
body{margin:0;background:#f1f5f9;color:#0f172a;font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif}
main{max-width:1120px;margin:0 auto;padding:24px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:32px 0 8px}h3{font-size:15px;margin:0 0 10px}
.sub{color:#475569;margin:0 0 4px}.card{background:#fff;border:1px solid #e2e8f0;border-radius:10px;
padding:16px 18px;margin:14px 0;box-shadow:0 1px 2px rgba(15,23,42,.05)}
.charts{display:flex;flex-wrap:wrap;gap:8px 28px}.ratio{margin:6px 0 10px;color:#334155}
.ratio b{font-variant-numeric:tabular-nums}.faster{color:#15803d}.slower{color:#b91c1c}
table{border-collapse:collapse;width:100%;font-size:12.5px;font-variant-numeric:tabular-nums;margin-top:6px}
th,td{text-align:right;padding:4px 8px;border-bottom:1px solid #f1f5f9;vertical-align:top}
th{color:#475569;font-weight:600;border-bottom:1px solid #e2e8f0;white-space:nowrap}th:first-child,td:first-child{text-align:left;white-space:nowrap}
td.err{text-align:left;color:#b91c1c;max-width:420px;word-break:break-word}td.skip{text-align:left;color:#64748b}
.dot{display:inline-block;width:9px;height:9px;border-radius:2px;margin-right:6px;vertical-align:middle}
.meta{font-size:12.5px;color:#475569}.none{color:#94a3b8}footer{color:#64748b;font-size:12px;margin:28px 0}
"""


def _latest_runs(store: Store) -> list[dict]:
    """The newest run of each configuration that has results, newest first."""
    with_results = {r["run_id"] for r in store.results()}
    latest: dict[str, dict] = {}
    for run in store.runs():
        if run["id"] in with_results:
            latest[run["config"]] = run
    return sorted(latest.values(), key=lambda r: r["id"], reverse=True)


def _num(value: float | None, digits: int = 1) -> str:
    return f"{value:,.{digits}f}" if value is not None else "<span class='none'>–</span>"


def _agreement(ours: list[int], theirs: list[int]) -> str:
    if not ours or not theirs:
        return "<span class='none'>–</span>"
    n = min(len(ours), len(theirs))
    same = next((i for i in range(n) if ours[i] != theirs[i]), n)
    return f"{same}/{n}"


def _ratio_line(metric: str, rows: list[dict], key: str) -> str:
    ours = [r for r in rows if PATHS[r["path"]].ours and r[key]]
    peers = [r for r in rows if not PATHS[r["path"]].ours and r[key]]
    if not ours or not peers:
        return ""
    best = min(peers, key=lambda r: r[key])
    parts = []
    for row in ours:
        value = stats.ratio(row[key], best[key])
        word, cls = ("slower", "slower") if value > 1 else ("faster", "faster")
        factor = value if value > 1 else 1 / value
        tokens = f", decode tok/s ratio {1 / value:.2f}" if key == "tpot_ms" else ""
        parts.append(f"{escape(PATHS[row['path']].label)} / {escape(PATHS[best['path']].label)} = "
                     f"<b>{value:.2f}×</b> <span class='{cls}'>({factor:.2f}× {word}{tokens})</span>")
    return f"<div class='ratio'>{metric}, ours / best peer: {'; '.join(parts)}</div>"


def _bars(rows: list[dict], key: str, samples: str) -> list[Bar]:
    peers = [r[key] for r in rows if not PATHS[r["path"]].ours and r[key]]
    best = min(peers) if peers else None
    bars = []
    for row in rows:
        note = ""
        if PATHS[row["path"]].ours and row[key] and best:
            note = f"{row[key] / best:.2f}× best"
        missing = row["status"] if row["status"] != "ok" else ""
        bars.append(Bar(PATHS[row["path"]].label, row["path"], row[key], row[samples], note, missing))
    return bars


def _table(rows: list[dict]) -> str:
    ours_ids = next((r["generated_ids"] for r in rows if r["path"] == "ours-cpu" and r["status"] == "ok"), [])
    head = ("<tr><th>path</th><th>TTFT ms</th><th>TPOT ms</th><th>tok/s</th><th>compile ms</th><th>load ms</th>"
            "<th>peak RSS MiB</th><th>samples TTFT / TPOT</th><th>greedy ids = ours</th><th>dtype</th></tr>")
    body = []
    for r in rows:
        name = f"<span class='dot' style='background:{color(r['path'])}'></span>{escape(PATHS[r['path']].label)}"
        if r["status"] != "ok":
            cls = "skip" if r["status"] == "skipped" else "err"
            body.append(f"<tr><td>{name}</td><td class='{cls}' colspan='9'>{escape(r['status'])}: "
                        f"{escape(r['error'] or '')}</td></tr>")
            continue
        agree = _agreement(ours_ids, r["generated_ids"]) if r["path"] != "ours-cpu" else "–"
        body.append(f"<tr><td>{name}</td><td>{_num(r['ttft_ms'])}</td><td>{_num(r['tpot_ms'], 2)}</td>"
                    f"<td>{_num(r['throughput_tps'])}</td><td>{_num(r['compile_ms'], 0)}</td>"
                    f"<td>{_num(r['load_ms'], 0)}</td><td>{_num(r['peak_rss_mib'], 0)}</td>"
                    f"<td>{len(r['ttft_ms_samples'])} / {len(r['tpot_ms_samples'])}</td><td>{agree}</td>"
                    f"<td style='text-align:left'>{escape(r['dtype'] or '')}</td></tr>")
    return f"<table>{head}{''.join(body)}</table>"


HISTORY_METRICS = {"ttft_ms": ("TTFT", "ttft_ms_samples"), "tpot_ms": ("TPOT", "tpot_ms_samples"),
                   "compile_ms": ("compile time", "compile_ms_samples")}


def _history(store_rows: list[dict], runs: dict[int, dict], model: str, setting: str, metrics: tuple[str, ...]) -> str:
    """Our medians for this model and setting over every run that measured them."""
    series: dict[str, dict[str, list[Point]]] = {key: defaultdict(list) for key in metrics}
    for row in store_rows:
        if (row["model"], row["setting"], row["status"]) != (model, setting, "ok") or not PATHS[row["path"]].ours:
            continue
        run = runs[row["run_id"]]
        commit = (run["git_commit"] or "?")[:7] + ("*" if run["git_dirty"] else "")
        for key in metrics:
            spread = stats.spread(row[HISTORY_METRICS[key][1]]) or (row[key], row[key])
            series[key][row["path"]].append(Point(commit, row[key], spread[0], spread[1],
                                                  f"run {run['id']} · {commit} · {run['started_at']}: "
                                                  f"{fmt(row[key], 'ms')}"))
    runs_seen = max((len(points) for points in series[metrics[0]].values()), default=0)
    if runs_seen < 2:
        return "<div class='meta'>History: this is the first run that measured this; later runs draw a line here.</div>"
    charts = "".join(line_chart(f"History: our {HISTORY_METRICS[key][0]} (median, band = spread)", "ms", series[key])
                     for key in metrics)
    return f"<div class='charts'>{charts}</div>"


def _card(model_title: str, setting: str, rows: list[dict], history: str) -> str:
    title = f"<h3>{escape(model_title)} <span class='sub'>· {escape(setting)}</span></h3>"
    if all(r["path"] in COMPILE_ONLY for r in rows):
        bars = [Bar(PATHS[r["path"]].label, r["path"], r["compile_ms"], r["compile_ms_samples"], "",
                    r["status"] if r["status"] != "ok" else "") for r in rows]
        errors = "".join(f"<div class='ratio slower'>{escape(r['path'])}: {escape(r['error'] or '')}</div>"
                         for r in rows if r["status"] != "ok")
        samples = ", ".join(f"{s:.0f}" for r in rows for s in r["compile_ms_samples"])
        return (f"<div class='card'>{title}<div class='charts'>"
                f"{bar_chart('Compile time: graph build excluded, saturation + extraction', 'ms', bars)}</div>"
                f"<div class='meta'>samples (ms): {samples or '–'}</div>{errors}{history}</div>")
    ttft = bar_chart("Time to first token (median; whisker = min–max)", "ms",
                     _bars(rows, "ttft_ms", "ttft_ms_samples"))
    tpot = bar_chart("Time per output token (median; whisker = min–max)", "ms",
                     _bars(rows, "tpot_ms", "tpot_ms_samples"))
    return (f"<div class='card'>{title}<div class='charts'>{ttft}{tpot}"
            f"</div>{_ratio_line('TTFT', rows, 'ttft_ms')}{_ratio_line('TPOT', rows, 'tpot_ms')}"
            f"{_table(rows)}{history}</div>")


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def _run_header(run: dict) -> str:
    commit = (run["git_commit"] or "unknown")[:10]
    dirty = " (uncommitted changes)" if run["git_dirty"] else ""
    machine = f"{run['cpu_model']}, {run['cpu_cores']} cores, {run['memory_gib']} GiB"
    gpu = escape(run["gpu"]) if run["gpu"] else "no GPU"
    return (f"<h2>Configuration “{escape(run['config'])}” · run {run['id']}</h2>"
            f"<p class='meta'>commit <code>{escape(commit)}</code>{dirty} on {escape(run['git_branch'] or '?')} — "
            f"{escape(_shorten(run['git_subject'] or '', 110))}<br>{escape(machine)}; {gpu}; started {escape(run['started_at'])}"
            f", finished {escape(run['finished_at'] or 'not finished')}</p>")


def render(store: Store) -> str:
    runs = {r["id"]: r for r in store.runs()}
    all_rows = store.results()
    sections = []
    for run in _latest_runs(store):
        rows = [r for r in all_rows if r["run_id"] == run["id"]]
        groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
        for row in rows:
            groups[(row["model"], row["setting"])].append(row)
        cards = []
        for (model, setting), group in groups.items():
            compile_only = all(r["path"] in COMPILE_ONLY for r in group)
            metrics = ("compile_ms",) if compile_only else ("ttft_ms", "tpot_ms")
            cards.append(_card(group[0]["model_title"] or model, setting, group,
                               _history(all_rows, runs, model, setting, metrics)))
        sections.append(_run_header(run) + "".join(cards))
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    body = "".join(sections) or "<p>No results yet: run <code>scripts/bench.sh</code> first.</p>"
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>luminal benchmarks</title>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'><style>{CSS}</style></head>"
            f"<body><main><h1>luminal benchmarks</h1><p class='sub'>Every path gets the same prompt ids, one "
            f"batched prefill per TTFT sample, the same greedy decode loop; medians of the samples, whiskers "
            f"min–max. Lower is better.</p>{body}<footer>Generated {generated} from {len(runs)} run(s) by "
            f"scripts/bench.sh --report.</footer></main></body></html>")


def write(store: Store, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(store))


def markdown(store: Store, config: str) -> str:
    """The newest run of a configuration as a Markdown table (what the README shows)."""
    run = next((r for r in _latest_runs(store) if r["config"] == config), None)
    if run is None:
        return f"no run of configuration {config!r} in the database"
    rows = store.results(run["id"])
    lines = [f"Run {run['id']} of `{config}`, commit {(run['git_commit'] or '?')[:10]}"
             f"{' (uncommitted changes)' if run['git_dirty'] else ''}, {run['started_at']}; {run['cpu_model']}, "
             f"{run['cpu_cores']} cores, {run['gpu'] or 'no GPU'}.", "",
             "| model | path | TTFT ms | TPOT ms | tok/s | compile ms | peak RSS MiB | ours / best peer |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in rows:
        groups[(row["model"], row["setting"])].append(row)
    for (model, setting), group in groups.items():
        peers = [r for r in group if not PATHS[r["path"]].ours and r["status"] == "ok"]
        for r in group:
            label = PATHS[r["path"]].label
            if r["status"] != "ok":
                error = (r["error"] or "").replace("|", "\\|")
                lines.append(f"| {model} ({setting}) | {label} | {r['status']} | | | | | {error} |")
                continue
            ratio = ""
            if PATHS[r["path"]].ours and peers and r["ttft_ms"]:
                ttft_best = min(peers, key=lambda x: x["ttft_ms"])
                tpot_best = min(peers, key=lambda x: x["tpot_ms"])
                ratio = (f"TTFT {r['ttft_ms'] / ttft_best['ttft_ms']:.2f}× ({PATHS[ttft_best['path']].label}), "
                         f"TPOT {r['tpot_ms'] / tpot_best['tpot_ms']:.2f}× ({PATHS[tpot_best['path']].label})")
            def cell(value, digits):
                return f"{value:,.{digits}f}" if value is not None else "–"
            lines.append(f"| {model} ({setting}) | {label} | {cell(r['ttft_ms'], 1)} | {cell(r['tpot_ms'], 2)} | "
                         f"{cell(r['throughput_tps'], 1)} | {cell(r['compile_ms'], 0)} | "
                         f"{cell(r['peak_rss_mib'], 0)} | {ratio} |")
    return "\n".join(lines)


def _leading_matches(ours: list[int], theirs: list[int]) -> str:
    if not ours or not theirs:
        return "–"
    n = min(len(ours), len(theirs))
    return f"{next((i for i in range(n) if ours[i] != theirs[i]), n)}/{n}"


def summary(store: Store, run_id: int) -> str:
    """One plain-text table of a run, printed at its end: per model and setting each path's
    TTFT and TPOT medians, the decode floor and TPOT / floor where the weights were sized
    and the bandwidth measured, each peer's time over ours (above 1: ours is faster), and
    how many leading greedy ids a peer shares with ours; under a model with `bounds`, its
    checks (_checks). A row that did not measure says FAILED or skipped with its reason."""
    rows = store.results(run_id)
    head = (f"{'path':<24} {'TTFT ms':>9} {'TPOT ms':>9} {'floor ms':>9} {'TPOT/floor':>10} "
            f"{'TTFT peer/ours':>14} {'TPOT peer/ours':>14} {'ids = ours':>10}")
    lines = [head, "-" * len(head)]
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in rows:
        groups[(row["model_title"] or row["model"], row["setting"])].append(row)
    bandwidth = next((r["raw"] for r in rows if r["raw"].get("bandwidth_gbs")), None)
    for (title, setting), group in groups.items():
        lines.append(f"{title} ({setting})")
        ours = next((r for r in group if PATHS[r["path"]].ours and r["status"] == "ok" and r["tpot_ms"]), None)
        for r in group:
            label = PATHS[r["path"]].label + (" *" if r["raw"].get("measured_during_our_build") else "")
            if r["status"] != "ok":
                word = "FAILED" if r["status"] == "failed" else "skipped"
                lines.append(f"  {label:<22} {word}: {(r['error'] or '')[:160]}")
                continue
            floor = r["raw"].get("floor_ms")
            cells = [_cell(r["ttft_ms"], 1), _cell(r["tpot_ms"], 2), _cell(floor, 2),
                     _cell(r["tpot_ms"] / floor if floor and r["tpot_ms"] else None, 2, "×")]
            if ours is not None and r is not ours and not PATHS[r["path"]].ours:
                cells += [_cell(stats.ratio(r["ttft_ms"], ours["ttft_ms"]), 2, "×"),
                          _cell(stats.ratio(r["tpot_ms"], ours["tpot_ms"]), 2, "×"),
                          _leading_matches(ours["generated_ids"], r["generated_ids"])]
            else:
                cells += ["", "", ""]
            lines.append(f"  {label:<22} {cells[0]:>9} {cells[1]:>9} {cells[2]:>9} {cells[3]:>10} "
                         f"{cells[4]:>14} {cells[5]:>14} {cells[6]:>10}")
        lines += _checks(group)
    if any(r["raw"].get("measured_during_our_build") for r in rows):
        lines.append("* measured while our binaries were still building in the background")
    if bandwidth:
        lines.append(f"floor = weight bytes one decode step reads / copy bandwidth "
                     f"({bandwidth['bandwidth_gbs']:.0f} GB/s on {bandwidth.get('bandwidth_device')})")
    return "\n".join(lines)


def _verdict(ratio: float, bound: float) -> str:
    return f"bound {bound:g}×: {'within' if ratio <= bound else 'OVER'}"


def _compile_checks(compiled: list[dict]) -> list[str]:
    """A compile-only model's `compile_ms` bound: our compile time's median and spread
    against it, and the median of each compile phase where the benchmark reports them."""
    lines = ["  checks:"]
    for r in compiled:
        low, high = stats.spread(r["compile_ms_samples"])
        bound = r["raw"]["bounds"].get("compile_ms")
        verdict = f" (bound {bound:g} ms: {'within' if r['compile_ms'] <= bound else 'OVER'})" if bound else ""
        lines.append(f"    compile {PATHS[r['path']].label}: median {r['compile_ms']:,.1f} ms, min-max {low:,.1f}-"
                     f"{high:,.1f} ms over {len(r['compile_ms_samples'])} compiles{verdict}")
        phases = r["raw"].get("phases_ms")
        if phases:
            lines.append("      phases (medians, ms): " + ", ".join(f"{k} {v:,.1f}" for k, v in phases.items()))
    return lines


def _checks(group: list[dict]) -> list[str]:
    """The lines of a model's `bounds` (config.BOUNDS) under its table: each path's TTFT
    spread (per round where it ran in rounds), our TTFT over each peer's, each path's peak
    RSS over its weight files + KV cache, and whether the first greedy token agrees; for a
    compile-only model, our compile time against its bound (_compile_checks)."""
    measured = [r for r in group if r["status"] == "ok" and r["raw"].get("bounds")]
    compiled = [r for r in measured if r["path"] in COMPILE_ONLY]
    if compiled:
        return _compile_checks(compiled)
    ours = next((r for r in measured if PATHS[r["path"]].ours), None)
    if ours is None:
        return []
    bounds, peers = ours["raw"]["bounds"], [r for r in measured if not PATHS[r["path"]].ours]
    lines = ["  checks:"]
    for r in measured:
        low, high = stats.spread(r["ttft_ms_samples"])
        rounds = r["raw"].get("rounds", [])
        per_round = (", round medians " + " / ".join(f"{stats.median(x['ttft_ms_samples']):,.1f}" for x in rounds)
                     if rounds else "")
        lines.append(f"    TTFT {PATHS[r['path']].label}: median {r['ttft_ms']:,.1f} ms, min-max {low:,.1f}-"
                     f"{high:,.1f} ms over {len(r['ttft_ms_samples'])} prefills{per_round}")
    for peer in peers:
        ratio = ours["ttft_ms"] / peer["ttft_ms"]
        bound = f" ({_verdict(ratio, bounds['ttft_over_peer'])})" if "ttft_over_peer" in bounds else ""
        lines.append(f"    TTFT ours / {PATHS[peer['path']].label}: {ratio:.2f}×{bound}")
    for r in measured:
        raw = r["raw"]
        if "file_bytes" not in raw:
            continue
        ratio = r["peak_rss_mib"] * 2**20 / (raw["file_bytes"] + raw["kv_bytes"])
        bound = (f" ({_verdict(ratio, bounds['rss_over_file_and_kv'])})"
                 if r is ours and "rss_over_file_and_kv" in bounds else "")
        lines.append(f"    peak RSS {PATHS[r['path']].label}: {r['peak_rss_mib']:,.0f} MiB / (files "
                     f"{raw['file_bytes'] / 2**20:,.0f} MiB + KV {raw['kv_bytes'] / 2**20:,.1f} MiB: "
                     f"{raw['kv_context']} tokens of {raw['kv_dtype']}) = {ratio:.3f}×{bound}")
    for peer in peers:
        a, b = (ours["generated_ids"] or [None])[0], (peer["generated_ids"] or [None])[0]
        lines.append(f"    first greedy token: ours {a}, {PATHS[peer['path']].label} {b}: "
                     f"{'agree' if a == b else 'differ'}")
    return lines


def _cell(value: float | None, digits: int, unit: str = "") -> str:
    return f"{value:,.{digits}f}{unit}" if value is not None else "–"
