// Unit tests of the page's pure helpers (src/format.js): `node --test cockpit/test/`, no
// browser, no cockpit. The page looks the service's words up; these tests pin that it judges
// nothing itself (health, initial builds, member roles, check severity, what a repair writes).
import assert from "node:assert/strict";
import test from "node:test";
import * as fmt from "../src/format.js";

// An Array object's properties as the page receives them (dbus/org.mdpilot.MdPilot1.Array.xml).
function array(props) {
    return {
        KernelName: "md0", Level: "raid5", NumDevices: 4, Degraded: 0, Running: true,
        State: "clean", SyncAction: "idle", Health: "ok", InitialBuild: false,
        Members: [["sda", 0, ["in_sync"], 0], ["sdb", 1, ["in_sync"], 0],
                  ["sdc", 2, ["in_sync"], 0], ["sdd", 3, ["in_sync"], 0]],
        MemberRoles: { sda: "in_sync", sdb: "in_sync", sdc: "in_sync", sdd: "in_sync" },
        ...props,
    };
}

test("a raid5 with two of four members faulty is unusable, as status --test says", () => {
    const a = array({
        Degraded: 2, Health: "unusable",
        Members: [["sda", 0, ["in_sync"], 0], ["sdb", 1, ["in_sync"], 0],
                  ["sdc", 2, ["faulty"], 0], ["sdd", 3, ["faulty"], 0]],
        MemberRoles: { sda: "in_sync", sdb: "in_sync", sdc: "faulty", sdd: "faulty" },
    });
    const h = fmt.health(a);
    assert.equal(h.health, "unusable");
    assert.equal(h.label, "Unusable");
    assert.equal(h.color, "red");
    assert.equal(h.rank, 0);
});

test("the page shows the service's verdict and judges nothing itself", () => {
    // Whatever the counts say, the Health word decides.
    assert.equal(fmt.health(array({ Degraded: 1, Health: "ok" })).health, "ok");
    assert.equal(fmt.health(array({ Degraded: 0, Health: "degraded" })).label, "Degraded");
    assert.equal(fmt.health(array({ Running: false, Health: "inactive" })).label, "Inactive");
    // A word this page does not know is shown as sent, with the inactive arrays.
    const u = fmt.health(array({ Health: "rectified" }));
    assert.deepEqual([u.label, u.color, u.rank], ["rectified", "grey", 2]);
    assert.equal(fmt.health(array({ Health: undefined })).label, "unknown");
});

test("an initial build is the service's InitialBuild, in the sync action's words", () => {
    const build = fmt.health(array({ SyncAction: "recover", InitialBuild: true, Degraded: 1 }));
    assert.equal(build.words, "Initial build (recovery)");
    assert.ok(build.initialBuild && build.sync);
    assert.equal(fmt.health(array({ SyncAction: "resync", InitialBuild: true })).words,
                 "Initial build (resync)");
    // A recovery the service does not call an initial build is a rebuild, whatever the members.
    const rebuild = fmt.health(array({ SyncAction: "recover", InitialBuild: false, Degraded: 1 }));
    assert.equal(rebuild.words, "Recovery");
    assert.ok(!rebuild.initialBuild);
    // Idle: no sync, and no initial build even if a stale flag says so.
    const idle = fmt.health(array({ InitialBuild: true }));
    assert.ok(!idle.sync && !idle.initialBuild);
    assert.equal(fmt.health(array({ SyncAction: "frozen" })).words, "Frozen");
    assert.equal(fmt.health(array({ SyncAction: "rectify" })).words, "rectify");
});

test("member roles come from MemberRoles: a rebuilding member is neither faulty nor in sync", () => {
    const m = fmt.members(
        [["sda", 0, ["in_sync"], 0], ["sdb", 1, ["spare"], 3], ["sdc", -1, ["faulty"], 0]],
        { sda: "in_sync", sdb: "rebuilding", sdc: "faulty" },
    );
    assert.deepEqual(m.map(x => [x.name, x.role, x.faulty]),
                     [["sda", "in_sync", false], ["sdb", "rebuilding", false], ["sdc", "faulty", true]]);
    assert.equal(m[1].errors, 3);
    assert.equal(fmt.ROLE_WORDS[m[1].role], "Rebuilding");
    // Without roles (an older service): no role, nothing judged faulty from the state words.
    assert.deepEqual(fmt.members([["sda", 0, ["faulty"], 0]]).map(x => [x.role, x.faulty]), [["", false]]);
    assert.deepEqual(fmt.members(undefined), []);
});

