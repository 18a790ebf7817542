/**
 * The request header the status page's script carries its per-start secret in (ui/server.ts checks
 * it; ui/page/api.ts sends it). A header, not a cookie: a browser sends a cookie for 127.0.0.1 to
 * every port on 127.0.0.1, so any local server the operator's browser visited would read it; a header
 * is sent only by this page's own script, and the secret it keeps is in storage kept apart by origin.
 */
export const SESSION_HEADER = 'x-ledger-session';
