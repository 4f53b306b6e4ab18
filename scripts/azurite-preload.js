// Loaded into the test Azurite before its own code (node --require).
//
// Azurite's blob service runs a mark-and-sweep pass over its extents every
// ten minutes (a constant, with no option to change it). Its mark phase
// lists every blob of the account in pages of 5000, sorting the whole blob
// collection again for each page, on the one thread that also answers
// requests. After a full test run's worth of lock blobs that pass takes
// minutes, during which Azurite answers nothing at all, and any check
// running at the tenth minute fails with lost replies.
//
// The test Azurite keeps everything in memory and lives for one run, so
// there is nothing worth collecting: the pass is put off for the longest
// time a Node timer takes (about 24 days). The pass at start-up, over an
// empty store, still runs.
"use strict";
const path = require("path");
const constants = require(path.join(
    __dirname, "..", "node_modules", "azurite", "dist", "src", "blob", "utils", "constants.js"));
if (typeof constants.DEFAULT_GC_INTERVAL_MS === "number") {
    constants.DEFAULT_GC_INTERVAL_MS = 2 ** 31 - 1;
} else {
    console.error("azurite-preload: the pinned Azurite has no DEFAULT_GC_INTERVAL_MS; its blob GC stays on");
}