test("arrays sort by the service's verdict, then by kernel name in numeric order", () => {
    const list = [
        array({ KernelName: "md10" }),
        array({ KernelName: "md2" }),
        array({ KernelName: "md3", Health: "inactive" }),
        array({ KernelName: "md4", Health: "degraded" }),
        array({ KernelName: "md5", Health: "unusable" }),
    ];
    assert.deepEqual(fmt.sortArrays(list).map(a => a.KernelName), ["md5", "md4", "md3", "md2", "md10"]);
});

test("what a repair writes is looked up from Redundancy", () => {
    assert.match(fmt.repairWrites({ Redundancy: "parity" }), /parity blocks are recomputed/);
    assert.match(fmt.repairWrites({ Redundancy: "mirror" }), /first copy/);
    assert.match(fmt.repairWrites({ Redundancy: "none" }), /no copies or parity/);
    assert.match(fmt.repairWrites({}), /no copies or parity/);
});

test("a check result's severity is the service's", () => {
    assert.equal(fmt.checkResult({}), null);
    const warn = fmt.checkResult({ action: "check", mismatch_cnt: 8, completed: 0, level: "raid5", severity: "warning" });
    assert.equal(warn.severity, "warning");
    assert.match(warn.text, /8 mismatched sectors \(parity must match on raid5: investigate\)/);
    const info = fmt.checkResult({ action: "repair", mismatch_cnt: 8, completed: 0, level: "raid1", severity: "info" });
    assert.match(info.text, /^Repair completed never: 8 mismatched sectors \(usual on raid1/);
    // No severity sent: the page does not decide one from the level or the count.
    assert.equal(fmt.checkResult({ action: "check", mismatch_cnt: 8, level: "raid5" }).severity, "info");
    // Cockpit variants ({t, v}) are unwrapped.
    const v = fmt.checkResult({ action: { t: "s", v: "check" }, mismatch_cnt: { t: "t", v: 0 } });
    assert.equal(v.mismatches, 0);
});

test("units, durations and progress", () => {
    assert.equal(fmt.bytes(0), "0 B");
    assert.equal(fmt.bytes(1536), "1.50 KiB");
    assert.equal(fmt.bytes(3 * 1024 ** 4), "3.00 TiB");
    assert.equal(fmt.bytes(-1), "?");
    assert.equal(fmt.kib(1000), "1000 KiB/s (1000.0 KiB/s)");
    assert.equal(fmt.duration(42), "42 s");
    assert.equal(fmt.duration(3900), "1 h 05 min");
    assert.equal(fmt.duration(3 * 86400 + 3600), "3 d 1 h");
    assert.equal(fmt.duration(NaN), "?");
    assert.deepEqual(fmt.progress({ SyncCompleted: 0.25, SyncRate: 1024, SyncRemainingTime: 2e6 }),
                     { percent: 25, rate: 1024, eta: 2 });
    assert.deepEqual(fmt.progress({ SyncCompleted: 2 }), { percent: 100, rate: 0, eta: null });
});

test("leases and errors in words", () => {
    const l = fmt.lease({ id: "a", min: 5000, arrays: { md0: { max: 9 } } });
    assert.equal(l.limits, "min 5000 KiB/s; md0: max 9 KiB/s");
    assert.equal(fmt.lease({ id: "b" }).limits, "install policy");
    const plain = [l, fmt.lease({ id: "c", max: 1 })];
    assert.deepEqual(fmt.leasesHolding(plain, null, "min").map(x => x.id), ["a"]);
    assert.deepEqual(fmt.leasesHolding(plain, "md0", "max").map(x => x.id), ["a"]);
    assert.equal(fmt.errorWords({ name: "org.mdpilot.MdPilot1.Error.Busy", message: "x" }), "Busy: x");
    assert.equal(fmt.errorWords({ message: "plain" }), "plain");
});
