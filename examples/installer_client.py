#!/usr/bin/python3
"""An installer's use of org.mdpilot.MdPilot1, written as a GTK installer would (GLib/Gio
through python3-gi, no mdpilot code): list the arrays, take the install lease, wipe a device
while following the job through PropertiesChanged, release the lease, and check that nothing
is left behind.

    installer_client.py --device /dev/loop7 [--address unix:path=/tmp/bus] [--method zero]

Without --address it uses the system bus. Paths come from the ObjectManager at
/org/mdpilot/MdPilot1 and from the interfaces the objects carry: the Manager is the object
with org.mdpilot.MdPilot1.Manager (/org/mdpilot/MdPilot1/Manager in API 1.0; the
ObjectManager's own path if no managed object has it), arrays are the objects with
org.mdpilot.MdPilot1.Array (.../arrays/<uuid>), the job is the path StartWipe returns.

Prints one line per step ("arrays: ...", "lease: ...", "job: ...", "progress: ...",
"completed: ...", "released", "clean") and exits 0; on any failure prints "FAIL: ..." on
stderr and exits 1. Needs: python3-gi, gir1.2-glib-2.0 (Debian).
"""

import argparse
import sys

import gi

gi.require_version("Gio", "2.0")
gi.require_version("GLib", "2.0")
from gi.repository import Gio, GLib  # noqa: E402

NAME = "org.mdpilot.MdPilot1"
ROOT = "/org/mdpilot/MdPilot1"
MANAGER = "org.mdpilot.MdPilot1.Manager"
ARRAY = "org.mdpilot.MdPilot1.Array"
JOB = "org.mdpilot.MdPilot1.Job"


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def connect(address):
    if address is None:
        return Gio.bus_get_sync(Gio.BusType.SYSTEM, None)
    flags = (Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT
             | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION)
    return Gio.DBusConnection.new_for_address_sync(address, flags, None, None)


def get_all(conn, path, iface):
    """Fresh property values (not the proxy cache): Properties.GetAll."""
    reply = conn.call_sync(NAME, path, "org.freedesktop.DBus.Properties", "GetAll",
                           GLib.Variant("(s)", (iface,)), GLib.VariantType("(a{sv})"),
                           Gio.DBusCallFlags.NONE, 10000, None)
    return reply.unpack()[0]


