// Pure helpers of the page: units, the service's words looked up (health, member roles, sync
// actions), progress, lease and check text. No cockpit, no DOM: the data as the D-Bus API v1
// publishes it (dbus/*.xml). Unit tests: cockpit/test/format.test.js (node --test).

/** Bytes as IEC units: 1.5 GiB. */
export function bytes(n) {
    if (!Number.isFinite(n) || n < 0) return "?";
    const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++ }
    return (i === 0 ? String(n) : n.toFixed(n < 10 ? 2 : 1)) + " " + units[i];
}

/** A rate in bytes/s: "195.3 MiB/s". */
export function rate(bytesPerS) {
    return bytes(bytesPerS) + "/s";
}

/** A speed limit in KiB/s as md takes it: "200000 KiB/s (195.3 MiB/s)". */
export function kib(v) {
    return `${v} KiB/s (${rate(v * 1024)})`;
}

/** A duration in seconds: "1 h 05 min", "42 s". */
export function duration(s) {
    if (!Number.isFinite(s) || s < 0) return "?";
    s = Math.round(s);
    if (s < 60) return `${s} s`;
    const m = Math.floor(s / 60);
    if (m < 60) return `${m} min ${String(s % 60).padStart(2, "0")} s`;
    const h = Math.floor(m / 60);
    if (h < 48) return `${h} h ${String(m % 60).padStart(2, "0")} min`;
    return `${Math.floor(h / 24)} d ${h % 24} h`;
}

/** µs since the epoch as local date and time; "" for 0. */
export function whenUs(us) {
    if (!us) return "";
    return new Date(us / 1000).toLocaleString();
}

/** Unix seconds as local date and time; "never" for 0. */
export function whenS(s) {
    return s ? new Date(s * 1000).toLocaleString() : "never";
}

/** Unwraps a cockpit variant ({t, v}) or passes a plain value through. */
export function unwrap(v) {
    return v && typeof v === "object" && "t" in v && "v" in v ? v.v : v;
}

/** An a{sv} as a plain object of plain values (nested a{sv} unwrapped too). */
export function plain(dict) {
    const out = {};
    for (const [k, v] of Object.entries(dict || {})) {
        const u = unwrap(v);
        out[k] = u && typeof u === "object" && !Array.isArray(u) ? plain(u) : u;
    }
    return out;
}

/**
 * Members a(siast) as objects {name, slot, states, errors, role, faulty}: `role` is the
 * service's word from MemberRoles (in_sync, rebuilding, spare, faulty, journal), "" where the
 * service sent none.
 */
export function members(raw, roles) {
    const r = roles || {};
    return (raw || []).map(([name, slot, states, errors]) => {
        const role = r[name] || "";
        return { name, slot, states, errors, role, faulty: role === "faulty" };
    });
}

/** The words of the service's MemberRoles. */
export const ROLE_WORDS = {
    in_sync: "In sync",
    rebuilding: "Rebuilding",
    spare: "Spare",
    faulty: "Faulty",
    journal: "Journal",
};

/** The words of md/sync_action, as the Array's SyncAction publishes them. */
export const ACTION_WORDS = {
    resync: "Resync",
    recover: "Recovery",
    check: "Check",
    repair: "Repair",
    reshape: "Reshape",
    frozen: "Frozen",
};

/**
 * The service's Health word (status --test's verdict) as the page shows it: [label color,
 * label, rank (0 = most urgent)]. A word this page does not know reads as itself, grey, with
 * the inactive arrays.
 */
export const HEALTH = {
    unusable: ["red", "Unusable", 0],
    degraded: ["orange", "Degraded", 1],
    inactive: ["grey", "Inactive", 2],
    ok: ["green", "Healthy", 3],
};

/**
 * What the array is doing and how alarming it is, looked up from the Array properties (the
 * service decides; the page judges nothing): {health (the Health word), color, label, rank,
 * sync, action, words, initialBuild}.
 */
export function health(a) {
    const word = a.Health || "unknown";
    const [color, label, rank] = HEALTH[word] || ["grey", word, 2];
    const action = a.SyncAction || "idle";
    const sync = action !== "idle";
    const initialBuild = !!a.InitialBuild && sync;
    let words = ACTION_WORDS[action] || action;
    if (initialBuild) words = `Initial build (${words.toLowerCase()})`;
    return { health: word, color, label, rank, sync, action, words, initialBuild };
}

