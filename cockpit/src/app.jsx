// The page: arrays, resync priority, checks and wipe jobs of mdpilot, live from its D-Bus API.
// Every control that changes something is enabled only with administrative access
// (cockpit.permission({admin: true})); a read-only session says why and calls no method
// but the one that only reads (Array.GetSyncHistory, for the charts).
import React, { useEffect, useMemo, useState } from "react";
import { Alert, Page, PageSection, Title } from "@patternfly/react-core";
import cockpit from "./cockpit.js";
import { connect } from "./client.js";
import { sortArrays } from "./format.js";
import { ArrayCard } from "./arrays.jsx";
import { PriorityPanel } from "./priority.jsx";
import { WipePanel } from "./wipe.jsx";

/** Administrative access: true, false, or null while cockpit finds out. */
function useAdmin() {
    const [allowed, setAllowed] = useState(null);
    useEffect(() => {
        const p = cockpit.permission({ admin: true });
        const update = () => setAllowed(p.allowed);
        p.addEventListener("changed", update);
        update();
        return () => p.close();
    }, []);
    return allowed;
}

/** The model from client.js, re-rendered on every change the bridge reports. */
function useMdpilot() {
    const [state, setState] = useState(null);
    const [conn, setConn] = useState(null);
    useEffect(() => {
        const c = connect(setState);
        setConn(c.client);
        return c.close;
    }, []);
    return [state, conn];
}

function Absent({ state }) {
    return (
        <Alert variant="warning" isInline title="The mdpilot service is not running" id="mdp-absent">
            <p>
                This page shows what the mdpilot service publishes on the system bus
                (org.mdpilot.MdPilot1){state && state.closed ? ` (${state.closed})` : ""}. Start it
                with <code>systemctl start mdpilot.service</code> (it is also started on demand by
                D-Bus activation once installed: <code>apt install mdpilot</code>). For a
                demonstration without RAID hardware: <code>mdpilot serve --sim</code>.
            </p>
        </Alert>
    );
}

function ReadOnly() {
    return (
        <Alert variant="info" isInline id="mdp-readonly"
               title="Read-only: this session has no administrative access">
            Everything is shown, nothing can be changed: speed limits, leases, checks and wipes need
            administrative access. Turn it on with "Limited access" in Cockpit's top bar
            (it asks for your password), or log in as an administrator.
        </Alert>
    );
}

export function App() {
    const admin = useAdmin();
    const [state, client] = useMdpilot();
    const arrays = useMemo(() => state ? sortArrays(Object.values(state.arrays)) : [], [state]);
    const ready = state && state.owner && state.manager && state.manager.valid;
    const canChange = admin === true && !!ready;
    return (
        <Page>
            <PageSection variant="light">
                <Title headingLevel="h1">RAID (mdpilot)</Title>
                {state && state.manager && state.manager.valid &&
                    <span className="mdp-small">mdpilot {state.manager.ServiceVersion}, D-Bus API {state.manager.Version}</span>}
            </PageSection>
            <PageSection>
                {state && (state.owner === false || state.closed) && <Absent state={state} />}
                {admin === false && <ReadOnly />}
                {ready &&
                    <>
                        <Title headingLevel="h2" id="mdp-arrays-title">Arrays</Title>
                        {arrays.length === 0 && <p>No md arrays.</p>}
                        <div className="mdp-cards" id="mdp-arrays">
                            {arrays.map(a => <ArrayCard key={a.path} array={a} client={client}
                                                        version={state.versions[a.path]}
                                                        history={state.history[a.path] || []}
                                                        leases={state.manager.Leases || []}
                                                        canChange={canChange} />)}
                        </div>
                        <PriorityPanel manager={state.manager} arrays={arrays} client={client}
                                       canChange={canChange} />
                        <WipePanel jobs={state.jobs} completed={state.completed} client={client}
                                   canChange={canChange} />
                    </>}
                {!state && <p>Connecting…</p>}
            </PageSection>
        </Page>
    );
}

