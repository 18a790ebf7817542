#!/usr/bin/env node
// The `ledger` command: the built CLI in dist/ (scripts/build-packages.ts). A file of its own, outside
// dist/, so npm links the bin even when it installs this workspace before its first build (npm ci in
// the repository: the build runs in `prepare`, after the links are made).
import '../dist/ledger.js';
