// Unit tests of the sync-history chart's pure helpers (src/history.js): `node --test
// cockpit/test/`. The samples as Array.GetSyncHistory returns them (a(tttd): Unix s, KiB/s,
// KiB/s, percent or -1).
import assert from "node:assert/strict";
import test from "node:test";
import * as h from "../src/history.js";

const T0 = 1_800_000_000;

// A check of an hour at 120000 KiB/s, one sample per 10 s, slowed to 5000 KiB/s while the
// io pressure was 12 % (minutes 20 to 30).
function hour() {
    const out = [];
    for (let i = 0; i < 360; i++) {
        const busy = i >= 120 && i < 180;
        out.push([T0 + i * 10, busy ? 5000 : 120000, busy ? 5000 : 200000, busy ? 12 : 0.5]);
    }
    return out;
}

test("the wire form becomes samples; bad entries, -1, NaN and times out of order are dropped or unknown", () => {
    const s = h.fromWire([
        [T0, 100, 200, 1.5],
        [T0 + 10, 100, 200, -1],
        [T0 + 10, 1, 1, 1], // not later: dropped
        [T0 + 5, 1, 1, 1], // earlier: dropped
        [T0 + 20, NaN, 200, 1], // no speed: dropped
        ["x"], null, [T0 + 30, 5, 6],
        [T0 + 40, 2 ** 64 - 1, 2 ** 64 - 1, NaN],
        [T0 + 50, 1, 1, 250],
    ]);
    assert.deepEqual(s.map(x => x.t), [T0, T0 + 10, T0 + 40, T0 + 50]);
    assert.deepEqual(s.map(x => x.pressure), [1.5, null, null, null]);
    assert.equal(s[2].speed, 2 ** 64);
    assert.deepEqual(h.fromWire(undefined), []);
    // At most 360, the newest kept.
    const many = Array.from({ length: 500 }, (_, i) => [T0 + i, 1, 1, 0]);
    const kept = h.fromWire(many);
    assert.equal(kept.length, 360);
    assert.equal(kept[0].t, T0 + 140);
});

test("the window is the smallest that holds the samples, at most an hour", () => {
    const s = h.fromWire([[T0, 1, 1, 0], [T0 + 20, 1, 1, 0]]);
    assert.equal(h.chooseWindow(s, T0 + 20), 60);
    assert.equal(h.chooseWindow(s, T0 + 61), 120);
    assert.equal(h.chooseWindow(s, T0 + 250), 300);
    assert.equal(h.chooseWindow(s, T0 + 7200), 3600);
    assert.equal(h.chooseWindow([], T0), 60);
});

test("an hour of samples: 360 points, the speed axis above the fastest, limits clamped, pressure axis 25 %", () => {
    const s = h.fromWire(hour());
    const g = h.geometry(s, T0 + 3590);
    assert.equal(g.window, 3600);
    assert.equal(g.stats.points, 360);
    assert.equal(g.stats.maxSpeed, 120000);
    assert.equal(g.stats.maxLimit, 200000);
    assert.equal(g.stats.minLimit, 5000);
    assert.equal(g.stats.maxPressure, 12);
    assert.equal(g.stats.lastPressure, 0.5);
    // 200000 is below twice the fastest speed: the axis holds it.
    assert.equal(g.speed.top, 200000);
    assert.equal(g.pressure.top, 25);
    assert.equal(g.speed.speed.length, 1, "one unbroken line");
    assert.equal(g.speed.speed[0].split(" ").length, 360);
    assert.deepEqual(g.xTicks.map(t => t.label), ["−60 min", "−45 min", "−30 min", "−15 min", "now"]);
    assert.equal(g.xTicks[0].x, h.BOX.left);
    assert.equal(g.xTicks[4].x, h.BOX.width - h.BOX.right);
    assert.deepEqual(g.pressure.ticks.map(t => t.label), ["0 %", "25 %"]);
    // The speed axis top is at the plot's top, 0 at its bottom.
    assert.equal(g.speed.ticks[2].y, h.BOX.speedTop);
    assert.equal(g.speed.ticks[0].y, h.BOX.speedTop + h.BOX.speedHeight);
    // Every point is inside the box.
    for (const line of [...g.speed.speed, ...g.speed.limit, ...g.pressure.lines])
        for (const p of line.split(" ")) {
            const [x, y] = p.split(",").map(Number);
            assert.ok(x >= h.BOX.left - 0.1 && x <= h.BOX.width - h.BOX.right + 1.1, p);
            assert.ok(y >= 0 && y <= h.BOX.speedTop + h.BOX.speedHeight + h.BOX.gap + h.BOX.pressureHeight, p);
        }
});

test("a limit far above the speed is drawn at the top; huge values stay in the box", () => {
    const s = h.fromWire([[T0, 1000, 2 ** 64 - 1, 0], [T0 + 10, 1000, 2 ** 64 - 1, 0]]);
    const g = h.geometry(s, T0 + 10);
    assert.equal(g.speed.top, 2000);
    const ys = g.speed.limit[0].split(" ").map(p => Number(p.split(",")[1]));
    assert.deepEqual(ys, [h.BOX.speedTop, h.BOX.speedTop]);
    assert.ok(!JSON.stringify(g).includes("NaN"));
});

