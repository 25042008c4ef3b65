#!/usr/bin/env python3
"""Reduces the raw logs of benches/peers' guest (tests/debian/bench/peers.sh, and peers-again.sh
of the second boot in RAW_DIR/again) to results.json and results.md: event latency per tool
(p50/p95/max over the `mdadm --fail` trials, and latency.png: their distributions, with
python3-matplotlib), progress fidelity (each tool's update interval and lag behind
md/sync_completed during a recovery and a check), idle cost per daemon (CPU seconds, context
switches, peak RSS), each tool's view in the hard cases beside the kernel's, and the checks
(Debian's mdcheck beside mdpilot's schedule: overlap on shared disks, the position across a
reboot, where the result can be read). All times are the guest's CLOCK_MONOTONIC; mdmonitor's PROGRAM and the script's marks
stamp CLOCK_REALTIME ($EPOCHREALTIME), turned into CLOCK_MONOTONIC by the offset the guest measured
at its start (the guest runs no time sync: the offset measured at the end is printed beside it).

Usage: peers_report.py RAW_DIR OUT_DIR [--release R] [--wall S] [--trials N] [--idle S] [--docs FILE]
"""
import argparse
import json
import math
import os
import re

TOOLS = [
    ("udisks", "udisksd: MDRaid.Degraded PropertiesChanged"),
    ("mdpilot", "mdpilot: Array.Degraded PropertiesChanged"),
    ("events", "mdpilot monitor --events: `Fail md0` line"),
    ("mdmonitor", "mdadm --monitor (mdmonitor.service): PROGRAM `Fail`"),
    ("node", "node_exporter: node_md_disks{state=\"failed\"} (scraped every 1 s)"),
    ("metrics", "mdpilot metrics: mdpilot_array_members{state=\"faulty\"} (scraped every 1 s)"),
]
LABELS = re.compile(r'(\w+)="([^"]*)"')


def jsonl(path):
    if not os.path.exists(path):
        return []
    out = []
    with open(path) as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def pct(xs, p):
    """Nearest-rank percentile."""
    if not xs:
        return None
    s = sorted(xs)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


def marks(raw, off):
    out = []
    if not os.path.exists(os.path.join(raw, "marks.log")):
        return out
    with open(os.path.join(raw, "marks.log")) as f:
        for line in f:
            t, _, text = line.rstrip("\n").partition(" ")
            out.append((float(t) - off, text))
    return out


def latency(raw, off, ms):
    dbus = jsonl(os.path.join(raw, "dbus.jsonl"))
    events = jsonl(os.path.join(raw, "events.jsonl"))
    node = jsonl(os.path.join(raw, "scrape-node.jsonl"))
    metr = jsonl(os.path.join(raw, "scrape-mdpilot.jsonl"))
    mon = []
    p = os.path.join(raw, "mdmonitor.log")
    if os.path.exists(p):
        with open(p) as f:
            for line in f:
                t, _, text = line.rstrip("\n").partition(" ")
                mon.append((float(t) - off, text))
    obs = {
        "udisks": [r["t"] for r in dbus if r.get("tool") == "udisks" and r.get("sig") == "PropertiesChanged"
                   and (r.get("props") or {}).get("Degraded", 0) > 0],
        "mdpilot": [r["t"] for r in dbus if r.get("tool") == "mdpilot" and r.get("sig") == "PropertiesChanged"
                    and (r.get("props") or {}).get("Degraded", 0) > 0],
        "events": [r["t"] for r in events if r.get("line", "").startswith("Fail md0")],
        "mdmonitor": [t for t, x in mon if x.startswith("Fail /dev/md0")],
        "node": [r["t"] for r in node if (r.get("failed") or {}).get("md0", 0) > 0],
        "metrics": [r["t"] for r in metr if (r.get("failed") or {}).get("md0", 0) > 0],
    }
    starts = {int(m.group(1)): t for t, x in ms for m in [re.match(r"fail (\d+) start", x)] if m}
    dones = {int(m.group(1)): t for t, x in ms for m in [re.match(r"fail (\d+) done", x)] if m}
    ends = {int(m.group(1)): t for t, x in ms for m in [re.match(r"fail (\d+) whole", x)] if m}
    trials = []
    for i in sorted(starts):
        t0, t1 = starts[i], ends.get(i, float("inf"))
        row = {"trial": i, "mdadm_fail_s": dones.get(i, t0) - t0}
        for k in obs:
            first = [t for t in obs[k] if t0 <= t <= t1]
            row[k] = (min(first) - t0) if first else None
            row[k + "_after_return"] = (min(first) - dones[i]) if first and i in dones else None
        trials.append(row)
    summary = {}
    for k, _ in TOOLS:
        xs = [r[k] for r in trials if r[k] is not None]
        ys = [r[k + "_after_return"] for r in trials if r[k + "_after_return"] is not None]
        summary[k] = {"n": len(xs), "missed": len(trials) - len(xs), "p50": pct(xs, 50), "p95": pct(xs, 95),
                      "max": max(xs) if xs else None, "p50_after_return": pct(ys, 50)}
    xs = [r["mdadm_fail_s"] for r in trials]
    summary["mdadm_fail_run"] = {"n": len(xs), "p50": pct(xs, 50), "max": max(xs) if xs else None}
    return {"trials": trials, "summary": summary}


