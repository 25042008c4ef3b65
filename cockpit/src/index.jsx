// Entry point: PatternFly's stylesheet, the page's own styles and the React root.
import "@patternfly/patternfly/patternfly.css";
import "./page.css";
import React from "react";
import { createRoot } from "react-dom/client";
import { App } from "./app.jsx";

document.addEventListener("DOMContentLoaded", () => {
    createRoot(document.getElementById("app")).render(<App />);
});
