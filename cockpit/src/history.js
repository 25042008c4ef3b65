// Pure helpers of the sync-history chart: the service's samples (Array.GetSyncHistory,
// a(tttd): Unix s, md/sync_speed KiB/s, md/sync_speed_max KiB/s, io pressure full avg10 % or
// -1) to chart geometry (SVG polylines, axis ticks) and a sentence for people and screen
// readers. No cockpit, no DOM. Unit tests: cockpit/test/history.test.mjs (node --test).
import { rate } from "./format.js";

/** The chart's time windows, seconds: the smallest that holds the samples (at most 1 h). */
export const WINDOWS_S = [60, 120, 300, 600, 900, 1800, 3600];
/** Tick spacing per window, seconds. */
const TICK_S = { 60: 15, 120: 30, 300: 60, 600: 120, 900: 300, 1800: 600, 3600: 900 };
/** Samples the page keeps at most (the service's 360, or the page's own when sampling). */
export const MAX_SAMPLES = 360;

/** The chart's box, SVG user units: two stacked plots sharing the time axis. */
export const BOX = { width: 400, left: 62, right: 6, speedTop: 4, speedHeight: 80, gap: 16, pressureHeight: 36, axis: 14 };

const finite = x => typeof x === "number" && Number.isFinite(x);

/**
 * The reply of GetSyncHistory (a list of [time_s, speed_kib_s, limit_kib_s, pressure_pct])
 * as samples {t, speed, limit, pressure (null when unknown: -1, not finite, above 100)}:
 * malformed entries dropped, times strictly increasing (a later entry at or before the last
 * time replaces... no: is dropped), at most MAX_SAMPLES (the newest).
 */
export function fromWire(list) {
    const out = [];
    for (const e of Array.isArray(list) ? list : []) {
        if (!Array.isArray(e) || e.length < 4) continue;
        const [t, speed, limit, p] = e.map(Number);
        if (!finite(t) || !finite(speed) || !finite(limit) || speed < 0 || limit < 0) continue;
        if (out.length && t <= out[out.length - 1].t) continue;
        out.push({ t, speed, limit, pressure: finite(p) && p >= 0 && p <= 100 ? p : null });
    }
    return out.slice(-MAX_SAMPLES);
}

/** The smallest of WINDOWS_S that reaches from now_s back to the oldest sample. */
export function chooseWindow(samples, nowS) {
    const span = samples.length ? nowS - samples[0].t : 0;
    return WINDOWS_S.find(w => w >= span) || WINDOWS_S[WINDOWS_S.length - 1];
}

/** The median of the gaps between consecutive samples, seconds; null with fewer than 2. */
export function medianGap(samples) {
    const gaps = [];
    for (let i = 1; i < samples.length; i++) gaps.push(samples[i].t - samples[i - 1].t);
    if (!gaps.length) return null;
    gaps.sort((a, b) => a - b);
    return gaps[Math.floor(gaps.length / 2)];
}

/** How long the page waits before asking for the history again, ms: the service's slot
 * (the samples' median gap) between 1 and 10 s; 5 s before there are two samples. */
export function refetchMs(samples) {
    const g = medianGap(samples);
    return g === null ? 5000 : Math.min(10000, Math.max(1000, g * 1000));
}

/** A round number at or above v (1, 2, 2.5, 5 × 10^n); 1 for v ≤ 0. */
export function niceCeil(v) {
    if (!finite(v) || v <= 0) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
}

/** The samples within the window ending at now_s. */
function inWindow(samples, nowS, window) {
    return samples.filter(s => s.t >= nowS - window && s.t <= nowS);
}

/**
 * Polylines ("x,y x,y ...") of `value(s)` (null: no point), broken where two samples are more
 * than three median gaps apart (the service took none: no sync ran) or a value is missing.
 */
function lines(samples, value, x, y, gap) {
    const out = [];
    let cur = [];
    let last = null;
    for (const s of samples) {
        const v = value(s);
        if (v === null || (last !== null && gap !== null && s.t - last > 3 * gap)) {
            if (cur.length) out.push(cur);
            cur = [];
        }
        if (v !== null) cur.push(`${x(s.t).toFixed(1)},${y(v).toFixed(1)}`);
        last = s.t;
    }
    if (cur.length) out.push(cur);
    // A lone point is drawn as a short flat segment, so it shows.
    return out.map(pts => pts.length === 1 ? `${pts[0]} ${pts[0].replace(/^[^,]+/, m => (Number(m) + 1).toFixed(1))}` : pts.join(" "));
}

/** "−15 min", "−30 s", "now". */
export function ago(s) {
    if (s <= 0) return "now";
    return s >= 120 || s % 60 === 0 ? `−${Math.round(s / 60)} min` : `−${s} s`;
}

/**
 * The chart of `samples` (fromWire) at now_s (the newest sample's time when later): the
 * window, the x ticks, and for each plot its top value, y ticks and polylines. The speed
 * plot's top is a round number above the fastest sample and the limit (a limit far above
 * the speed, such as md's default 200000 KiB/s, is drawn at the top, clamped: at most twice
 * the fastest speed is shown); the pressure plot's top is 10, 25, 50 or 100 %.
 * Returns {window, points, xTicks, speed: {top, ticks, speed, limit}, pressure: {top, ticks,
 * lines}, stats: {points, maxSpeed, maxLimit, minLimit, lastLimit, maxPressure,
 * lastPressure}} (KiB/s and percent; null where there is nothing).
 */