def idle(raw):
    p = os.path.join(raw, "idle.txt")
    if not os.path.exists(p):
        return {}
    tck, rows = 100, {}
    with open(p) as f:
        for line in f:
            w = line.split()
            if w[0] == "clk_tck":
                tck = int(w[1])
                continue
            when, unit, pid = w[0], w[1], w[2]
            kv = dict(x.split("=", 1) for x in w[3:] if "=" in x)
            m = re.search(r"VmHWM: (\d+) kB", line)
            rows.setdefault(unit, {})[when] = {"ticks": int(kv["ticks"]), "ctxt": int(kv["ctxt"]),
                                              "threads": int(kv["threads"]), "hwm_kib": int(m.group(1)) if m else None}
    out = {}
    for unit, r in rows.items():
        if "start" in r and "end" in r:
            out[unit] = {"cpu_s": (r["end"]["ticks"] - r["start"]["ticks"]) / tck,
                         "ctxt": r["end"]["ctxt"] - r["start"]["ctxt"],
                         "threads": r["end"]["threads"], "peak_rss_kib": r["end"]["hwm_kib"]}
    return out


def array_views(snap, name):
    """What each tool shows about the array kernel-named NAME in one snapshot."""
    v = {}
    k = snap["kernel"]["arrays"].get(name)
    line = [ln for ln in snap["kernel"]["mdstat"].splitlines() if ln.startswith(name + " ")]
    idx = snap["kernel"]["mdstat"].splitlines()
    prog = ""
    for i, ln in enumerate(idx):
        if ln.startswith(name + " "):
            for ln2 in idx[i + 1:i + 4]:
                if not ln2.strip():
                    break
                if "=" in ln2 and ("recovery" in ln2 or "resync" in ln2 or "check" in ln2 or "reshape" in ln2):
                    prog = ln2.strip()
    v["kernel"] = ("absent" if not k else
                   "%s sync_action=%s sync_completed=%s degraded=%s raid_disks=%s%s" % (
                       k["level"], k["sync_action"], k["sync_completed"], k["degraded"], k["raid_disks"],
                       (" mdstat: " + prog) if prog else ""))
    u = [x for x in snap["udisks"].values() if isinstance(x, dict) and (x.get("device") or "").endswith("/" + name)]
    if isinstance(snap["udisks"], dict) and "error" in snap["udisks"]:
        v["udisks"] = "error: " + snap["udisks"]["error"]
    else:
        v["udisks"] = "absent" if not u else "%s SyncAction=%s SyncCompleted=%.3f NumDevices=%s Degraded=%s" % (
            u[0]["Level"], u[0]["SyncAction"] or "''", u[0]["SyncCompleted"] or 0, u[0]["NumDevices"], u[0]["Degraded"])
    m = [x for x in snap["mdpilot"].values() if isinstance(x, dict) and x.get("KernelName") == name]
    v["mdpilot"] = "absent" if not m else "%s SyncAction=%s SyncCompleted=%.3f NumDevices=%s Degraded=%s State=%s" % (
        m[0]["Level"], m[0]["SyncAction"], m[0]["SyncCompleted"] or 0, m[0]["NumDevices"], m[0]["Degraded"], m[0]["State"])
    ne = snap["node_exporter"]
    if not ne["ok"]:
        v["node_exporter"] = "scrape failed: %s" % ne["samples"].get("error")
    else:
        ok = ne["samples"].get('node_scrape_collector_success{collector="mdadm"}')
        s = {}
        for key, val in ne["samples"].items():
            fam, _, rest = key.partition("{")
            lab = dict(LABELS.findall(rest))
            if lab.get("device") == name:
                s.setdefault(fam, []).append((lab.get("state", ""), val))
        if ok == 0:
            v["node_exporter"] = "md collector failed (node_scrape_collector_success 0): no node_md_* samples at all"
        elif not s:
            v["node_exporter"] = "absent"
        else:
            st = [a for a, b in s.get("node_md_state", []) if b == 1]
            synced = s.get("node_md_blocks_synced", [(None, None)])[0][1]
            blocks = s.get("node_md_blocks", [(None, None)])[0][1]
            req = s.get("node_md_disks_required", [(None, None)])[0][1]
            v["node_exporter"] = "state=%s blocks_synced=%s/%s disks_required=%s" % (
                ",".join(st) or "?", synced, blocks, req)
    mm = snap["mdpilot_metrics"]
    acts = [dict(LABELS.findall(key.partition("{")[2])).get("action") for key, val in mm["samples"].items()
            if key.startswith("mdpilot_array_sync_action{") and 'array="%s"' % name in key and val == 1]
    ratio = [val for key, val in mm["samples"].items()
             if key.startswith("mdpilot_array_sync_completed_ratio{") and 'array="%s"' % name in key]
    v["mdpilot_metrics"] = ("absent" if not acts and not ratio else
                            "sync_action=%s sync_completed_ratio=%s" % (",".join(a for a in acts if a), ratio[0] if ratio else "-"))
    return v


NODE_STATE = {"idle": "active", "check": "check", "repair": "check", "resync": "resync", "recover": "recovering"}


