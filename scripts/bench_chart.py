#!/usr/bin/env python3
"""The state of the race at a glance: cyb-llm's speed relative to each peer, per task,
from the newest report of each topic scripts/bench.sh wrote (.cache/bench/TOPIC-DATE.md),
as one SVG bar chart (standard library only).

A bar is cyb-llm's speed over the peer's, on a log scale around 1: right of the line
(green) cyb-llm is faster, left (red) slower. llm rows use the
reports' ratio column (cyb-llm t/s / llama.cpp t/s), as do perplexity, embed and serve
rows; whisper rows divide each peer's wall time by cyb-llm's.

  python3 scripts/bench_chart.py [REPORT_DIR] [OUT.svg]   # default .cache/bench, REPORT_DIR/ratios.svg
"""
import glob
import html
import math
import os
import re
import sys


def newest(folder, topic):
    reports = sorted(glob.glob(os.path.join(folder, f"{topic}-*.md")))
    return reports[-1] if reports else None


def table_rows(path):
    """Cells of the markdown table rows of `path`, without header and rule rows."""
    rows = []
    for line in open(path, encoding="utf-8"):
        if not line.startswith("|") or "---" in line:
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] in ("model", "audio", "batch", "text"):
            continue
        rows.append(cells)
    return rows


def llm_bars(path):
    return [(f"{m} {test}: vs llama.cpp", float(ratio)) for m, test, _, _, ratio in table_rows(path)]


def perplexity_bars(path):
    return [(f"perplexity {m}: vs llama-perplexity", float(ratio.rstrip("x")))
            for m, _, _, _, _, _, ratio in table_rows(path)]


def embed_bars(path):
    return [(f"embed batch {b}: vs sentence-transformers", float(ratio.rstrip("x")))
            for b, _, _, ratio, _ in table_rows(path)]


def serve_bars(path):
    """`concurrency C: ... | ratio R x` lines of scripts/bench-serve.sh."""
    bars = []
    for line in open(path, encoding="utf-8"):
        m = re.match(r"concurrency (\d+): .*\| ratio ([0-9.]+)x", line)
        if m:
            bars.append((f"serve, {m.group(1)} streams: vs llama-server", float(m.group(2))))
    return bars


def onnx_bars(path):
    """Rows `| model | batch | threads | ours | ort | R x | diff |` of scripts/bench-onnx.sh."""
    return [(f"eval {m.split()[0]} {m.split()[1]} batch {b}: vs onnxruntime", float(ratio.rstrip("x")))
            for m, b, _, _, _, ratio, _ in table_rows(path)]


def diffuse_bars(path):
    """Rows `| batch | threads | backend | ... | R x | ... | R x |` of scripts/bench-diffuse.sh
    (the load-excluded ratio)."""
    return [(f"diffuse batch {b} ({be}): vs onnxruntime", float(excl.rstrip("x")))
            for b, _, be, _, _, _, _, _, excl in table_rows(path)]


def tts_bars(path):
    """Rows `| text | threads | backend | audio | ... | R x | ... | R x |` of scripts/bench-tts.sh."""
    bars = []
    for _, _, be, _, _, _, whole, _, _, synth in table_rows(path):
        bars.append((f"speak whole process ({be}): vs piper-tts", float(whole.rstrip("x"))))
        bars.append((f"speak synthesis ({be}): vs piper-tts", float(synth.rstrip("x"))))
    return bars


def seconds(cell):
    """`0.38 (0.035)` -> 0.38."""
    return float(re.match(r"[0-9.]+", cell).group(0))


def whisper_bars(path):
    bars = []
    for audio, _, ours, cpp, fw in table_rows(path):
        bars.append((f"transcribe {audio}: vs whisper.cpp", seconds(cpp) / seconds(ours)))
        bars.append((f"transcribe {audio}: vs faster-whisper", seconds(fw) / seconds(ours)))
    return bars


def svg(bars, sources):
    label_w, bar_w, row_h, top = 330, 360, 26, 46
    span = max([math.log(2.0)] + [abs(math.log(r)) for _, r in bars if r > 0]) * 1.15
    one = label_w + bar_w / 2
    x = lambda r: one + (bar_w / 2) * math.log(max(r, 1e-9)) / span
    h = top + row_h * len(bars) + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 70}" height="{h}" '
           'font-family="sans-serif" font-size="13">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="10" y="22" font-size="15" font-weight="bold">cyb-llm speed / peer speed '
           '(log scale; right of 1: cyb-llm is faster)</text>']
    for i, (label, r) in enumerate(bars):
        y = top + i * row_h
        color = "#2e7d32" if r >= 1 else "#c62828"
        left, right = sorted((one, x(r)))
        out.append(f'<text x="{label_w - 8}" y="{y + 17}" text-anchor="end">{html.escape(label)}</text>')
        out.append(f'<rect x="{left:.1f}" y="{y + 4}" width="{right - left:.1f}" height="{row_h - 8}" fill="{color}"/>')
        tx, anchor = (right + 5, "start") if r >= 1 else (left - 5, "end")
        out.append(f'<text x="{tx:.1f}" y="{y + 17}" text-anchor="{anchor}">{r:.2f}x</text>')
    out.append(f'<line x1="{one:.1f}" y1="{top - 4}" x2="{one:.1f}" y2="{top + row_h * len(bars)}" '
               'stroke="black" stroke-dasharray="4 3"/>')
    out.append(f'<text x="10" y="{h - 14}" font-size="11" fill="#555">from '
               f'{html.escape(", ".join(sources))} (scripts/bench.sh)</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else ".cache/bench"
    target = sys.argv[2] if len(sys.argv) > 2 else os.path.join(folder, "ratios.svg")
    bars, sources = [], []
    topics = (("llm", llm_bars), ("whisper", whisper_bars), ("perplexity", perplexity_bars),
              ("embed", embed_bars), ("serve", serve_bars), ("onnx", onnx_bars),
              ("diffuse", diffuse_bars), ("tts", tts_bars))
    for topic, parse in topics:
        report = newest(folder, topic)
        if report:
            bars += parse(report)
            sources.append(os.path.basename(report))
    if not bars:
        sys.exit(f"bench_chart: no llm-*.md or whisper-*.md report in {folder}: run scripts/bench.sh llm / whisper first")
    with open(target + ".part", "w", encoding="utf-8") as f:
        f.write(svg(bars, sources))
    os.replace(target + ".part", target)
    print(f"bench_chart: {len(bars)} bars from {', '.join(sources)} -> {target}", file=sys.stderr)


if __name__ == "__main__":
    main()