export function geometry(samples, nowS) {
    const now = Math.max(nowS, samples.length ? samples[samples.length - 1].t : nowS);
    const window = chooseWindow(samples, now);
    const ss = inWindow(samples, now, window);
    const b = BOX;
    const x = t => b.left + (b.width - b.left - b.right) * (1 - (now - t) / window);
    const maxSpeed = ss.length ? Math.max(...ss.map(s => s.speed)) : null;
    const limits = ss.map(s => s.limit).filter(l => l > 0);
    const maxLimit = limits.length ? Math.max(...limits) : null;
    const top = niceCeil(Math.max(maxSpeed || 0, Math.min(maxLimit || 0, 2 * (maxSpeed || 0)), 1));
    const ys = v => b.speedTop + b.speedHeight * (1 - Math.min(v, top) / top);
    const pressures = ss.map(s => s.pressure).filter(p => p !== null);
    const maxPressure = pressures.length ? Math.max(...pressures) : null;
    const ptop = [10, 25, 50, 100].find(v => v >= (maxPressure || 0)) || 100;
    const py0 = b.speedTop + b.speedHeight + b.gap;
    const yp = v => py0 + b.pressureHeight * (1 - Math.min(v, ptop) / ptop);
    const gap = medianGap(ss);
    const xTicks = [];
    for (let s = window; s >= 0; s -= TICK_S[window]) xTicks.push({ x: x(now - s), label: ago(s) });
    const lastWith = f => { const l = ss.filter(f); return l.length ? l[l.length - 1] : null };
    const lp = lastWith(s => s.pressure !== null);
    const ll = lastWith(s => s.limit > 0);
    return {
        window,
        xTicks,
        speed: {
            top,
            ticks: [0, top / 2, top].map(v => ({ y: ys(v), label: rate(v * 1024) })),
            speed: lines(ss, s => s.speed, x, ys, gap),
            limit: lines(ss, s => (s.limit > 0 ? s.limit : null), x, ys, gap),
        },
        pressure: {
            top: ptop,
            ticks: [0, ptop].map(v => ({ y: yp(v), label: `${v} %` })),
            lines: lines(ss, s => s.pressure, x, yp, gap),
        },
        stats: {
            points: ss.length,
            maxSpeed,
            maxLimit,
            minLimit: limits.length ? Math.min(...limits) : null,
            lastLimit: ll ? ll.limit : null,
            maxPressure,
            lastPressure: lp ? lp.pressure : null,
        },
    };
}

/** A percent for people: "12 %", "0.5 %". */
export function pct(p) {
    return `${p >= 10 ? Math.round(p) : Number(p.toFixed(1))} %`;
}

/** "last hour", "last 5 min", "last minute" for a window in seconds. */
export function windowWords(window) {
    if (window >= 3600) return "last hour";
    if (window <= 60) return "last minute";
    return `last ${Math.round(window / 60)} min`;
}

/**
 * One sentence about the samples in the window at now_s, for the caption and screen readers:
 * "last hour: check 120 MiB/s on average, slowed to 5 MiB/s while io pressure was 12 %".
 * `what`: the sync's word ("check", "resync"; default "sync"). The slow-down is named when
 * the slowest sample taken under io pressure (1 % or more) ran below 80 % of the average,
 * with that sample's pressure (a slow-down without pressure, a limit set by hand, is not
 * blamed on it); otherwise the highest pressure, or that there were no pressure readings.
 */
export function summary(samples, nowS, what = "sync") {
    const now = Math.max(nowS, samples.length ? samples[samples.length - 1].t : nowS);
    const window = chooseWindow(samples, now);
    const run = inWindow(samples, now, window).filter(s => s.speed > 0);
    const head = windowWords(window);
    if (!run.length) return `${head}: no ${what} ran`;
    const avg = run.reduce((a, s) => a + s.speed, 0) / run.length;
    let text = `${head}: ${what} ${rate(avg * 1024)} on average`;
    const withP = run.filter(s => s.pressure !== null);
    if (!withP.length) return text + "; no io pressure readings";
    const hi = withP.reduce((a, s) => (s.pressure > a.pressure ? s : a));
    const busy = withP.filter(s => s.pressure >= 1);
    const lo = busy.length ? busy.reduce((a, s) => (s.speed < a.speed ? s : a)) : null;
    if (lo && lo.speed < 0.8 * avg)
        return text + `, slowed to ${rate(lo.speed * 1024)} while io pressure was ${pct(lo.pressure)}`;
    return text + `; io pressure at most ${pct(hi.pressure)}`;
}

/**
 * The page's own sample from an Array proxy's properties, for a service without
 * GetSyncHistory (API before 1.5): {t, speed, limit, pressure} from SyncRate (bytes/s),
 * SyncSpeedMax and CheckThrottle's full_avg10; null while no sync runs.
 */
export function sampleOfProps(a, nowMs) {
    if (!a.SyncAction || a.SyncAction === "idle" || a.SyncAction === "frozen") return null;
    const th = a.CheckThrottle || {};
    const p = th.full_avg10 && typeof th.full_avg10 === "object" ? th.full_avg10.v : th.full_avg10;
    return {
        t: Math.floor(nowMs / 1000),
        speed: Math.round((a.SyncRate || 0) / 1024),
        limit: (a.SyncSpeedMax || [0])[0] || 0,
        pressure: finite(p) && p >= 0 && p <= 100 ? p : null,
    };
}

/** The page's own samples `list` with `s` added (a new list: times increasing, the last
 * hour, at most MAX_SAMPLES); `list` itself when `s` is null. */
export function addSample(list, s) {
    if (!s) return list;
    const out = list.filter(x => x.t < s.t && x.t > s.t - 3600);
    out.push(s);
    return out.slice(-MAX_SAMPLES);
}