def judge(snap, name):
    """{tool: "right" | "wrong: why"}: each tool's view of NAME against md's own sysfs, with 0.1 of
    slack on progress (the tools are read one after the other, seconds apart under TCG)."""
    k = snap["kernel"]["arrays"].get(name)
    out = {}
    if not k:
        for tool, text in array_views(snap, name).items():
            if tool != "kernel":
                out[tool] = "right" if text == "absent" else "wrong: shows an array md no longer has"
        return out
    act = k["sync_action"]
    delayed = k["sync_completed"] == "delayed"
    f = 0.0 if delayed else (fraction(k["sync_completed"]) if act != "idle" else None)
    disks = int(k["raid_disks"].split()[0])

    def verdict(shown_act, frac, ndev, word=None):
        why = []
        if shown_act != act:
            why.append("%s where md says %s" % (shown_act, act))
        if f is not None and frac is not None and abs(frac - f) > 0.1:
            why.append("progress %.3f where md says %.3f" % (frac, f))
        if ndev is not None and ndev != disks:
            why.append("%s devices where md has %d" % (ndev, disks))
        if why:
            return "wrong: " + "; ".join(why)
        return "right" + (" (%s)" % word if word else "")

    u = [x for x in snap["udisks"].values() if isinstance(x, dict) and (x.get("device") or "").endswith("/" + name)]
    out["udisks"] = "wrong: absent" if not u else verdict(
        u[0]["SyncAction"] or "idle", u[0]["SyncCompleted"] if act != "idle" else None, u[0]["NumDevices"],
        "no word for delayed: a check at 0 %" if delayed else None)
    m = [x for x in snap["mdpilot"].values() if isinstance(x, dict) and x.get("KernelName") == name]
    out["mdpilot"] = "wrong: absent" if not m else verdict(
        m[0]["SyncAction"], m[0]["SyncCompleted"] if act != "idle" else None, m[0]["NumDevices"],
        "no word for delayed on D-Bus: a check at 0 %" if delayed else None)
    ne = snap["node_exporter"]
    sm = ne["samples"] if ne["ok"] else {}
    if not ne["ok"] or sm.get('node_scrape_collector_success{collector="mdadm"}') == 0:
        out["node_exporter"] = "wrong: no md samples (scrape or collector failed)"
    else:
        st = [lab for key, val in sm.items() if key.startswith("node_md_state{") and 'device="%s"' % name in key
              and val == 1 for lab in [dict(LABELS.findall(key)).get("state")]]
        if not st:
            out["node_exporter"] = "wrong: absent"
        else:
            want = NODE_STATE.get(act)
            a = sm.get('node_md_blocks_synced{device="%s"}' % name)
            b = sm.get('node_md_blocks{device="%s"}' % name)
            why = []
            if want is None:
                if st[0] == "active":
                    why.append("state active (nothing running) where md says %s" % act)
            elif st[0] != want:
                why.append("state %s where md says %s" % (st[0], act))
            if f is not None and a is not None and b and abs(a / b - f) > 0.1:
                why.append("progress %.3f where md says %.3f" % (a / b, f))
            req = sm.get('node_md_disks_required{device="%s"}' % name)
            if req is not None and int(req) != disks:
                why.append("%d disks required where md has %d" % (req, disks))
            out["node_exporter"] = ("wrong: " + "; ".join(why)) if why else "right"
    mm = snap["mdpilot_metrics"]["samples"]
    acts = [dict(LABELS.findall(key)).get("action") for key, val in mm.items()
            if key.startswith("mdpilot_array_sync_action{") and 'array="%s"' % name in key and val == 1]
    ratio = [val for key, val in mm.items()
             if key.startswith("mdpilot_array_sync_completed_ratio{") and 'array="%s"' % name in key]
    nd = [val for key, val in mm.items() if key.startswith("mdpilot_array_raid_disks{") and 'array="%s"' % name in key]
    out["mdpilot_metrics"] = "wrong: absent" if not acts else verdict(
        acts[0], ratio[0] if ratio else (0.0 if delayed else None), int(nd[0]) if nd else None)
    return out


HARD = [
    ("shared-delayed", ["md10", "md11"], "Two RAID1 on the same two disks, both asked to check: md runs one, the other waits (`resync=DELAYED` in /proc/mdstat)"),
    ("reshape", ["md12"], "A RAID5 of 3 grown to 4 members (`mdadm --grow --raid-devices=4`), 8 s into the reshape"),
    ("resyncing", ["md13"], "A RAID1 resyncing (the moment before it is stopped)"),
    ("stopped", ["md13"], "8 s after `mdadm --stop` of that resyncing RAID1"),
    ("created", ["md14"], "10 s after `mdadm --create` of a new RAID1 while every tool runs"),
]


