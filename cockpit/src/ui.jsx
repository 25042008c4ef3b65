// Small pieces the panels share: an action button with its error beside it, a rate chart.
import React, { useState } from "react";
import { Button } from "@patternfly/react-core";
import { errorWords, rate } from "./format.js";
import { HISTORY_MS } from "./client.js";

/**
 * A button that runs `run()` (a promise), disabled while it runs or when `disabled`; a failure
 * is shown in words under it (id + "-error").
 */
export function Action({ id, label, run, disabled, variant = "secondary" }) {
    const [busy, setBusy] = useState(false);
    const [err, setErr] = useState(null);
    const click = () => {
        setBusy(true);
        setErr(null);
        Promise.resolve()
            .then(run)
            .then(() => setBusy(false))
            .catch(e => { setBusy(false); setErr(errorWords(e)) });
    };
    return (
        <span className="mdp-action">
            <Button id={id} variant={variant} size="sm" isDisabled={!!disabled || busy} onClick={click}>
                {label}
            </Button>
            {err && <div className="mdp-error" id={id + "-error"}>{err}</div>}
        </span>
    );
}

/** The sync rate over the last HISTORY_MS from the updates received: an SVG polyline. */
export function RateChart({ id, points }) {
    if (points.length < 2) return null;
    const now = points[points.length - 1][0];
    const max = Math.max(1, ...points.map(p => p[1]));
    const xy = points.map(([t, r]) =>
        `${(100 - (now - t) / HISTORY_MS * 100).toFixed(2)},${(46 - r / max * 44).toFixed(2)}`);
    return (
        <div>
            <svg id={id} className="mdp-chart" viewBox="0 0 100 48" preserveAspectRatio="none"
                 role="img" aria-label={`Sync rate, last 5 minutes, peak ${rate(max)}`}>
                <polyline points={xy.join(" ")} vectorEffect="non-scaling-stroke" />
            </svg>
            <span className="mdp-small">last 5 min, peak {rate(max)}</span>
        </div>
    );
}
