// The page's model of mdpilot's D-Bus API v1: one cockpit.dbus client on the system bus, an
// ObjectManager proxy set per interface (Manager, Array, Job), kept live by the bridge from
// InterfacesAdded/Removed and PropertiesChanged. Nothing polls: the sync-rate history is built
// from the PropertiesChanged the service sends.
import cockpit from "./cockpit.js";

export const BUS_NAME = "org.mdpilot.MdPilot1";
export const ROOT = "/org/mdpilot/MdPilot1";
export const MANAGER = ROOT + "/Manager";
export const IFACE = {
    manager: BUS_NAME + ".Manager",
    array: BUS_NAME + ".Array",
    job: BUS_NAME + ".Job",
};
/** How much sync-rate history a card's chart keeps, ms. */
export const HISTORY_MS = 5 * 60 * 1000;

/**
 * Connects and calls `onChange(state)` after every change. state: {owner (true, false or null
 * while unknown), manager (proxy or null), arrays (proxies by path), versions (a counter per
 * array path, bumped at each change of that array), jobs (proxies by path),
 * history ({path: [[ms, bytes/s], ...]}), completed ({jobPath: [success, message]})}.
 * Returns {client, close}.
 */
export function connect(onChange) {
    const client = cockpit.dbus(BUS_NAME, { bus: "system", superuser: "try" });
    const state = {
        owner: null, manager: null, arrays: {}, versions: {}, jobs: {}, history: {}, completed: {}, closed: null,
    };
    let scheduled = false;
    // Coalesce a burst of signals (64 arrays stepping at once) into one render.
    const notify = () => {
        if (scheduled) return;
        scheduled = true;
        Promise.resolve().then(() => { scheduled = false; onChange({ ...state }) });
    };
    const record = (path, proxy) => {
        // Proxies are updated in place: a version per array lets unchanged cards skip rendering.
        state.versions[path] = (state.versions[path] || 0) + 1;
        if (!proxy.valid) return;
        const h = state.history[path] || (state.history[path] = []);
        const now = Date.now();
        if (proxy.SyncAction && proxy.SyncAction !== "idle") h.push([now, proxy.SyncRate || 0]);
        while (h.length && h[0][0] < now - HISTORY_MS) h.shift();
    };

    const manager = client.proxy(IFACE.manager, MANAGER);
    manager.addEventListener("changed", notify);
    manager.wait(() => { state.manager = manager; notify() });

    const arrays = client.proxies(IFACE.array, ROOT);
    arrays.addEventListener("added", (ev, p) => { state.arrays[p.path] = p; record(p.path, p); notify() });
    arrays.addEventListener("changed", (ev, p) => { state.arrays[p.path] = p; record(p.path, p); notify() });
    arrays.addEventListener("removed", (ev, p) => { delete state.arrays[p.path]; delete state.history[p.path]; notify() });

    const jobs = client.proxies(IFACE.job, ROOT);
    jobs.addEventListener("added", (ev, p) => { state.jobs[p.path] = p; notify() });
    jobs.addEventListener("changed", (ev, p) => { state.jobs[p.path] = p; notify() });
    jobs.addEventListener("removed", (ev, p) => { delete state.jobs[p.path]; notify() });
    client.subscribe({ interface: IFACE.job, member: "Completed" }, (path, iface, signal, args) => {
        state.completed[path] = args;
        notify();
    });

    client.addEventListener("owner", (ev, owner) => {
        state.owner = !!owner;
        if (!owner) { state.arrays = {}; state.jobs = {} }
        notify();
    });
    client.addEventListener("close", (ev, options) => {
        state.closed = options.problem || "disconnected";
        notify();
    });
    return { client, close: () => client.close() };
}

/** A variant for an a{sv} options argument. */
export const v = cockpit.variant;

/** Calls `method` of `iface` at `path` with `args` of D-Bus signature `sig`; a promise. */
export function call(client, path, iface, method, sig, args) {
    return client.call(path, iface, method, args, { type: sig });
}