/** Arrays sorted: unusable, degraded, inactive first, then by kernel name (md2 before md10). */
export function sortArrays(list) {
    return [...list].sort((x, y) => {
        const d = health(x).rank - health(y).rank;
        if (d) return d;
        return String(x.KernelName).localeCompare(String(y.KernelName), undefined, { numeric: true });
    });
}

/** What a repair writes on this array, from its Redundancy word. */
export function repairWrites(a) {
    return {
        parity: "the parity blocks are recomputed from the data blocks and overwritten",
        mirror: "the first copy md reads is written over the other copies",
    }[a.Redundancy] || "nothing can be recomputed: the level keeps no copies or parity";
}

/** Progress of the running sync: {percent, rate (bytes/s), eta (s) or null}. */
export function progress(a) {
    const pct = Math.max(0, Math.min(100, (a.SyncCompleted || 0) * 100));
    const eta = a.SyncRemainingTime ? a.SyncRemainingTime / 1e6 : null;
    return { percent: pct, rate: a.SyncRate || 0, eta };
}

/**
 * The last check result with the severity the service gives it (warning: mismatches where
 * parity must match; info otherwise): {severity, text, mismatches} or null when none completed.
 */
export function checkResult(raw) {
    const r = plain(raw);
    if (!r.action) return null;
    const n = r.mismatch_cnt || 0;
    const sev = r.severity || "info";
    const what = r.action === "repair" ? "Repair" : "Check";
    const text = n === 0
        ? `${what} completed ${whenS(r.completed)}: no mismatches`
        : `${what} completed ${whenS(r.completed)}: ${n} mismatched sectors` +
          (sev === "warning" ? " (parity must match on " + r.level + ": investigate)"
                             : " (usual on " + r.level + ": swap and in-flight writes)");
    return { severity: sev, text, mismatches: n };
}

/** One lease of Manager.Leases as a plain object with words for the page. */
export function lease(raw) {
    const l = plain(raw);
    const parts = [];
    if (l.min !== undefined) parts.push(`min ${l.min} KiB/s`);
    if (l.max !== undefined) parts.push(`max ${l.max} KiB/s`);
    if (l.io_depth !== undefined) parts.push(`sync_io_depth ${l.io_depth}`);
    for (const [arr, lim] of Object.entries(l.arrays || {})) {
        const p = [];
        if (lim.min !== undefined) p.push(`min ${lim.min} KiB/s`);
        if (lim.max !== undefined) p.push(`max ${lim.max} KiB/s`);
        if (lim.io_depth !== undefined) p.push(`sync_io_depth ${lim.io_depth}`);
        parts.push(`${arr}: ${p.join(", ")}`);
    }
    return { ...l, limits: parts.join("; ") || "install policy" };
}

/**
 * The array's layout in words: its write-intent bitmap, the bitmap implementation (md/bitmap_type,
 * Linux 6.19+), the consistency policy and the logical block size (md/logical_block_size, bytes,
 * Linux 6.19+), each only where the service knows it (empty string / 0 on the bus).
 */
export function layout(a) {
    const parts = [];
    if (a.WriteIntentBitmap) parts.push(`bitmap ${a.WriteIntentBitmap}`);
    if (a.BitmapType) parts.push(`bitmap type ${a.BitmapType}`);
    if (a.ConsistencyPolicy) parts.push(`consistency policy ${a.ConsistencyPolicy}`);
    if (a.LogicalBlockSize) parts.push(`logical block size ${a.LogicalBlockSize} B`);
    return parts.join(", ");
}

/** The leases (plain) that set a bound: `array` null for the system-wide ones. */
export function leasesHolding(leases, array, bound) {
    return leases.filter(l => array === null
        ? l[bound] !== undefined
        : l.arrays && l.arrays[array] && l.arrays[array][bound] !== undefined);
}

/** A D-Bus error in words for the control that caused it. */
export function errorWords(e) {
    const name = (e && e.name) || "";
    const msg = (e && (e.message || e.problem)) || String(e);
    const short = name.replace("org.mdpilot.MdPilot1.Error.", "");
    const lead = {
        NotAuthorized: "Not authorized",
        Busy: "Busy",
        InvalidArgument: "Invalid request",
        NoSuchArray: "No such array",
        NotSupported: "Not supported by the device",
        Cancelled: "Already cancelled",
        Failed: "Failed",
    }[short];
    return lead ? `${lead}: ${msg}` : msg;
}
