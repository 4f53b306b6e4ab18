#!/usr/bin/env node
// Measures what Azurite's periodic blob sweep costs per number of dead blob
// data records, on the metadata store Azurite itself uses (LokiJS from the
// pinned node_modules, a collection indexed on `id` as Azurite creates it).
// The sweep removes one record per dead chunk, in insertion order; this does
// the same and prints the time for each size.
//
//   node scripts/azurite-sweep-cost.js 1000 2000 4000
//
// Every journalled commit writes its lock blob twice, so a long torture run
// at full speed leaves tens of thousands of such records (see README,
// "Reliability runs").
"use strict";
const path = require("path");
const crypto = require("crypto");
const Loki = require(path.join(__dirname, "..", "node_modules", "lokijs"));

const sizes = process.argv.slice(2).map(Number);
for (const n of sizes.length ? sizes : [1000, 2000, 4000]) {
    const coll = new Loki("sweep").addCollection("extents", { indices: ["id"] });
    const ids = [];
    for (let i = 0; i < n; i++) {
        const id = crypto.randomUUID();
        ids.push(id);
        coll.insert({ id, LastModifyInMS: Date.now() });
    }
    const start = process.hrtime.bigint();
    for (const id of ids) {
        coll.findAndRemove({ id });
    }
    const ms = Number(process.hrtime.bigint() - start) / 1e6;
    const perSquare = (ms * 1e3) / (n * n);
    console.log(`${n} records: ${(ms / 1000).toFixed(2)} s (${perSquare.toFixed(2)} µs × n²)`);
}
