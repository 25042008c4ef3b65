#!/usr/bin/env python3
"""Reduces the raw output of benches/check-yield (tests/debian/bench/check-yield.sh) to a
markdown table, JSON and a plot of the throttle way.

Input (RAW): per way (none, default, fixed, throttle) `<way>-samples.tsv` (one line a second:
epoch seconds, phase, check position KiB from /proc/mdstat, md/sync_speed KiB/s,
md/sync_speed_max KiB/s, io pressure full avg10 %, some avg10 %, md/sync_completed),
`<way>-b<N>.json` (fio's json) and `<way>-b<N>_clat.1.log` (fio's per-I/O completion
latency: msec, value, direction, block size, ...), `marks.log`, `versions.txt`, and for the
throttle way `throttle-throttle.jsonl` (one line a second: {"t": epoch s, "notes": the service's
check-throttle.json}: the pressure each decision used, its source, the decisions so far).
Output (OUT): results.md, results.json, throttle.png (with matplotlib only).
Usage: check_yield_report.py RAW OUT [--wall S] [--docs DOCS_DIR]
"""
import argparse
import glob
import json
import math
import os
import re
import shutil
import sys

WAYS = [
    ("none", "no check (baseline)"),
    ("default", "check at md's defaults"),
    ("fixed", "check at a fixed sync_speed_max"),
    ("throttle", "mdpilot check, pressure throttle"),
]


