#!/usr/bin/env node
// Bundles the page as cockpit's starter-kit does (esbuild, one JS and one CSS file) into
// OUTDIR (default: dist/): index.html, index.js, index.css, manifest.json and PatternFly's fonts.
// Usage: node build.js [OUTDIR] [--watch]
"use strict";
const esbuild = require("esbuild");
const fs = require("fs");
const path = require("path");

const outdir = path.resolve(process.argv.slice(2).find(a => !a.startsWith("--")) || "dist");
const watch = process.argv.includes("--watch");

async function main() {
    fs.mkdirSync(outdir, { recursive: true });
    for (const f of ["index.html", "manifest.json"])
        fs.copyFileSync(path.join(__dirname, "src", f), path.join(outdir, f));
    const options = {
        entryPoints: { index: path.join(__dirname, "src", "index.jsx") },
        bundle: true,
        outdir,
        minify: !watch,
        sourcemap: watch ? "inline" : false,
        target: ["es2020"],
        loader: { ".woff2": "file", ".woff": "file", ".ttf": "file", ".otf": "file", ".svg": "file" },
        assetNames: "fonts/[name]",
        jsx: "automatic",
        define: { "process.env.NODE_ENV": watch ? '"development"' : '"production"' },
        logLevel: watch ? "info" : "warning",
    };
    if (watch) {
        const ctx = await esbuild.context(options);
        await ctx.watch();
    } else {
        await esbuild.build(options);
    }
}

main().catch(e => { console.error(e); process.exit(1); });