test("a gap without samples (no sync ran) breaks the lines; a lone sample still shows", () => {
    const s = h.fromWire([
        [T0, 100, 200, 1], [T0 + 10, 100, 200, 1], [T0 + 20, 100, 200, 1],
        [T0 + 600, 100, 200, 1], [T0 + 610, 100, 200, 1], [T0 + 620, 0, 200, 1],
    ]);
    const g = h.geometry(s, T0 + 630);
    assert.equal(g.speed.speed.length, 2);
    const one = h.geometry(h.fromWire([[T0, 100, 200, -1]]), T0);
    assert.equal(one.speed.speed.length, 1);
    assert.equal(one.speed.speed[0].split(" ").length, 2);
    assert.deepEqual(one.pressure.lines, [], "no pressure readings, no line");
    assert.equal(one.stats.lastPressure, null);
});

test("the summary says how far the check slowed and under what pressure", () => {
    const s = h.fromWire(hour());
    assert.equal(h.summary(s, T0 + 3590, "check"),
        "last hour: check 98.5 MiB/s on average, slowed to 4.88 MiB/s while io pressure was 12 %");
    // Slow by hand (a limit, no pressure), then busy: the slow-down under pressure is named.
    const mixed = h.fromWire([[T0, 1000, 1000, -1], [T0 + 10, 20000, 20000, 0.5], [T0 + 20, 20000, 20000, 0.5],
                              [T0 + 30, 5000, 5000, 30], [T0 + 40, 4000, 5000, 28]]);
    assert.equal(h.summary(mixed, T0 + 40, "check"),
        "last minute: check 9.77 MiB/s on average, slowed to 3.91 MiB/s while io pressure was 28 %");
    // Slow by hand only: the pressure is not blamed.
    const byHand = h.fromWire([[T0, 1000, 1000, 0], [T0 + 10, 20000, 20000, 0.5], [T0 + 20, 20000, 20000, 0.5]]);
    assert.equal(h.summary(byHand, T0 + 20, "check"),
        "last minute: check 13.3 MiB/s on average; io pressure at most 0.5 %");
    const quiet = h.fromWire([[T0, 1000, 2000, 0.2], [T0 + 10, 1000, 2000, 0.4]]);
    assert.equal(h.summary(quiet, T0 + 10, "resync"), "last minute: resync 1000.0 KiB/s on average; io pressure at most 0.4 %");
    const nopsi = h.fromWire([[T0, 2048, 2000, -1], [T0 + 200, 0, 2000, -1]]);
    assert.equal(h.summary(nopsi, T0 + 200), "last 5 min: sync 2.00 MiB/s on average; no io pressure readings");
    assert.equal(h.summary([], T0, "check"), "last minute: no check ran");
});

test("the page asks again after the service's slot, between 1 and 10 s", () => {
    assert.equal(h.refetchMs([]), 5000);
    assert.equal(h.refetchMs(h.fromWire(hour())), 10000);
    assert.equal(h.refetchMs(h.fromWire([[T0, 1, 1, 0], [T0 + 1, 1, 1, 0], [T0 + 2, 1, 1, 0]])), 1000);
    assert.equal(h.refetchMs(h.fromWire([[T0, 1, 1, 0], [T0 + 60, 1, 1, 0]])), 10000);
});

test("without GetSyncHistory the page samples the properties itself", () => {
    const a = { SyncAction: "check", SyncRate: 2048 * 1024, SyncSpeedMax: [5000, "local"],
                CheckThrottle: { full_avg10: { t: "d", v: 12.5 } } };
    const s = h.sampleOfProps(a, T0 * 1000);
    assert.deepEqual(s, { t: T0, speed: 2048, limit: 5000, pressure: 12.5 });
    assert.equal(h.sampleOfProps({ SyncAction: "idle" }, 0), null);
    assert.equal(h.sampleOfProps({ SyncAction: "resync" }, 0).pressure, null);
    let list = [];
    for (let i = 0; i < 400; i++) list = h.addSample(list, { ...s, t: T0 + i });
    assert.equal(list.length, 360);
    list = h.addSample(list, { ...s, t: T0 + 100 });
    assert.equal(list[list.length - 1].t, T0 + 100, "a clock set back drops the later samples");
    assert.ok(list.every((x, i) => i === 0 || x.t > list[i - 1].t));
    assert.equal(h.addSample(list, null), list);
});

test("round numbers and words", () => {
    assert.deepEqual([0, 1, 3, 7, 12, 150000, 2e19].map(h.niceCeil), [1, 1, 5, 10, 20, 200000, 2e19]);
    assert.deepEqual([0, 30, 60, 90, 900].map(h.ago), ["now", "−30 s", "−1 min", "−90 s", "−15 min"]);
    assert.deepEqual([60, 300, 3600].map(h.windowWords), ["last minute", "last 5 min", "last hour"]);
    assert.deepEqual([0.5, 12.4, 9.96].map(h.pct), ["0.5 %", "12 %", "10 %"]);
});
