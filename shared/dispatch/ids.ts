/**
 * CONTRACT §1 field rules for the identifiers, apart from the message schema: the API and the monitor
 * check ids without carrying the message schema (and zod's share of it) in their bundles.
 */
export const DISPATCH_ID = /^[A-Za-z0-9._:-]{1,128}$/;
export const ORIGIN = /^[a-z0-9-]{1,64}$/;
export const TARGET_NAME = /^[a-z0-9][a-z0-9-]{0,63}$/;