def run_until(loop_ctx, done, timeout_s):
    """Iterates the main context until done() or timeout_s; returns done()."""
    deadline = GLib.get_monotonic_time() + int(timeout_s * 1e6)
    while not done() and GLib.get_monotonic_time() < deadline:
        loop_ctx.iteration(False) or GLib.usleep(10000)
    return done()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--address", help="D-Bus address (default: the system bus)")
    ap.add_argument("--device", required=True, help="block device to wipe (all data is lost)")
    ap.add_argument("--method", default="zero")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds for the wipe")
    a = ap.parse_args()

    ctx = GLib.MainContext.default()
    conn = connect(a.address)
    om = Gio.DBusObjectManagerClient.new_sync(
        conn, Gio.DBusObjectManagerClientFlags.NONE, NAME, ROOT, None, None, None)
    if om.get_name_owner() is None:
        fail(f"{NAME} is not on the bus")

    # 1. Arrays, as a partitioning screen lists them.
    arrays = []
    for obj in om.get_objects():
        p = obj.get_interface(ARRAY)
        if p is None:
            continue
        props = {k: p.get_cached_property(k) for k in p.get_cached_property_names()}
        label = next((props[k].unpack() for k in ("KernelName", "Name") if k in props), "?")
        arrays.append((obj.get_object_path(), label))
    arrays.sort()
    print("arrays: " + ", ".join(f"{label} ({path})" for path, label in arrays))

    # The Manager: the managed object with the Manager interface, else the root itself.
    manager_path = next((o.get_object_path() for o in om.get_objects()
                         if o.get_interface(MANAGER) is not None), ROOT)
    manager = Gio.DBusProxy.new_sync(conn, Gio.DBusProxyFlags.NONE, None, NAME, manager_path,
                                     MANAGER, None)
    before = get_all(conn, manager_path, MANAGER)
    limits_before = (before["SpeedLimitMin"], before["SpeedLimitMax"])
    if before["Leases"]:
        fail(f"leases before we started: {before['Leases']}")

    # 2. The install lease: empty options = the service's install policy.
    lease = manager.call_sync("AcquirePriority", GLib.Variant("(a{sv})", ({},)),
                              Gio.DBusCallFlags.NONE, 30000, None).unpack()[0]
    now = get_all(conn, manager_path, MANAGER)
    if len(now["Leases"]) != 1 or lease not in repr(now["Leases"]):
        fail(f"lease {lease} not in Leases: {now['Leases']}")
    print(f"lease: {lease} (speed_limit_min {now['SpeedLimitMin']} KiB/s)")

    # 3. The wipe, followed through PropertiesChanged and Completed as seen by the
    # ObjectManager client's proxies (subscribed before the job starts).
    seen = {"progress": [], "completed": None, "path": None}

    def on_props(_om, obj_proxy, iface_proxy, changed, _invalidated):
        if iface_proxy.get_interface_name() != JOB:
            return
        if obj_proxy.get_object_path() != seen["path"]:
            return
        v = changed.lookup_value("Progress", GLib.VariantType("d"))
        if v is not None:
            seen["progress"].append(v.get_double())

    def on_signal(_om, obj_proxy, iface_proxy, _sender, signal, params):
        if iface_proxy.get_interface_name() == JOB and signal == "Completed" \
                and obj_proxy.get_object_path() == seen["path"]:
            seen["completed"] = params.unpack()

    om.connect("interface-proxy-properties-changed", on_props)
    om.connect("interface-proxy-signal", on_signal)
    options = {"method": GLib.Variant("s", a.method)}
    job = manager.call_sync("StartWipe", GLib.Variant("(sa{sv})", (a.device, options)),
                            Gio.DBusCallFlags.NONE, 60000, None).unpack()[0]
    seen["path"] = job
    print(f"job: {job}")
    if not run_until(ctx, lambda: om.get_interface(job, JOB) is not None, 10):
        fail(f"{job} never appeared in the ObjectManager")
    jp = om.get_interface(job, JOB)
    print(f"job: operation {jp.get_cached_property('Operation').unpack()}, "
          f"{jp.get_cached_property('Bytes').unpack()} bytes, objects "
          f"{jp.get_cached_property('Objects').unpack()}")
    if not run_until(ctx, lambda: seen["completed"] is not None, a.timeout):
        fail(f"no Completed within {a.timeout} s (progress seen: {seen['progress']})")
    ok, message = seen["completed"]
    print(f"progress: {' '.join(f'{p:.2f}' for p in seen['progress'])}")
    print(f"completed: {ok} {message}")
    if not ok:
        fail(f"the wipe failed: {message}")
    if not seen["progress"] or seen["progress"][-1] != 1.0:
        fail(f"PropertiesChanged never reported Progress 1.0: {seen['progress']}")
    final = get_all(conn, job, JOB)
    if final["BytesDone"] != final["Bytes"] or final["Cancelable"]:
        fail(f"job's final properties: {final}")

    # 4. Release, and check that nothing is left: no lease, the limits as before.
    manager.call_sync("ReleasePriority", GLib.Variant("(s)", (lease,)),
                      Gio.DBusCallFlags.NONE, 30000, None)
    print("released")
    after = get_all(conn, manager_path, MANAGER)
    if after["Leases"]:
        fail(f"leases left: {after['Leases']}")
    limits_after = (after["SpeedLimitMin"], after["SpeedLimitMax"])
    if limits_after != limits_before:
        fail(f"speed limits {limits_after} are not the originals {limits_before}")
    print(f"clean: no leases, speed limits {limits_after[0]}/{limits_after[1]} KiB/s as before")


if __name__ == "__main__":
    try:
        main()
    except GLib.Error as e:
        fail(f"{e.domain}: {e.message}")
