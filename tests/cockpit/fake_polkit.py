#!/usr/bin/python3
"""A stand-in polkit authority for tests/cockpit/run: owns org.freedesktop.PolicyKit1 on the bus
at DBUS_SYSTEM_BUS_ADDRESS and answers every CheckAuthorization "not authorized", appending one
line per question (subject kind and uid, action id) to the file named by argv[1]. The service
asks polkit only for callers other than uid 0, so an empty file means no such caller tried a
mutating method."""
import sys

import dbus
import dbus.service
from dbus.mainloop.glib import DBusGMainLoop
from gi.repository import GLib

LOG = sys.argv[1]


class Authority(dbus.service.Object):
    @dbus.service.method("org.freedesktop.PolicyKit1.Authority",
                         in_signature="(sa{sv})sa{ss}us", out_signature="(bba{ss})")
    def CheckAuthorization(self, subject, action_id, details, flags, cancellation_id):
        uid = subject[1].get("uid", -1)
        with open(LOG, "a") as f:
            f.write(f"{subject[0]} uid={int(uid)} {action_id}\n")
        return (False, False, {})

    @dbus.service.method("org.freedesktop.PolicyKit1.Authority", in_signature="s", out_signature="")
    def CancelCheckAuthorization(self, cancellation_id):
        pass


DBusGMainLoop(set_as_default=True)
bus = dbus.bus.BusConnection(__import__("os").environ["DBUS_SYSTEM_BUS_ADDRESS"])
name = dbus.service.BusName("org.freedesktop.PolicyKit1", bus)
Authority(bus, "/org/freedesktop/PolicyKit1/Authority")
print("ready", flush=True)
GLib.MainLoop().run()
