// Resync priority: the system-wide speed limits in force, the leases holding them (holder,
// kind, since, until), timed "boost" and "quiet" leases, release, restore the saved limits.
import React, { useState } from "react";
import { Card, CardBody, CardTitle, FormSelect, FormSelectOption, Label } from "@patternfly/react-core";
import { IFACE, MANAGER, call, v } from "./client.js";
import * as fmt from "./format.js";
import { Action } from "./ui.jsx";

/** The timed profiles: the limits each asks for, KiB/s (the most yielding lease wins). */
export const PROFILES = {
    boost: { holder: "cockpit-boost", label: "Boost", what: "resync at least 100000 KiB/s", min: 100000, max: 2000000 },
    quiet: { holder: "cockpit-quiet", label: "Quiet", what: "resync at most 5000 KiB/s, yielding to all I/O", min: 0, max: 5000 },
};
const DURATIONS = [[900, "15 minutes"], [3600, "1 hour"], [4 * 3600, "4 hours"], [12 * 3600, "12 hours"]];

function Leases({ leases, client, canChange }) {
    if (leases.length === 0) return <p id="mdp-no-leases">No leases: the saved limits are in force.</p>;
    return (
        <table className="pf-v5-c-table pf-m-compact pf-m-grid-md" id="mdp-leases">
            <thead><tr><th>Holder</th><th>Kind</th><th>Kept by</th><th>Limits</th><th>Since</th><th>Until</th><th /></tr></thead>
            <tbody>
                {leases.map(l => (
                    <tr key={l.id} data-lease={l.id}>
                        <td>{l.id}</td><td>{l.kind}</td>
                        <td>{l["owner-kind"] === "holder" ? (l.expires ? "no owner (ends on its own)" : "held until released") : `${l["owner-kind"]} ${l.owner}`}</td>
                        <td>{l.limits}</td>
                        <td>{fmt.whenUs(l.taken) || "?"}</td>
                        <td className="mdp-until">{l.expires ? fmt.whenUs(l.expires) : "until released"}</td>
                        <td>
                            <Action id={`lease-release-${l.id}`} label="Release" variant="link" disabled={!canChange}
                                    run={() => call(client, MANAGER, IFACE.manager, "ReleasePriority", "s", [l.id])} />
                        </td>
                    </tr>))}
            </tbody>
        </table>
    );
}

function Global({ m, leases, bound }) {
    const now = bound === "min" ? m.SpeedLimitMin : m.SpeedLimitMax;
    const [saved, orig] = (bound === "min" ? m.OriginalSpeedLimitMin : m.OriginalSpeedLimitMax) || [false, 0];
    const holders = fmt.leasesHolding(leases, null, bound);
    return (
        <div id={`mdp-global-${bound}`}>
            speed_limit_{bound}: <b>{fmt.kib(now)}</b>{" "}
            {holders.length
                ? <span className="mdp-small">held by {holders.map(l => l.id).join(", ")}{saved ? `; ${orig} KiB/s saved` : ""}</span>
                : <Label isCompact>{saved ? "saved value" : "kernel setting"}</Label>}
        </div>
    );
}

/** The Manager's limits and leases, and the actions on them. */
export function PriorityPanel({ manager: m, client, canChange }) {
    const [secs, setSecs] = useState("3600");
    const leases = (m.Leases || []).map(fmt.lease);
    const take = p => call(client, MANAGER, IFACE.manager, "AcquirePriority", "a{sv}", [{
        min: v("t", p.min), max: v("t", p.max), holder: v("s", p.holder), kind: v("s", "admin"),
        duration: v("t", Number(secs)),
    }]);
    return (
        <Card id="mdp-priority" isCompact>
            <CardTitle>Resync priority</CardTitle>
            <CardBody>
                <Global m={m} leases={leases} bound="min" />
                <Global m={m} leases={leases} bound="max" />
                <div className="mdp-row">
                    <FormSelect id="mdp-profile-duration" value={secs} aria-label="Duration"
                                onChange={(_e, val) => setSecs(val)} isDisabled={!canChange} style={{ width: "12rem" }}>
                        {DURATIONS.map(([s, w]) => <FormSelectOption key={s} value={String(s)} label={"for " + w} />)}
                    </FormSelect>
                    {Object.entries(PROFILES).map(([k, p]) =>
                        <Action key={k} id={`mdp-profile-${k}`} label={p.label} disabled={!canChange} run={() => take(p)} />)}
                    <Action id="mdp-restore" label="Restore saved limits" variant="link" disabled={!canChange}
                            run={() => call(client, MANAGER, IFACE.manager, "RestoreLimits", "a{sv}", [{}])} />
                </div>
                <div className="mdp-small">
                    {Object.values(PROFILES).map(p => `${p.label}: ${p.what}`).join(". ")}. Leases combine: the most
                    yielding one wins. Restore drops every lease (the installer's too) and writes back the saved limits.
                </div>
                <Leases leases={leases} client={client} canChange={canChange} />
            </CardBody>
        </Card>
    );
}
