#!/usr/bin/python3
"""Observers of benches/peers, run in the booted Debian guest. Each prints one JSON object a line,
stamped with the guest's CLOCK_MONOTONIC in seconds ("t"), flushed at once.

  peers_observe.py dbus            PropertiesChanged, InterfacesAdded and InterfacesRemoved of
                                   udisksd (org.freedesktop.UDisks2) and mdpilot
                                   (org.mdpilot.MdPilot1) on the system bus:
                                   {"t", "tool": "udisks"|"mdpilot", "sig", "path", "iface", "props"}
  peers_observe.py lines TOOL      each line of stdin: {"t", "tool", "line"}
  peers_observe.py scrape TOOL URL GET URL every second (on a fixed 1 s grid), keep the md samples:
                                   {"t", "tool", "ok", "samples": {"name{labels}": value}}
  peers_observe.py snapshot LABEL  every tool's view and the kernel's at one moment, one object:
                                   udisksd's MDRaid objects, mdpilot's Array objects, both scrapes
                                   (node_exporter's whole md collector), /proc/mdstat and md/ in sysfs
  peers_observe.py clock           {"mono", "real"}: the offset between CLOCK_REALTIME and
                                   CLOCK_MONOTONIC (mdmonitor's PROGRAM stamps $EPOCHREALTIME)
  peers_observe.py kernel SECONDS  every md array's sync state read from sysfs every SECONDS, a
                                   line when it changed: {"t", "md", "uuid", "action",
                                   "completed" (md/sync_completed as printed), "min", "mismatch"}
  peers_observe.py state LABEL     the checks' records at one moment: per array md/ in sysfs, the
                                   files of /var/lib/mdcheck, /var/lib/mdpilot/checks.toml,
                                   mdpilot's check properties and udisksd's MDRaid properties
"""
import glob
import json
import os
import re
import sys
import time
import urllib.request


def out(obj):
    sys.stdout.write(json.dumps(obj, sort_keys=True) + "\n")
    sys.stdout.flush()


def mono():
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def plain(v):
    """A GLib.Variant unpacked to JSON-able values (bytes arrays as text)."""
    if isinstance(v, bytes):
        return v.rstrip(b"\0").decode("utf-8", "replace")
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        if v and all(isinstance(x, int) and 0 <= x < 256 for x in v) and len(v) > 1 and v[-1] == 0:
            return bytes(v[:-1]).decode("utf-8", "replace")
        return [plain(x) for x in v]
    return v


def dbus():
    from gi.repository import Gio, GLib

    bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)
    prefixes = {"/org/freedesktop/UDisks2/": "udisks", "/org/mdpilot/": "mdpilot"}

    def tool_of(path):
        for p, t in prefixes.items():
            if path.startswith(p):
                return t
        return None

    def on_signal(_c, _sender, path, iface, member, params):
        t = mono()
        args = params.unpack()
        if member == "PropertiesChanged":
            tool = tool_of(path)
            if tool:
                out({"t": t, "tool": tool, "sig": member, "path": path, "iface": args[0], "props": plain(args[1])})
        elif member in ("InterfacesAdded", "InterfacesRemoved"):
            obj = args[0]
            tool = tool_of(obj)
            if tool:
                ifaces = list(args[1].keys()) if member == "InterfacesAdded" else list(args[1])
                props = plain(args[1]) if member == "InterfacesAdded" else {}
                out({"t": t, "tool": tool, "sig": member, "path": obj, "ifaces": ifaces, "props": props})

    for iface in ("org.freedesktop.DBus.Properties", "org.freedesktop.DBus.ObjectManager"):
        bus.signal_subscribe(None, iface, None, None, None, Gio.DBusSignalFlags.NONE, on_signal)
    out({"t": mono(), "tool": "observer", "ready": True})
    GLib.MainLoop().run()


def lines(tool):
    for line in sys.stdin:
        out({"t": mono(), "tool": tool, "line": line.rstrip("\n")})