def hard(raw, off, ms):
    out = {}
    for label, names, what in HARD:
        p = os.path.join(raw, "snap-%s.json" % label)
        snaps = jsonl(p)
        if not snaps:
            continue
        out[label] = {"what": what, "arrays": {n: array_views(snaps[0], n) for n in names},
                      "verdicts": {n: judge(snaps[0], n) for n in names}}
    # The new array's appearance: from the mark before `mdadm --create` to each tool's first sign.
    t0 = [t for t, x in ms if x == "create md14"]
    if t0:
        t0 = t0[0]
        dbus = jsonl(os.path.join(raw, "dbus.jsonl"))
        ap = {}
        for r in dbus:
            if r["t"] < t0 or r.get("sig") != "InterfacesAdded":
                continue
            props = r.get("props") or {}
            if r["tool"] == "udisks" and "org.freedesktop.UDisks2.MDRaid" in r.get("ifaces", []):
                ap.setdefault("udisks", r["t"] - t0)
            a = props.get("org.mdpilot.MdPilot1.Array") or {}
            if r["tool"] == "mdpilot" and a.get("KernelName") == "md14":
                ap.setdefault("mdpilot", r["t"] - t0)
        for r in jsonl(os.path.join(raw, "scrape-node.jsonl")):
            if r["t"] >= t0 and any('device="md14"' in k for k in r.get("samples", {})):
                ap.setdefault("node_exporter", r["t"] - t0)
        for r in jsonl(os.path.join(raw, "scrape-mdpilot.jsonl")):
            if r["t"] >= t0 and any('array="md14"' in k for k in r.get("samples", {})):
                ap.setdefault("mdpilot_metrics", r["t"] - t0)
        mon = os.path.join(raw, "mdmonitor.log")
        if os.path.exists(mon):
            for line in open(mon):
                t, _, text = line.partition(" ")
                if float(t) - off >= t0 and "md14" in text:
                    ap.setdefault("mdmonitor", float(t) - off - t0)
                    out.setdefault("mdmonitor_md14", text.strip())
        out["created_appearance_s"] = ap
    mon = os.path.join(raw, "mdmonitor.log")
    if os.path.exists(mon):
        hard_t0 = [t for t, x in ms if x == "shared start"]
        hard_t1 = [t for t, x in ms if x == "checks mdcheck start"] or [float("inf")]
        out["mdmonitor_events"] = [line.strip().partition(" ")[2] for line in open(mon)
                                   if hard_t0 and hard_t0[0] <= float(line.split()[0]) - off < hard_t1[0]]
    return out


SHORT = dict(zip([n for _, n in TOOLS], ["udisksd (D-Bus)", "mdpilot (D-Bus)", "mdpilot monitor --events",
                                          "mdadm --monitor", "node_exporter (1 s scrape)",
                                          "mdpilot metrics (1 s scrape)"]))
PROGRESS_TOOLS = [
    ("udisks", "udisksd: MDRaid.SyncCompleted PropertiesChanged"),
    ("mdpilot", "mdpilot: Array.SyncCompleted PropertiesChanged"),
    ("events", "mdpilot monitor --events: Rebuild/CheckNN lines"),
    ("mdmonitor", "mdadm --monitor: PROGRAM RebuildNN"),
    ("node", "node_exporter: node_md_blocks_synced / node_md_blocks (scraped every 1 s)"),
    ("metrics", "mdpilot metrics: mdpilot_array_sync_completed_ratio (scraped every 1 s)"),
]


def fraction(text):
    """md/sync_completed's `A / B` as a fraction; None for `none`, `delayed` and the rest."""
    m = re.match(r"\s*(\d+)\s*/\s*(\d+)", text or "")
    if not m or int(m.group(2)) == 0:
        return None
    return int(m.group(1)) / int(m.group(2))


def mdmonitor_lines(raw, off):
    p = os.path.join(raw, "mdmonitor.log")
    out = []
    if os.path.exists(p):
        for line in open(p):
            t, _, text = line.rstrip("\n").partition(" ")
            try:
                out.append((float(t) - off, text))
            except ValueError:
                pass
    return out


def progress_updates(raw, off, md="md0"):
    """{tool: [(t, fraction)]}: every progress value each tool showed for MD, in time order."""
    dbus = jsonl(os.path.join(raw, "dbus.jsonl"))
    u = {k: [] for k, _ in PROGRESS_TOOLS}
    for r in dbus:
        v = (r.get("props") or {}).get("SyncCompleted")
        if r.get("sig") == "PropertiesChanged" and isinstance(v, (int, float)) and r.get("tool") in ("udisks", "mdpilot"):
            u[r["tool"]].append((r["t"], float(v)))
    for r in jsonl(os.path.join(raw, "events.jsonl")):
        m = re.match(r"(?:Rebuild|Check|InitialBuild)(\d\d) %s\b" % md, r.get("line", ""))
        if m:
            u["events"].append((r["t"], int(m.group(1)) / 100))
    for t, text in mdmonitor_lines(raw, off):
        m = re.match(r"Rebuild(\d\d) /dev/%s\b" % md, text)
        if m:
            u["mdmonitor"].append((t, int(m.group(1)) / 100))
    for r in jsonl(os.path.join(raw, "scrape-node.jsonl")):
        sm = r.get("samples") or {}
        a = sm.get('node_md_blocks_synced{device="%s"}' % md)
        b = sm.get('node_md_blocks{device="%s"}' % md)
        if a is not None and b:
            u["node"].append((r["t"], a / b))
    for r in jsonl(os.path.join(raw, "scrape-mdpilot.jsonl")):
        sm = r.get("samples") or {}
        v = sm.get('mdpilot_array_sync_completed_ratio{array="%s"}' % md)
        if v is not None:
            u["metrics"].append((r["t"], v))
    for k in u:
        u[k].sort()
    return u


