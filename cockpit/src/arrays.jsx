// One card per array: identity, health, members, the running sync with its rate chart, the
// speed limits in force with the leases behind them, and the check controls.
import React, { useState } from "react";
import {
    Button, Card, CardBody, CardTitle, Label, Modal, ModalVariant, Progress, TextInput,
} from "@patternfly/react-core";
import { IFACE, MANAGER, call, v } from "./client.js";
import * as fmt from "./format.js";
import { Action, SyncChart } from "./ui.jsx";

function Members({ list }) {
    return (
        <table className="mdp-members">
            <thead><tr><th>Member</th><th>Slot</th><th>Role</th><th>State</th><th>Read errors</th></tr></thead>
            <tbody>
                {list.map(m => (
                    <tr key={m.name} className={m.faulty ? "mdp-faulty" : ""} data-member={m.name}>
                        <td>{m.name}</td><td>{m.slot < 0 ? "–" : m.slot}</td>
                        <td data-role={m.role}>{fmt.ROLE_WORDS[m.role] || m.role}</td>
                        <td>{m.states.join(", ")}</td><td>{m.errors}</td>
                    </tr>))}
            </tbody>
        </table>
    );
}

function Sync({ a, h, history }) {
    const chart = <SyncChart id={`${a.KernelName}-chart`} samples={history} what={h.sync ? a.SyncAction : "sync"} />;
    if (!h.sync) return <div><div className="mdp-small">No sync running.</div>{chart}</div>;
    const p = fmt.progress(a);
    const k = a.KernelName;
    const variant = h.initialBuild || !["recover"].includes(h.action) ? undefined : "warning";
    return (
        <div id={`${k}-sync`}>
            <Progress id={`${k}-progress`} value={p.percent} title={h.words} variant={variant}
                      label={`${p.percent.toFixed(1)} %`} aria-label={`${h.words} progress`} />
            <div className="mdp-small">
                <span id={`${k}-rate`}>{fmt.rate(p.rate)}</span>
                {" · "}<span id={`${k}-eta`}>{p.eta ? "about " + fmt.duration(p.eta) + " left" : "time left unknown"}</span>
            </div>
            {chart}
        </div>
    );
}

function LimitSource({ a, leases, bound }) {
    const [kib, scope] = a[bound === "min" ? "SyncSpeedMin" : "SyncSpeedMax"] || [0, "system"];
    const k = a.KernelName;
    const holders = fmt.leasesHolding(leases, scope === "local" ? k : null, bound);
    return (
        <div id={`${k}-limit-${bound}`}>
            sync_speed_{bound}: {fmt.kib(kib)} <Label isCompact>{scope === "local" ? "this array" : "system-wide"}</Label>
            {holders.length > 0 && <span className="mdp-small"> held by {holders.map(l => l.id).join(", ")}</span>}
        </div>
    );
}

function ArrayLimits({ a, client, leases, canChange }) {
    const [min, setMin] = useState("");
    const [max, setMax] = useState("");
    const k = a.KernelName;
    const set = () => call(client, MANAGER, IFACE.manager, "SetArraySpeedLimits", "stta{sv}",
                           [k, Number(min || 0), Number(max || 0), {}]);
    const clear = () => call(client, MANAGER, IFACE.manager, "SetArraySpeedLimits", "stta{sv}",
                             [k, 0, 0, {}]);
    return (
        <div>
            <LimitSource a={a} leases={leases} bound="min" />
            <LimitSource a={a} leases={leases} bound="max" />
            <div className="mdp-row">
                <TextInput id={`${k}-limit-min-input`} type="number" aria-label="min KiB/s" placeholder="min KiB/s"
                           value={min} onChange={(_e, val) => setMin(val)} isDisabled={!canChange} />
                <TextInput id={`${k}-limit-max-input`} type="number" aria-label="max KiB/s" placeholder="max KiB/s"
                           value={max} onChange={(_e, val) => setMax(val)} isDisabled={!canChange} />
                <Action id={`${k}-limits-set`} label="Set limits" run={set} disabled={!canChange || (!min && !max)} />
                <Action id={`${k}-limits-clear`} label="Clear" run={clear} disabled={!canChange} variant="link" />
            </div>
        </div>
    );
}

/** What repair writes, said before the admin confirms. */
function RepairConfirm({ a, onConfirm, onClose }) {
    return (
        <Modal variant={ModalVariant.small} isOpen onClose={onClose} id={`${a.KernelName}-repair-dialog`}
               title={`Repair ${a.KernelName}?`} titleIconVariant="warning"
               actions={[
                   <Button key="go" id={`${a.KernelName}-repair-confirm`} variant="danger" onClick={onConfirm}>Repair</Button>,
                   <Button key="no" variant="link" onClick={onClose}>Cancel</Button>,
               ]}>
            <p>
                A repair reads every member like a check and, wherever the copies or the parity
                disagree, <b>writes</b> to make them agree: on {a.Level} {fmt.repairWrites(a)}.
                md cannot tell which copy was right: if a member returned wrong data, the others are
                made to match it. Run a check first and look at its mismatch count.
            </p>
        </Modal>
    );
}

