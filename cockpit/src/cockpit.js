// The installed cockpit.js (../base1/cockpit.js in index.html) as a module: never bundled.
const cockpit = window.cockpit;
export default cockpit;