def progress(raw, off, ms):
    kern = [(r["t"], fraction(r.get("completed"))) for r in jsonl(os.path.join(raw, "kernel-progress.jsonl"))
            if r.get("md") == "md0"]
    if not kern:
        return {}
    ups = progress_updates(raw, off)
    at = {x: t for t, x in ms}
    out = {}
    for kind in ("recovery", "check"):
        t0 = at.get("progress %s start" % kind)
        t1 = at.get("progress %s end" % kind)
        if t0 is None or t1 is None:
            continue
        # Late words (mdmonitor's) still belong to this sync until the next one starts.
        t2 = at.get("progress check start") if kind == "recovery" else at.get("progress end", t1 + 70)
        kw = [(t, f) for t, f in kern if t0 <= t <= t1 and f is not None]
        row = {"duration_s": t1 - t0, "kernel": {
            "n": len(kw), "interval_p50": pct([b[0] - a[0] for a, b in zip(kw, kw[1:])], 50),
            "interval_max": max([b[0] - a[0] for a, b in zip(kw, kw[1:])], default=None)}}
        for k, _ in PROGRESS_TOOLS:
            seen, last = [], None
            for t, v in ups[k]:
                if t0 <= t <= (t2 or t1) and 0 < v < 1 and v != last:
                    seen.append((t, v))
                    last = v
            lags, ahead = [], 0
            for t, v in seen:
                reached = [tk for tk, f in kw if f >= v - 1e-9]
                if reached and reached[0] <= t:
                    lags.append(t - reached[0])
                else:
                    ahead += 1
            iv = [b[0] - a[0] for a, b in zip(seen, seen[1:])]
            row[k] = {"n": len(seen), "interval_p50": pct(iv, 50), "interval_max": max(iv) if iv else None,
                      "lag_p50": pct(lags, 50), "lag_p95": pct(lags, 95), "lag_max": max(lags) if lags else None,
                      "ahead": ahead, "values": [[round(t - t0, 3), round(v, 4)] for t, v in seen]}
        out[kind] = row
    return out


def parse_toml(text):
    try:
        import tomllib
        return tomllib.loads(text)
    except Exception:  # noqa: BLE001 -- "(No such file...)" or an old Python: no record
        return {}


def mdpilot_record(text, uuid):
    arrays = parse_toml(text).get("array", {})
    key = uuid.replace("-", "").replace(":", "").lower()
    for k, v in arrays.items():
        if k.replace("-", "").replace(":", "").lower() == key:
            return v
    return None


def overlap(rows, a, b):
    """Seconds during which both arrays' checks advanced (md/sync_completed rose in both) and during
    which both were asked to check at once (sync_action `check` in both), from the kernel samples
    of each boot (`boot` keeps the boots apart), which are md's changes polled every 1 s: a state
    lasts from its sample to the array's next, the last one to the boot's last sample."""
    runs = {a: [], b: []}
    asked = {a: [], b: []}
    last = {}
    for r in rows:
        md = r["md"]
        if md not in runs:
            continue
        key = (r.get("boot", 1), md)
        f = fraction(r.get("completed"))
        if key in last:
            t0, f0, act0 = last[key]
            if f0 is not None and f is not None and f > f0:
                runs[md].append((t0, r["t"]))
            if act0 == "check" and r.get("action") == "check":
                asked[md].append((t0, r["t"]))
        last[key] = (r["t"], f, r.get("action"))
    # Only changes are sampled: each array's last state lasts to the end of its boot's samples.
    end = {}
    for r in rows:
        end[r.get("boot", 1)] = max(end.get(r.get("boot", 1), r["t"]), r["t"])
    for (boot, md), (t0, _f, act) in last.items():
        if act == "check" and end[boot] > t0:
            asked[md].append((t0, end[boot]))

    def both(x, y):
        tot = 0.0
        for s1, e1 in x:
            for s2, e2 in y:
                tot += max(0.0, min(e1, e2) - max(s1, s2))
        return tot

    return {"both_advancing_s": round(both(runs[a], runs[b]), 1),
            "advancing_s": {a: round(sum(e - s for s, e in runs[a]), 1), b: round(sum(e - s for s, e in runs[b]), 1)},
            "both_asked_s": round(both(asked[a], asked[b]), 1),
            "both_asked": both(asked[a], asked[b]) > 0}


