// Small pieces the panels share: an action button with its error beside it, the sync-history
// chart.
import React, { useState } from "react";
import { Button } from "@patternfly/react-core";
import { errorWords } from "./format.js";
import { BOX, geometry, summary } from "./history.js";

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

/**
 * The sync history of one array (history.js samples; the service's last hour): speed and
 * limit (KiB/s shown as rates) above, io pressure (percent) below, on one time axis ending now;
 * the sentence of history.summary as caption and accessible name. `id` names the speed plot
 * (its polylines: .mdp-speed, .mdp-limit) and, with "-summary", the caption; the data it drew
 * is on the figure's data-* attributes (points, max-speed, min-limit, last-limit, max-pressure,
 * last-pressure: KiB/s and percent, "" for none). Nothing with fewer than two samples.
 */
export function SyncChart({ id, samples, what }) {
    if (!samples || samples.length < 2) return null;
    const now = Date.now() / 1000;
    const g = geometry(samples, now);
    const text = summary(samples, now, what);
    const b = BOX;
    const py0 = b.speedTop + b.speedHeight + b.gap;
    const height = py0 + b.pressureHeight + b.axis;
    const st = g.stats;
    const d = v => (v === null ? "" : String(v));
    return (
        <figure className="mdp-history" id={id + "-figure"} data-points={st.points} data-max-speed={d(st.maxSpeed)}
                data-min-limit={d(st.minLimit)} data-last-limit={d(st.lastLimit)}
                data-max-pressure={d(st.maxPressure)} data-last-pressure={d(st.lastPressure)}>
            <svg id={id} className="mdp-chart" viewBox={`0 0 ${b.width} ${height}`} role="img" aria-label={text}>
                <g className="mdp-grid">
                    {g.speed.ticks.map((t, i) => <g key={"s" + i}>
                        <line x1={b.left} x2={b.width - b.right} y1={t.y} y2={t.y} />
                        <text x={b.left - 3} y={t.y + 3} textAnchor="end">{t.label}</text>
                    </g>)}
                    {g.pressure.ticks.map((t, i) => <g key={"p" + i}>
                        <line x1={b.left} x2={b.width - b.right} y1={t.y} y2={t.y} />
                        <text x={b.left - 3} y={t.y + 3} textAnchor="end">{t.label}</text>
                    </g>)}
                    {g.xTicks.map((t, i) => <text key={"x" + i} x={t.x} y={height - 2}
                                                  textAnchor={i === 0 ? "start" : i === g.xTicks.length - 1 ? "end" : "middle"}>
                        {t.label}</text>)}
                </g>
                {g.speed.speed.map((p, i) => <polyline key={"v" + i} className="mdp-speed" points={p} />)}
                {/* The limit over the speed, dashed: md runs at it when nothing else needs the disks. */}
                {g.speed.limit.map((p, i) => <polyline key={"l" + i} className="mdp-limit" points={p} />)}
                {g.pressure.lines.map((p, i) => <polyline key={"p" + i} className="mdp-pressure" points={p} />)}
            </svg>
            <figcaption className="mdp-small">
                <span className="mdp-key mdp-key-speed">speed</span>{" "}
                <span className="mdp-key mdp-key-limit">limit</span>{" "}
                <span className="mdp-key mdp-key-pressure">io pressure</span>
                {" · "}<span id={id + "-summary"}>{text}</span>
            </figcaption>
        </figure>
    );
}