KEEP = ("node_md_", "mdpilot_array_", "node_scrape_collector_", "node_exporter_build_info", "mdpilot_build_info")
LABELS = re.compile(r'(\w+)="([^"]*)"')


def failed_members(samples):
    """{array: n}: node_md_disks{state="failed"} and mdpilot_array_members{state="faulty"}."""
    f = {}
    for name, val in samples.items():
        fam, _, rest = name.partition("{")
        lab = dict(LABELS.findall(rest))
        if (fam == "node_md_disks" and lab.get("state") == "failed") or (
                fam == "mdpilot_array_members" and lab.get("state") == "faulty"):
            f[lab.get("device") or lab.get("array")] = val
    return f


def fetch(url):
    ok, samples = True, {}
    try:
        body = urllib.request.urlopen(url, timeout=5).read().decode()
        for ln in body.splitlines():
            if ln.startswith(KEEP):
                name, _, val = ln.rpartition(" ")
                try:
                    samples[name] = float(val)
                except ValueError:
                    pass
    except Exception as e:  # noqa: BLE001 -- a failed scrape is a data point
        ok, samples = False, {"error": str(e)}
    return ok, samples


def scrape(tool, url):
    start = mono()
    k = 0
    while True:
        k += 1
        ok, samples = fetch(url)
        out({"t": mono(), "tool": tool, "ok": ok, "failed": failed_members(samples) if ok else {}, "samples": samples})
        nxt = start + k
        now = mono()
        while nxt < now:
            k += 1
            nxt = start + k
        time.sleep(nxt - now)


def managed(bus, name, path):
    """The service's objects, without starting it: NO_AUTO_START, so a snapshot taken after a unit
    was stopped (the reboot's `stopped` state) reads "not running" instead of activating it again
    through its D-Bus service file (which resumed mdpilot's check behind the stop)."""
    from gi.repository import Gio, GLib

    try:
        r = bus.call_sync(name, path, "org.freedesktop.DBus.ObjectManager", "GetManagedObjects", None,
                          GLib.VariantType("(a{oa{sa{sv}}})"), Gio.DBusCallFlags.NO_AUTO_START, 20000, None)
        return plain(r.unpack()[0])
    except Exception as e:  # noqa: BLE001
        return {"error": str(e)}


def read(p):
    try:
        with open(p) as f:
            return f.read().strip()
    except OSError as e:
        return "(%s)" % e.strerror


def snapshot(label):
    from gi.repository import Gio

    bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)
    t = mono()
    ud = managed(bus, "org.freedesktop.UDisks2", "/org/freedesktop/UDisks2")
    udisks = {}
    if "error" not in ud:
        dev = {}
        for path, ifs in ud.items():
            b = ifs.get("org.freedesktop.UDisks2.Block")
            if b and b.get("MDRaid", "/") != "/":
                dev[b["MDRaid"]] = b.get("PreferredDevice") or b.get("Device")
        for path, ifs in ud.items():
            m = ifs.get("org.freedesktop.UDisks2.MDRaid")
            if m:
                keep = {k: m.get(k) for k in ("Name", "Level", "NumDevices", "Degraded", "SyncAction",
                                              "SyncCompleted", "SyncRate", "SyncRemainingTime", "Running", "Size")}
                keep["ActiveDevices"] = [[a[0].rsplit("/", 1)[-1], a[1], a[2]] for a in m.get("ActiveDevices", [])]
                keep["device"] = dev.get(path)
                udisks[path] = keep
    else:
        udisks = ud
    mp = managed(bus, "org.mdpilot.MdPilot1", "/org/mdpilot/MdPilot1")
    mdpilot = {}
    if "error" not in mp:
        for path, ifs in mp.items():
            a = ifs.get("org.mdpilot.MdPilot1.Array")
            if a:
                mdpilot[path] = {k: a.get(k) for k in ("KernelName", "Level", "NumDevices", "Degraded", "SyncAction",
                                                       "SyncCompleted", "SyncRate", "State", "Running", "Members",
                                                       "Warnings", "Size")}
    else:
        mdpilot = mp
    node = fetch("http://127.0.0.1:9100/metrics?collect[]=mdadm")
    metrics = fetch("http://127.0.0.1:9163/metrics")
    kernel = {"mdstat": read("/proc/mdstat"), "arrays": {}}
    for md in sorted(glob.glob("/sys/block/md*/md")):
        name = md.split("/")[3]
        kernel["arrays"][name] = {k: read(os.path.join(md, k)) for k in (
            "level", "raid_disks", "array_state", "sync_action", "sync_completed", "degraded",
            "reshape_position", "mismatch_cnt")}
    out({"t": t, "label": label, "udisks": udisks, "mdpilot": mdpilot,
         "node_exporter": {"ok": node[0], "samples": node[1]},
         "mdpilot_metrics": {"ok": metrics[0], "samples": metrics[1]}, "kernel": kernel})