def num(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def samples(raw, way):
    path = os.path.join(raw, f"{way}-samples.tsv")
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            c = line.rstrip("\n").split("\t")
            c += [""] * (8 - len(c))
            rows.append({
                "t": num(c[0]), "phase": c[1], "done_kib": num(c[2]), "speed": num(c[3]),
                "max": num(c[4]), "full": num(c[5]), "some": num(c[6]),
            })
    return [r for r in rows if r["t"] is not None]


def notes(raw, array="md0"):
    """The throttle way's notes, one a second: (epoch s, the array's note or None)."""
    path = os.path.join(raw, "throttle-throttle.jsonl")
    out = []
    if os.path.exists(path):
        for line in open(path):
            try:
                j = json.loads(line)
            except ValueError:
                continue
            out.append((float(j["t"]), j.get("notes", {}).get(array)))
    return out


def throttle_summary(raw, rows):
    """What the throttle saw and did: the mean pressure its decisions used in the bursts and
    gaps (percent; `source` interval only) and its last note's decision counts."""
    ns = notes(raw)
    if not ns:
        return {}
    phase_at = {}
    for r in rows:
        phase_at[round(r["t"])] = r["phase"]
    used = {"burst": [], "gap": []}
    for t, n in ns:
        ph = phase_at.get(round(t))
        if n and n.get("source") == "interval" and n.get("pressure_pct") is not None and ph in used:
            used[ph].append(n["pressure_pct"])
    last = next((n for _, n in reversed(ns) if n), {})
    return {
        "burst_pressure_used": mean(used["burst"]),
        "gap_pressure_used": mean(used["gap"]),
        "decisions": last.get("decisions", {}),
        "io_depth_seen": any(n and n.get("io_depth") for _, n in ns),
    }


def marks(raw):
    out = {}
    path = os.path.join(raw, "marks.log")
    if os.path.exists(path):
        for line in open(path):
            t, _, what = line.strip().partition(" ")
            out[what] = float(t)
    return out


def percentile(sorted_vals, p):
    if not sorted_vals:
        return None
    k = (len(sorted_vals) - 1) * p / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (k - lo)


def latencies(raw, way):
    """Every I/O's completion latency in ms over all bursts; fio's own totals for the scale."""
    vals, json_ns, log_sum, log_n, ios, secs = [], [], 0.0, 0, 0, 0.0
    for jpath in sorted(glob.glob(os.path.join(raw, f"{way}-b*.json"))):
        try:
            txt = open(jpath).read()
            job = json.loads(txt[txt.index("{"):])["jobs"][0]
        except (ValueError, KeyError, IndexError):
            continue
        for d in ("read", "write"):
            st = job[d]
            if st.get("total_ios", 0):
                json_ns.append((st["clat_ns"]["mean"], st["total_ios"]))
                ios += st["total_ios"]
        secs += job.get("job_runtime", job["read"].get("runtime", 0)) / 1000.0
    raws = []
    for lpath in sorted(glob.glob(os.path.join(raw, f"{way}-b*_clat.*.log"))):
        for line in open(lpath):
            c = line.split(",")
            if len(c) >= 2:
                v = float(c[1])
                raws.append(v)
                log_sum += v
                log_n += 1
    # fio 3 logs nanoseconds; older ones microseconds: the json's mean (always ns) decides.
    scale_to_ns = 1.0
    if json_ns and log_n:
        jm = sum(m * n for m, n in json_ns) / sum(n for _, n in json_ns)
        lm = log_sum / log_n
        scale_to_ns = 1000.0 if abs(math.log10(jm / lm) - 3) < abs(math.log10(jm / lm)) else 1.0
    vals = sorted(v * scale_to_ns / 1e6 for v in raws)
    return {
        "ios": len(vals) or ios,
        "iops": (ios / secs) if secs else None,
        "p50_ms": percentile(vals, 50),
        "p99_ms": percentile(vals, 99),
        "max_ms": vals[-1] if vals else None,
    }


def check_rates(rows):
    """MB/s (10^6 bytes) of the check's position over the way, in the gaps and in the bursts."""
    pts = [(r["t"], r["done_kib"], r["phase"]) for r in rows if r["done_kib"] is not None]
    if len(pts) < 2:
        return {"run_mb_s": 0.0, "gap_mb_s": 0.0, "burst_mb_s": 0.0, "done_mib": 0.0}
    t0 = rows[0]["t"]
    tl, dl, _ = pts[-1]
    by = {"gap": [0.0, 0.0], "burst": [0.0, 0.0]}
    for (ta, da, pa), (tb, db, pb) in zip(pts, pts[1:]):
        if pa == pb and pa in by and db >= da:
            by[pa][0] += db - da
            by[pa][1] += tb - ta
    mb = lambda kib: kib * 1024 / 1e6
    return {
        "run_mb_s": mb(dl) / (tl - t0) if tl > t0 else 0.0,
        "gap_mb_s": mb(by["gap"][0]) / by["gap"][1] if by["gap"][1] else 0.0,
        "burst_mb_s": mb(by["burst"][0]) / by["burst"][1] if by["burst"][1] else 0.0,
        "done_mib": dl / 1024,
    }


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def reduce(raw):
    res = {}
    for way, label in WAYS:
        rows = samples(raw, way)
        if not rows:
            continue
        lat = latencies(raw, way)
        rates = check_rates(rows)
        res[way] = {
            "label": label, **lat, **rates,
            "burst_full_avg10": mean(r["full"] for r in rows if r["phase"] == "burst"),
            "mean_limit_kib_s": mean(r["max"] for r in rows),
            "seconds": rows[-1]["t"] - rows[0]["t"],
        }
        if way == "throttle":
            res[way]["throttle"] = throttle_summary(raw, rows)
    base = res.get("none", {}).get("p99_ms")
    for w in res.values():
        w["p99_vs_baseline"] = (w["p99_ms"] / base) if base and w["p99_ms"] else None
    return res


def fmt(v, spec=".1f", none="–"):
    return none if v is None else format(v, spec)


def table(res, meta):
    lines = [
        "| way | foreground p50 (ms) | p99 (ms) | p99 / baseline | check MB/s, whole way | in the gaps | in the bursts | full avg10 in bursts (%) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for way, _ in WAYS:
        if way not in res:
            continue
        w = res[way]
        chk = way != "none"
        lines.append(
            f"| {w['label']} | {fmt(w['p50_ms'], '.2f')} | {fmt(w['p99_ms'], '.2f')} | "
            f"{fmt(w['p99_vs_baseline'], '.2f')}x | {fmt(w['run_mb_s'] if chk else None)} | "
            f"{fmt(w['gap_mb_s'] if chk else None)} | {fmt(w['burst_mb_s'] if chk else None)} | "
            f"{fmt(w['burst_full_avg10'])} |")
    goals = goals_of(res)
    lines.append("")
    lines.append(f"Goals (reported, not asserted): throttle p99 within 1.25x of the baseline: "
                 f"{fmt(goals['throttle_p99_ratio'], '.2f')}x ({goals['p99_goal']}); throttle check at "
                 f"least 3x the fixed limit's: {fmt(goals['throttle_vs_fixed_speed'], '.2f')}x "
                 f"({goals['speed_goal']}).")
    th = res.get("throttle", {}).get("throttle")
    if th:
        dec = ", ".join(f"{k} {v}" for k, v in sorted(th["decisions"].items())) or "none"
        lines.append("")
        lines.append(f"The throttle's input (the band's line over each look's interval, mean of the "
                     f"seconds sampled): {fmt(th['burst_pressure_used'])} % in the bursts, "
                     f"{fmt(th['gap_pressure_used'])} % in the gaps; limit changes by decision: {dec}.")
    if meta:
        lines.append("")
        lines.append(meta)
    return "\n".join(lines) + "\n"


def goals_of(res):
    t, f = res.get("throttle", {}), res.get("fixed", {})
    r1 = t.get("p99_vs_baseline")
    r2 = (t["run_mb_s"] / f["run_mb_s"]) if t.get("run_mb_s") and f.get("run_mb_s") else None
    met = lambda ok: "met" if ok else "not met"
    return {
        "throttle_p99_ratio": r1, "p99_goal": met(r1 is not None and r1 <= 1.25),
        "throttle_vs_fixed_speed": r2, "speed_goal": met(r2 is not None and r2 >= 3),
    }


def band(raw):
    """The throttle way's pressure_target band in percent (versions.txt `target full A%..B%`)."""
    path = os.path.join(raw, "versions.txt")
    m = re.search(r"target \w+ ([0-9.]+)%\.\.([0-9.]+)%", open(path).read()) if os.path.exists(path) else None
    return (float(m.group(1)), float(m.group(2))) if m else (5.0, 10.0)


def plot(raw, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("check-yield: no matplotlib (apt-get install python3-matplotlib): no plot", file=sys.stderr)
        return False
    rows = samples(raw, "throttle")
    if not rows:
        return False
    t0 = rows[0]["t"]
    ts = [r["t"] - t0 for r in rows]
    fig, (a1, a2) = plt.subplots(2, 1, sharex=True, figsize=(9, 5.5), height_ratios=[2, 1])
    pts = [(r["t"] - t0, r["done_kib"]) for r in rows if r["done_kib"] is not None]
    sp = [(tb, (db - da) / (tb - ta) / 1000) for (ta, da), (tb, db) in zip(pts, pts[1:]) if tb > ta and db >= da]
    a1.plot([x for x, _ in sp], [y for _, y in sp], lw=0.8, label="check speed (mdstat position, per s)")
    a1.plot(ts, [(r["speed"] or 0) / 1000 for r in rows], lw=1, label="md/sync_speed (md's ~30 s average)")
    a1.step(ts, [(r["max"] or 0) / 1000 for r in rows], where="post", ls="--", color="k", lw=1.2,
            label="limit md/sync_speed_max")
    a1.set_ylabel("MB/s (1000 KiB/s)")
    a1.set_yscale("symlog", linthresh=1)
    a2.plot(ts, [r["full"] or 0 for r in rows], color="tab:red", lw=0.8, label="io pressure full avg10")
    used = [(t - t0, n["pressure_pct"]) for t, n in notes(raw)
            if n and n.get("source") == "interval" and n.get("pressure_pct") is not None]
    if used:
        a2.plot([x for x, _ in used], [y for _, y in used], color="tab:purple", lw=1,
                label="the throttle's input (its line, per look's interval)")
    lo, hi = band(raw)
    a2.axhspan(lo, hi, color="tab:green", alpha=0.15, label=f"target {lo:g}%..{hi:g}%")
    a2.set_ylabel("%")
    a2.set_xlabel("seconds since the check started")
    for ax in (a1, a2):
        start = None
        for x, r in zip(ts, rows):
            if r["phase"] == "burst" and start is None:
                start = x
            if r["phase"] != "burst" and start is not None:
                ax.axvspan(start, x, color="0.85", zorder=0)
                start = None
        ax.legend(loc="upper right", fontsize=7)
    a1.set_title("mdpilot check under the io-pressure throttle; grey: fio bursts")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def to_docs(docs, out, md):
    shutil.copy(os.path.join(out, "throttle.png"), os.path.join(docs, "check-yield.png"))
    path = os.path.join(docs, "checks.md")
    text = open(path).read()
    pat = re.compile(r"(<!-- check-yield:begin -->\n).*?(<!-- check-yield:end -->)", re.S)
    if not pat.search(text):
        sys.exit(f"check-yield: no check-yield:begin/end markers in {path}")
    open(path, "w").write(pat.sub(lambda m: m.group(1) + md + m.group(2), text))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("raw")
    ap.add_argument("out")
    ap.add_argument("--wall", type=int)
    ap.add_argument("--docs")
    a = ap.parse_args()
    res = reduce(a.raw)
    vpath = os.path.join(a.raw, "versions.txt")
    versions = open(vpath).read().strip().splitlines() if os.path.exists(vpath) else []
    meta = "Guest: " + "; ".join(versions)
    if a.wall:
        meta += f"; host wall time {a.wall} s"
    md = table(res, meta)
    os.makedirs(a.out, exist_ok=True)
    open(os.path.join(a.out, "results.md"), "w").write(md)
    json.dump({"ways": res, "goals": goals_of(res), "versions": versions, "wall_s": a.wall},
              open(os.path.join(a.out, "results.json"), "w"), indent=2)
    plotted = plot(a.raw, os.path.join(a.out, "throttle.png"))
    print(md)
    if a.docs and plotted:
        to_docs(a.docs, a.out, md)


if __name__ == "__main__":
    main()