def checks(raw, off):
    again = os.path.join(raw, "again")
    uu = {}
    p = os.path.join(raw, "checks-uuids.txt")
    if not os.path.exists(p):
        return {}
    for line in open(p):
        w = line.split()
        if len(w) == 2:
            uu[w[0]] = w[1]
    names2 = {}
    p = os.path.join(again, "names.txt")
    if os.path.exists(p):
        for line in open(p):
            w = line.split()
            if len(w) == 3:
                names2[w[0]] = w[1]
    st1 = {r["label"]: r for r in jsonl(os.path.join(raw, "state.jsonl"))}
    st2 = {r["label"]: r for r in jsonl(os.path.join(again, "state.jsonl"))}
    k1 = jsonl(os.path.join(raw, "kernel-checks.jsonl"))
    # The second boot's samples under the first boot's names.
    back = {v: k for k, v in names2.items()}
    k2 = [dict(r, md=back.get(r["md"], r["md"]), boot=2) for r in jsonl(os.path.join(again, "kernel-checks.jsonl"))]
    out = {"uuids": uu, "names_after_reboot": names2,
           "overlap": {"debian (mdcheck): md20+md21": overlap(k1 + k2, "md20", "md21"),
                       "mdpilot (schedule): md22+md23": overlap(k1 + k2, "md22", "md23")}}
    stops = {}
    p = os.path.join(raw, "stop-times.txt")
    if os.path.exists(p):
        for line in open(p):
            w = line.split()
            if len(w) == 2:
                stops[w[0]] = float(w[1])
    out["stop_s"] = stops
    arrays = {}
    for a in ("md20", "md21", "md22", "md23"):
        u = uu.get(a, "")
        n2 = names2.get(a)
        row = {"tool": "mdcheck" if a in ("md20", "md21") else "mdpilot"}
        before = st1.get("before-reboot", {}).get("arrays", {}).get(a, {})
        row["before_reboot"] = {"action": before.get("sync_action") or before.get("action"),
                                "completed": before.get("completed")}
        running = st1.get("mdcheck-running" if a in ("md20", "md21") else "before-reboot", {})
        if a in ("md20", "md21"):
            row["recorded_while_running"] = (running.get("mdcheck") or {}).get("MD_UUID_" + u)
        else:
            rec = mdpilot_record(running.get("checks_toml", ""), u) or {}
            row["recorded_while_running"] = (rec.get("position") or {}).get("sectors")
        stopped = st1.get("stopped", {})
        row["after_stop"] = (stopped.get("arrays") or {}).get(a, {}).get("completed")
        if row["tool"] == "mdcheck":
            row["saved"] = (stopped.get("mdcheck") or {}).get("MD_UUID_" + u)
        else:
            rec = mdpilot_record(stopped.get("checks_toml", ""), u) or {}
            row["saved"] = rec.get("position", {}).get("sectors") if rec.get("position") else None
            row["saved_record"] = rec
        boot = (st2.get("boot", {}).get("arrays") or {}).get(n2 or "", {})
        row["after_boot"] = {"action": boot.get("action"), "completed": boot.get("completed")}
        # Where the first check after the boot started: md/sync_min in the first 1 s sample that
        # shows it running (a resumed check can end before the step's snapshot); else the snapshot.
        first = next((r for r in k2 if r["md"] == a and r.get("action") in ("check", "repair")), None)
        lab = "mdcheck-continued" if row["tool"] == "mdcheck" else "mdpilot-resumed"
        res = first or (st2.get(lab, {}).get("arrays") or {}).get(n2 or "", {})
        row["resumed"] = {"action": res.get("action"), "sync_min": res.get("min"), "completed": res.get("completed"),
                          "sampled_s": round(first["t"], 1) if first else None}
        fin = (st2.get("results", {}).get("arrays") or {}).get(n2 or "", {})
        row["result_sysfs"] = {"mismatch_cnt": fin.get("mismatch"), "last_sync_action": fin.get("last_sync_action")}
        mp = (st2.get("results", {}).get("mdpilot") or {}).get(n2 or "", {})
        row["result_mdpilot_dbus"] = {k: v for k, v in mp.items() if k.startswith("LastCheck")}
        rec2 = mdpilot_record(st2.get("results", {}).get("checks_toml", ""), u) or {}
        row["result_mdpilot_record"] = rec2.get("last") or {k: v for k, v in rec2.items() if k != "name"}
        ud = (st2.get("results", {}).get("udisks") or {}).get(u, {})
        row["udisks_keys_with_mismatch"] = sorted(k for k in ud if "ismatch" in k)
        arrays[a] = row
    out["arrays"] = arrays
    mon = [x for _, x in mdmonitor_lines(again, 0.0)]
    out["mdmonitor_after_reboot"] = mon
    t1 = [t for t, x in marks(raw, off) if x == "checks mdcheck start"]
    out["mdmonitor_first_boot"] = [x for t, x in mdmonitor_lines(raw, off) if t1 and t >= t1[0]]
    p = os.path.join(again, "journal-mdcheck.txt")
    out["journal_mdcheck"] = [ln.rstrip("\n") for ln in open(p)] if os.path.exists(p) else []
    return out


