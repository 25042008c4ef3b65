// Wipe jobs: the running jobs (progress, rate, ETA, Cancel) and "Wipe a device…": the devices
// the service would accept (Manager.WipeCandidates, probed without writing), the refused ones
// with the service's reason, a method, and a confirmation where the admin types the device.
import React, { useState } from "react";
import {
    Button, Card, CardBody, CardTitle, FormSelect, FormSelectOption, Modal, ModalVariant, Progress, TextInput,
} from "@patternfly/react-core";
import { IFACE, MANAGER, call } from "./client.js";
import * as fmt from "./format.js";
import { Action } from "./ui.jsx";

const METHODS = [
    ["zero", "zero: zeroes, the fastest way the device offers"],
    ["random", "random: a random stream (O_DIRECT writes)"],
    ["zeroout", "zeroout: BLKZEROOUT only"],
    ["discard", "discard: BLKDISCARD (contents afterwards device-defined)"],
    ["signatures", "signatures: md superblocks and the first and last MiB"],
];

function Job({ job: j, done, client, canChange }) {
    const n = j.path.split("/").pop();
    const eta = j.ExpectedEndTime ? Math.max(0, j.ExpectedEndTime / 1e6 - Date.now() / 1000) : null;
    return (
        <div id={`mdp-job-${n}`} data-device={j.Device} className="mdp-job">
            <b>{j.Device}</b> {j.Operation}
            {j.ProgressValid && <Progress id={`mdp-job-${n}-progress`} value={(j.Progress || 0) * 100}
                                          label={`${((j.Progress || 0) * 100).toFixed(1)} %`}
                                          aria-label={`wipe of ${j.Device}`} />}
            <div className="mdp-small">
                {fmt.bytes(j.BytesDone)} of {fmt.bytes(j.Bytes)} · <span id={`mdp-job-${n}-rate`}>{fmt.rate(j.Rate)}</span>
                {eta !== null && j.Cancelable && <> · about {fmt.duration(eta)} left</>}
            </div>
            {done && <div id={`mdp-job-${n}-done`} className={done[0] ? "" : "mdp-error"}>{done[0] ? "Done: " : "Ended: "}{done[1]}</div>}
            {j.Cancelable &&
                <Action id={`mdp-job-${n}-cancel`} label="Cancel" variant="link" disabled={!canChange}
                        run={() => call(client, j.path, IFACE.job, "Cancel", "a{sv}", [{}])} />}
        </div>
    );
}

function WipeDialog({ client, onClose }) {
    const [list, setList] = useState(null);
    const [loadErr, setLoadErr] = useState(null);
    const [device, setDevice] = useState("");
    const [method, setMethod] = useState("zero");
    const [typed, setTyped] = useState("");
    const [err, setErr] = useState(null);
    const [busy, setBusy] = useState(false);
    React.useEffect(() => {
        call(client, MANAGER, IFACE.manager, "WipeCandidates", "a{sv}", [{}])
            .then(([l]) => {
                setList(l);
                const first = l.find(c => c[1]);
                if (first) setDevice(first[0]);
            })
            .catch(e => setLoadErr(fmt.errorWords(e)));
    }, [client]);
    const accepted = (list || []).filter(c => c[1]);
    const refused = (list || []).filter(c => !c[1]);
    const start = () => {
        setBusy(true);
        setErr(null);
        call(client, MANAGER, IFACE.manager, "StartWipe", "sa{sv}", [device, { method: { t: "s", v: method } }])
            .then(() => onClose())
            .catch(e => { setBusy(false); setErr(fmt.errorWords(e)) });
    };
    return (
        <Modal variant={ModalVariant.medium} isOpen onClose={onClose} id="mdp-wipe-dialog" title="Wipe a device"
               titleIconVariant="warning"
               actions={[
                   <Button key="go" id="mdp-wipe-start" variant="danger" onClick={start}
                           isDisabled={busy || !device || typed !== device}>Wipe {device}</Button>,
                   <Button key="no" variant="link" onClick={onClose}>Cancel</Button>,
               ]}>
            {loadErr && <div className="mdp-error" id="mdp-wipe-load-error">{loadErr}</div>}
            {!list && !loadErr && <p>Asking the service which devices it would wipe…</p>}
            {list && accepted.length === 0 && <p id="mdp-wipe-none">The service would wipe none of the devices.</p>}
            {accepted.length > 0 &&
                <>
                    <FormSelect id="mdp-wipe-device" value={device} onChange={(_e, val) => { setDevice(val); setTyped("") }}
                                aria-label="Device">
                        {accepted.map(([d]) => <FormSelectOption key={d} value={d} label={d} />)}
                    </FormSelect>
                    <FormSelect id="mdp-wipe-method" value={method} onChange={(_e, val) => setMethod(val)} aria-label="Method">
                        {METHODS.map(([m, w]) => <FormSelectOption key={m} value={m} label={w} />)}
                    </FormSelect>
                    <p>Everything on <b>{device}</b> is destroyed. Type <b>{device}</b> to confirm:</p>
                    <TextInput id="mdp-wipe-confirm" value={typed} onChange={(_e, val) => setTyped(val)}
                               aria-label="Type the device name to confirm" />
                </>}
            {err && <div className="mdp-error" id="mdp-wipe-error">{err}</div>}
            {refused.length > 0 &&
                <>
                    <p><b>Refused by the service:</b></p>
                    <ul id="mdp-wipe-refused">
                        {refused.map(([d, , why]) => <li key={d} data-device={d}><b>{d}</b>: {why}</li>)}
                    </ul>
                </>}
        </Modal>
    );
}

/** The jobs (proxies by path) and the wipe dialog. */
export function WipePanel({ jobs, completed, client, canChange }) {
    const [open, setOpen] = useState(false);
    const list = Object.values(jobs).sort((a, b) => a.path.localeCompare(b.path, undefined, { numeric: true }));
    return (
        <Card id="mdp-wipe" isCompact>
            <CardTitle>Wipe jobs</CardTitle>
            <CardBody>
                {list.length === 0 && <p id="mdp-no-jobs">No wipe jobs.</p>}
                {list.map(j => <Job key={j.path} job={j} done={completed[j.path]} client={client} canChange={canChange} />)}
                <div className="mdp-row">
                    <Button id="mdp-wipe-open" variant="danger" size="sm" isDisabled={!canChange}
                            onClick={() => setOpen(true)}>Wipe a device…</Button>
                </div>
                {open && <WipeDialog client={client} onClose={() => setOpen(false)} />}
            </CardBody>
        </Card>
    );
}
