// Makes the OAuth Azurite's TLS files for one test run, with nothing but
// Node (no openssl command needed): a test CA (ca.pem) and a server certificate for
// 127.0.0.1 and localhost signed by it (server.pem, server.key), both valid
// two days. Keys come from Node's own crypto; node-forge (pinned in
// package-lock.json) writes the certificates.
//
//   node scripts/test-cert.js DIR
"use strict";

const crypto = require("crypto");
const fs = require("fs");
const path = require("path");
const forge = require("node-forge");

const dir = process.argv[2];
if (!dir) {
    console.error("usage: node scripts/test-cert.js DIR");
    process.exit(64);
}

function keyPair() {
    const { privateKey, publicKey } = crypto.generateKeyPairSync("rsa", {
        modulusLength: 2048,
        publicKeyEncoding: { type: "spki", format: "pem" },
        privateKeyEncoding: { type: "pkcs1", format: "pem" },
    });
    return {
        pem: privateKey,
        privateKey: forge.pki.privateKeyFromPem(privateKey),
        publicKey: forge.pki.publicKeyFromPem(publicKey),
    };
}

function certificate(subjectKey, commonName, issuer, signingKey, extensions) {
    const cert = forge.pki.createCertificate();
    cert.publicKey = subjectKey.publicKey;
    cert.serialNumber = "01" + crypto.randomBytes(8).toString("hex");
    const now = new Date();
    cert.validity.notBefore = new Date(now.getTime() - 60 * 1000);
    cert.validity.notAfter = new Date(now.getTime() + 2 * 24 * 3600 * 1000);
    cert.setSubject([{ name: "commonName", value: commonName }]);
    cert.setIssuer(issuer);
    cert.setExtensions(extensions);
    cert.sign(signingKey, forge.md.sha256.create());
    return cert;
}

const caKey = keyPair();
const ca = certificate(caKey, "leasehold test CA", [{ name: "commonName", value: "leasehold test CA" }], caKey.privateKey, [
    { name: "basicConstraints", cA: true, critical: true },
    { name: "keyUsage", keyCertSign: true, cRLSign: true, critical: true },
]);
const serverKey = keyPair();
const server = certificate(serverKey, "127.0.0.1", ca.subject.attributes, caKey.privateKey, [
    { name: "basicConstraints", cA: false },
    { name: "keyUsage", digitalSignature: true, keyEncipherment: true, critical: true },
    { name: "extKeyUsage", serverAuth: true },
    {
        name: "subjectAltName",
        altNames: [
            { type: 7, ip: "127.0.0.1" },
            { type: 2, value: "localhost" },
        ],
    },
]);

fs.writeFileSync(path.join(dir, "ca.pem"), forge.pki.certificateToPem(ca));
fs.writeFileSync(path.join(dir, "server.pem"), forge.pki.certificateToPem(server));
fs.writeFileSync(path.join(dir, "server.key"), serverKey.pem, { mode: 0o600 });