def plot(r, path):
    """latency.png: each tool's latencies over the trials (log scale), one row per tool."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    trials = r["latency"]["trials"]
    rows = [(name, [t[k] for t in trials if t.get(k) is not None]) for k, name in TOOLS]
    rows = [(n, xs) for n, xs in rows if xs]
    if not rows:
        return False
    fig, ax = plt.subplots(figsize=(10, 0.8 * len(rows) + 1.5))
    for i, (n, xs) in enumerate(rows):
        ax.scatter(xs, [i] * len(xs), alpha=0.6, s=24)
        ax.plot([pct(xs, 50)] * 2, [i - 0.3, i + 0.3], color="black")
        ax.plot([pct(xs, 95)] * 2, [i - 0.3, i + 0.3], color="red")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([SHORT.get(n, n) for n, _ in rows])
    ax.set_xscale("log")
    ax.set_xlabel("seconds from `mdadm --fail` until the tool showed it (black: p50, red: p95)")
    ax.set_title("A member fails: %d trials, Debian %s guest under qemu TCG" % (len(trials), r["release"]))
    ax.grid(True, axis="x", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def fmt(x):
    return "–" if x is None else ("%.3f" % x)


def markdown(r):
    L = []
    L.append("Debian %s guest (qemu TCG, 2 vCPUs, 2 GiB), kernel %s; %s." % (
        r["release"], r["versions"].get("kernel", "?"), ", ".join(
            "%s %s" % (k, v) for k, v in r["versions"].items() if k != "kernel")))
    L.append("Whole run: %s s wall on the host (%s)%s.\n" % (r["wall_s"], "two boots" if r.get("second_boot") else
                                                              "the first boot only: no second boot's output", "; guest steps: " + "; ".join(
        r["verdicts"]) if r.get("verdicts") else ""))
    L += latency_md(r["latency"])
    if r["idle"]:
        L.append("### Idle cost: %s s asked, %s s between the two reads, four arrays, nothing happening (no scrapes)\n" % (
            r["idle_s"], r["idle_window_s"]))
        L.append("| process | CPU s (utime+stime) | context switches | threads | peak RSS (VmHWM) |")
        L.append("|---|---:|---:|---:|---:|")
        for u, x in r["idle"].items():
            L.append("| %s | %.2f | %d | %d | %s MiB |" % (u, x["cpu_s"], x["ctxt"], x["threads"],
                                                      "%.1f" % (x["peak_rss_kib"] / 1024) if x["peak_rss_kib"] else "?"))
    L += progress_md(r.get("progress") or {})
    h = r["hard"]
    if any(label in h for label, _, _ in HARD):
        L.append("\n### Hard cases: what each tool showed, beside the kernel\n")
        for label, names, what in HARD:
            if label not in h:
                continue
            L.append("**%s** — %s\n" % (label, what))
            L.append("| array | view | shows | right? |")
            L.append("|---|---|---|---|")
            for name, views in h[label]["arrays"].items():
                vd = h[label].get("verdicts", {}).get(name, {})
                for tool, text in views.items():
                    L.append("| %s | %s | %s | %s |" % (name, tool, text.replace("|", "\\|"),
                                                       "(the truth)" if tool == "kernel" else vd.get(tool, "")))
            L.append("")
        if "created_appearance_s" in h:
            L.append("A new array (md14) appeared after (s): " + ", ".join(
                "%s %.3f" % (k, v) for k, v in sorted(h["created_appearance_s"].items())) + "\n")
        if h.get("mdmonitor_events"):
            L.append("mdadm --monitor's PROGRAM calls during the hard cases: " + "; ".join(
                "`%s`" % e for e in h["mdmonitor_events"]) + "\n")
    L += checks_md(r.get("checks") or {})
    return "\n".join(L) + "\n"


def latency_md(lat):
    """The failure trials' table; nothing where no trial ran (`--phases` without latency)."""
    n = len(lat["trials"])
    if not n:
        return []
    s = lat["summary"]
    L = []
    L.append("### A member fails: time until each tool shows it (%d trials, seconds from `mdadm --fail`)\n" % n)
    L.append("| tool | p50 | p95 | max | p50 after mdadm returned | seen in |")
    L.append("|---|---:|---:|---:|---:|---:|")
    for k, name in TOOLS:
        x = s[k]
        L.append("| %s | %s | %s | %s | %s | %d/%d |" % (name, fmt(x["p50"]), fmt(x["p95"]), fmt(x["max"]),
                                                     fmt(x["p50_after_return"]), x["n"], n))
    m = s["mdadm_fail_run"]
    L.append("\n`mdadm --fail` itself ran %s s (p50), %s s (max): every figure above includes it.\n" % (
        fmt(m["p50"]), fmt(m["max"])))
    return L