def sync_state(md):
    f = {k: read(os.path.join(md, k)) for k in ("uuid", "sync_action", "sync_completed", "sync_min",
                                               "mismatch_cnt")}
    return {"md": md.split("/")[3], "uuid": f["uuid"], "action": f["sync_action"],
            "completed": f["sync_completed"], "min": f["sync_min"], "mismatch": f["mismatch_cnt"]}


def kernel(interval):
    """md's own progress, the truth the tools are measured against (only changes are printed)."""
    last = {}
    while True:
        t = mono()
        for md in sorted(glob.glob("/sys/block/md*/md")):
            s = sync_state(md)
            key = (s["md"], s["uuid"])
            if last.get(key) != s:
                last[key] = s
                out(dict(s, t=t))
        time.sleep(max(0.0, interval - (mono() - t)))


def state(label):
    from gi.repository import Gio

    bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)
    t = mono()
    arrays = {}
    for md in sorted(glob.glob("/sys/block/md*/md")):
        s = sync_state(md)
        s["last_sync_action"] = read(os.path.join(md, "last_sync_action"))
        arrays[s["md"]] = s
    mdcheck = {os.path.basename(p): read(p) for p in sorted(glob.glob("/var/lib/mdcheck/MD_UUID_*"))}
    mp = managed(bus, "org.mdpilot.MdPilot1", "/org/mdpilot/MdPilot1")
    mdpilot = {}
    if "error" not in mp:
        for ifs in mp.values():
            a = ifs.get("org.mdpilot.MdPilot1.Array")
            if a:
                mdpilot[a.get("KernelName")] = {k: v for k, v in a.items() if "Check" in k or k in (
                    "UUID", "SyncAction", "SyncCompleted")}
    else:
        mdpilot = mp
    ud = managed(bus, "org.freedesktop.UDisks2", "/org/freedesktop/UDisks2")
    udisks = {}
    if "error" not in ud:
        for ifs in ud.values():
            m = ifs.get("org.freedesktop.UDisks2.MDRaid")
            if m:
                udisks[m.get("UUID")] = {k: v for k, v in m.items() if k not in ("ActiveDevices",)}
    else:
        udisks = ud
    out({"t": t, "label": label, "arrays": arrays, "mdcheck": mdcheck,
         "checks_toml": read("/var/lib/mdpilot/checks.toml"), "mdpilot": mdpilot, "udisks": udisks})


def clock():
    out({"mono": mono(), "real": time.time()})


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "dbus":
        dbus()
    elif mode == "lines":
        lines(sys.argv[2])
    elif mode == "scrape":
        scrape(sys.argv[2], sys.argv[3])
    elif mode == "snapshot":
        snapshot(sys.argv[2])
    elif mode == "clock":
        clock()
    elif mode == "kernel":
        kernel(float(sys.argv[2]))
    elif mode == "state":
        state(sys.argv[2])
    else:
        sys.exit("unknown mode " + mode)