function Checks({ a, client, canChange }) {
    const [confirm, setConfirm] = useState(false);
    const [repairErr, setRepairErr] = useState(null);
    const k = a.KernelName;
    const res = fmt.checkResult(a.LastCheckResult);
    const running = a.SyncAction === "check" || a.SyncAction === "repair";
    const paused = !running && a.CheckPosition > 0;
    const other = a.SyncAction !== "idle" && !running;
    const arr = (m, sig, args) => call(client, a.path, IFACE.array, m, sig, args);
    const repair = () => {
        setConfirm(false);
        setRepairErr(null);
        arr("StartCheck", "a{sv}", [{ repair: v("b", true) }]).catch(e => setRepairErr(fmt.errorWords(e)));
    };
    return (
        <div id={`${k}-checks`}>
            <div id={`${k}-check-result`} data-severity={res ? res.severity : "none"}>
                {res
                    ? <><Label isCompact color={res.severity === "warning" ? "orange" : "blue"}>{res.severity}</Label> {res.text}</>
                    : "No check completed yet."}
            </div>
            <div className="mdp-small" id={`${k}-check-next`}>
                Next scheduled check: {a.NextCheckStart ? fmt.whenS(a.NextCheckStart) : "none scheduled"}
                {paused && <> · <span id={`${k}-check-paused`}>paused at {fmt.bytes(a.CheckPosition * 512)} per member</span></>}
            </div>
            <div className="mdp-row">
                <Action id={`${k}-check-start`} label="Start check" disabled={!canChange || running || other}
                        run={() => arr("StartCheck", "a{sv}", [{}])} />
                <Action id={`${k}-check-pause`} label="Pause" disabled={!canChange || !running}
                        run={() => arr("PauseCheck", "", [])} />
                <Action id={`${k}-check-resume`} label="Resume" disabled={!canChange || !paused}
                        run={() => arr("ResumeCheck", "", [])} />
                <Action id={`${k}-check-cancel`} label="Cancel" disabled={!canChange || (!running && !paused)}
                        run={() => arr("CancelCheck", "", [])} variant="link" />
                <span>
                    <Button id={`${k}-repair`} size="sm" variant="warning" isDisabled={!canChange || running || other}
                            onClick={() => setConfirm(true)}>Repair…</Button>
                    {repairErr && <div className="mdp-error" id={`${k}-repair-error`}>{repairErr}</div>}
                </span>
            </div>
            {confirm && <RepairConfirm a={a} onConfirm={repair} onClose={() => setConfirm(false)} />}
        </div>
    );
}

/**
 * The card of one array proxy `array` (properties as dbus/org.mdpilot.MdPilot1.Array.xml),
 * rendered again only when `version` (the array changed), the leases or the access change.
 */
export const ArrayCard = React.memo(ArrayCardBody, (x, y) =>
    x.version === y.version && x.leases === y.leases && x.canChange === y.canChange && x.client === y.client);

function ArrayCardBody({ array: a, client, history, leases, canChange }) {
    const h = fmt.health(a);
    const plainLeases = (leases || []).map(fmt.lease);
    const k = a.KernelName;
    return (
        <Card id={`mdp-array-${k}`} data-health={h.health} className="mdp-array" isCompact>
            <CardTitle>
                {k} {a.Name && <span className="mdp-small">({a.Name}{a.NamedDevice ? ", " + a.NamedDevice : ""})</span>}{" "}
                <Label id={`${k}-health`} color={h.color}>{h.label}</Label>{" "}
                {h.sync && <Label color={h.initialBuild ? "blue" : "grey"} id={`${k}-action`}>{h.words}</Label>}
            </CardTitle>
            <CardBody>
                <div>
                    {a.Level}, {fmt.bytes(a.Size)}, {a.NumDevices} slots, state {a.State}
                    {a.Degraded > 0 && <>, <span className="mdp-faulty">{a.Degraded} missing</span></>}
                    {a.ReadOnly && ", read-only"}
                </div>
                {fmt.layout(a) && <div className="mdp-small" id={`${k}-layout`}>{fmt.layout(a)}</div>}
                {(a.Warnings || []).map((w, i) =>
                    <div className="mdp-warning" id={`${k}-warning-${i}`} key={i}>{w}</div>)}
                                <Members list={fmt.members(a.Members, a.MemberRoles)} />
                <Sync a={a} h={h} history={history} />
                <ArrayLimits a={a} client={client} leases={plainLeases} canChange={canChange} />
                <Checks a={a} client={client} canChange={canChange} />
            </CardBody>
        </Card>
    );
}