def progress_md(p):
    L = []
    for kind, row in p.items():
        k = row["kernel"]
        L.append("\n### Progress during a %s of md0 (64 MiB at 1000 KiB/s, %.0f s): update interval and lag behind md/sync_completed\n" % (
            kind, row["duration_s"]))
        L.append("md/sync_completed itself (sampled every 0.1 s) changed %d times, every %s s (p50), %s s at most." % (
            k["n"], fmt(k["interval_p50"]), fmt(k["interval_max"])))
        L.append("A lag is the time from md/sync_completed first reaching the value a tool showed to the tool "
                 "showing it; *ahead*: values shown before md/sync_completed reached them (read from /proc/mdstat's "
                 "finer counter).\n")
        L.append("| tool | updates | interval p50 | interval max | lag p50 | lag p95 | lag max | ahead |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        for t, name in PROGRESS_TOOLS:
            x = row[t]
            L.append("| %s | %d | %s | %s | %s | %s | %s | %d |" % (
                name, x["n"], fmt(x["interval_p50"]), fmt(x["interval_max"]), fmt(x["lag_p50"]),
                fmt(x["lag_p95"]), fmt(x["lag_max"]), x["ahead"]))
    return L


def checks_md(c):
    if not c:
        return []
    L = ["\n### Checks: Debian's mdcheck beside mdpilot's schedule, two RAID1 on shared disks each, a reboot mid-check\n"]
    L.append("| pair | seconds both in `check` at once | seconds both advanced at once | seconds each advanced |")
    L.append("|---|---:|---:|---|")
    for pair, o in c["overlap"].items():
        L.append("| %s | %s | %s | %s |" % (pair, o.get("both_asked_s", "yes" if o["both_asked"] else "no"), o["both_advancing_s"],
                                           ", ".join("%s %s" % kv for kv in o["advancing_s"].items())))
    if c.get("stop_s"):
        L.append("\n`systemctl stop` (what the shutdown does to each unit) took: " + ", ".join(
            "%s %.1f s" % kv for kv in c["stop_s"].items()) + ".\n")
    L.append("Positions in 512-byte sectors (md/sync_completed's unit); *recorded while running*: mdcheck's "
             "/var/lib/mdcheck file 30 s after its start, mdpilot's checks.toml just before the reboot.\n")
    L.append("| array (tool) | recorded while running | before the reboot (sync_completed) | saved at the stop | after the boot | first check after the boot: from (md/sync_min while it runs) | result afterwards: md/mismatch_cnt | mdpilot's record |")
    L.append("|---|---|---|---|---|---|---|---|")
    for a, x in c["arrays"].items():
        rec = x.get("result_mdpilot_record") or {}
        L.append("| %s (%s) | %s | %s %s | %s | %s %s | %s %s | %s (last_sync_action %s) | %s |" % (
            a, x["tool"], x.get("recorded_while_running"), x["before_reboot"]["action"], x["before_reboot"]["completed"], x.get("saved"),
            x["after_boot"]["action"], x["after_boot"]["completed"], x["resumed"]["action"], x["resumed"]["sync_min"],
            x["result_sysfs"]["mismatch_cnt"], x["result_sysfs"]["last_sync_action"],
            json.dumps(rec, sort_keys=True).replace("|", "\\|") if rec else "–"))
    if c.get("mdmonitor_first_boot"):
        L.append("\nmdadm --monitor's PROGRAM calls during the checks (first boot): " + "; ".join(
            "`%s`" % e for e in c["mdmonitor_first_boot"]))
    if c.get("mdmonitor_after_reboot"):
        L.append("\nmdadm --monitor's PROGRAM calls after the reboot: " + "; ".join(
            "`%s`" % e for e in c["mdmonitor_after_reboot"]))
    if c.get("journal_mdcheck"):
        L.append("\nmdcheck's journal lines after the reboot: " + "; ".join(
            "`%s`" % e.split(": ", 1)[-1] for e in c["journal_mdcheck"] if "mdcheck" in e))
    return L


def versions(raw):
    v = {}
    p = os.path.join(raw, "versions.txt")
    if os.path.exists(p):
        for line in open(p):
            w = line.split()
            if len(w) == 2 and w[0] in ("kernel", "udisks2", "mdadm", "prometheus-node-exporter", "mdpilot", "systemd"):
                v[w[0]] = w[1]
    return v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("raw")
    ap.add_argument("out")
    ap.add_argument("--release", default="?")
    ap.add_argument("--wall", type=int, default=0)
    ap.add_argument("--trials", type=int, default=0)
    ap.add_argument("--idle", type=int, default=0)
    ap.add_argument("--docs")
    a = ap.parse_args()
    clocks = jsonl(os.path.join(a.raw, "clock.jsonl"))
    offs = [c["real"] - c["mono"] for c in clocks]
    off = offs[0] if offs else 0.0
    ms = marks(a.raw, off)
    w = [t for t, x in ms if x == "idle start"], [t for t, x in ms if x == "idle end"]
    verdicts = []
    p = os.path.join(a.raw, "verdicts.txt")
    if os.path.exists(p):
        for ln in open(p):
            v = ln.strip().replace("RESULT ", "").replace("INFO ", "")
            if v and v not in verdicts:
                verdicts.append(v)
    r = {"release": a.release, "wall_s": a.wall, "verdicts": verdicts,
         "second_boot": os.path.exists(os.path.join(a.raw, "again", "state.jsonl")), "idle_s": a.idle,
         "idle_window_s": round(w[1][0] - w[0][0], 1) if w[0] and w[1] else None, "versions": versions(a.raw),
         "clock_offsets": offs, "latency": latency(a.raw, off, ms), "progress": progress(a.raw, off, ms),
         "idle": idle(a.raw), "hard": hard(a.raw, off, ms), "checks": checks(a.raw, off)}
    if plot(r, os.path.join(a.out, "latency.png")):
        r["plot"] = "latency.png"
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(r, f, indent=1, sort_keys=True)
    md = markdown(r)
    with open(os.path.join(a.out, "results.md"), "w") as f:
        f.write(md)
    print(md)
    if a.docs:
        text = open(a.docs).read()
        b, e = "<!-- peers:begin -->\n", "<!-- peers:end -->"
        i, j = text.index(b) + len(b), text.index(e)
        with open(a.docs, "w") as f:
            f.write(text[:i] + md + text[j:])


if __name__ == "__main__":
    main()
