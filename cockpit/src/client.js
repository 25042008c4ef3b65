// The page's model of mdpilot's D-Bus API v1: one cockpit.dbus client on the system bus, an
// ObjectManager proxy set per interface (Manager, Array, Job), kept live by the bridge from
// InterfacesAdded/Removed and PropertiesChanged. Nothing polls: an array's sync history (the
// service's last hour, Array.GetSyncHistory) is fetched when the array appears, when its
// SyncAction changes, and on its PropertiesChanged at most once per the service's sample
// slot; a service without the method (API before 1.5) gets the page's own samples instead.
import cockpit from "./cockpit.js";
import { addSample, fromWire, refetchMs, sampleOfProps } from "./history.js";

export const BUS_NAME = "org.mdpilot.MdPilot1";
export const ROOT = "/org/mdpilot/MdPilot1";
export const MANAGER = ROOT + "/Manager";
export const IFACE = {
    manager: BUS_NAME + ".Manager",
    array: BUS_NAME + ".Array",
    job: BUS_NAME + ".Job",
};

/**
 * Connects and calls `onChange(state)` after every change. state: {owner (true, false or null
 * while unknown), manager (proxy or null), arrays (proxies by path), versions (a counter per
 * array path, bumped at each change of that array), jobs (proxies by path),
 * history ({path: [{t, speed, limit, pressure}, ...]}: history.js's samples), completed
 * ({jobPath: [success, message]})}.
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
    // Per array path: {at (ms of the last call), busy, action (SyncAction then), local (the
    // service has no GetSyncHistory: the page samples)}.
    const fetches = {};
    const bump = path => { state.versions[path] = (state.versions[path] || 0) + 1 };
    const fetchHistory = (path, proxy) => {
        const f = fetches[path] || (fetches[path] = { at: 0, busy: false, action: null, local: false });
        const now = Date.now();
        if (f.local) {
            state.history[path] = addSample(state.history[path] || [], sampleOfProps(proxy, now));
            return;
        }
        const due = f.action !== proxy.SyncAction ||
            (proxy.SyncAction !== "idle" && now - f.at >= refetchMs(state.history[path] || []));
        if (f.busy || !due) return;
        f.busy = true;
        f.at = now;
        f.action = proxy.SyncAction;
        client.call(path, IFACE.array, "GetSyncHistory", [], { type: "" })
            .then(([list]) => { state.history[path] = fromWire(list) })
            .catch(e => {
                if (e && /UnknownMethod/.test(e.name || "")) f.local = true;
            })
            .finally(() => {
                f.busy = false;
                if (!state.arrays[path]) delete state.history[path];
                bump(path);
                notify();
            });
    };
    const record = (path, proxy) => {
        // Proxies are updated in place: a version per array lets unchanged cards skip rendering.
        bump(path);
        if (proxy.valid) fetchHistory(path, proxy);
    };

    const manager = client.proxy(IFACE.manager, MANAGER);
    manager.addEventListener("changed", notify);
    manager.wait(() => { state.manager = manager; notify() });

    const arrays = client.proxies(IFACE.array, ROOT);
    arrays.addEventListener("added", (ev, p) => { state.arrays[p.path] = p; record(p.path, p); notify() });
    arrays.addEventListener("changed", (ev, p) => { state.arrays[p.path] = p; record(p.path, p); notify() });
    arrays.addEventListener("removed", (ev, p) => { delete state.arrays[p.path]; delete state.history[p.path]; delete fetches[p.path]; notify() });

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
        if (!owner) {
            state.arrays = {}; state.jobs = {}; state.history = {};
            for (const k of Object.keys(fetches)) delete fetches[k];
        }
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
